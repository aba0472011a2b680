"""Per-node dtype decisions for each precision mode, the gray rule, and its fixed point over loops.

Every node with a float32/float16/bfloat16 port gets a Plan: its role, its list colour, the dtype it
runs in on the NPU (`npu`) and the reason. Roles:
- source: placeholders, constants, variables and their reads, containers, function arguments. Never
  changed; they do not decide for the ops after them.
- pinned: fed or preserved nodes (keep dtype and name), `_keep_dtype` nodes (keep_dtype_scope),
  nodes the placement pass keeps on the host, ops that read or update a variable (ref or resource
  input). Never changed. Preserved and keep_dtype nodes decide (they run float32); fed, host and
  variable nodes do not. A fetched node is decided as if nothing fetched it (a fetch reads an op's
  output, it does not change how the op runs): boundary.py converts what leaves the device.
- plumbing: Identity-like and v1 control-flow ops (Enter/Exit/Merge/Switch/NextIteration, IdentityN,
  Squeeze, ExpandDims, ...). They carry the dtype of what flows in: each output follows its inputs.
- cast: existing Cast nodes keep SrcT/DstT.
- inserted: Casts an earlier run of the pass inserted; transparent (they carry their input's vote).
- opaque: functional While/If and function calls (their bodies are rewritten separately), ops the
  operator library has no op info for, unknown ops. They keep their dtype and do not decide.
- fixed / gray: ops of the operator library, decided by the mode (Decider._fixed_decision). Only the
  mix-precision modes leave gray ops to the gray rule; in the others every op decides for itself.
  An op without the kernel a mode wants takes the other dtype; a black op without a float32 kernel
  runs float32 as an AI CPU fallback (force_fp32 and the mix modes).

The gray rule (mix-precision modes): a gray op drops to the low dtype only if every float input that
comes from a decided op comes from a dropped op, and at least one does. Inputs from placeholders,
constants, variable reads and other non-deciding nodes (sources, fed nodes, opaque ops, and gray or
plumbing nodes whose own inputs are all non-deciding) do not decide. A gray op with no decided float
input keeps its dtype and does not decide either. Plumbing ops pass the decision of their inputs
through by the same rule (in every mode). Loops (v1 frames: Merge <- NextIteration) settle to a fixed
point: votes only move up the order undecided < dropped < kept, so iterating until nothing changes
terminates. A NextIteration then carries the dtype of its Merge, so no Cast sits on the back edge.
"""

from __future__ import annotations

import collections
import dataclasses
import functools

from tensorflow.core.framework import types_pb2

from npu_sim_bridge.config.registry import effective_precision_mode
from npu_sim_bridge.errors import ConfigError, UnsupportedGraphError
from npu_sim_bridge.graph.attr_names import KEEP_DTYPE_ATTR
from npu_sim_bridge.graph.names import parse_input
from npu_sim_bridge.graph.op_categories import (FUNCTION_RUNNING_OPS, FUSED_BASE_OPS, PASS_THROUGH_OPS,
                                                 VALUE_SINK_OPS, VALUE_SOURCE_OPS)
from npu_sim_bridge.graph.ports import port_attrs, port_key_of, registered_spec
from npu_sim_bridge.passes.precision import ports
from npu_sim_bridge.passes.precision.lists import BLACK, WHITE
from npu_sim_bridge.passes.precision.marks import CONVERSION_OPS, ORIG_PREFIX, is_inserted_conversion
from npu_sim_bridge.report.reasons import LazyReason, Reason
from npu_sim_bridge.report.reasons import reason as coded

FP32, FP16, BF16 = types_pb2.DT_FLOAT, types_pb2.DT_HALF, types_pb2.DT_BFLOAT16

# Votes, ordered: the gray rule takes the largest vote among the deciding inputs.
NONE, LOW, HIGH = 0, 1, 2

SOURCE, PINNED, PLUMBING, CAST, OPAQUE, FIXED, GRAY, INSERTED = (
    "source", "pinned", "plumbing", "cast", "opaque", "fixed", "gray", "inserted")

