"""The fusion rules: each a small object with a pattern, a check that says why it does not fire, and a rewrite.

Each rule corresponds to a fusion of Ascend's graph engine (names from CANN's public graph/UB fusion
references) and rewrites onto a fused TensorFlow kernel, so the fused op rounds to float16 only at its
end, as the NPU's fused kernel does:
  GraphFusion MatMulBiasAddFusionPass       MatMul -> BiasAdd                 => _FusedMatMul[BiasAdd]
  GraphFusion AABiasaddConvFusion           Conv2D -> BiasAdd                 => _FusedConv2D[BiasAdd]
                                            (the NPU cannot switch it off, so neither can the switch here)
  UBFusion    TbeConvElemwiseFusionPass     _FusedConv2D[BiasAdd] -> Relu     => _FusedConv2D[BiasAdd, Relu]
  UBFusion    TbeFullyconnectionElemwiseDequantFusionPass
                                            _FusedMatMul[BiasAdd] -> Relu     => _FusedMatMul[BiasAdd, Relu]
The fused node takes the name of the last node of the pattern (its consumers and fetches keep working,
as with Grappler's remapper); the others are removed. Graph fusion rules run before UB fusion rules.
On a GPU, AABiasaddConvFusion does not fire: TensorFlow's GPU _FusedConv2D refuses a bias without an
activation when the step runs (measured on an H200 with TensorFlow 2.15.1, float32 and float16); the
_FusedMatMul forms and _FusedConv2D[BiasAdd, Relu] run there. An NCHW convolution fuses too, as on the
NPU: TensorFlow's CPU _FusedConv2D takes NHWC only, and the CPU layout (passes/layout) runs it so.
"""

from __future__ import annotations

import dataclasses
import functools

from tensorflow.core.framework import attr_value_pb2, types_pb2
from tensorflow.python.framework import kernels, op_def_registry

from npu_sim_bridge.graph.names import node_name, on_gpu, parse_input
from npu_sim_bridge.graph.attr_names import FUSED_FROM_ATTR, FUSION_ATTR, KEEP_DTYPE_ATTR, PREFIX
from npu_sim_bridge.passes.fusion.marks import fusion_rules
from npu_sim_bridge.passes.fusion.switch import GRAPH_FUSION, UB_FUSION

FLOAT_TYPES = frozenset({types_pb2.DT_FLOAT, types_pb2.DT_HALF, types_pb2.DT_BFLOAT16})


@dataclasses.dataclass(frozen=True)
class Match:
    """The nodes a rule matched, producer first; the fused node takes the last one's name."""

    nodes: tuple[str, ...]

    @property
    def root(self) -> str:
        return self.nodes[-1]


@dataclasses.dataclass
class FusionEnv:
    """What checks consult: the device-candidate test, protected names and the fp16 execution."""

    candidate: object            # passes.partition.support.CandidateTest over node predicates
    protected: frozenset         # fetched, fed or preserved node names
    native_fp16: bool


