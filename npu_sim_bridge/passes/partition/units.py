"""The units a proposal places (cluster.py): a node of the root frame, or a whole outermost v1 while frame
(never split), their links in one piece (Links) and their topological order.
"""

from __future__ import annotations

import heapq
import itertools
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence

import numpy

from npu_sim_bridge.graph import shared_ints
from npu_sim_bridge.graph.control_flow import Frames
from npu_sim_bridge.graph.names import parse_input
from npu_sim_bridge.graph.op_categories import NEXT_ITERATION_OPS, SWITCH_OPS
from npu_sim_bridge.graph.view import GraphView


class Links(Sequence):
    """Each unit's successor units, sorted, in one piece: unit i's are targets[starts[i]:starts[i + 1]],
    two int32 arrays (a list per unit and an int object per edge were a fifth of the rewrite's peak on
    a 10k-node graph). Reading a unit's gives an array('i') of them; the segments kernel takes the pair."""

    __slots__ = ("starts", "targets")
    __hash__ = None

    def __init__(self, starts: array, targets: array):
        self.starts, self.targets = starts, targets

    @classmethod
    def of_lists(cls, lists: Iterable[Iterable[int]]) -> "Links":
        starts, targets = array("i", [0]), array("i")
        for units in lists:
            targets.extend(units)
            starts.append(len(targets))
        return cls(starts, targets)

    def __len__(self) -> int:
        return len(self.starts) - 1

    def __getitem__(self, unit: int) -> array:
        if not 0 <= unit < len(self.starts) - 1:
            raise IndexError(f"unit {unit} of {len(self.starts) - 1}")
        return self.targets[self.starts[unit]:self.starts[unit + 1]]

    def __iter__(self):
        starts, targets = self.starts, self.targets
        return (targets[starts[unit]:starts[unit + 1]] for unit in range(len(starts) - 1))

    def __eq__(self, other) -> bool:
        if isinstance(other, Links):
            return self.starts == other.starts and self.targets == other.targets
        return NotImplemented

    def run_forward(self) -> bool:
        """Whether every link runs from a lower unit to a higher (each unit's lowest successor above it)."""
        starts, targets = self.starts, self.targets
        return all(targets[start] > unit for unit, (start, end) in enumerate(zip(starts, starts[1:])) if start < end)


class _OneNodeUnits(Sequence):
    """`_Units.nodes` when unit i is the node order[i] alone: (order[i],), made when read (a list per
    node was a tenth of the pipeline's peak memory on BERT)."""

    __slots__ = ("_order",)

    def __init__(self, order: list[str]):
        self._order = order

    def __len__(self) -> int:
        return len(self._order)

    def __getitem__(self, unit: int) -> tuple[str]:
        return (self._order[unit],)

    def __iter__(self):
        return ((name,) for name in self._order)


class UnitsByPlace:
    """`_Units.of` when unit i is the node order[i] alone: name -> unit read through the view's place index
    and one int32 column by place (-1 where a node is no unit), not an index of its own over every name
    (that was a tenth of the rewrite's peak on the 10k-node synthetic graph). The view cuts the column in
    step when it compacts (`GraphView.track_places`), so the layout keeps it from placement to partition.
    Only the nodes of `order` that are still in the graph are found: a node added since, or removed
    since, is no unit (carrying gives up on a graph that lost nodes)."""

    __slots__ = ("_place", "_unit", "__weakref__")

    def __init__(self, view: GraphView, order: list[str]):
        unit = array("i", [-1]) * view.place_count()
        for index, at in enumerate(map(view.place, order)):
            unit[at] = index
        self._place, self._unit = view.place_lookup(), unit
        view.track_places(self)

    def drop_places(self, start: int, end: int) -> None:
        """The view drops the places [start, end) (see `GraphView.track_places`)."""
        del self._unit[start:end]

    def columns(self) -> "tuple[Callable[[object], int | None], array]":
        """(the view's name -> place lookup, the unit per place, -1 for none): `get` without a call per
        name, for a caller that reads every edge (a place at or past the column's length is no unit)."""
        return self._place, self._unit

    def get(self, name: str, default=None):
        at = self._place(name)
        if at is None or at >= len(self._unit):
            return default
        unit = self._unit[at]
        return default if unit < 0 else unit

    def __getitem__(self, name: str) -> int:
        unit = self.get(name)
        if unit is None:
            raise KeyError(name)
        return unit

    def __contains__(self, name: object) -> bool:
        return self.get(name) is not None