MIX_MODES = ("allow_mix_precision", "allow_mix_precision_bf16")

# Type attrs that stay as they are when the op's dtype changes (batch norm statistics stay float32).
_FIXED_ATTRS = {"FusedBatchNorm": ("U",), "FusedBatchNormV2": ("U",), "FusedBatchNormV3": ("U",),
                "FusedBatchNormGradV2": ("U",), "FusedBatchNormGradV3": ("U",), "_FusedBatchNormEx": ("U",)}
_NEVER_RETYPED = frozenset({"Cast", "Bitcast"})
_UNSEEN = object()  # a port key no node had yet
_FOLLOWERS = frozenset({GRAY, PLUMBING, INSERTED})  # roles whose plans `_settle` changes per node
_VARIABLE_KINDS = ("variable", "container")

_LOW_OF_MODE = {"allow_mix_precision_bf16": BF16, "allow_fp32_to_bf16": BF16}


class PrecisionModeError(UnsupportedGraphError, ConfigError):
    """The precision mode cannot be honoured for ops of this graph (must_keep_origin_dtype)."""


class Follows(LazyReason):
    """The reason of a node that follows another's dtype, made when the report is read: a gray op's
    ("precision.gray_follows", its list `rule`, the node and, when it stays high, the dtype) or a
    pass-through op's ("precision.pass_through_follows", `rule` None). A Reason and its dict per gray
    and pass-through node were a tenth of BERT's peak."""

    __slots__ = ("rule", "node", "dtype")

    def __init__(self, rule: str | None, node: str, dtype: str | None = None):
        self.rule, self.node, self.dtype = rule, node, dtype

    @property
    def code(self) -> str:
        return "precision.pass_through_follows" if self.rule is None else "precision.gray_follows"

    def reason_for(self, name: str) -> Reason:
        if self.rule is None:
            return Reason("precision.pass_through_follows", {"node": self.node})
        details = {"rule": self.rule, "node": self.node}
        if self.dtype:
            details["dtype"] = self.dtype
        return Reason("precision.gray_follows", details)


@dataclasses.dataclass(slots=True)
class Plan:
    """What the precision pass does with one node.

    Nodes alike by their ports whose plan nothing changes once made (not gray, pass-through or
    inserted: those follow their inputs) share one Plan: `name` is then the node it was worked out
    for, and a node's own name is its key in the plans."""

    name: str
    op: str
    role: str
    sig: ports.Signature
    attrs: tuple = ()                 # changeable type attrs
    orig: int | None = None           # their current dtype
    colour: str | None = None
    rule: str = ""
    npu: int | None = None            # dtype on the NPU (the report's dtype_after)
    reason: "Reason | Follows | None" = None
    vote: int = NONE
    follows: str | None = None
    cube_split: bool = False          # cube_fp16in_fp32out: float16 inputs, float32 output
    port_votes: list | None = None    # IdentityN: per element
    port_npu: list | None = None

    def copy_as(self, name: str) -> "Plan":
        """A fresh plan for node `name` with this plan's decision (nothing mutable shared)."""
        return Plan(name, self.op, self.role, self.sig, self.attrs, self.orig, self.colour, self.rule, self.npu,
                    self.reason, self.vote, self.follows, self.cube_split,
                    None if self.port_votes is None else list(self.port_votes),
                    None if self.port_npu is None else list(self.port_npu))

    def npu_of_port(self, port: int) -> int | None:
        if self.port_npu is not None:
            return self.port_npu[port] if port < len(self.port_npu) else None
        if self._fixed_port(port):
            return self.sig.outputs[port].dtype
        return self.npu

    def vote_of_port(self, port: int) -> int:
        if self.port_votes is not None:
            return self.port_votes[port] if port < len(self.port_votes) else NONE
        if self.vote != NONE and self._fixed_port(port):
            return HIGH if self.sig.outputs[port].dtype not in ports.LOW_TYPES else LOW
        return self.vote

    def _fixed_port(self, port: int) -> bool:
        """An output whose type attr never changes with the op (the batch statistics, reserve spaces and
        scale/offset gradients of a batch norm): it keeps its dtype, and its consumers follow that dtype,
        not the op's."""
        fixed = _FIXED_ATTRS.get(self.op)
        if not fixed or port >= len(self.sig.outputs):
            return False
        out = self.sig.outputs[port]
        return out.is_float and out.type_attr in fixed