class FusionRule:
    """Base of every rule. Subclasses set the class attributes and implement match and fused_attrs."""

    name = ""
    kind = GRAPH_FUSION
    pattern = ""
    fused_op = ""
    description = ""
    can_disable = True
    # The op types the last node of a match has (None: any); a rewrite never makes a node of one.
    root_ops: frozenset | None = None

    def match(self, view, name: str, node) -> Match | None:
        """The match rooted at node `name` (the view's str: a Match keeps it), else None."""
        raise NotImplementedError

    def check(self, view, match: Match, env: FusionEnv) -> str | None:
        """Why the rule does not fire on this match (None: it fires)."""
        return _common_problems(view, match, env, self.fused_op)

    def rewrite(self, view, match: Match, env: FusionEnv):
        """Turn the last matched node into the fused op and remove the others; returns the fused node."""
        root = view.node(match.root)
        originals = [view.node(name) for name in match.nodes]
        inputs, controls = self.fused_inputs(view, match)
        attrs = self.fused_attrs(view, match)
        kept = {key: root.attr[key] for key in root.attr if key.startswith("_") and not key.startswith(PREFIX)}
        rules = []
        history = []
        for node in originals:
            rules.extend(rule for rule in fusion_rules(node) if rule not in rules)
            history.extend(_history(node))
        rules.append(self.name)
        for index in reversed(range(len(root.input))):
            view.remove_input(match.root, index)
        for text in inputs + controls:
            view.add_input(match.root, text)
        view.set_op(match.root, self.fused_op)
        saved = {key: attr_value_pb2.AttrValue() for key in kept}
        for key, value in kept.items():
            saved[key].CopyFrom(value)
        root.ClearField("attr")
        for key, value in with_defaults(self.fused_op, attrs).items():
            root.attr[key].CopyFrom(value)
        for key, value in saved.items():
            root.attr[key].CopyFrom(value)
        root.attr[FUSION_ATTR].list.s.extend(rule.encode() for rule in rules)
        root.attr[FUSED_FROM_ATTR].list.s.extend(item.encode() for item in dict.fromkeys(history))
        for name in match.nodes[:-1]:
            view.remove_node(name)
        return root

    def fused_inputs(self, view, match: Match) -> tuple[list[str], list[str]]:
        raise NotImplementedError

    def fused_attrs(self, view, match: Match) -> dict:
        raise NotImplementedError


def _history(node) -> list[str]:
    if FUSED_FROM_ATTR in node.attr:
        return [value.decode() for value in node.attr[FUSED_FROM_ATTR].list.s]
    return [f"{node.name}:{node.op}"]


def _controls(view, names) -> list[str]:
    found = []
    for name in names:
        for text in view.input_texts(name):
            if text.startswith("^") and text[1:] not in names and text not in found:
                found.append(text)
    return found


def _data_inputs(view, name: str) -> list[str]:
    """A node's data input strings, the ones the view holds (protobuf makes a new str at each read, and
    the fused node keeps these: new ones were a twentieth of the rewrite's peak on a graph that fuses
    everywhere)."""
    return [text for text in view.input_texts(name) if text[0] != "^"]


def _with_bias_inputs(view, match: Match) -> tuple[list[str], list[str]]:
    """The inputs of an op fused with its BiasAdd: the op's two data inputs, then the bias; and the
    control inputs of both."""
    op_name, bias_add = match.nodes
    return _data_inputs(view, op_name)[:2] + [_data_inputs(view, bias_add)[1]], _controls(view, match.nodes)


def _producer(view, name: str, position: int = 0):
    """(name, node) of the node feeding data input `position` of node `name` at output 0, else None."""
    data = _data_inputs(view, name)
    if position >= len(data):
        return None
    ref = parse_input(data[position])
    if ref.port != 0:
        return None
    node = view.get(ref.node)
    return None if node is None else (ref.node, node)


def with_defaults(op: str, attrs: dict) -> dict:
    """`attrs` plus the OpDef defaults of every attr not given (the fused node is complete on its own)."""
    full = dict(attrs)
    for attr in op_def_registry.get(op).attr:
        if attr.name not in full and attr.HasField("default_value"):
            full[attr.name] = attr.default_value
    return full


def _list(strings=(), ints=None, types=None) -> attr_value_pb2.AttrValue:
    value = attr_value_pb2.AttrValue()
    if ints is not None:
        value.list.i.extend(ints)
    elif types is not None:
        value.list.type.extend(types)
    else:
        value.list.s.extend(s.encode() for s in strings)
    return value


@functools.lru_cache(maxsize=None)  # TensorFlow's kernel list costs 1-10 ms a call; a graph asks per match
def _has_kernel(op: str, dtype: int, device: str) -> bool:
    device_type = "GPU" if on_gpu(device) else "CPU"
    for kernel in kernels.get_registered_kernels_for_op(op).kernel:
        if kernel.device_type != device_type:
            continue
        allowed = [c.allowed_values.list.type for c in kernel.constraint if c.name == "T"]
        if not allowed or dtype in allowed[0]:
            return True
    return False


