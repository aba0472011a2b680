"""Input and output ports of a NodeDef: their OpDef arg names and dtypes, from the op registry or the library."""

from __future__ import annotations

import functools
from typing import Mapping, NamedTuple

from tensorflow.core.framework import function_pb2, node_def_pb2, types_pb2
from tensorflow.python.framework import op_def_registry

from npu_sim_bridge.errors import UnsupportedGraphError


FLOAT_TYPES = frozenset({types_pb2.DT_FLOAT, types_pb2.DT_HALF, types_pb2.DT_BFLOAT16})

# Ref dtypes (DT_FLOAT_REF, ...) are the base dtype plus this offset.
_REF_OFFSET = 100


class Port(NamedTuple):
    """One input or output of a node: the OpDef arg it belongs to, its index in that arg, its dtype."""

    arg: str
    index: int
    dtype: int          # a types_pb2.DataType value (never a _REF type; see is_ref)
    is_ref: bool = False
    type_attr: str | None = None   # the type or list(type) attr that sets dtype; None when the op fixes it
    list_index: int | None = None  # with a list(type) type_attr: the element of that list

    @property
    def is_float(self) -> bool:
        """Whether the port carries float32, float16 or bfloat16."""
        return self.dtype in FLOAT_TYPES

    def function_output(self, node: str) -> str:
        """How a FunctionDef body names this output of `node`: "node:arg:index"."""
        return f"{node}:{self.arg}:{self.index}"


def base_dtype(dtype: int) -> int:
    """The dtype without its ref-ness (DT_FLOAT for DT_FLOAT_REF)."""
    return dtype - _REF_OFFSET if dtype > _REF_OFFSET else dtype


def op_signature(op: str, library: Mapping[str, function_pb2.FunctionDef] | None = None):
    """The OpDef of a registered op, or the signature of a library function called by name; else None."""
    op_def = op_def_registry.get(op)
    if op_def is not None:
        return op_def
    if library and op in library:
        return library[op].signature
    return None


def output_ports(node: node_def_pb2.NodeDef,
                 library: Mapping[str, function_pb2.FunctionDef] | None = None) -> tuple[Port, ...]:
    """Every output of `node`, in port order."""
    return _ports(node, library, outputs=True)


def input_ports(node: node_def_pb2.NodeDef,
                library: Mapping[str, function_pb2.FunctionDef] | None = None) -> tuple[Port, ...]:
    """Every data input of `node`, in input order."""
    return _ports(node, library, outputs=False)


def is_stateful(node: node_def_pb2.NodeDef,
                library: Mapping[str, function_pb2.FunctionDef] | None = None) -> bool:
    """Whether the op (or the function the node calls by name) is marked stateful."""
    signature = op_signature(node.op, library)
    return bool(signature is not None and signature.is_stateful)


def _signature_or_error(node, library):
    signature = op_signature(node.op, library)
    if signature is None:
        raise UnsupportedGraphError(
            f"node {node.name!r} has op type {node.op!r}, which is neither a registered TensorFlow op nor a "
            "function of the graph library; load the library that defines it (tf.load_op_library) first")
    return signature


def _attr(node, defaults, name, strict=True):
    if name in node.attr:
        return node.attr[name]
    default = defaults.get(name)
    if default is not None:
        return default
    if not strict:
        return None
    raise UnsupportedGraphError(
        f"node {node.name!r} ({node.op}) lacks attribute {name!r} that gives the type of its ports; "
        "the GraphDef is incomplete: export it again with tf.Graph.as_graph_def()")


def registered_spec(op: str):
    """(attr defaults, input arg specs, output arg specs) of a registered op, or None when it is not registered."""
    return _registered_spec(op) if op_def_registry.get(op) is not None else None


@functools.lru_cache(maxsize=4096)
def _registered_spec(op: str):
    """`registered_spec`, read once per op type (only asked for registered ops, which stay registered)."""
    op_def = op_def_registry.get(op)
    return (_defaults(op_def), arg_specs(op_def.input_arg), arg_specs(op_def.output_arg))


def _defaults(op_def) -> dict:
    return {attr.name: attr.default_value for attr in op_def.attr if attr.HasField("default_value")}


def arg_specs(args) -> tuple:
    """(name, fixed type, type_attr, number_attr, type_list_attr, is_ref) of each OpDef arg."""
    return tuple((arg.name, arg.type, arg.type_attr, arg.number_attr, arg.type_list_attr, arg.is_ref)
                 for arg in args)


def expand_arg(node, spec: tuple, defaults: Mapping, strict: bool = True) -> list[Port]:
    """The flat ports of one OpDef arg (an `arg_specs` entry) of `node`.

    An attr the node lacks (and has no default) raises UnsupportedGraphError when `strict`; otherwise it
    reads as an empty list(type), DT_INVALID or a count of 0.
    """
    name, fixed, type_attr, number_attr, type_list_attr, arg_is_ref = spec
    if type_list_attr:
        value = _attr(node, defaults, type_list_attr, strict)
        types = list(value.list.type) if value is not None else []
        return [Port(name, index, base_dtype(dtype), arg_is_ref or dtype > _REF_OFFSET, type_list_attr, index)
                for index, dtype in enumerate(types)]
    if fixed != types_pb2.DT_INVALID:
        dtype, attr = fixed, None
    else:
        value = _attr(node, defaults, type_attr, strict)
        dtype, attr = (value.type if value is not None else types_pb2.DT_INVALID), type_attr or None
    count = 1
    if number_attr:
        value = _attr(node, defaults, number_attr, strict)
        count = value.i if value is not None else 0
    is_ref, dtype = arg_is_ref or dtype > _REF_OFFSET, base_dtype(dtype)
    return [Port(name, index, dtype, is_ref, attr) for index in range(count)]


