"""GeOp bodies as plain graph nodes: function-body input names in graph form, for pictures and graph dumps.

Inside a FunctionDef an input reads `node:output_arg:index`; in a GraphDef it reads `node:flat_index`.
These helpers convert between the two with the op registry (graph/ports.py), so multi-output ops
(FusedBatchNorm's batch_mean is output 1) keep the right edge.
"""

from __future__ import annotations

from npu_sim_bridge.errors import NpuSimError
from npu_sim_bridge.graph.ports import output_ports


def graph_input(text: str, members: dict, library: dict, prefix: str = "") -> str | None:
    """`text` (a function-body input) as a graph input naming `prefix + node`; None for a function argument.

    members: the body's node name -> NodeDef; library: function name -> FunctionDef.
    """
    control = "^" if text.startswith("^") else ""
    parts = text.lstrip("^").split(":")
    if parts[0] not in members:
        return None
    if len(parts) != 3:
        port = int(parts[1]) if len(parts) == 2 and parts[1].isdigit() else 0
        return control + prefix + parts[0] + (f":{port}" if port else "")
    node, arg, index = members[parts[0]], parts[1], int(parts[2])
    try:
        ports = output_ports(node, library)
        flat = next(i for i, port in enumerate(ports) if port.arg == arg and port.index == index)
    except (NpuSimError, StopIteration):
        flat = index
    return control + prefix + node.name + (f":{flat}" if flat else "")
