"""Which tensors may not cross a segment boundary, and why (cluster.py's tied edges): string tensors, ref
tensors other than a TF1 variable's, resource handles that do not come from a variable op, and variants
other than Optionals and TensorLists.
"""

from __future__ import annotations

from tensorflow.core.framework import types_pb2

from npu_sim_bridge.errors import UnsupportedGraphError
from npu_sim_bridge.graph.names import node_name, parse_input
from npu_sim_bridge.graph.op_categories import CALLING_OPS, PASS_THROUGH_OPS, makes_passable_variant
from npu_sim_bridge.graph.ports import input_ports, output_ports
from npu_sim_bridge.graph.view import GraphView
from npu_sim_bridge.passes.partition import bridges, ref_variables
from npu_sim_bridge.passes.support import BOUNDARY_DTYPES

READ_REF = "ref read"

_UNKNOWN = object()


class EdgeKinds:
    """Says which tensors may not cross a segment boundary, and why.

    Answers are kept, so one instance serves one state of the graph (the proposal's rounds do not edit it).
    """

    def __init__(self, view: GraphView, functions):
        self.view = view
        self.functions = functions
        self._outputs: dict[str, list] = {}
        self._kinds: dict[tuple[str, int, str], str | None] = {}

    def output_types(self, name: str):
        ports = self._outputs.get(name)
        if ports is None:
            try:
                ports = output_ports(self.view.node(name), self.functions)
            except UnsupportedGraphError:
                ports = []
            self._outputs[name] = ports
        return ports

    def tensor_kind(self, producer: str, port: int, consumer: str) -> str | None:
        """'string', 'variant', 'ref' or 'resource' for a data edge that may not cross; else None.

        READ_REF: a TF1 variable's ref tensor read by a non-ref input; it may enter a GeOp from
        the host (the call reads the value), not leave one.
        """
        edge = (producer, port, consumer)
        kind = self._kinds.get(edge, _UNKNOWN)
        if kind is _UNKNOWN:
            kind = self._kinds[edge] = self._tensor_kind(producer, port, consumer)
        return kind

    def _tensor_kind(self, producer: str, port: int, consumer: str) -> str | None:
        ports = self.output_types(producer)
        if port < len(ports):
            dtype, is_ref = ports[port].dtype, ports[port].is_ref
        else:
            dtype, is_ref = self._consumer_side(producer, port, consumer)
        if is_ref:
            if ref_variables.is_ref_variable(self.view, producer):
                return None  # a TF1 variable: the segment gets its own copy of the variable op
            return READ_REF if not self._consumer_side(producer, port, consumer)[1] else "ref (TF1 variable)"
        kind = BOUNDARY_DTYPES.get(dtype)
        if kind == "resource" and bridges.variable_origin(self.view, producer, port):
            return None  # a variable's handle: the GeOp takes it as an input, as TF functions do
        if kind == "variant" and self._passable_variant(producer, port):
            return None  # an Optional or a TensorList: a function call passes it like any tensor
        return kind

    def dtype(self, producer: str, port: int, consumer: str) -> int:
        ports = self.output_types(producer)
        if port < len(ports):
            return ports[port].dtype
        return self._consumer_side(producer, port, consumer)[0]

    def _passable_variant(self, producer: str, port: int) -> bool:
        """An Optional or TensorList, made here or returned by every branch or body of a functional op."""
        name = producer
        for _ in range(64):
            node = self.view.get(name)
            if node is None:
                return False
            if makes_passable_variant(node.op):
                return True
            if node.op in CALLING_OPS:
                bodies = [node.attr[key].func.name for key in ("then_branch", "else_branch", "body", "f")
                          if key in node.attr]
                if "branches" in node.attr:  # Case (reading a missing key would add it)
                    bodies += [f.name for f in node.attr["branches"].list.func]
                return bool(bodies) and all(_returns_passable_variant(self.functions.get(body), port)
                                            for body in bodies)
            if node.op not in PASS_THROUGH_OPS or not node.input:
                return False
            name, port = node_name(node.input[0]), 0
        return False

    def _consumer_side(self, producer, port, consumer):
        node = self.view.node(consumer)
        data_position = 0
        for text in node.input:
            ref = parse_input(text)
            if ref.is_control:
                continue
            if ref.node == producer and ref.port == port:
                try:
                    found = input_ports(node, self.functions)[data_position]
                except (UnsupportedGraphError, IndexError):
                    return types_pb2.DT_INVALID, False
                return found.dtype, found.is_ref
            data_position += 1
        return types_pb2.DT_INVALID, False


def _returns_passable_variant(function, index: int) -> bool:
    """Whether output `index` of a FunctionDef comes from an Optional or TensorList op of its body."""
    if function is None or index >= len(function.signature.output_arg):
        return False
    returned = function.ret.get(function.signature.output_arg[index].name, "")
    body = {node.name: node.op for node in function.node_def}
    op = body.get(returned.split(":", 1)[0])
    return op is not None and makes_passable_variant(op)
