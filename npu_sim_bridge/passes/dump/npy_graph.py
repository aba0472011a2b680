"""Graph nodes that write a tensor as a .npy file with TensorFlow ops only (no py_func, so they run in GeOp bodies).

SerializeTensor gives a TensorProto whose last field is the raw tensor bytes; Substr cuts them out,
and a .npy header (magic, fixed length, the dict with dtype and the shape read at run time) goes in
front. The write op creates the step folder. Everything works in the flat "node:port" form of a GraphView.

The write op is the simulator's NpuSimWriteFileAtomic (native/npu_ops.cc) in graphs a Session runs
(the Grappler rewrite loads the op library into the process): a file is written beside its place and
renamed into it, so a full disk leaves no cut .npy, and the run fails with one line naming the file
(WRITE_ERROR_PREFIX; `write_failure` finds it in TensorFlow's error). An offline rewrite keeps
TensorFlow's WriteFile, so its GraphDef runs where the op library is not loaded.
"""

from __future__ import annotations

import struct
import sys

from tensorflow.core.framework import attr_value_pb2, node_def_pb2, tensor_pb2, types_pb2
from tensorflow.python.framework import op_def_registry

_NUMPY_CODES = {
    types_pb2.DT_FLOAT: ("f", 4), types_pb2.DT_HALF: ("f", 2), types_pb2.DT_DOUBLE: ("f", 8),
    types_pb2.DT_INT8: ("i", 1), types_pb2.DT_INT16: ("i", 2), types_pb2.DT_INT32: ("i", 4),
    types_pb2.DT_INT64: ("i", 8), types_pb2.DT_UINT8: ("u", 1), types_pb2.DT_UINT16: ("u", 2),
    types_pb2.DT_UINT32: ("u", 4), types_pb2.DT_UINT64: ("u", 8), types_pb2.DT_BOOL: ("b", 1),
    types_pb2.DT_COMPLEX64: ("c", 8), types_pb2.DT_COMPLEX128: ("c", 16),
}
DUMPABLE = frozenset(_NUMPY_CODES) | {types_pb2.DT_BFLOAT16}
ATOMIC_WRITE_OP = "NpuSimWriteFileAtomic"
WRITE_ERROR_PREFIX = "npu-sim dump: cannot write "  # native/npu_ops.cc's kWriteErrorPrefix
_DICT_HEAD_LEN = len("{'descr': '<f4', 'fortran_order': False, 'shape': (")


def descr(dtype: int) -> str:
    kind, size = _NUMPY_CODES[dtype]
    order = "|" if size == 1 else ("<" if sys.byteorder == "little" else ">")
    return f"{order}{kind}{size}"


def write_op(item_id: str) -> str:
    """The op that writes a dump file in the graph of this Grappler item: NpuSimWriteFileAtomic, loading the
    op library (a NativeBuildError says why it cannot), or WriteFile in an offline rewrite."""
    if item_id == "offline":
        return "WriteFile"
    from npu_sim_bridge.native.loader import load_npu_ops

    load_npu_ops()
    return ATOMIC_WRITE_OP


def write_failure(error: BaseException) -> str | None:
    """The one line a failed dump write gave, out of TensorFlow's error text around it; None for another error."""
    text = getattr(error, "message", None) or str(error)
    start = text.find(WRITE_ERROR_PREFIX)
    if start < 0:
        return None
    return text[start:].split("\n", 1)[0].strip()


class NodeMaker:
    """Adds nodes to a GraphView under one name scope, with the device and marks every node needs.

    `writer` is the op type that writes a file (write_op)."""

    def __init__(self, view, scope: str, device: str = "", marks: dict | None = None, writer: str = "WriteFile"):
        self.view = view
        self.writer = writer
        self.scope = scope
        self.device = device
        self.marks = marks or {}
        self._consts: dict = {}

    def add(self, op: str, inputs=(), name: str = "", **attrs) -> str:
        node = node_def_pb2.NodeDef(op=op, name=self.view.unique_name(f"{self.scope}/{name or op}"),
                                    device=self.device)
        node.input.extend(inputs)
        for key, value in list(attrs.items()) + list(self.marks.items()):
            node.attr[key].CopyFrom(value if isinstance(value, attr_value_pb2.AttrValue) else _attr(value))
        for attr in op_def_registry.get(op).attr:  # complete on its own, as a function body needs
            if attr.name not in node.attr and attr.HasField("default_value"):
                node.attr[attr.name].CopyFrom(attr.default_value)
        self.view.add_node(node)
        return node.name

    def const(self, value, dtype: int, name: str = "const", shape=None) -> str:
        key = (repr(value), dtype, shape is not None)
        if key not in self._consts:
            self._consts[key] = self._const(value, dtype, name, shape)
        return self._consts[key]

    def _const(self, value, dtype, name, shape) -> str:
        tensor = tensor_pb2.TensorProto(dtype=dtype)
        values = value if isinstance(value, (list, tuple)) else [value]
        if shape is not None or isinstance(value, (list, tuple)):
            tensor.tensor_shape.dim.add(size=len(values))
        if dtype == types_pb2.DT_STRING:
            tensor.string_val.extend(v if isinstance(v, bytes) else v.encode("utf-8") for v in values)
        elif dtype == types_pb2.DT_INT64:
            tensor.int64_val.extend(values)
        elif dtype == types_pb2.DT_INT32:
            tensor.int_val.extend(values)
        elif dtype == types_pb2.DT_BOOL:
            tensor.bool_val.extend(values)
        else:
            raise ValueError(f"NodeMaker.const does not make {types_pb2.DataType.Name(dtype)} constants")
        return self.add("Const", name=name, dtype=type_attr(dtype), value=attr_value_pb2.AttrValue(tensor=tensor))


