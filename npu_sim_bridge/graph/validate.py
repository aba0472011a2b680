"""Graph validation (duplicate names, dangling inputs, illegal cycles) and topological order."""

from __future__ import annotations

from collections import deque

from tensorflow.core.framework import graph_pb2

from npu_sim_bridge.errors import GraphValidationError
from npu_sim_bridge.graph.names import parse_input

# Edges out of these ops close the loops of v1 while frames; they are the only legal cycles.
BACK_EDGE_OPS = frozenset({"NextIteration", "RefNextIteration"})

_MAX_NAMED = 8


def _listed(names) -> str:
    names = list(names)
    more = f" (and {len(names) - _MAX_NAMED} more)" if len(names) > _MAX_NAMED else ""
    return ", ".join(names[:_MAX_NAMED]) + more


def topological_order(graph_def: graph_pb2.GraphDef) -> list[str]:
    """Node names with every producer before its consumers (loop back edges ignored).

    Ties keep GraphDef order, so the order is deterministic. Raises GraphValidationError on a
    cycle that is not a v1 loop.
    """
    nodes = {node.name: node for node in graph_def.node}
    position = {name: i for i, name in enumerate(nodes)}
    pending = dict.fromkeys(nodes, 0)
    users: dict[str, list[str]] = {name: [] for name in nodes}
    for node in graph_def.node:
        for text in node.input:
            producer = parse_input(text).node
            if producer not in nodes or nodes[producer].op in BACK_EDGE_OPS:
                continue
            pending[node.name] += 1
            users[producer].append(node.name)
    ready = deque(name for name in nodes if pending[name] == 0)
    order: list[str] = []
    while ready:
        name = ready.popleft()
        order.append(name)
        released = []
        for user in users[name]:
            pending[user] -= 1
            if pending[user] == 0:
                released.append(user)
        ready.extend(sorted(released, key=position.__getitem__))
    if len(order) != len(nodes):
        stuck = sorted((name for name in nodes if pending[name] > 0), key=position.__getitem__)
        raise GraphValidationError("the graph has a cycle through nodes " + _listed(stuck))
    return order


def validate_graph(graph_def: graph_pb2.GraphDef, where: str = "graph",
                   allow_external: frozenset[str] = frozenset()) -> None:
    """Raise GraphValidationError naming the problem nodes if the graph is malformed.

    `allow_external` lists producer names that may be referenced without a node (for example
    function arguments of a function body).
    """
    seen: set[str] = set()
    duplicates: list[str] = []
    for node in graph_def.node:
        if not node.name:
            raise GraphValidationError(f"{where}: a node of op {node.op!r} has no name")
        if node.name in seen:
            duplicates.append(node.name)
        seen.add(node.name)
    if duplicates:
        raise GraphValidationError(f"{where}: duplicate node names: {_listed(sorted(set(duplicates)))}")
    dangling = []
    for node in graph_def.node:
        for text in node.input:
            producer = parse_input(text).node
            if producer not in seen and producer not in allow_external:
                dangling.append(f"{node.name} <- {text}")
    if dangling:
        raise GraphValidationError(f"{where}: inputs name missing nodes: {_listed(dangling)}")
    try:
        topological_order(graph_def)
    except GraphValidationError as err:
        raise GraphValidationError(f"{where}: {err}") from None
