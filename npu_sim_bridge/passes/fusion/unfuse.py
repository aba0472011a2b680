"""Takes the fused ops Grappler's remapper made apart into the primitive ops they replaced.

With a hand-built ConfigProto (as in the seeds) Grappler's remapper runs before NpuOptimizer and
fuses Conv2D+BiasAdd(+activation), MatMul+BiasAdd(+activation) and FusedBatchNorm(+side input)
(+activation) into `_FusedConv2D`, `_FusedMatMul` and `_FusedBatchNormEx`. The simulated NPU fuses
by its own rules, switched by fusion_switch_file, so the fusion pass first rebuilds the primitive
chain from each such node (its `fused_ops` say which ops, in which order) and lets its rules fuse
again. In float32 the chain computes what the fused kernel computed: measured bit-identical on
TensorFlow 2.15's CPU kernels (tests/test_unfuse.py).

The last op of the chain keeps the fused node's name (its consumers and fetches keep working); the
others are named `<fused node>/<Op>`. A fused node whose `fused_ops` hold an op this module does not
know is left as it is and reported.
"""

from __future__ import annotations

import dataclasses

from tensorflow.core.framework import attr_value_pb2, node_def_pb2, types_pb2

from npu_sim_bridge.graph.names import TensorRef, parse_input
from npu_sim_bridge.passes.fusion.marks import FUSION_ATTR
from npu_sim_bridge.passes.fusion.rules import with_defaults

REMAPPER_OPS = ("_FusedConv2D", "_FusedMatMul", "_FusedBatchNormEx")

# Activations the remapper folds in (fused_ops name -> TensorFlow op).
_ACTIVATIONS = {"Relu": "Relu", "Relu6": "Relu6", "Elu": "Elu", "LeakyRelu": "LeakyRelu", "Tanh": "Tanh",
                "Sigmoid": "Sigmoid", "GeluApproximate": "Gelu", "GeluExact": "Gelu"}
_CONV_ATTRS = ("strides", "padding", "explicit_paddings", "data_format", "dilations", "use_cudnn_on_gpu")


@dataclasses.dataclass
class Unfused:
    """One remapper node taken apart: its name, op and fused_ops, and the primitive chain, first to last."""

    name: str
    op: str
    fused_ops: list[str]
    chain: list[tuple[str, str]]   # (name, op) of the primitives, producer first

    @property
    def description(self) -> str:
        return f"{self.op}[{', '.join(self.fused_ops)}]" if self.fused_ops else self.op


def remapped_nodes(view) -> list[str]:
    """Names of the fused nodes Grappler's remapper made (the fusion pass's own carry FUSION_ATTR)."""
    # Found from the view's op column: only those nodes' NodeDefs are read (not every node's).
    return [name for name in view.names_with_op_in(REMAPPER_OPS) if FUSION_ATTR not in view.node(name).attr]


def unfuse(view, name: str) -> Unfused | str:
    """Replace the remapper node `name` by its primitive ops; returns what it did, or why it could not."""
    node = view.node(name)
    op = node.op
    fused_ops = [op.decode() for op in node.attr["fused_ops"].list.s] if "fused_ops" in node.attr else []
    data = [text for text in node.input if not text.startswith("^")]
    controls = [text for text in node.input if text.startswith("^")]
    builder = _Chain(view, node, controls)
    try:
        if node.op == "_FusedBatchNormEx":
            steps = _batch_norm_ex(builder, node, data)
        else:
            steps = _conv_or_matmul(builder, node, data, fused_ops)
    except _Unknown as err:
        return str(err)
    builder.commit(steps)
    return Unfused(name, op, fused_ops, [(n.name, n.op) for n in steps])


class _Unknown(Exception):
    """The fused node holds something this module cannot rebuild."""


class _Chain:
    """Collects the primitive NodeDefs; `commit` swaps them in for the fused node."""

    def __init__(self, view, node, controls):
        self.view, self.node, self.controls = view, node, controls
        self.kept = {key: value for key, value in node.attr.items() if key.startswith("_")}

    def make(self, op: str, inputs: list[str], attrs: dict) -> node_def_pb2.NodeDef:
        made = node_def_pb2.NodeDef(name="", op=op, device=self.node.device)
        made.input.extend(inputs)
        for key, value in attrs.items():
            made.attr[key].CopyFrom(value)
        for key, value in self.kept.items():
            made.attr[key].CopyFrom(value)
        return made

    def commit(self, steps: list[node_def_pb2.NodeDef]) -> None:
        """Name the steps, add all but the last, and turn the fused node itself into the last one."""
        view, fused = self.view, self.node.name
        names = [view.unique_name(f"{fused}/{step.op}") for step in steps[:-1]] + [fused]
        for step, name in zip(steps, names):
            step.name = name
            for slot, text in enumerate(step.input):
                if text.startswith("@"):  # "@k": output 0 of step k
                    step.input[slot] = names[int(text[1:])]
        steps[0].input.extend(self.controls)
        if len(steps) > 1:
            # Outputs 1.. of a _FusedBatchNormEx (batch mean, variance, ...) come from the batch norm step.
            for consumer in list(view.consumers(fused)):
                for slot, text in enumerate(list(view.node(consumer).input)):
                    ref = parse_input(text)
                    if ref.node == fused and ref.port > 0:
                        view.set_input(consumer, slot, TensorRef(names[0], ref.port))
            for step in steps[:-1]:
                view.add_node(step)
        last, node = steps[-1], view.node(fused)
        for index in reversed(range(len(node.input))):
            view.remove_input(fused, index)
        for text in last.input:
            view.add_input(fused, text)
        view.set_op(fused, last.op)
        node.ClearField("attr")
        for key, value in with_defaults(last.op, dict(last.attr)).items():
            node.attr[key].CopyFrom(value)
        for step in steps[:-1]:
            stored = view.node(step.name)
            for key, value in with_defaults(step.op, {}).items():
                if key not in stored.attr:
                    stored.attr[key].CopyFrom(value)


