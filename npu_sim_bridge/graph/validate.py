"""Graph validation (duplicate names, dangling inputs, illegal cycles) and topological order.

Both work on a GraphDef or, faster, on a GraphView (which already holds every node's inputs as
Python strings, so nothing is read back from the protobuf).
"""

from __future__ import annotations

import heapq
import itertools
from collections import Counter
from typing import Iterable, Mapping, Union

from tensorflow.core.framework import graph_pb2

from npu_sim_bridge.errors import GraphValidationError
from npu_sim_bridge.graph.indexes import UNRANKED, Ranks
from npu_sim_bridge.graph.name_index import new_index
from npu_sim_bridge.graph.names import node_name
from npu_sim_bridge.graph.op_categories import NEXT_ITERATION_OPS
from npu_sim_bridge.graph.table import edges

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


def _kahn(names: list[str], pending: list[int], users: list[list[int]]) -> tuple[list[str], list[str]]:
    """Release nodes whose pending count reaches zero, earliest in the GraphDef first."""
    ready = [i for i, count in enumerate(pending) if count == 0]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        index = heapq.heappop(ready)
        order.append(names[index])
        for user in users[index]:
            pending[user] -= 1
            if pending[user] == 0:
                heapq.heappush(ready, user)
    stuck = [names[i] for i, count in enumerate(pending) if count > 0]
    return order, stuck


def _order(records: Records) -> tuple[list[str], list[str]]:
    """Kahn's algorithm; ties keep GraphDef order. Returns (order, names left on a cycle)."""
    position = {name: i for i, (name, _, _) in enumerate(records)}
    back_edge = {name for name, op, _ in records if op in NEXT_ITERATION_OPS}
    pending = [0] * len(records)
    users: list[list[int]] = [[] for _ in records]
    for index, (_, _, inputs) in enumerate(records):
        for text in inputs:
            producer = node_name(text)
            where = position.get(producer)
            if where is None or producer in back_edge:
                continue
            pending[index] += 1
            users[where].append(index)
    return _kahn([name for name, _, _ in records], pending, users)


def _order_view(view) -> tuple[list[str], list[str]]:
    """Kahn's algorithm over a GraphView's consumer index: no input string is parsed.

    When every edge already runs forward in GraphDef order (as in the graphs TensorFlow and Grappler
    write), that order is the answer: Kahn's, taking the earliest ready node first, gives it back. One
    sweep over the index shows it, with no queue.
    """
    names = view.names()  # and the ops: not view.records(), whose tuples were a tenth of the peak
    ops = view.ops_of(names)
    position = new_index(names)
    if _runs_forward(ops, position, view.consumer_index()):
        return names, []
    users: list = [()] * len(names)
    for producer, consumers in view.consumer_index().items():
        where = position.get(producer)
        if where is None or not consumers or ops[where] in NEXT_ITERATION_OPS:
            continue
        users[where] = [position[consumer] for consumer in edges(consumers)]  # one per edge, as pending counts
    counts = Counter(itertools.chain.from_iterable(users))  # edges into each node, counted in C
    pending = [counts.get(index, 0) for index in range(len(names))]
    return _kahn(names, pending, users)


def _runs_forward(ops: list[str], position: "Mapping[str, int]", consumers: "dict[str, str | list[str]]") -> bool:
    """Whether each edge (loop back edges aside) goes from a node to one later in GraphDef order
    (`ops` and `position`: each node's op and place in that order)."""
    at = position.__getitem__
    for producer, users in consumers.items():
        where = position.get(producer)
        if where is None or not users or ops[where] in NEXT_ITERATION_OPS:
            continue
        if (at(users) if users.__class__ is str else min(map(at, users))) <= where:
            return False
    return True


def topological_order(graph: GraphLike, *, read_only: bool = False) -> list[str]:
    """Node names with every producer before its consumers (loop back edges ignored).

    Deterministic: among ready nodes the one earliest in the GraphDef goes first. A view validated
    since its last edit orders by the ranks that validation left instead: that is the same order
    for the nodes of its last complete check, and puts each node added since right after the latest
    of its inputs (ties in the view's order), without a sweep over every edge. Raises
    GraphValidationError on a cycle that is not a v1 loop.

    `read_only`: a view's order is the list the view remembers, not a copy, for a caller that only
    reads it (a copy of every name was a fiftieth of a rewrite's peak).
    """
    if isinstance(graph, graph_pb2.GraphDef):
        order, stuck = _order(_records(graph))
    else:
        remembered = graph.remembered_order(copy=not read_only)
        if remembered is not None:
            return remembered
        ranks = ranks_in_force(graph)
        if ranks is not None:
            order, stuck = ranks.sorted(graph.names()), []
        else:
            order, stuck = _order_view(graph)
    if stuck:
        raise GraphValidationError("the graph has a cycle through nodes " + _listed(stuck))
    if not isinstance(graph, graph_pb2.GraphDef):
        graph.remember_order(order)
        return order if read_only else list(order)
    return order


