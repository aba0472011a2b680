"""Typed ports of a node: the dtype each data input and output carries, and which type attr sets it.

The precision pass changes a node's dtype by rewriting its type attrs, so it must know, for every
data input and output, whether the port's dtype comes from a type attr (and which), from an element
of a list(type) attr, or is fixed by the op. This module reads that from the registered OpDef (or,
for a call of a function of the graph's library, from the FunctionDef signature).
"""

from __future__ import annotations

import dataclasses

from tensorflow.core.framework import types_pb2
from tensorflow.python.framework import op_def_registry

FLOAT_TYPES = frozenset({types_pb2.DT_FLOAT, types_pb2.DT_HALF, types_pb2.DT_BFLOAT16})
LOW_TYPES = frozenset({types_pb2.DT_HALF, types_pb2.DT_BFLOAT16})

DTYPE_BY_NAME = {
    "float32": types_pb2.DT_FLOAT,
    "float16": types_pb2.DT_HALF,
    "bfloat16": types_pb2.DT_BFLOAT16,
}
NAME_BY_DTYPE = {value: key for key, value in DTYPE_BY_NAME.items()}

# Ref dtypes (DT_FLOAT_REF, ...) are the base dtype plus this offset.
_REF_OFFSET = 100

# Fused ops whose list(type) attr of extra arguments moves together with T (bias of _FusedConv2D).
LIST_FOLLOWS_T = {"_FusedConv2D": "TArgs"}


@dataclasses.dataclass(frozen=True)
class Port:
    """One data input or output: its dtype and the attr that sets it (None when the op fixes it)."""

    dtype: int
    attr: str | None = None
    index: int | None = None     # element of a list(type) attr
    is_ref: bool = False
    arg: str = ""                # OpDef argument name
    arg_index: int = 0           # position inside a repeated or list argument

    @property
    def is_float(self) -> bool:
        return self.dtype in FLOAT_TYPES


@dataclasses.dataclass(frozen=True)
class Signature:
    """The data inputs and outputs of one node, flattened as GraphDef ports count them."""

    inputs: tuple[Port, ...]
    outputs: tuple[Port, ...]
    known: bool = True
    has_float: bool = False        # a float32/float16/bfloat16 input or output
    reads_variable: bool = False   # a ref or resource input
    float_attrs: tuple[str, ...] = ()  # type attrs that set a float port, in port order

    @staticmethod
    def of(inputs, outputs) -> "Signature":
        inputs, outputs = tuple(inputs), tuple(outputs)
        names: list[str] = []
        for port in inputs + outputs:
            if port.is_float and port.attr and port.attr not in names:
                names.append(port.attr)
        return Signature(inputs, outputs, True, any(p.is_float for p in inputs + outputs),
                         any(p.is_ref or p.dtype == types_pb2.DT_RESOURCE for p in inputs), tuple(names))

    def output_offset(self, arg: str) -> int | None:
        """Flat port of the first output of OpDef output argument `arg`."""
        for position, port in enumerate(self.outputs):
            if port.arg == arg:
                return position
        return None


UNKNOWN = Signature((), (), known=False)

_op_defs: dict[str, object] = {}


def op_def(op: str):
    """The registered OpDef of an op type, or None."""
    if op not in _op_defs:
        _op_defs[op] = op_def_registry.get(op)
    return _op_defs[op]


def _attr(node, op_definition, name):
    if name in node.attr:
        return node.attr[name]
    for attr in op_definition.attr:
        if attr.name == name and attr.HasField("default_value"):
            return attr.default_value
    return None


def _expand(node, op_definition, arg) -> list[Port]:
    ref = bool(arg.is_ref)
    if arg.type_list_attr:
        value = _attr(node, op_definition, arg.type_list_attr)
        types = list(value.list.type) if value is not None else []
        follows = LIST_FOLLOWS_T.get(node.op) == arg.type_list_attr
        return [Port(_base(t), "T" if follows else arg.type_list_attr, None if follows else i, ref,
                     arg.name, i) for i, t in enumerate(types)]
    if arg.type_attr:
        value = _attr(node, op_definition, arg.type_attr)
        dtype, attr = (value.type if value is not None else types_pb2.DT_INVALID), arg.type_attr
    else:
        dtype, attr = arg.type, None
    count = 1
    if arg.number_attr:
        value = _attr(node, op_definition, arg.number_attr)
        count = value.i if value is not None else 0
    return [Port(_base(dtype), attr, None, ref, arg.name, i) for i in range(count)]


def _base(dtype: int) -> int:
    return dtype - _REF_OFFSET if dtype > _REF_OFFSET else dtype


_templates: dict[str, tuple | None] = {}
_signatures: dict[tuple, Signature] = {}


def _template(op: str):
    """(OpDef, [(attr name, kind)] of the attrs its ports depend on), or None when the op is not registered."""
    if op not in _templates:
        definition = op_def(op)
        if definition is None:
            _templates[op] = None
        else:
            names: list[tuple[str, str]] = []
            for arg in list(definition.input_arg) + list(definition.output_arg):
                for name, kind in ((arg.type_attr, "type"), (arg.number_attr, "i"), (arg.type_list_attr, "list")):
                    if name and (name, kind) not in names:
                        names.append((name, kind))
            _templates[op] = (definition, tuple(names))
    return _templates[op]


def _key_part(attrs, name: str, kind: str):
    if name not in attrs:
        return None
    value = attrs[name]
    if kind == "type":
        return value.type
    if kind == "i":
        return value.i
    return tuple(value.list.type)


def signature(node, functions=None) -> Signature:
    """Ports of `node`; `functions` maps function names of the graph library to FunctionDefs.

    Cached per op type and the values of the attrs the ports depend on.
    """
    template = _template(node.op)
    if template is not None:
        definition, names = template
        attrs = node.attr
        key = (node.op,) + tuple(_key_part(attrs, name, kind) for name, kind in names)
        cached = _signatures.get(key)
        if cached is None:
            inputs: list[Port] = []
            for arg in definition.input_arg:
                inputs.extend(_expand(node, definition, arg))
            outputs: list[Port] = []
            for arg in definition.output_arg:
                outputs.extend(_expand(node, definition, arg))
            cached = _signatures[key] = Signature.of(inputs, outputs)
        return cached
    if functions and node.op in functions:
        sig = functions[node.op].signature
        return Signature.of(
            [Port(_base(a.type), None, None, False, a.name, 0) for a in sig.input_arg],
            [Port(_base(a.type), None, None, False, a.name, 0) for a in sig.output_arg])
    return UNKNOWN


def type_attr_dtype(node, attr: str, index: int | None) -> int | None:
    """Current value of a type attr (or of element `index` of a list(type) attr)."""
    if attr not in node.attr:
        return None
    value = node.attr[attr]
    if index is None:
        return value.type if value.WhichOneof("value") == "type" else None
    types = value.list.type
    return types[index] if index < len(types) else None


def dtype_name(dtype: int) -> str:
    """'float32', 'float16', 'int32', ... for a DataType value."""
    if dtype in NAME_BY_DTYPE:
        return NAME_BY_DTYPE[dtype]
    name = types_pb2.DataType.Name(dtype)
    return name[3:].lower() if name.startswith("DT_") else name.lower()