def port_key(node: node_def_pb2.NodeDef) -> tuple:
    """The op of a registered op's node and the values of the attrs its ports depend on: nodes with
    equal keys have the same ports (what caches of port answers key on)."""
    return port_key_of(node.op, node.attr)


def port_key_of(op: str, attrs) -> tuple:
    """`port_key` of a node of `op` with attr map `attrs`, for a caller that has read them already."""
    single = _single_type_attr(op)
    if single:  # the common case: one type attr, usually T
        value = attrs.get(single)
        return (op, value.type if value is not None else None)
    return (op, *[_attr_value(attrs, name, kind) for name, kind in port_attrs(op)])


@functools.lru_cache(maxsize=4096)
def _single_type_attr(op: str) -> str:
    """The name of the one attr the ports of registered op `op` depend on when it is a type; else ''."""
    names = port_attrs(op)
    return names[0][0] if len(names) == 1 and names[0][1] == "type" else ""


@functools.lru_cache(maxsize=4096)
def port_attrs(op: str) -> tuple[tuple[str, str], ...]:
    """(attr name, "type" | "i" | "list") of the attrs the ports of registered op `op` depend on."""
    _, inputs, outputs = _registered_spec(op)
    names: list[tuple[str, str]] = []
    for _, _, type_attr, number_attr, type_list_attr, _ in inputs + outputs:
        for name, kind in ((type_attr, "type"), (number_attr, "i"), (type_list_attr, "list")):
            if name and (name, kind) not in names:
                names.append((name, kind))
    return tuple(names)


def _attr_value(attrs, name: str, kind: str):
    value = attrs.get(name)  # one map read (indexing a missing key would add it)
    if value is None:
        return None
    if kind == "type":
        return value.type
    if kind == "i":
        return value.i
    return tuple(value.list.type)


def has_port_of_type(node: node_def_pb2.NodeDef, dtype: int,
                     library: Mapping[str, function_pb2.FunctionDef] | None = None) -> bool:
    """Whether an output or input of `node` carries `dtype` (or its ref type): what
    `output_ports(node) + input_ports(node)` would show, raising as they do, without building ports.

    Cached for a registered op per `port_key` (nodes of one op type mostly share it).
    """
    spec = registered_spec(node.op)
    if spec is None:
        signature = _signature_or_error(node, library)
        return _carries(node, {}, arg_specs(signature.input_arg), arg_specs(signature.output_arg), dtype)
    key = (dtype, port_key(node))
    found = _carries_cache.get(key)
    if found is None:
        defaults, inputs, outputs = spec
        found = _carries_cache[key] = _carries(node, defaults, inputs, outputs, dtype)
    return found


_carries_cache: dict[tuple, bool] = {}


def _carries(node, defaults, inputs, outputs, dtype: int) -> bool:
    found = False
    for specs in (outputs, inputs):
        for arg in specs:  # every arg is read (no early exit), so a missing attr raises as it would there
            if _arg_carries(node, arg, defaults, dtype):
                found = True
    return found


@functools.lru_cache(maxsize=4096)
def function_attrs(op: str) -> tuple[str, ...] | None:
    """The func and list(func) attrs of a registered op (the functions its kernel may call), sorted;
    None for an op that is not registered (a function called by name, an unknown op)."""
    op_def = op_def_registry.get(op)
    if op_def is None:
        return None
    return tuple(sorted(attr.name for attr in op_def.attr if attr.type in ("func", "list(func)")))


def called_by(node: node_def_pb2.NodeDef, library: Mapping[str, function_pb2.FunctionDef]) -> list[str]:
    """Names of the functions `node` calls: its op when that is a library function, then the
    functions its func and list(func) attrs name (the OpDef's; every attr for an unregistered op)."""
    op = node.op
    keys = function_attrs(op)
    if keys == () and op not in library:  # the common case: an op without func attrs
        return []
    names = [op] if op in library else []
    attrs = node.attr
    if keys is None:
        keys = sorted(attrs)
    for key in keys:
        if key not in attrs:
            continue
        value = attrs[key]
        kind = value.WhichOneof("value")
        if kind == "func":
            names.append(value.func.name)
        elif kind == "list" and value.list.func:
            names.extend(func.name for func in value.list.func)
    return [name for name in names if name]


def _arg_carries(node, spec: tuple, defaults: Mapping, dtype: int) -> bool:
    """Whether one OpDef arg of `node` has a port of `dtype`; `expand_arg` (strict) without the ports."""
    _, fixed, type_attr, number_attr, type_list_attr, _ = spec
    if type_list_attr:
        return any(base_dtype(value) == dtype for value in _attr(node, defaults, type_list_attr).list.type)
    value = fixed if fixed != types_pb2.DT_INVALID else _attr(node, defaults, type_attr).type
    count = _attr(node, defaults, number_attr).i if number_attr else 1
    return count > 0 and base_dtype(value) == dtype


def _ports(node, library, outputs: bool) -> tuple[Port, ...]:
    spec = registered_spec(node.op)
    key = None
    if spec is not None:
        # A registered op's ports follow from its port_key (when every attr in it is set): kept per key.
        key = port_key(node)
        found = _ports_cache.get((outputs, key))
        if found is not None:
            return found
        defaults, inputs, outs = spec
        specs = outs if outputs else inputs
    else:
        signature = _signature_or_error(node, library)
        defaults, specs = {}, arg_specs(signature.output_arg if outputs else signature.input_arg)
    ports: list[Port] = []
    for arg in specs:
        ports.extend(expand_arg(node, arg, defaults))
    if key is not None and None not in key:
        _ports_cache[(outputs, key)] = tuple(ports)
    return tuple(ports)


_ports_cache: dict[tuple, tuple[Port, ...]] = {}