def validate_graph(graph: GraphLike, where: str = "graph",
                   allow_external: frozenset[str] = frozenset()) -> None:
    """Raise GraphValidationError naming the problem nodes if the graph is malformed.

    `allow_external` lists producer names that may be referenced without a node (for example
    function arguments of a function body).
    """
    if not isinstance(graph, graph_pb2.GraphDef):
        _validate_view(graph, where, allow_external)
        return
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
                if node_name(text) not in seen and node_name(text) not in allow_external]
    if dangling:
        raise GraphValidationError(f"{where}: inputs name missing nodes: {_listed(dangling)}")
    _, stuck = _order(records)
    if stuck:
        raise GraphValidationError(f"{where}: the graph has a cycle through nodes {_listed(stuck)}")


def ranks_in_force(view) -> "Ranks | None":
    """The view's ranks when `topological_order` orders the view by them (validated since its last
    edit, every node ranked, no order remembered), else None. Then `Ranks.sorted` lists any of its
    nodes as that order does, without an order of every node."""
    if view.remembered_order(copy=False) is not None:
        return None
    ranks = view.ranks
    return ranks if ranks is not None and not view.has_touched() and ranks.complete() else None


def _validate_view(view, where: str, allow_external: frozenset[str]) -> None:
    """The same checks from a GraphView's indexes.

    The first check is complete and leaves a topological rank per node on the view. Later checks
    only look at the nodes added or given new inputs since (`view.take_touched`): the graph is still
    acyclic if each of their inputs comes from a node of lower rank (new nodes get a rank just
    above their highest input). When that does not hold, the complete check runs again. The view
    refuses duplicate names when it is built and when a node is added, so those need no check.
    """
    touched = view.take_touched()
    if view.ranks is not None and _extend_ranks(view, touched, where, allow_external):
        return
    view.set_ranks(None)
    if "" in view:
        raise GraphValidationError(f"{where}: a node of op {view.node('').op!r} has no name")
    readers = view.missing_producers()
    missing = [producer for producer, users in readers.items() if users and producer not in allow_external]
    if missing:
        dangling = [f"{user} <- {producer}" for producer in sorted(missing)
                    for user in sorted(set(edges(readers[producer])))]
        raise GraphValidationError(f"{where}: inputs name missing nodes: {_listed(dangling)}")
    order = view.remembered_order()  # a topological order of the graph as it is: it has no cycle
    if order is None:
        order, stuck = _order_view(view)
        if stuck:
            raise GraphValidationError(f"{where}: the graph has a cycle through nodes {_listed(stuck)}")
        view.remember_order(order)
    view.set_ranks(order)


_RANK_STEP = 1.0 / 1024  # a new node sits this far above its highest input (chains of casts stay below 1)


def _extend_ranks(view, touched: Iterable[str], where: str, allow_external: frozenset[str]) -> bool:
    """Rank the new nodes and check every input of a touched node comes from a lower rank.

    Every edge into an untouched node existed at the last check, between the same ranks, so only
    the touched nodes' inputs need a look (a node the list names twice is looked at twice; one removed
    since is skipped). Raises for an input naming a missing node; returns False
    when the ranks cannot show the graph acyclic.
    """
    ranks = view.ranks
    rank_of = ranks.values.__getitem__  # by place: ranks[name] without a Python call per edge
    place = ranks.place.__getitem__
    # Kept only while needed (a dict of every touched node's producers was a tenth of the peak on a
    # graph where precision adds 20k Casts): the producers of each new node that reads a node not
    # ranked yet, one as its name; and the old nodes that read a new one, checked once the new ones
    # have their rank.
    unranked: dict[str, str | list[str]] = {}
    deferred: list[str] = []
    in_order = True  # so far: every edge into a touched old node runs up the ranks
    for name in touched:
        if name not in view:
            continue
        producers = _ordering_producers(view, name, where, allow_external)
        rank = rank_of(place(name))
        if rank == UNRANKED:
            held = list(map(rank_of, map(place, producers)))
            if UNRANKED not in held:  # ranked now: the nodes come in the order of their places, a new
                ranks[name] = max(held, default=-1.0) + _RANK_STEP  # node's inputs mostly before it
            else:
                unranked[name] = producers[0] if len(producers) == 1 else producers
        elif UNRANKED in map(rank_of, map(place, producers)):
            deferred.append(name)
        elif in_order and not all(rank_of(place(producer)) < rank for producer in producers):
            in_order = False  # (every touched node is still looked at: a missing input raises)
    while unranked:  # new nodes that read new nodes get their rank once their inputs have one
        waiting = {}
        for name, producers in unranked.items():
            producers = edges(producers)
            held = list(map(rank_of, map(place, producers)))
            if UNRANKED in held:
                waiting[name] = producers
            else:
                ranks[name] = max(held, default=-1.0) + _RANK_STEP
        if len(waiting) == len(unranked):
            return False
        unranked = waiting
    return in_order and all(rank_of(place(producer)) < ranks[name] for name in deferred
                            for producer in _ordering_producers(view, name, where, allow_external))


def _ordering_producers(view, name: str, where: str, allow_external: frozenset[str]) -> list[str]:
    """The producers of node `name` that order it (its inputs, less back edges and allowed outside
    names); raises for an input naming a missing node."""
    producers = []
    for producer in view.producers(name):
        if producer not in view:
            if producer not in allow_external:
                raise GraphValidationError(f"{where}: inputs name missing nodes: {name} <- {producer}")
        elif view.op(producer) not in NEXT_ITERATION_OPS:
            producers.append(producer)
    return producers