def _common_problems(view, match: Match, env: FusionEnv, fused_op: str) -> str | None:
    nodes = [view.node(name) for name in match.nodes]
    for node, following in zip(nodes, nodes[1:]):
        users = view.consumers(node.name)
        reads = sum(1 for text in following.input if node_name(text) == node.name)
        if users != [following.name] or reads != 1:
            others = [user for user in users if user != following.name]
            return (f"{node.name} ({node.op}) is also read by {', '.join(others[:3]) or following.name}; its own "
                    "output must stay, so it cannot be folded into one op")
        if node.name in env.protected:
            return f"{node.name} ({node.op}) is fetched, fed or preserved, so its own output must stay"
    for node in nodes:
        objection = env.candidate(node)
        if objection:
            return f"{node.name} ({node.op}) does not run on the device ({objection}); the NPU fuses device ops only"
    if len({node.device for node in nodes}) > 1:
        return f"{', '.join(match.nodes)} are placed on different devices"
    keep = {bool(node.attr[KEEP_DTYPE_ATTR].b) if KEEP_DTYPE_ATTR in node.attr else False for node in nodes}
    if len(keep) > 1:
        return "keep_dtype_scope marks some of the nodes but not all"
    dtype = nodes[0].attr["T"].type if "T" in nodes[0].attr else types_pb2.DT_INVALID
    if dtype not in FLOAT_TYPES:
        return f"{nodes[0].name} has dtype {types_pb2.DataType.Name(dtype)}; only float ops are fused"
    if env.native_fp16 and not _has_kernel(fused_op, types_pb2.DT_HALF, nodes[-1].device):
        return (f"sim_fp16_execution is native and TensorFlow has no float16 {fused_op} kernel on "
                f"{nodes[-1].device or 'this machine'}")
    if not _has_kernel(fused_op, dtype, nodes[-1].device):
        return f"TensorFlow has no {types_pb2.DataType.Name(dtype)} {fused_op} kernel on {nodes[-1].device or 'CPU'}"
    return None


def _is_bias_add(node) -> bool:
    return node.op == "BiasAdd"


def _nhwc(node) -> bool:
    return "data_format" not in node.attr or node.attr["data_format"].s in (b"NHWC", b"")


class MatMulBiasAddFusionPass(FusionRule):
    name = "MatMulBiasAddFusionPass"
    kind = GRAPH_FUSION
    pattern = "MatMul -> BiasAdd"
    fused_op = "_FusedMatMul"
    description = ("MatMul and the BiasAdd after it become one MatMul with a bias input; the bias is added "
                   "before the result is rounded to float16")
    root_ops = frozenset({"BiasAdd"})

    def match(self, view, name, node):
        if not _is_bias_add(node):
            return None
        producer = _producer(view, name)
        if producer is None or producer[1].op != "MatMul":
            return None
        return Match((producer[0], name))

    def check(self, view, match, env):
        bias_add = view.node(match.root)
        if not _nhwc(bias_add):
            return f"{bias_add.name} has data_format NCHW; the fused MatMul adds the bias on the last dimension"
        return super().check(view, match, env)

    def fused_inputs(self, view, match):
        return _with_bias_inputs(view, match)

    def fused_attrs(self, view, match):
        matmul = view.node(match.nodes[0])
        attrs = {key: matmul.attr[key] for key in ("T", "transpose_a", "transpose_b") if key in matmul.attr}
        attrs["num_args"] = attr_value_pb2.AttrValue(i=1)
        attrs["fused_ops"] = _list(["BiasAdd"])
        return attrs


