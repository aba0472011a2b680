"""Input and output ports of a NodeDef: their OpDef arg names and dtypes, from the op registry or the library."""

from __future__ import annotations

import functools
from typing import Mapping, NamedTuple

from tensorflow.core.framework import function_pb2, node_def_pb2, types_pb2
from tensorflow.python.framework import op_def_registry

from npu_sim_bridge.errors import UnsupportedGraphError


class Port(NamedTuple):
    """One input or output of a node: the OpDef arg it belongs to, its index in that arg, its dtype."""

    arg: str
    index: int
    dtype: int          # a types_pb2.DataType value (never a _REF type; see is_ref)
    is_ref: bool = False

    def function_output(self, node: str) -> str:
        """How a FunctionDef body names this output of `node`: "node:arg:index"."""
        return f"{node}:{self.arg}:{self.index}"


def op_signature(op: str, library: Mapping[str, function_pb2.FunctionDef] | None = None):
    """The OpDef of a registered op, or the signature of a library function called by name; else None."""
    op_def = op_def_registry.get(op)
    if op_def is not None:
        return op_def
    if library and op in library:
        return library[op].signature
    return None


def output_ports(node: node_def_pb2.NodeDef,
                 library: Mapping[str, function_pb2.FunctionDef] | None = None) -> list[Port]:
    """Every output of `node`, in port order."""
    return _ports(node, library, outputs=True)


def input_ports(node: node_def_pb2.NodeDef,
                library: Mapping[str, function_pb2.FunctionDef] | None = None) -> list[Port]:
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


def _attr(node, defaults, name):
    if name in node.attr:
        return node.attr[name]
    default = defaults.get(name)
    if default is not None:
        return default
    raise UnsupportedGraphError(
        f"node {node.name!r} ({node.op}) lacks attribute {name!r} that gives the type of its ports; "
        "the GraphDef is incomplete: export it again with tf.Graph.as_graph_def()")


@functools.lru_cache(maxsize=4096)
def _registered_spec(op: str):
    """(attr defaults, input arg specs, output arg specs) of a registered op, read once per op type."""
    op_def = op_def_registry.get(op)
    return (_defaults(op_def), _arg_specs(op_def.input_arg), _arg_specs(op_def.output_arg))


def _defaults(op_def) -> dict:
    return {attr.name: attr.default_value for attr in op_def.attr if attr.HasField("default_value")}


def _arg_specs(args) -> tuple:
    return tuple((arg.name, arg.type, arg.type_attr, arg.number_attr, arg.type_list_attr, arg.is_ref)
                 for arg in args)


def _ports(node, library, outputs: bool) -> list[Port]:
    if op_def_registry.get(node.op) is not None:
        defaults, inputs, outs = _registered_spec(node.op)
        specs = outs if outputs else inputs
    else:
        signature = _signature_or_error(node, library)
        defaults, specs = {}, _arg_specs(signature.output_arg if outputs else signature.input_arg)
    ports: list[Port] = []
    for name, fixed, type_attr, number_attr, type_list_attr, arg_is_ref in specs:
        if type_list_attr:
            types = list(_attr(node, defaults, type_list_attr).list.type)
        else:
            dtype = fixed if fixed != types_pb2.DT_INVALID else _attr(node, defaults, type_attr).type
            count = _attr(node, defaults, number_attr).i if number_attr else 1
            types = [dtype] * count
        for index, dtype in enumerate(types):
            is_ref = arg_is_ref or dtype > 100
            ports.append(Port(name, index, dtype - 100 if dtype > 100 else dtype, is_ref))
    return ports