class _NoFrames(Sequence):
    """`_Units.frame` when no node is in a v1 while frame: "" for every unit, with no list (the layout
    keeps it from placement to partition)."""

    __slots__ = ("_count",)

    def __init__(self, count: int):
        self._count = count

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, unit: int) -> str:
        if not -self._count <= unit < self._count:
            raise IndexError(f"unit {unit} of {self._count}")
        return ""

    def __iter__(self):
        return itertools.repeat("", self._count)


class _Units:
    """The graph contracted to units, with a topological order over them."""

    def __init__(self, view: GraphView, order: list[str], frames: Frames, split: set[str]):
        self.of: "dict[str, int] | UnitsByPlace" = {}
        self.nodes: Sequence[Sequence[str]] = []
        self.frame: list[str] = []
        keys: dict[tuple[str, str], int] = {}
        if not frames:  # no v1 while frame: every node a unit of its own, numbered in `order`
            self.of = UnitsByPlace(view, order)
            self.nodes = _OneNodeUnits(order)
            self.frame = _NoFrames(len(order))
        for name in order if frames else ():
            top = frames.top(name)
            key = ("frame", top) if top and top not in split else ("node", name)
            unit = keys.get(key)
            if unit is None:
                unit = keys[key] = shared_ints.number(len(self.nodes))
                self.nodes.append([])
                self.frame.append(top if key[0] == "frame" else "")
            self.nodes[unit].append(name)
            self.of[name] = unit
        ops = view.ops_of(order)  # not view.records(): its input tuples were a third of the peak
        back_edge_sources = {name for name, op in zip(order, ops) if op in NEXT_ITERATION_OPS}
        self.single = len(self.nodes) == len(order)  # every node a unit of its own: unit i is order[i]
        if self.single:
            self.succ = self._single_node_links(view, order, back_edge_sources)
        else:
            self.succ = self._links(view, back_edge_sources)
        self.names = order  # the nodes, in the order the units are numbered by
        # For edges_across: a segment boundary may not cut data edges, nor control edges when the
        # graph has v1 conds (a control edge is tied only through a cond guard).
        self.back_edge_sources = back_edge_sources  # the NextIteration nodes: their edges run back
        self.has_switch = not SWITCH_OPS.isdisjoint(ops)  # a v1 cond somewhere
        self.order, self.stuck = self._topological()

    def edges_across(self, view: GraphView, segment: Sequence[int]) -> list[tuple[str, int, str, int, int]]:
        """The edges between units of different segments (`segment`: per unit, -1 for the host) that a
        boundary may not cut, as plain (producer, port, consumer, source unit, target unit) tuples
        (the fields of _Edge), in node order then input order: the order of the violations. Read from
        the view each round, not kept (the rounds do not edit the graph)."""
        if self.of.__class__ is UnitsByPlace:  # every unit one node, numbered in `names`
            return self._single_node_edges_across(view, segment)
        unit_of, back_edge_sources, skip_control = self.of, self.back_edge_sources, not self.has_switch
        found = []
        for name in self.names:
            target = unit_of[name]
            placed = segment[target]
            for text in view.input_texts(name):
                source = unit_of.get(text)  # most inputs are a port 0 spelled as the producer's name
                if source is not None:
                    producer, port = text, 0
                elif text[0] == "^" and skip_control:
                    continue
                else:
                    producer, port = parse_input(text)
                    source = unit_of.get(producer)
                    if source is None:
                        continue
                if source == target or segment[source] == placed or producer in back_edge_sources:
                    continue
                found.append((producer, port, name, source, target))
        return found

    def _single_node_edges_across(self, view: GraphView, segment: Sequence[int]) -> list[tuple[str, int, str, int, int]]:
        """`edges_across` when unit i is node names[i] alone. Every edge it may find is a link of `succ`
        (the links are the edges between units, back edges left out), so only the consumers with a link
        from another segment have their inputs read (found in numpy from the links; the rounds of a
        proposal read every input of the graph otherwise, a tenth of the placement pass). A producer's
        unit is read from the units' column by place (UnitsByPlace), without a call per edge."""
        back_edge_sources, skip_control = self.back_edge_sources, not self.has_switch
        place, column = self.of.columns()
        count, names, input_texts = len(column), self.names, view.input_texts
        found = []
        for target in _targets_across(self.succ, segment):
            name = names[target]
            placed = segment[target]
            for text in input_texts(name):
                at = place(text)  # most inputs are a port 0 spelled as the producer's name
                if at is not None:
                    producer, port = text, 0
                elif text[0] == "^" and skip_control:
                    continue
                else:
                    producer, port = parse_input(text)
                    at = place(producer)
                    if at is None:
                        continue
                source = column[at] if at < count else -1
                if source < 0 or source == target or segment[source] == placed or producer in back_edge_sources:
                    continue
                found.append((producer, port, name, source, target))
        return found

    @property
    def pred(self) -> list[Sequence[int]]:
        """Each unit's predecessor units, sorted, made from `succ` when read: only the Python twin of the
        segments kernel and Kahn's order over frames read them (kept, they were a fifth of `succ`'s and
        their memory, a tenth of the rewrite's peak on BERT)."""
        pred: list = [()] * len(self.succ)
        for source, targets in enumerate(self.succ):  # sources in unit order: each list comes sorted
            for target in targets:
                sources = pred[target]
                if sources.__class__ is tuple:
                    pred[target] = [source]
                else:
                    sources.append(source)
        return pred

    def _links(self, view: GraphView, back_edge_sources: set[str]) -> Links:
        """Each unit's successor units, sorted, from the consumer index (a set is made only for a unit
        that has an edge: an empty one per unit was twice the GraphDef)."""
        unit_of = self.of
        succ: list = [None] * len(self.nodes)
        for producer, users in view.consumer_edges():
            source = unit_of.get(producer)
            if source is None or producer in back_edge_sources:
                continue
            targets = {unit_of[user] for user in users}  # the sets are built in C
            targets.discard(source)
            if not targets:
                continue
            if succ[source] is None:
                succ[source] = targets
            else:
                succ[source] |= targets
        return Links.of_lists(sorted(units) if units else () for units in succ)

    def _single_node_links(self, view: GraphView, order: list[str], back_edge_sources: set[str]) -> Links:
        """`_links` when unit i is node order[i]: a node's consumers are its unit's successors."""
        unit_at = self.of.__getitem__
        if self.of.__class__ is UnitsByPlace:  # the unit column read by place: no Python call per edge
            place, column = self.of.columns()
            unit_at = None
        consumers_of = view.consumers_of
        starts, targets = array("i", bytes(4 * (len(order) + 1))), array("i")  # starts: made at its size
        for source, name in enumerate(order):
            users = consumers_of(name)
            if users and name not in back_edge_sources:
                # one per edge in the index: a unit once (every consumer is a node of `order`, so a unit)
                found = sorted(set(map(unit_at, users) if unit_at else map(column.__getitem__, map(place, users))))
                if found[0] < 0:
                    raise KeyError(f"a consumer of {name!r} is not a unit")
                if name in users:  # as in _links, a unit is not its own successor
                    found.remove(source)
                targets.extend(found)
            starts[source + 1] = len(targets)
        return Links(starts, targets)

    def _topological(self) -> tuple[Sequence[int], list[int]]:
        """Kahn's algorithm, the lowest unit index first among the ready ones (deterministic).

        Units are numbered in topological node order, so without v1 frames every edge runs from a lower
        number to a higher; Kahn's would then give the numbering back, and one look at each unit's
        lowest successor (the lists are sorted) shows it.
        """
        count = len(self.nodes)
        if self.succ.run_forward():
            return range(count), []
        pending = [0] * count
        for targets in self.succ:
            for target in targets:
                pending[target] += 1
        heap = [u for u in range(count) if pending[u] == 0]
        heapq.heapify(heap)
        order: list[int] = []
        while heap:
            unit = heapq.heappop(heap)
            order.append(unit)
            for user in self.succ[unit]:
                pending[user] -= 1
                if pending[user] == 0:
                    heapq.heappush(heap, user)
        stuck = [u for u in range(count) if pending[u] > 0]
        return order, stuck


def _targets_across(succ: "Links", segment: Sequence[int]) -> Iterator[int]:
    """The units, ascending, with a link from a unit of another segment (`segment`: per unit), each made
    an int when read. Worked out in numpy a block of units at a time, with a byte per unit kept: arrays
    per link over the whole graph were a tenth of the rewrite's peak on the 10k-node synthetic graph."""
    starts = numpy.frombuffer(succ.starts, dtype=numpy.int32)
    targets = numpy.frombuffer(succ.targets, dtype=numpy.int32)
    placed = numpy.asarray(segment, dtype=numpy.int32)
    count = len(starts) - 1
    hit = numpy.zeros(count, dtype=bool)
    for first in range(0, count, _BLOCK):
        last = min(first + _BLOCK, count)
        ends = starts[first:last + 1]
        linked = targets[ends[0]:ends[-1]]
        hit[linked[numpy.repeat(placed[first:last], numpy.diff(ends)) != placed[linked]]] = True
    return map(int, numpy.flatnonzero(hit))


_BLOCK = 4096  # units per block in _targets_across
