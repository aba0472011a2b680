"""The channels-first ops the CPU layout rewrites: which inputs and attrs carry the layout, per op type.

Measured on TensorFlow 2.15.1 (CPU), each op given data_format NCHW / NCDHW: without oneDNN
(TF_ENABLE_ONEDNN_OPTS=0, the default on CPUs without AVX-512 VNNI/BF16/AMX) every op below fails
("Conv2DCustomBackpropFilterOp only supports NHWC", "Default MaxPoolingOp only supports NHWC on device
type CPU", ...). With oneDNN on, its kernels take NCHW for the float32 convolutions, MaxPool, AvgPool
and the 3D pools, but not MaxPoolV2, MaxPoolGradV2, MaxPoolGradGrad, MaxPool3DGrad, MaxPool3DGradGrad,
nor any float16 op (what sim_fp16_execution=native runs); _FusedConv2D, which the fusion pass makes
as the NPU fuses, takes NHWC only. So every op below is laid out on the CPU,
whatever the machine: a graph runs the same kernels everywhere. FusedBatchNorm (all versions, and
their gradients, 4D and 5D) has NCHW CPU kernels, and is laid out for another reason (below); BiasAdd
and BiasAddGrad have NCHW CPU kernels and are left as they are. SpaceToDepth and DepthToSpace in NCHW
cannot be helped here: their CPU kernels are registered for NHWC only, so TensorFlow's placer refuses
the graph ("No OpKernel was registered") before Grappler, and NpuOptimizer, ever see it.
"""

from __future__ import annotations

import dataclasses

# (source format, target format, permutation from source to target, permutation back)
FORMATS = {
    b"NCHW": (b"NCHW", b"NHWC", (0, 2, 3, 1), (0, 3, 1, 2)),
    b"NCDHW": (b"NCDHW", b"NDHWC", (0, 2, 3, 4, 1), (0, 4, 1, 2, 3)),
}


@dataclasses.dataclass(frozen=True)
class OpLayout:
    """Where one op type carries the layout.

    `tensors`: input ports holding activations (transposed to the target layout); `vectors`: input
    ports holding a shape or window as a vector in the op's format (permuted with DataFormatVecPermute);
    `lists`: attrs holding one int per dimension (strides, ksize, dilations); `output`: whether output
    0 is an activation (a filter gradient is not: it needs no Transpose back).
    """

    tensors: tuple[int, ...]
    vectors: tuple[int, ...] = ()
    lists: tuple[str, ...] = ()
    output: bool = True
    no_kernel: bool = True  # False: the CPU has a kernel in the source layout (the report says why then)


_CONV = ("strides", "dilations")
_POOL = ("ksize", "strides")

OPS: dict[str, OpLayout] = {
    "Conv2D": OpLayout((0,), lists=_CONV),
    "_FusedConv2D": OpLayout((0,), lists=_CONV),  # the fusion pass's Conv2D + BiasAdd (+ Relu); args are 1-D
    "Conv2DBackpropInput": OpLayout((2,), vectors=(0,), lists=_CONV),
    "Conv2DBackpropFilter": OpLayout((0, 2), lists=_CONV, output=False),
    "Conv3D": OpLayout((0,), lists=_CONV),
    "Conv3DBackpropInputV2": OpLayout((2,), vectors=(0,), lists=_CONV),
    "Conv3DBackpropFilterV2": OpLayout((0, 2), lists=_CONV, output=False),
    "DepthwiseConv2dNative": OpLayout((0,), lists=_CONV),
    "DepthwiseConv2dNativeBackpropInput": OpLayout((2,), vectors=(0,), lists=_CONV),
    "DepthwiseConv2dNativeBackpropFilter": OpLayout((0, 2), lists=_CONV, output=False),
    "MaxPool": OpLayout((0,), lists=_POOL),
    "MaxPoolV2": OpLayout((0,), vectors=(1, 2)),
    "AvgPool": OpLayout((0,), lists=_POOL),
    "MaxPool3D": OpLayout((0,), lists=_POOL),
    "AvgPool3D": OpLayout((0,), lists=_POOL),
    "MaxPoolGrad": OpLayout((0, 1, 2), lists=_POOL),
    "MaxPoolGradV2": OpLayout((0, 1, 2), vectors=(3, 4)),
    "MaxPoolGradGrad": OpLayout((0, 1, 2), lists=_POOL),
    "MaxPoolGradGradV2": OpLayout((0, 1, 2), vectors=(3, 4)),
    "AvgPoolGrad": OpLayout((1,), vectors=(0,), lists=_POOL),
    "MaxPool3DGrad": OpLayout((0, 1, 2), lists=_POOL),
    "MaxPool3DGradGrad": OpLayout((0, 1, 2), lists=_POOL),
    "AvgPool3DGrad": OpLayout((1,), vectors=(0,), lists=_POOL),
    # Batch norms have NCHW CPU kernels, but oneDNN's (enabled by default on CPUs with AVX-512 VNNI)
    # sums in another order than its NHWC one: laid out, an NCHW model follows its NHWC twin within
    # float32 rounding on every machine (benchmarks/bench_layout.py, oneDNN on: variables 1.4e-5 apart
    # after 3 steps with the batch norms left NCHW, 3e-8 after 20 steps with them laid out).
    "FusedBatchNorm": OpLayout((0,), no_kernel=False),
    "FusedBatchNormV2": OpLayout((0,), no_kernel=False),
    "FusedBatchNormV3": OpLayout((0,), no_kernel=False),
    "FusedBatchNormGrad": OpLayout((0, 1), no_kernel=False),
    "FusedBatchNormGradV2": OpLayout((0, 1), no_kernel=False),
    "FusedBatchNormGradV3": OpLayout((0, 1), no_kernel=False),
}


def source_format(node) -> bytes | None:
    """The channels-first format `node` runs in (b"NCHW" or b"NCDHW"), or None: not an op of OPS, or
    already channels-last (the ops' default), or a format the CPU layout leaves alone (NCHW_VECT_C)."""
    if node.op not in OPS or "data_format" not in node.attr:
        return None
    value = node.attr["data_format"].s
    return value if value in FORMATS else None


def permuted(values, perm) -> list[int]:
    """`values` (one per dimension of the source format) in the target format's order."""
    return [values[index] for index in perm]


def permuted_pairs(values, perm) -> list[int]:
    """explicit_paddings (a before/after pair per dimension) in the target format's order."""
    return [value for index in perm for value in (values[2 * index], values[2 * index + 1])]
