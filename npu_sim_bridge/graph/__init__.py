"""GraphDef helpers shared by every pass: tensor names, an indexed view, validation and ordering."""

from npu_sim_bridge.graph.names import TensorRef, parse_input, format_input, is_control_input
from npu_sim_bridge.graph.view import GraphView
from npu_sim_bridge.graph.validate import validate_graph, topological_order

__all__ = [
    "TensorRef",
    "parse_input",
    "format_input",
    "is_control_input",
    "GraphView",
    "validate_graph",
    "topological_order",
]
