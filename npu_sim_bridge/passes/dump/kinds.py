"""Which overflow kind an op's check reports (AI Core or Atomic Add), and dtype names as the manifest writes them."""

from __future__ import annotations

from tensorflow.core.framework import types_pb2

AICORE_OVERFLOW, ATOMIC_OVERFLOW = "aicore_overflow", "atomic_overflow"
# Ops whose results several AI Cores add into one output buffer with Atomic Add as the data leaves the
# unified buffer (reductions and scatter/segment sums, the bias and filter gradients that sum over the batch).
ATOMIC_ADD_OPS = frozenset({
    "Sum", "Mean", "L2Loss", "BiasAddGrad", "Conv2DBackpropFilter", "DepthwiseConv2dNativeBackpropFilter",
    "Conv3DBackpropFilterV2", "UnsortedSegmentSum", "SegmentSum", "ScatterAdd", "ResourceScatterAdd",
    "ScatterNdAdd", "TensorScatterAdd", "SparseSegmentSum", "SparseSegmentMean",
})


def overflow_kind(node) -> str:
    """'atomic_overflow' for ops whose output the NPU accumulates with Atomic Add, else 'aicore_overflow'."""
    return ATOMIC_OVERFLOW if node.op in ATOMIC_ADD_OPS else AICORE_OVERFLOW


def dtype_name(dtype: int) -> str:
    name = types_pb2.DataType.Name(dtype)
    return {"DT_FLOAT": "float32", "DT_HALF": "float16", "DT_DOUBLE": "float64"}.get(name, name[3:].lower())
