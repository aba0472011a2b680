"""Bytes per element of TensorFlow dtypes, as the device holds them (a resource handle moves no data)."""

from __future__ import annotations

from tensorflow.core.framework import types_pb2

_WIDTH = {
    types_pb2.DT_FLOAT: 4, types_pb2.DT_HALF: 2, types_pb2.DT_BFLOAT16: 2, types_pb2.DT_DOUBLE: 8,
    types_pb2.DT_INT32: 4, types_pb2.DT_INT64: 8, types_pb2.DT_INT16: 2, types_pb2.DT_INT8: 1,
    types_pb2.DT_UINT8: 1, types_pb2.DT_UINT16: 2, types_pb2.DT_UINT32: 4, types_pb2.DT_UINT64: 8,
    types_pb2.DT_BOOL: 1, types_pb2.DT_RESOURCE: 0, types_pb2.DT_VARIANT: 0, types_pb2.DT_STRING: 8,
}
_NAMED = {"float16": 2, "float32": 4, "bfloat16": 2, "float64": 8}
FLOAT_TYPES = frozenset({types_pb2.DT_FLOAT, types_pb2.DT_HALF, types_pb2.DT_BFLOAT16, types_pb2.DT_DOUBLE})


def width(dtype: int, default: int = 4) -> int:
    """Bytes of one element of a DataType enum value."""
    return _WIDTH.get(dtype & ~100 if dtype > 100 else dtype, default)  # reference types are dtype + 100


def width_of_attr(attr, key: str, default: int = 4) -> int:
    """Bytes of one element of the dtype attribute `key`, or `default` when the node lacks it."""
    return width(attr[key].type, default) if key in attr else default


def width_of_name(name: str | None, default: int = 4) -> int:
    """Bytes of one element of a dtype name as the report writes it (float16, float32)."""
    return _NAMED.get(name or "", default)


def main_dtype(attr):
    """The dtype an op computes in, from T, dtype or DstT; None when it has none of them."""
    for key in ("T", "dtype", "DstT", "Tout"):
        if key in attr and attr[key].type:
            return attr[key].type
    return None
