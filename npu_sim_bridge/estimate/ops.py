"""What one op asks of the chip: its unit (cube, vector, AI CPU, host), FLOPs and bytes from its shapes."""

from __future__ import annotations

import dataclasses
import math

from npu_sim_bridge.estimate.shapes import elements, known

CUBE, VECTOR, AICPU, HOST, FREE = "cube", "vector", "aicpu", "host", "free"

MATMUL = frozenset({"MatMul", "_FusedMatMul", "MatMulV2"})
BATCH_MATMUL = frozenset({"BatchMatMul", "BatchMatMulV2", "BatchMatMulV3"})
CONV = frozenset({"Conv2D", "_FusedConv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", "Conv3D",
                  "Conv3DBackpropInputV2", "Conv3DBackpropFilterV2", "Conv2DTranspose"})
DEPTHWISE = frozenset({"DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropInput",
                       "DepthwiseConv2dNativeBackpropFilter", "_FusedDepthwiseConv2dNative"})
BATCH_NORM = frozenset({"FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3", "_FusedBatchNormEx",
                        "FusedBatchNormGrad", "FusedBatchNormGradV2", "FusedBatchNormGradV3"})
SOFTMAX = frozenset({"Softmax", "LogSoftmax", "SoftmaxCrossEntropyWithLogits",
                     "SparseSoftmaxCrossEntropyWithLogits"})
REDUCE = frozenset({"Sum", "Mean", "Max", "Min", "Prod", "BiasAddGrad", "ArgMax", "ArgMin", "All", "Any",
                    "L2Loss", "EuclideanNorm"})
POOL = frozenset({"MaxPool", "AvgPool", "MaxPoolV2", "MaxPoolGrad", "AvgPoolGrad", "MaxPoolGradV2",
                  "MaxPool3D", "AvgPool3D", "MaxPool3DGrad", "AvgPool3DGrad"})
FORMAT = frozenset({"Transpose", "TransData", "TransposeD", "ConjugateTranspose"})
MOVE = frozenset({"Pad", "PadV2", "MirrorPad", "MirrorPadGrad", "ConcatV2", "Concat", "Slice", "StridedSlice",
                  "StridedSliceGrad", "Split", "SplitV", "Tile", "GatherV2", "Gather", "ResourceGather", "Pack",
                  "Unpack", "OneHot", "Fill", "ZerosLike", "OnesLike", "BroadcastTo", "Reverse", "ReverseV2",
                  "UnsortedSegmentSum", "ScatterNd", "GatherNd", "TensorScatterUpdate", "Select", "SelectV2"})
TRANSCENDENTAL = frozenset({"Exp", "Log", "Log1p", "Tanh", "Sigmoid", "Erf", "Erfc", "Rsqrt", "Sqrt", "Pow",
                            "TanhGrad", "SigmoidGrad", "RsqrtGrad", "SqrtGrad", "Softplus", "Elu", "Selu",
                            "RealDiv", "Reciprocal", "Div", "DivNoNan", "Sin", "Cos", "Gelu", "GeluGrad"})
ASSIGN = frozenset({"AssignVariableOp", "AssignSubVariableOp", "AssignAddVariableOp", "Assign", "AssignSub",
                    "AssignAdd"})
# Ops with no kernel of their own on the device: views, graph plumbing, shape reads, the emulation's rounding.
NO_KERNEL = frozenset({"Identity", "IdentityN", "Reshape", "ExpandDims", "Squeeze", "NoOp", "Const", "HostConst",
                       "ReadVariableOp", "VarHandleOp", "VariableV2", "Variable", "_Arg", "_Retval", "StopGradient",
                       "PreventGradient", "Snapshot", "Shape", "ShapeN", "Size", "Rank", "OptionalFromValue",
                       "OptionalGetValue", "OptionalNone", "Switch", "Merge", "Enter", "Exit", "NextIteration",
                       "LoopCond", "ControlTrigger", "NpuSimRoundToFloat16", "Placeholder",
                       "PlaceholderWithDefault", "VarIsInitializedOp", "EnsureShape", "CheckNumerics",
                       "BroadcastGradientArgs", "GeOp"})
