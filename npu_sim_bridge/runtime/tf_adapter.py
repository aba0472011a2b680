"""npu_bridge.tf_adapter: the adapter's native module as scripts use it, its GE data type numbers (DT_FLOAT, ...).

Scripts pass these numbers to npu_plugin.malloc_shared_memory(name, shape, tf_adapter.DT_FLOAT). The
values are GE's DataType enumeration (graph/types.h), which is not TensorFlow's: DT_FLOAT is 0 here.
The shared host memory calls themselves are not simulated (npu_plugin says so when called).
"""

import tensorflow as tf

DT_FLOAT = 0
DT_FLOAT16 = 1
DT_INT8 = 2
DT_INT32 = 3
DT_UINT8 = 4
DT_INT16 = 6
DT_UINT16 = 7
DT_UINT32 = 8
DT_INT64 = 9
DT_UINT64 = 10
DT_DOUBLE = 11
DT_BOOL = 12
DT_STRING = 13
DT_DUAL_SUB_INT8 = 14
DT_DUAL_SUB_UINT8 = 15
DT_COMPLEX64 = 16
DT_COMPLEX128 = 17
DT_QINT8 = 18
DT_QINT16 = 19
DT_QINT32 = 20
DT_QUINT8 = 21
DT_QUINT16 = 22
DT_RESOURCE = 23
DT_STRING_REF = 24
DT_DUAL = 25
DT_UNDEFINED = 26

_TF_DTYPES = {
    DT_FLOAT: tf.float32, DT_FLOAT16: tf.float16, DT_INT8: tf.int8, DT_INT32: tf.int32, DT_UINT8: tf.uint8,
    DT_INT16: tf.int16, DT_UINT16: tf.uint16, DT_UINT32: tf.uint32, DT_INT64: tf.int64, DT_UINT64: tf.uint64,
    DT_DOUBLE: tf.float64, DT_BOOL: tf.bool, DT_STRING: tf.string, DT_COMPLEX64: tf.complex64,
    DT_COMPLEX128: tf.complex128, DT_QINT8: tf.qint8, DT_QINT16: tf.qint16, DT_QINT32: tf.qint32,
    DT_QUINT8: tf.quint8, DT_QUINT16: tf.quint16, DT_RESOURCE: tf.resource,
}


def tf_dtype(ge_data_type):
    """The TensorFlow dtype of a GE data type number (tf_adapter.DT_FLOAT -> tf.float32)."""
    if ge_data_type not in _TF_DTYPES:
        known = ", ".join(f"{name}={value}" for name, value in globals().items()
                          if name.startswith("DT_") and value in _TF_DTYPES)
        raise ValueError(f"tf_adapter: {ge_data_type!r} is not a GE data type with a TensorFlow dtype; known: {known}")
    return _TF_DTYPES[ge_data_type]


class TensorInfo:
    """ge::TensorInfo: var_name, dims and data_type (a DT_* number), as npu_plugin.malloc_shared_memory fills it."""

    def __init__(self):
        self.var_name = ""
        self.dims = []
        self.data_type = DT_UNDEFINED


class HostVarInfo:
    """ge::HostVarInfo: base_addr and var_size of a host variable."""

    def __init__(self):
        self.base_addr = 0
        self.var_size = 0


def int64_vec(values=()):
    """std::vector<int64_t>: a list of ints."""
    return [int(value) for value in values]


def var_info_vec(values=()):
    """std::vector<ge::HostVarInfo>: a list."""
    return list(values)