class AABiasaddConvFusion(FusionRule):
    name = "AABiasaddConvFusion"
    kind = GRAPH_FUSION
    pattern = "Conv2D -> BiasAdd"
    fused_op = "_FusedConv2D"
    description = ("a Conv2D without bias and the BiasAdd after it become one convolution with a bias input; "
                   "the NPU's graph engine always applies it (it cannot be switched off)")
    can_disable = False
    root_ops = frozenset({"BiasAdd"})

    def match(self, view, name, node):
        if not _is_bias_add(node):
            return None
        producer = _producer(view, name)
        if producer is None or producer[1].op != "Conv2D":
            return None
        return Match((producer[0], name))

    def check(self, view, match, env):
        conv, bias_add = (view.node(name) for name in match.nodes)
        conv_format = conv.attr["data_format"].s if "data_format" in conv.attr else b"NHWC"
        bias_format = bias_add.attr["data_format"].s if "data_format" in bias_add.attr else b"NHWC"
        if conv_format != bias_format:
            return f"{conv.name} and {bias_add.name} use different data formats"
        if on_gpu(bias_add.device):
            # The kernel is registered, so no kernel lookup shows this; it fails when the step runs.
            return (f"{bias_add.name} is placed on {bias_add.device}, where TensorFlow's _FusedConv2D runs a bias "
                    "only together with an activation ('Fusion is not implemented: [BiasAdd]'), and this rule makes "
                    "the bias-only form: the convolution rounds its own output before the bias there")
        return super().check(view, match, env)

    def fused_inputs(self, view, match):
        return _with_bias_inputs(view, match)

    def fused_attrs(self, view, match):
        conv = view.node(match.nodes[0])
        keys = ("T", "strides", "padding", "explicit_paddings", "data_format", "dilations", "use_cudnn_on_gpu")
        attrs = {key: conv.attr[key] for key in keys if key in conv.attr}
        attrs["num_args"] = attr_value_pb2.AttrValue(i=1)
        attrs["TArgs"] = _list(types=[conv.attr["T"].type])
        attrs["fused_ops"] = _list(["BiasAdd"])
        return attrs


class _BiasAddReluFusion(FusionRule):
    """UB fusion of a fused op with bias (made by a graph fusion rule) and the Relu after it."""

    kind = UB_FUSION
    base_op = ""
    activation = "Relu"
    root_ops = frozenset({activation})

    def match(self, view, name, node):
        if node.op != self.activation:
            return None
        found = _producer(view, name)
        if found is None:
            return None
        producer_name, producer = found
        if producer.op != self.base_op or FUSION_ATTR not in producer.attr:
            return None
        if list(producer.attr["fused_ops"].list.s) != [b"BiasAdd"]:
            return None
        return Match((producer_name, name))

    def fused_inputs(self, view, match):
        return _data_inputs(view, match.nodes[0]), _controls(view, match.nodes)

    def fused_attrs(self, view, match):
        fused = view.node(match.nodes[0])
        attrs = {key: fused.attr[key] for key in fused.attr if not key.startswith("_")}
        attrs["fused_ops"] = _list(["BiasAdd", self.activation])
        return attrs


class TbeConvElemwiseFusionPass(_BiasAddReluFusion):
    name = "TbeConvElemwiseFusionPass"
    pattern = "_FusedConv2D[BiasAdd] -> Relu"
    fused_op = base_op = "_FusedConv2D"
    description = ("UB fusion: the Relu after a convolution with bias runs inside it (Relu only selects values, "
                   "so the numbers do not change; the Relu disappears from dumps)")


class TbeFullyconnectionElemwiseDequantFusionPass(_BiasAddReluFusion):
    name = "TbeFullyconnectionElemwiseDequantFusionPass"
    pattern = "_FusedMatMul[BiasAdd] -> Relu"
    fused_op = base_op = "_FusedMatMul"
    description = ("UB fusion: the Relu after a MatMul with bias runs inside it (Relu only selects values, so "
                   "the numbers do not change; the Relu disappears from dumps)")


RULE_CLASSES = (MatMulBiasAddFusionPass, AABiasaddConvFusion, TbeConvElemwiseFusionPass,
                TbeFullyconnectionElemwiseDequantFusionPass)


def all_rules() -> list[FusionRule]:
    """Every rule, in the order the pass applies them (graph fusion first, then UB fusion)."""
    rules = [cls() for cls in RULE_CLASSES]
    return [rule for rule in rules if rule.kind == GRAPH_FUSION] + [rule for rule in rules if rule.kind == UB_FUSION]
