"""Typed ports of a node for the precision pass: cached signatures on graph.ports, with the type attr that sets each dtype."""

from __future__ import annotations

import dataclasses

from tensorflow.core.framework import types_pb2

from npu_sim_bridge.graph import ports as graph_ports
from npu_sim_bridge.graph.ports import FLOAT_TYPES, Port, base_dtype

LOW_TYPES = frozenset({types_pb2.DT_HALF, types_pb2.DT_BFLOAT16})

DTYPE_BY_NAME = {
    "float32": types_pb2.DT_FLOAT,
    "float16": types_pb2.DT_HALF,
    "bfloat16": types_pb2.DT_BFLOAT16,
}
NAME_BY_DTYPE = {value: key for key, value in DTYPE_BY_NAME.items()}

# Fused ops whose list(type) attr of extra arguments moves together with T (bias of _FusedConv2D).
LIST_FOLLOWS_T = {"_FusedConv2D": "TArgs"}

__all__ = ["FLOAT_TYPES", "LOW_TYPES", "DTYPE_BY_NAME", "NAME_BY_DTYPE", "LIST_FOLLOWS_T", "Port", "Signature",
           "UNKNOWN", "signature", "type_attr_dtype", "dtype_name"]


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
            if port.is_float and port.type_attr and port.type_attr not in names:
                names.append(port.type_attr)
        return Signature(inputs, outputs, True, any(p.is_float for p in inputs + outputs),
                         any(p.is_ref or p.dtype == types_pb2.DT_RESOURCE for p in inputs), tuple(names))

    def output_offset(self, arg: str) -> int | None:
        """Flat port of the first output of OpDef output argument `arg`."""
        for position, port in enumerate(self.outputs):
            if port.arg == arg:
                return position
        return None


UNKNOWN = Signature((), (), known=False)


def _expand(node, spec, defaults) -> list[Port]:
    """The shared expansion, tolerant of missing attrs, with the precision pass's view of list attrs and refs."""
    ports = graph_ports.expand_arg(node, spec, defaults, strict=False)
    follows = spec[4] and LIST_FOLLOWS_T.get(node.op) == spec[4]
    arg_is_ref = bool(spec[5])  # a ref port is one of a ref arg; a ref dtype in an attr does not count here
    if follows or any(port.is_ref != arg_is_ref for port in ports):
        ports = [port._replace(is_ref=arg_is_ref, type_attr="T" if follows else port.type_attr,
                               list_index=None if follows else port.list_index) for port in ports]
    return ports


def signature(node, functions=None) -> Signature:
    """Ports of `node`; `functions` maps function names of the graph library to FunctionDefs.

    Cached per `graph.ports.port_key`: the op type and the values of the attrs the ports depend on.
    """
    op = node.op
    spec = graph_ports.registered_spec(op)
    if spec is not None:
        key = graph_ports.port_key(node)
        cached = _signatures.get(key)
        if cached is None:
            defaults, input_specs, output_specs = spec
            inputs: list[Port] = []
            for arg in input_specs:
                inputs.extend(_expand(node, arg, defaults))
            outputs: list[Port] = []
            for arg in output_specs:
                outputs.extend(_expand(node, arg, defaults))
            cached = _signatures[key] = Signature.of(inputs, outputs)
        return cached
    if functions and op in functions:
        sig = functions[op].signature
        return Signature.of([Port(a.name, 0, base_dtype(a.type)) for a in sig.input_arg],
                            [Port(a.name, 0, base_dtype(a.type)) for a in sig.output_arg])
    return UNKNOWN


_signatures: dict[tuple, Signature] = {}


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