def _type(dtype: int) -> attr_value_pb2.AttrValue:
    return attr_value_pb2.AttrValue(type=dtype)


def _activation(builder, node, op: str, source: str) -> node_def_pb2.NodeDef:
    name = _ACTIVATIONS.get(op)
    if name is None:
        raise _Unknown(f"fused op {op!r} has no primitive this simulator rebuilds")
    attrs = {"T": node.attr["T"]}
    if op == "LeakyRelu":
        alpha = node.attr["leakyrelu_alpha"].f if "leakyrelu_alpha" in node.attr else 0.2
        attrs["alpha"] = attr_value_pb2.AttrValue(f=alpha)
    if name == "Gelu":
        attrs["approximate"] = attr_value_pb2.AttrValue(b=op == "GeluApproximate")
    return builder.make(name, [source], attrs)


def _conv_or_matmul(builder, node, data, fused_ops):
    dtype = node.attr["T"].type
    if node.op == "_FusedConv2D":
        attrs = {key: node.attr[key] for key in _CONV_ATTRS if key in node.attr}
        attrs["T"] = _type(dtype)
        first = builder.make("Conv2D", data[:2], attrs)
    else:
        attrs = {key: node.attr[key] for key in ("transpose_a", "transpose_b") if key in node.attr}
        attrs["T"] = _type(dtype)
        first = builder.make("MatMul", data[:2], attrs)
    steps, args = [first], list(data[2:])
    data_format = node.attr["data_format"] if "data_format" in node.attr else attr_value_pb2.AttrValue(s=b"NHWC")
    for op in fused_ops:
        source = f"@{len(steps) - 1}"
        if op == "BiasAdd":
            steps.append(builder.make("BiasAdd", [source, _take(args, 1, node)[0]],
                                      {"T": _type(dtype), "data_format": data_format}))
        elif op == "FusedBatchNorm":
            scale, offset, mean, variance = _take(args, 4, node)
            targ = node.attr["TArgs"].list.type[0] if "TArgs" in node.attr else types_pb2.DT_FLOAT
            steps.append(builder.make("FusedBatchNormV3", [source, scale, offset, mean, variance], {
                "T": _type(dtype), "U": _type(targ), "data_format": data_format, "is_training":
                attr_value_pb2.AttrValue(b=False), "epsilon": node.attr["epsilon"]}))
        elif op in ("Add", "AddV2"):
            steps.append(builder.make("AddV2", [source, _take(args, 1, node)[0]], {"T": _type(dtype)}))
        else:
            steps.append(_activation(builder, node, op, source))
    if args:
        raise _Unknown(f"{len(args)} fused argument(s) of {node.name} are left over after {fused_ops}")
    return steps


def _take(args: list[str], count: int, node) -> list[str]:
    if len(args) < count:
        raise _Unknown(f"{node.name} ({node.op}) has fewer fused arguments than its fused_ops need")
    taken = args[:count]
    del args[:count]
    return taken


def _batch_norm_ex(builder, node, data):
    if len(data) < 5:
        raise _Unknown(f"{node.name} (_FusedBatchNormEx) has {len(data)} inputs, expected at least 5")
    attrs = {key: node.attr[key] for key in ("T", "U", "epsilon", "exponential_avg_factor", "data_format",
                                                "is_training") if key in node.attr}
    steps = [builder.make("FusedBatchNormV3", data[:5], attrs)]
    sides = int(node.attr["num_side_inputs"].i) if "num_side_inputs" in node.attr else 0
    for side in data[5:5 + sides]:
        steps.append(builder.make("AddV2", [f"@{len(steps) - 1}", side], {"T": node.attr["T"]}))
    mode = node.attr["activation_mode"].s.decode() if "activation_mode" in node.attr else "Identity"
    if mode != "Identity":
        steps.append(_activation(builder, node, mode, f"@{len(steps) - 1}"))
    return steps