def _attr(value) -> attr_value_pb2.AttrValue:
    if isinstance(value, bool):
        return attr_value_pb2.AttrValue(b=value)
    if isinstance(value, int):
        return attr_value_pb2.AttrValue(i=value)
    if isinstance(value, (str, bytes)):
        return attr_value_pb2.AttrValue(s=value if isinstance(value, bytes) else value.encode("utf-8"))
    raise TypeError(f"cannot make an AttrValue of {value!r}")


def type_attr(dtype: int) -> attr_value_pb2.AttrValue:
    return attr_value_pb2.AttrValue(type=dtype)


def type_list(dtypes) -> attr_value_pb2.AttrValue:
    value = attr_value_pb2.AttrValue()
    value.list.type.extend(dtypes)
    return value


def header_length(rank: int | None) -> int:
    """A fixed .npy header size (a multiple of 64) with room for the shape text of a tensor of this rank."""
    rank = 32 if rank is None or rank < 0 else rank
    needed = 10 + _DICT_HEAD_LEN + 21 * rank + len("), }") + 1
    return 64 * ((needed + 63) // 64)


def as_npu_value(make: NodeMaker, tensor: str, graph_dtype: int, npu_dtype: int) -> tuple[str, int]:
    """The tensor as the NPU holds it (a Cast where the graph emulates float16 in float32), stored dtype."""
    value, dtype = tensor, graph_dtype
    if npu_dtype != graph_dtype and npu_dtype in (types_pb2.DT_HALF, types_pb2.DT_BFLOAT16):
        value = make.add("Cast", [value], name="to_npu_dtype", SrcT=type_attr(graph_dtype), DstT=type_attr(npu_dtype),
                         Truncate=False)
        dtype = npu_dtype
    if dtype == types_pb2.DT_BFLOAT16:
        value = make.add("Cast", [value], name="bfloat16_as_float32", SrcT=type_attr(dtype),
                         DstT=type_attr(types_pb2.DT_FLOAT), Truncate=False)
        dtype = types_pb2.DT_FLOAT
    return value, dtype


def write_npy(make: NodeMaker, value: str, dtype: int, rank: int | None, path: str, const=None,
              control: tuple = ()) -> str:
    """Nodes writing `value` (a tensor of `dtype`) as .npy to the file named by the string tensor `path`.

    `const(value, dtype, name)` gives constants usable where `value` lives (inside a while frame they
    must enter it; default: make.const); `control` are control inputs of the write (make.writer). Returns it."""
    const = const or make.const
    int32, string = types_pb2.DT_INT32, types_pb2.DT_STRING
    _, itemsize = _NUMPY_CODES[dtype]
    total = header_length(None if rank is None else rank + 8)  # room for a rank the static shape got wrong
    serialized = make.add("SerializeTensor", [value], name="serialized", T=type_attr(dtype))
    # The shape and size are read from the tensor parsed back: its static shape is unknown, so Grappler
    # cannot fold them from a static shape that disagrees with the run (a stale _output_shapes, or an op
    # whose shape function says scalar where the kernel gives [0]), which would write a wrong header.
    parsed = make.add("ParseTensor", [serialized], name="parsed", out_type=type_attr(dtype))
    count = make.add("Size", [parsed], name="count", T=type_attr(dtype), out_type=type_attr(int32))
    nbytes = make.add("Mul", [count, const(itemsize, int32, "itemsize")], name="nbytes", T=type_attr(int32))
    length = make.add("StringLength", [serialized], name="length", unit="BYTE")
    start = make.add("Sub", [length, nbytes], name="start", T=type_attr(int32))
    raw = make.add("Substr", [serialized, start, nbytes], name="raw", T=type_attr(int32), unit="BYTE")
    shape = make.add("Shape", [parsed], name="shape", T=type_attr(dtype), out_type=type_attr(int32))
    dims = make.add("AsString", [shape], name="dims", T=type_attr(int32))
    items = make.add("StringJoin", [dims, const(",", string, "comma")], name="items", N=2, separator="")
    joined = make.add("ReduceJoin", [items, const(0, int32, "axis")], name="shape_text", keep_dims=False,
                      separator=" ")
    head = f"{{'descr': '{descr(dtype)}', 'fortran_order': False, 'shape': ("
    text = make.add("StringJoin", [const(head, string, "head"), joined, const("), }" + " " * total, string, "tail")],
                    name="header_text", N=3, separator="")
    padded = make.add("Substr", [text, const(0, int32, "zero"), const(total - 11, int32, "width")],
                      name="header_padded", T=type_attr(int32), unit="BYTE")
    prefix = b"\x93NUMPY\x01\x00" + struct.pack("<H", total - 10)
    content = make.add("StringJoin", [const(prefix, string, "magic"), padded, const("\n", string, "newline"), raw],
                       name="content", N=4, separator="")
    return make.add(make.writer, [path, content] + ["^" + name for name in control], name="write")
