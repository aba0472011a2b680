"""Graph validation (duplicate names, dangling inputs, illegal cycles) and topological order.

Both work on a GraphDef or, faster, on a GraphView (which already holds every node's inputs as
Python strings, so nothing is read back from the protobuf).
"""

from __future__ import annotations

import heapq
from typing import Iterable, Union

from tensorflow.core.framework import graph_pb2

from npu_sim_bridge.errors import GraphValidationError
from npu_sim_bridge.graph.names import parse_input

# Edges out of these ops close the loops of v1 while frames; they are the only legal cycles.
BACK_EDGE_OPS = frozenset({"NextIteration", "RefNextIteration"})

_MAX_NAMED = 8

# (name, op, input strings) for every node, in GraphDef order.
Records = list[tuple[str, str, list[str]]]
GraphLike = Union[graph_pb2.GraphDef, "GraphView"]  # noqa: F821


def _listed(names: Iterable[str]) -> str:
    names = list(names)
    more = f" (and {len(names) - _MAX_NAMED} more)" if len(names) > _MAX_NAMED else ""
    return ", ".join(names[:_MAX_NAMED]) + more


def _records(graph: GraphLike) -> Records:
    if isinstance(graph, graph_pb2.GraphDef):
        return [(node.name, node.op, list(node.input)) for node in graph.node]
    return graph.records()


def _kahn(records: Records, pending: list[int], users: list[list[int]]) -> tuple[list[str], list[str]]:
    """Release nodes whose pending count reaches zero, earliest in the GraphDef first."""
    ready = [i for i, count in enumerate(pending) if count == 0]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        index = heapq.heappop(ready)
        order.append(records[index][0])
        for user in users[index]:
            pending[user] -= 1
            if pending[user] == 0:
                heapq.heappush(ready, user)
    stuck = [records[i][0] for i, count in enumerate(pending) if count > 0]
    return order, stuck


def _order(records: Records) -> tuple[list[str], list[str]]:
    """Kahn's algorithm; ties keep GraphDef order. Returns (order, names left on a cycle)."""
    position = {name: i for i, (name, _, _) in enumerate(records)}
    back_edge = {name for name, op, _ in records if op in BACK_EDGE_OPS}
    pending = [0] * len(records)
    users: list[list[int]] = [[] for _ in records]
    for index, (_, _, inputs) in enumerate(records):
        for text in inputs:
            producer = parse_input(text).node
            where = position.get(producer)
            if where is None or producer in back_edge:
                continue
            pending[index] += 1
            users[where].append(index)
    return _kahn(records, pending, users)


def _order_view(view) -> tuple[list[str], list[str]]:
    """Kahn's algorithm over a GraphView's consumer index: no input string is parsed."""
    records = view.records()
    position = {name: i for i, (name, _, _) in enumerate(records)}
    pending = [0] * len(records)
    users: list[list[int]] = [[] for _ in records]
    for producer, consumers in view.consumer_index().items():
        where = position.get(producer)
        if where is None or records[where][1] in BACK_EDGE_OPS:
            continue
        targets = users[where]
        for consumer, count in consumers.items():
            index = position[consumer]
            pending[index] += count
            targets.extend([index] * count)
    return _kahn(records, pending, users)


def topological_order(graph: GraphLike) -> list[str]:
    """Node names with every producer before its consumers (loop back edges ignored).

    Deterministic: among ready nodes the one earliest in the GraphDef goes first. Raises
    GraphValidationError on a cycle that is not a v1 loop.
    """
    order, stuck = _order(_records(graph)) if isinstance(graph, graph_pb2.GraphDef) else _order_view(graph)
    if stuck:
        raise GraphValidationError("the graph has a cycle through nodes " + _listed(stuck))
    return order


def validate_graph(graph: GraphLike, where: str = "graph",
                   allow_external: frozenset[str] = frozenset()) -> None:
    """Raise GraphValidationError naming the problem nodes if the graph is malformed.

    `allow_external` lists producer names that may be referenced without a node (for example
    function arguments of a function body).
    """
    records = _records(graph)
    seen: set[str] = set()
    duplicates: list[str] = []
    for name, op, _ in records:
        if not name:
            raise GraphValidationError(f"{where}: a node of op {op!r} has no name")
        if name in seen:
            duplicates.append(name)
        seen.add(name)
    if duplicates:
        raise GraphValidationError(f"{where}: duplicate node names: {_listed(sorted(set(duplicates)))}")
    dangling = [f"{name} <- {text}" for name, _, inputs in records for text in inputs
                if parse_input(text).node not in seen and parse_input(text).node not in allow_external]
    if dangling:
        raise GraphValidationError(f"{where}: inputs name missing nodes: {_listed(dangling)}")
    _, stuck = _order(records) if isinstance(graph, graph_pb2.GraphDef) else _order_view(graph)
    if stuck:
        raise GraphValidationError(f"{where}: the graph has a cycle through nodes {_listed(stuck)}")