_APPLY_STATES = {"GradientDescent": 0, "Momentum": 1, "KerasMomentum": 1, "Adam": 2, "AdamWithAmsgrad": 3,
                 "RMSProp": 2, "CenteredRMSProp": 3, "Adagrad": 1, "AdagradV2": 1, "Adadelta": 2, "Ftrl": 2,
                 "FtrlV2": 2, "AdaMax": 2, "AddSign": 1, "PowerSign": 1, "ProximalAdagrad": 1}


@dataclasses.dataclass
class Work:
    """One op's work: unit, FLOPs, HBM bytes, the parallel pieces it splits into, and what the advisor reads."""

    unit: str
    flops: float = 0.0
    bytes: float = 0.0
    pieces: float = 1.0            # cube: 16x16 output tiles; vector: output elements
    family: str = "elementwise"
    fp32_cube: bool = False        # a float32 cube op on a chip without a float32 cube: costs conversions
    convert_elements: float = 0.0  # elements the conversions to and from float16 touch
    static: bool = True            # every shape it reads is static


@dataclasses.dataclass
class OpCall:
    """What the cost formulas read about one op: type, attributes, shapes and element widths in bytes."""

    op: str
    attr: object
    in_shapes: list
    out_shapes: list
    width: int = 4                 # bytes of an element of its float tensors on the device
    in_widths: list | None = None  # per input where they differ (Cast, resource handles: 0)
    batch: int | None = None


def _elems(call: OpCall, shape) -> int:
    return elements(shape, call.batch)


def _bytes(call: OpCall) -> float:
    widths = call.in_widths or [call.width] * len(call.in_shapes)
    total = sum(_elems(call, s) * (call.width if w is None else w) for s, w in zip(call.in_shapes, widths))
    out_width = call.width if call.op != "Cast" else _cast_width(call, "DstT")
    return float(total + sum(_elems(call, s) for s in call.out_shapes) * out_width)


def _cast_width(call: OpCall, key: str) -> int:
    from npu_sim_bridge.estimate.dtypes import width_of_attr

    return width_of_attr(call.attr, key, call.width)


def _dim(shape, index, default=1) -> int:
    if shape is None or len(shape) < abs(index) + (0 if index < 0 else 1):
        return default
    value = shape[index]
    return value if value > 0 else default


def _tiles(rows: float, cols: float) -> float:
    return math.ceil(max(rows, 1) / 16) * math.ceil(max(cols, 1) / 16)


def _attr_bool(attr, key) -> bool:
    return key in attr and attr[key].b


def cube_work(call: OpCall) -> Work:
    """Matmuls and convolutions: 2 FLOPs per multiply-accumulate, inputs and output read/written once."""
    op, ins, outs = call.op, call.in_shapes, call.out_shapes
    out = outs[0] if outs else None
    if op in MATMUL or op in BATCH_MATMUL:
        a = ins[0] if ins else None
        flip = _attr_bool(call.attr, "transpose_a") or _attr_bool(call.attr, "adj_x")
        k = _dim(a, -2) if flip else _dim(a, -1)
        flops = 2.0 * _elems(call, out) * k
        batches = _elems(call, out) / max(_dim(out, -2) * _dim(out, -1), 1)
        tiles = _tiles(_dim(out, -2), _dim(out, -1)) * batches
        family = "matmul" if op in MATMUL else "batch_matmul"
    else:
        backprop_filter = "BackpropFilter" in op
        filt = out if backprop_filter else (ins[1] if len(ins) > 1 else None)
        y = ins[2] if ("Backprop" in op and len(ins) > 2) else out
        per_output = math.prod(_dim(filt, i) for i in range(len(filt) - 1)) if filt else 1
        flops = 2.0 * _elems(call, y) * per_output
        rows = _elems(call, out) / max(_dim(out, -1), 1)
        tiles = _tiles(rows, _dim(out, -1))
        family = "conv"
    return Work(CUBE, flops, _bytes(call), tiles, family, static=_static(call))


