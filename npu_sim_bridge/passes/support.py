"""The device-candidate test: small predicates, each naming why a node stays on the host, composed in order.

The capability check the fusion pass (a fused node must stay a device candidate) and the placement and partition
passes read; it imports only the graph floor and the report's reasons, so each of them imports it at module level.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Iterable, Mapping

from tensorflow.core.framework import function_pb2, node_def_pb2, types_pb2

from npu_sim_bridge.errors import UnsupportedGraphError
from npu_sim_bridge.graph.attr_names import FUSION_ATTR, WITHOUT_NPU_COMPILE_ATTR
from npu_sim_bridge.graph.names import node_name
from npu_sim_bridge.graph.op_categories import (
    CHECKPOINT_OPS, FUSED_BASE_OPS, GRAPH_INPUT_OPS, PASS_FUSED_BASE_OPS, PY_FUNC_OPS, RUNTIME_OPS, STRING_CARRIER_OPS,
    ROUND_OP, VARIABLE_OPS, is_data_input, is_queue, is_summary)
from npu_sim_bridge.graph.ports import called_by, function_attrs, has_port_of_type, port_key_of
from npu_sim_bridge.report.reasons import Reason, host


# Tensors of these dtypes may not cross a GeOp boundary (resource handles only from variable ops).
BOUNDARY_DTYPES = {types_pb2.DT_STRING: "string", types_pb2.DT_VARIANT: "variant",
                   types_pb2.DT_RESOURCE: "resource"}

FuncLibrary = Mapping[str, function_pb2.FunctionDef]
Predicate = Callable[[node_def_pb2.NodeDef, "SupportContext"], "Reason | None"]


@dataclasses.dataclass
class SupportContext:
    """What the predicates consult: the op library, the mode, the graph's functions and fed nodes."""

    ops_library: object                 # npu_sim_bridge.ops_info.OpLibrary
    mix_compile: bool
    functions: FuncLibrary
    fed: frozenset = frozenset()
    _function_verdicts: dict = dataclasses.field(default_factory=dict)
    _body_test: "CandidateTest | None" = None  # the test of function body nodes (NODE_PREDICATES)


# ------------------------------------------------------------------------------------ predicates
def graph_input(node, ctx):
    if node.op in GRAPH_INPUT_OPS:
        return host("graph_input", op=node.op)
    if node.op in RUNTIME_OPS:
        return host("runtime_op", op=node.op)
    return None


def fed_by_session(node, ctx):
    if node.name in ctx.fed:
        return host("fed")
    return None


def scoped_to_host(node, ctx):
    attr = node.attr.get(WITHOUT_NPU_COMPILE_ATTR)
    if attr is not None and attr.WhichOneof("value") == "b" and attr.b:
        return host("scoped")
    return None


def py_func(node, ctx):
    if node.op in PY_FUNC_OPS:
        return host("py_func", op=node.op)
    return None


def checkpoint_io(node, ctx):
    if node.op in CHECKPOINT_OPS:
        return host("checkpoint", op=node.op)
    return None


def summary(node, ctx):
    if is_summary(node.op):
        return host("summary", op=node.op)
    return None


def data_input(node, ctx):
    if is_data_input(node.op):
        return host("data_input", op=node.op)
    return None


def queue(node, ctx):
    if is_queue(node.op):
        return host("queue", op=node.op)
    return None


def variable(node, ctx):
    if node.op in VARIABLE_OPS:
        return host("variable", op=node.op)
    return None


def string_op(node, ctx):
    if node.op in STRING_CARRIER_OPS:
        return None
    if has_port_of_type(node, types_pb2.DT_STRING, ctx.functions):
        return host("string_op", op=node.op)
    return None


def function_bodies(node, ctx):
    """A node that calls functions (While/If/PartitionedCall/a function by name) needs device-capable bodies."""
    for function_name in called_by(node, ctx.functions):
        reason = _function_verdict(function_name, ctx)
        if reason:
            return reason
    return None


def device_op_list(node, ctx):
    if node.op in ctx.functions:
        return None  # a direct function call: decided by function_bodies
    if ctx.ops_library.device_supported(node.op, mix_compile=ctx.mix_compile):
        return None
    # made by the fusion pass: runs where the op it fused runs
    base = PASS_FUSED_BASE_OPS.get(node.op) if FUSION_ATTR in node.attr else None
    if node.op == ROUND_OP:  # the float16 emulation's rounding: runs where the Casts it stands for run
        base = "Cast"
    if base is not None and ctx.ops_library.device_supported(base, mix_compile=ctx.mix_compile):
        return None
    parts = grappler_fused_parts(node)  # made by Grappler before NpuOptimizer: runs where its parts run
    if parts and all(ctx.ops_library.device_supported(op, mix_compile=ctx.mix_compile) for op in parts):
        return None
    if ctx.mix_compile and ctx.ops_library.device_supported(node.op):
        return host("gray_in_mix", op=node.op)
    note = ""
    if node.op.startswith("_Fused"):
        note = (" (Grappler's remapper made it: turn remapping off, "
                "rewrite_options.remapping = RewriterConfig.OFF, as npu_config_proto does)")
    return host("not_device_op", op=node.op, note=note)


# Predicates that read nothing but the node's op type: the test asks them once per op type.
OP_TYPE_PREDICATES = frozenset({graph_input, py_func, checkpoint_io, summary, data_input, queue, variable})

# What these predicates read of a node, for the ops CandidateTest answers by port_key: its op, its
# name (fed_by_session), the scoping attr, and the type attrs that port_key holds.
_PORT_KEY_PREDICATES = frozenset(OP_TYPE_PREDICATES | {fed_by_session, scoped_to_host, string_op, function_bodies,
                                                       device_op_list})