@dataclasses.dataclass(frozen=True)
class ModeInfo:
    """The effective mode, its low dtype and how float16 is executed."""

    mode: str
    low: int
    emulate: bool
    mode_key: str   # 'precision_mode' or 'precision_mode_v2', for messages
    mode_text: str  # the value as the user wrote it

    @property
    def is_mix(self) -> bool:
        return self.mode in MIX_MODES


def mode_info(options) -> ModeInfo:
    mode = effective_precision_mode(options)
    v2 = options.get("precision_mode_v2")
    key, text = ("precision_mode_v2", v2) if v2 else ("precision_mode", options.get("precision_mode") or mode)
    return ModeInfo(mode=mode, low=_LOW_OF_MODE.get(mode, FP16),
                    emulate=(options.get("sim_fp16_execution") or "emulate") == "emulate",
                    mode_key=key, mode_text=text)


@functools.lru_cache(maxsize=4096)
def _marks_that_decide(op: str) -> tuple[str, ...] | None:
    """The attrs whose presence makes a node of `op` decide on its own (keep_dtype, the original dtypes an
    earlier run recorded); None for ops whose nodes always do (conversions, unregistered ops)."""
    if op in CONVERSION_OPS or registered_spec(op) is None:
        return None
    return (KEEP_DTYPE_ATTR, *(ORIG_PREFIX + name for name, _ in port_attrs(op)))


def name_of(dtype: int | None) -> str | None:
    return ports.dtype_name(dtype) if dtype is not None else None


def share_alike(plans: dict[str, Plan]) -> None:
    """Let the plans of the nodes that followed their inputs (gray, pass-through, inserted) share one
    Plan where they rewrite alike: the same op, role, ports, type attrs and dtypes. Only for a rewrite
    whose report rows are made already (their reasons, votes and the nodes they follow differ, and
    the shared plan keeps one's). A Plan each was a twentieth of the precision pass's peak memory on a
    graph of dense blocks."""
    shared: dict[tuple, Plan] = {}
    for name, plan in plans.items():
        if plan.role in _FOLLOWERS:
            key = (plan.op, plan.role, plan.sig, plan.attrs, plan.orig, plan.npu, plan.cube_split,
                   None if plan.port_npu is None else tuple(plan.port_npu))
            plans[name] = shared.setdefault(key, plan)