def vector_work(call: OpCall) -> Work:
    """Vector-unit work per family: FLOPs per element read or written, bytes of every input and output."""
    op = call.op
    out_elems = sum(_elems(call, s) for s in call.out_shapes[:1]) or 1
    in_elems = _elems(call, call.in_shapes[0]) if call.in_shapes else out_elems
    if op in DEPTHWISE:
        filt = call.out_shapes[0] if "BackpropFilter" in op else (call.in_shapes[1] if len(call.in_shapes) > 1
                                                                  else None)
        y = call.in_shapes[2] if ("Backprop" in op and len(call.in_shapes) > 2) else call.out_shapes[0]
        # The filter gradient is a few thousand numbers summed over the whole batch: the kernel splits that
        # sum over the cores, so its pieces are the gradient's elements, not the filter's.
        pieces = _elems(call, y) if "BackpropFilter" in op else out_elems
        return _vec(call, 2.0 * _elems(call, y) * _dim(filt, 0) * _dim(filt, 1), pieces, "depthwise")
    if op in BATCH_NORM:
        per = 10.0 if "Grad" in op else 8.0
        return _vec(call, per * in_elems, out_elems, "batch_norm")
    if op in SOFTMAX:
        return _vec(call, 5.0 * in_elems, in_elems, "softmax")
    if op in REDUCE:
        return _vec(call, float(in_elems), in_elems, "reduction")
    if op in POOL:
        ksize = call.attr["ksize"].list.i if "ksize" in call.attr else []
        window = math.prod(ksize) if ksize else 1
        return _vec(call, float(out_elems * window), out_elems, "pool")
    if op in FORMAT:
        return _vec(call, 0.0, out_elems, "format")
    if op in MOVE:
        return _vec(call, 0.0, out_elems, "move")
    if op == "Cast":
        return _vec(call, float(out_elems), out_elems, "cast")
    if op in ASSIGN:
        value = call.in_shapes[1] if len(call.in_shapes) > 1 else None
        n = _elems(call, value)
        return Work(VECTOR, float(n), 2.0 * n * call.width, n, "assign", static=_static(call))
    states = _apply_states(op)
    if states is not None:
        n = max((_elems(call, s) for s in call.in_shapes), default=1)
        return Work(VECTOR, (3.0 + 3 * states) * n, float(n * 4 * (2 * (1 + states) + 1)), n, "optimizer",
                    static=_static(call))
    per = 4.0 if op in TRANSCENDENTAL else 1.0
    return _vec(call, per * out_elems, out_elems, "elementwise")


def _vec(call: OpCall, flops: float, pieces: float, family: str) -> Work:
    return Work(VECTOR, flops, _bytes(call), pieces, family, static=_static(call))


def _apply_states(op: str):
    for prefix in ("ResourceApply", "ResourceSparseApply", "SparseApply", "Apply"):
        if op.startswith(prefix):
            return _APPLY_STATES.get(op[len(prefix):], 2)
    return None


def _static(call: OpCall) -> bool:
    return all(known(s) for s in list(call.in_shapes[:1]) + list(call.out_shapes[:1]))


def generic_work(call: OpCall, unit: str) -> Work:
    """AI CPU and host ops: FLOPs one per output element, bytes of every input and output."""
    out_elems = sum(_elems(call, s) for s in call.out_shapes) or 1
    family = "format" if call.op in FORMAT else ("move" if call.op in MOVE else "other")
    return Work(unit, float(out_elems), _bytes(call), out_elems, family, static=_static(call))