NODE_PREDICATES: tuple[Predicate, ...] = (
    scoped_to_host, py_func, checkpoint_io, summary, data_input, queue, variable, string_op,
    function_bodies, device_op_list,
)
GRAPH_PREDICATES: tuple[Predicate, ...] = (graph_input, fed_by_session) + NODE_PREDICATES


class CandidateTest:
    """Runs predicates in order; the first one that objects gives the host reason (None: device).

    A run of consecutive OP_TYPE_PREDICATES is asked once per op type, and its answer kept. With the
    usual predicates, a node whose answer only its op and type attrs decide is answered once per
    port_key: most of a graph's nodes (Identity, ReadVariableOp, Const of a few dtypes).
    """

    def __init__(self, ctx: SupportContext, predicates: Iterable[Predicate] = GRAPH_PREDICATES):
        self.ctx = ctx
        self.predicates = tuple(predicates)
        # Steps: a predicate, or a tuple of consecutive op-type predicates asked together.
        steps: list = []
        for predicate in self.predicates:
            if predicate in OP_TYPE_PREDICATES:
                if steps and isinstance(steps[-1], tuple):
                    steps[-1] += (predicate,)
                else:
                    steps.append((predicate,))
            else:
                steps.append(predicate)
        self._steps = tuple(steps)
        self._by_op: dict[tuple, tuple] = {}  # (step, op) -> (reason, predicate)
        # Answers by port_key, for the nodes whose answer nothing else decides (see _ports_key).
        self._by_ports: dict[tuple, tuple] | None = {} if set(self.predicates) <= _PORT_KEY_PREDICATES else None
        self._ports_decide: dict[str, bool] = {}  # op -> whether its nodes may be answered by port_key

    def __call__(self, node: node_def_pb2.NodeDef) -> Reason | None:
        return self.explain(node)[0]

    def explain(self, node: node_def_pb2.NodeDef) -> tuple[Reason | None, Predicate | None]:
        """(host reason, the predicate that gave it), or (None, None) for a device candidate."""
        if self._by_ports is not None:
            key = self._ports_key(node)
            if key is not None:
                found = self._by_ports.get(key)
                if found is None:
                    found = self._by_ports[key] = self._explain(node)
                return found
        return self._explain(node)

    def _ports_key(self, node) -> tuple | None:
        """The node's port_key when that decides its answer: a registered op that calls no function and
        is no fused op (whose attrs decide), the node neither fed nor scoped to host, every attr present
        (a missing one is reported by name); else None."""
        op = node.op
        decides = self._ports_decide.get(op)
        if decides is None:
            decides = self._ports_decide[op] = (
                function_attrs(op) == () and op not in self.ctx.functions and op not in PASS_FUSED_BASE_OPS
                and op not in FUSED_BASE_OPS and op != "_UnaryOpsComposition")
        attrs = node.attr
        if not decides or node.name in self.ctx.fed or WITHOUT_NPU_COMPILE_ATTR in attrs:
            return None
        key = port_key_of(op, attrs)
        return None if None in key else key

    def _explain(self, node) -> tuple[Reason | None, Predicate | None]:
        ctx = self.ctx
        for step in self._steps:
            if step.__class__ is tuple:
                key = (step, node.op)
                found = self._by_op.get(key)
                if found is None:
                    found = self._by_op[key] = self._first_objection(step, node)
                if found[0]:
                    return found
                continue
            try:
                reason = step(node, ctx)
            except UnsupportedGraphError as err:
                return host("unsupported_graph", error=str(err)), step
            if reason:
                return reason, step
        return None, None

    def _first_objection(self, predicates, node) -> tuple[Reason | None, Predicate | None]:
        for predicate in predicates:
            reason = predicate(node, self.ctx)
            if reason:
                return reason, predicate
        return None, None


# ------------------------------------------------------------------------------------- helpers
def grappler_fused_parts(node) -> list[str]:
    """The TF ops a node that Grappler fused stands for (remapper's _Fused* ops, the arithmetic
    optimizer's _UnaryOpsComposition), base op first; empty for any other node. On the NPU these
    ops arrive unfused, so the device takes the node when it takes every part."""
    if node.op == "_UnaryOpsComposition":
        return [name.decode() for name in node.attr["op_names"].list.s]
    base = FUSED_BASE_OPS.get(node.op)
    if base is None:
        return []
    fused = [name.decode() for name in node.attr["fused_ops"].list.s] if "fused_ops" in node.attr else []
    return [base] + [_FUSED_OP_TYPES.get(op, op) for op in fused]


# The names remapper writes in `fused_ops` that are not op types.
_FUSED_OP_TYPES = {"LeakyRelu": "LeakyRelu", "GeluApproximate": "Gelu", "GeluExact": "Gelu",
                   "FusedBatchNorm": "FusedBatchNormV3"}


def _function_verdict(function_name: str, ctx: SupportContext) -> Reason | None:
    verdicts = ctx._function_verdicts
    if function_name in verdicts:
        return verdicts[function_name]
    func = ctx.functions.get(function_name)
    if func is None:
        verdicts[function_name] = host("undefined_function", function=function_name)
        return verdicts[function_name]
    verdicts[function_name] = None  # a recursive call does not decide anything by itself
    reason = None
    if ctx._body_test is None:
        ctx._body_test = CandidateTest(ctx, NODE_PREDICATES)
    for body_node in func.node_def:
        objection = ctx._body_test(body_node)
        if objection:
            reason = host("function_body", function=function_name, node=body_node.name, cause=objection)
            break
    verdicts[function_name] = reason
    return reason


def node_names(tensors: Iterable[str]) -> list[str]:
    """Node names of tensor names ("x:0" -> "x")."""
    return [node_name(text) for text in tensors]