class Decider:
    """Builds the Plans of one graph (or function body)."""

    def __init__(self, view, library, lists, mode: ModeInfo, fed=(), preserved=(), functions=None, host=()):
        self.view = view
        self.host = host  # placement's set (not copied: a large part of the graph on BERT)
        self.library = library
        self.lists = lists
        self.mode = mode
        self.fed = frozenset(fed)
        self.preserved = frozenset(preserved)
        self.functions = functions or {}
        self.plans: dict[str, Plan] = {}
        self.edges: dict[str, list] = {}
        self.must_keep_failures: list[tuple[str, str, int]] = []
        # The sets a node's name may be in, in the order _classify_node asks: alike nodes share a
        # template only within the same first set (see _template_key).
        self._named_sets = (self.fed, self.preserved, self.host)
        # port key -> (the plan of the first node with that key, whether it failed must_keep_origin_dtype)
        self._templates: dict[tuple, tuple[Plan, bool]] = {}
        # One Reason per code and details: the plans (and the report rows made from them) of a graph's
        # hundreds of variables, sources and host nodes share a handful of reasons.
        self._shared: dict[tuple, Reason] = {}

    # ----------------------------------------------------------------- driver
    def run(self) -> dict[str, Plan]:
        plans = self.plans
        for name, node in self.view.named_nodes():
            plan = self._classify(name, node)
            if plan is not None:
                plans[name] = plan
        if self.must_keep_failures:
            raise self._must_keep_error()
        self._settle()
        self._match_loop_merges()
        return self.plans

    # --------------------------------------------------------- classification
    def _classify(self, name: str, node) -> Plan | None:
        """The node's plan, or None for a node without float ports.

        Nodes of a registered op with equal port keys (op type and the attrs its ports depend on: its
        dtypes) get the same decision unless their name (fed, preserved, host) or their own
        marks (keep_dtype, an earlier run's) say otherwise: the first is worked out, the others copy it.
        """
        key = self._template_key(name, node)
        if key is None:
            sig = ports.signature(node, self.functions)
            return self._classify_node(name, node, sig) if sig.has_float else None
        found = self._templates.get(key, _UNSEEN)
        if found is _UNSEEN:
            sig = ports.signature(node, self.functions)
            if not sig.has_float:
                self._templates[key] = None
                return None
            failures = len(self.must_keep_failures)
            plan = self._classify_node(name, node, sig)
            self._templates[key] = plan, len(self.must_keep_failures) > failures
            return plan
        if found is None:
            return None
        template, failed = found
        if failed:
            self.must_keep_failures.append((template.op, name, template.orig))
        if template.role in _FOLLOWERS:  # decided again from its own inputs: a plan of its own
            return template.copy_as(name)
        return template  # decided once for all alike (a plan per node was a tenth of the peak)

    def _template_key(self, name: str, node) -> tuple | None:
        """The node's port key when its plan may be copied from another node's, else None. A node that is
        fed, preserved or on the host is alike only to nodes in the same first of those sets
        (the key says which): on BERT the host nodes alone had a plan each, a twentieth of the peak."""
        op = node.op
        marks = _marks_that_decide(op)
        if marks is None or op in self.functions:
            return None
        attrs = node.attr
        for mark in marks:
            if mark in attrs:
                return None
        key = port_key_of(op, attrs)
        fed, preserved, host = self._named_sets
        if name in host or name in fed or name in preserved:
            return (0 if name in fed else 1 if name in preserved else 2), key
        return key

    def _classify_node(self, name: str, node, sig) -> Plan:
        op = self.view.op(name)  # the view's str: protobuf makes one at each read, and the plan keeps it
        plan = Plan(name, op, SOURCE, sig)
        self._set_attrs(node, plan)
        dtype = name_of(plan.orig)  # what a kept node's reason says it keeps
        why = self._why
        kind = self.library.not_compute_kind(op)
        has_ref = sig.reads_variable

        if is_inserted_conversion(node):
            plan.role, plan.reason = INSERTED, why("precision.earlier_cast")
            return plan
        if op == "Cast":
            return self._classify_cast(node, plan)
        if op in VALUE_SOURCE_OPS or kind == "source":
            return self._keep(plan, SOURCE, NONE, why("precision.source", dtype=dtype))
        if op in ("VariableV2", "Variable", "VarHandleOp") or kind in _VARIABLE_KINDS:
            return self._keep(plan, SOURCE, NONE, why("precision.variable", kind=kind or "variable", dtype=dtype))
        if op in VALUE_SINK_OPS:
            return self._keep(plan, PINNED, HIGH, why("precision.function_result", dtype=dtype))
        if node.name in self.fed:
            return self._keep(plan, PINNED, NONE, why("precision.fed", dtype=dtype))
        if node.name in self.preserved:
            return self._keep(plan, PINNED, HIGH, why("precision.preserved", dtype=dtype))
        if node.name in self.host:
            return self._keep(plan, PINNED, NONE, why("precision.host", dtype=dtype))
        if KEEP_DTYPE_ATTR in node.attr and node.attr[KEEP_DTYPE_ATTR].b:
            return self._keep(plan, PINNED, HIGH, why("precision.keep_dtype"))
        if op in FUNCTION_RUNNING_OPS or op in self.functions:
            return self._keep(plan, OPAQUE, NONE, why("precision.function_call"))
        if has_ref:
            return self._keep(plan, PINNED, NONE, why("precision.reads_variable", dtype=dtype))
        if not plan.attrs:
            return self._keep(plan, OPAQUE, NONE, why("precision.no_type_attr", dtype=dtype))
        if plan.orig is None:
            return self._keep(plan, OPAQUE, NONE, why("precision.mixed_attrs"))
        if op in PASS_THROUGH_OPS or kind == "pass_through":
            plan.role = PLUMBING
            if op == "IdentityN":
                plan.port_votes = [NONE] * len(sig.outputs)
                plan.port_npu = [p.dtype if p.is_float else None for p in sig.outputs]
            plan.npu = plan.orig
            return plan

        base = FUSED_BASE_OPS.get(op, op)  # Grappler's remapper fused it: the base op's list
        info = self.library.info(base)
        if info is None:
            note = self.library.no_op_info_note(base) or None
            return self._keep(plan, OPAQUE, NONE, why("precision.no_op_info", note=note, dtype=dtype))
        entry = self.lists.classify(base)
        plan.colour, plan.rule = entry.colour, entry.rule
        decided = self._fixed_decision(plan, info)
        if decided is None:
            plan.role = GRAY
            plan.npu = plan.orig
            return plan
        plan.role = FIXED
        plan.npu, plan.reason = decided
        plan.vote = LOW if plan.npu in ports.LOW_TYPES else HIGH
        return plan

    def _set_attrs(self, node, plan: Plan) -> None:
        if node.op in _NEVER_RETYPED:
            return
        fixed = _FIXED_ATTRS.get(node.op, ())
        names = tuple(a for a in plan.sig.float_attrs if a not in fixed) if fixed else plan.sig.float_attrs
        plan.attrs = names
        if node.op == "IdentityN":
            plan.orig = FP32 if names else None
            return
        dtypes = set()
        for attr in names:
            original = ORIG_PREFIX + attr  # retyped by an earlier run: decide from the original dtype
            dtypes.add(ports.type_attr_dtype(node, original if original in node.attr else attr, None))
        if len(dtypes) == 1:
            dtype = dtypes.pop()
            if dtype in ports.FLOAT_TYPES:
                plan.orig = dtype

    def _why(self, code: str, **details) -> Reason:
        """The shared Reason of a code and its details (see `_shared`)."""
        key = (code, *details.values())
        found = self._shared.get(key)
        if found is None:
            found = self._shared[key] = coded(code, **details)
        return found

    def _keep(self, plan: Plan, role: str, vote: int, reason: Reason) -> Plan:
        plan.role, plan.vote, plan.reason, plan.npu = role, vote, reason, plan.orig
        if plan.port_npu is None and plan.orig is None:
            plan.npu = None
        return plan

    def _classify_cast(self, node, plan: Plan) -> Plan:
        src, dst = node.attr["SrcT"].type, node.attr["DstT"].type
        plan.role, plan.reason = CAST, self._why("precision.existing_cast")
        plan.orig = plan.npu = dst if dst in ports.FLOAT_TYPES else None
        if dst in ports.LOW_TYPES:
            plan.vote = LOW
        elif dst in ports.FLOAT_TYPES and src in ports.FLOAT_TYPES:
            plan.vote = HIGH
        else:
            plan.vote = NONE
        return plan

    # ------------------------------------------------------------ mode table
    def _supports(self, info, dtype: int) -> bool:
        if dtype == FP32:
            return info.supports_fp32
        if dtype == FP16:
            return info.supports_fp16
        # The Ascend 910 library lists no bfloat16; a half-precision kernel stands for it.
        return info.supports_bf16 or info.supports_fp16

    def _fixed_decision(self, plan: Plan, info):
        """(npu dtype, reason) for a library op, or None when the gray rule decides."""
        mode, low, orig = self.mode.mode, self.mode.low, plan.orig
        sup = lambda dtype: self._supports(info, dtype)  # noqa: E731
        why = self._why
        if mode == "force_fp32":
            if sup(FP32):
                return FP32, why("precision.forced", mode=mode) if orig == FP32 else \
                    why("precision.forced_up", mode=mode, dtype=name_of(orig))
            if plan.colour == BLACK:
                return FP32, why("precision.ai_cpu", rule=plan.rule)
            return FP16, why("precision.no_kernel", dtype="float32")
        if mode == "force_fp16":
            if sup(FP16):
                return FP16, why("precision.forced", mode=mode)
            return FP32, why("precision.no_kernel", dtype="float16")
        if mode not in MIX_MODES:
            if mode == "cube_fp16in_fp32out" and info.is_cube and orig == FP32:
                plan.cube_split = True
                return FP16, why("precision.cube_split")
            if sup(orig):
                return orig, why("precision.mode_keeps", mode=self.mode.mode_text, dtype=name_of(orig))
            if mode == "must_keep_origin_dtype":
                self.must_keep_failures.append((plan.op, plan.name, orig))
                return orig, why("precision.mode_keeps", mode=self.mode.mode_text, dtype=name_of(orig))
            if orig == FP32:
                return low, why("precision.no_kernel", dtype="float32")
            return FP32, why("precision.no_kernel", dtype=name_of(orig))
        # allow_mix_precision(_fp16/_bf16): only float32 ops are lowered.
        if orig != FP32:
            if sup(orig):
                return orig, why("precision.mix_keeps", dtype=name_of(orig))
            return FP32, why("precision.no_kernel", dtype=name_of(orig))
        if not sup(FP32):
            if plan.colour == BLACK:
                return FP32, why("precision.ai_cpu", rule=plan.rule)
            return low, why("precision.no_kernel", dtype="float32")
        if not sup(low):
            return FP32, why("precision.list_no_kernel", rule=plan.rule, dtype=name_of(low))
        if plan.colour == WHITE:
            return low, self._list_reason(plan, "precision.white_list")
        if plan.colour == BLACK:
            return FP32, self._list_reason(plan, "precision.black_list")
        return None

    def _list_reason(self, plan: Plan, code: str) -> Reason:
        """A white or black list op's reason: the built-in list's, or the modify_mixlist rule that put it there."""
        if plan.rule == ("white list" if code == "precision.white_list" else "black list"):
            return self._why(code)
        return self._why("precision.modify_mixlist", rule=plan.rule)

    def _must_keep_error(self) -> PrecisionModeError:
        by_op: dict[str, list[str]] = collections.OrderedDict()
        dtypes = set()
        for op, name, dtype in self.must_keep_failures:
            by_op.setdefault(op, []).append(name)
            dtypes.add(name_of(dtype))

        def listed(names):
            shown = ", ".join(names[:5])
            return shown + (f" and {len(names) - 5} more" if len(names) > 5 else "")

        parts = [f"{op} ({listed(names)})" for op, names in by_op.items()]
        subject = f"op {parts[0]} has" if len(parts) == 1 and len(by_op[next(iter(by_op))]) == 1 else \
            f"ops {', '.join(parts)} have"
        return PrecisionModeError(
            f"{self.mode.mode_key} {self.mode.mode_text}: {subject} no {' or '.join(sorted(dtypes))} support "
            f"on Ascend 910; use allow_fp32_to_fp16 or allow_mix_precision")

    # -------------------------------------------------------------- gray rule
    def _float_edges(self, name: str) -> list:
        """(producer, port, input position) of the float data inputs of a node."""
        edges = self.edges.get(name)
        if edges is None:
            plan = self.plans[name]
            edges = []
            for position, text in enumerate(self.view.input_texts(name)):  # the view's str objects
                if text.startswith("^"):
                    break
                if position < len(plan.sig.inputs) and plan.sig.inputs[position].is_float:
                    ref = parse_input(text)
                    edges.append((ref.node, ref.port, position))
            self.edges[name] = edges
        return edges

    def _vote(self, producer: str, port: int) -> int:
        plan = self.plans.get(producer)
        return plan.vote_of_port(port) if plan is not None else NONE

    def _combine(self, edges) -> tuple[int, str | None, int | None]:
        vote, follows, port = NONE, None, None
        for producer, out_port, _ in edges:
            value = self._vote(producer, out_port)
            if value == HIGH:
                return HIGH, producer, out_port
            if value == LOW and follows is None:
                vote, follows, port = LOW, producer, out_port
        return vote, follows, port

    def _named(self, producer: str | None) -> str | None:
        """The node a reason names: an inserted Cast stands for the node it reads."""
        plan = self.plans.get(producer) if producer is not None else None
        while plan is not None and plan.role == INSERTED and plan.follows is not None:
            producer = plan.follows
            plan = self.plans.get(producer)
        return producer

    def _update(self, plan: Plan) -> bool:
        edges = self._float_edges(plan.name)
        if plan.port_votes is not None:  # IdentityN: element i follows input i
            changed = False
            for producer, out_port, position in edges:
                value = self._vote(producer, out_port)
                if position < len(plan.port_votes) and value != plan.port_votes[position]:
                    plan.port_votes[position] = value
                    source = self.plans.get(producer)
                    plan.port_npu[position] = source.npu_of_port(out_port) if value != NONE else \
                        plan.sig.outputs[position].dtype
                    changed = True
            return changed
        if plan.role == INSERTED:
            vote, follows, port = self._combine(edges)
            npu = self.plans[follows].npu_of_port(port) if follows is not None else None
        elif plan.role == PLUMBING:
            governed = [e for e in edges if plan.sig.inputs[e[2]].type_attr in plan.attrs]
            vote, follows, port = self._combine(governed)
            npu = self.plans[follows].npu_of_port(port) if follows is not None else plan.orig
        else:
            if plan.op in _FIXED_ATTRS:  # a batch norm follows its data inputs, not its float32 statistics
                edges = [e for e in edges if plan.sig.inputs[e[2]].type_attr in plan.attrs]
            vote, follows, port = self._combine(edges)
            npu = self.mode.low if vote == LOW else plan.orig
        if vote == plan.vote and npu == plan.npu and follows == plan.follows:
            return False
        plan.vote, plan.follows, plan.npu = vote, follows, npu
        return True

    def _settle(self) -> None:
        plans = self.plans
        # The followers, asked of their plans (a set of their names was a tenth of the pass's peak).
        queue = collections.deque(name for name, plan in plans.items() if plan.role in _FOLLOWERS)
        queued = set(queue)
        while queue:
            name = queue.popleft()
            queued.discard(name)
            if self._update(plans[name]):
                for consumer in self.view.consumers(name):
                    plan = plans.get(consumer)
                    if plan is not None and plan.role in _FOLLOWERS and consumer not in queued:
                        queue.append(consumer)
                        queued.add(consumer)
        for name, plan in plans.items():
            if plan.role not in _FOLLOWERS or plan.role == INSERTED:
                continue
            if plan.role == GRAY:
                plan.reason = self._gray_reason(plan)
            elif plan.port_votes is not None:
                plan.reason = self._why("precision.pass_through_ports")
            elif plan.follows is not None:
                plan.reason = Follows(None, self._named(plan.follows))
            else:
                plan.reason = self._why("precision.pass_through_undecided")

    def _gray_reason(self, plan: Plan) -> "Reason | Follows":
        named = self._named(plan.follows)
        if plan.vote == LOW:
            return Follows(plan.rule, named)
        if plan.vote == HIGH:
            return Follows(plan.rule, named, name_of(self.plans[named].npu) or "float32")
        return self._why("precision.gray_undecided", rule=plan.rule, dtype=name_of(plan.orig))

    def _match_loop_merges(self) -> None:
        """A NextIteration feeding a lowered Merge carries the Merge's dtype (casts go before it)."""
        for plan in self.plans.values():
            if plan.op != "NextIteration" or plan.role != PLUMBING or plan.vote == LOW:
                continue
            for consumer in self.view.consumers(plan.name):
                merge = self.plans.get(consumer)
                if merge is not None and merge.op == "Merge" and merge.vote == LOW:
                    plan.vote, plan.npu = LOW, merge.npu
                    plan.reason = coded("precision.loop_merge", merge=merge.name)
                    break
