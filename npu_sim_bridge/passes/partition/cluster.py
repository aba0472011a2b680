"""Propose device segments: maximal groups of device nodes whose contraction creates no cycle.

Units: a node of the root frame, or a whole outermost v1 while frame (never split). Each device
unit gets a layer: ASAP, a unit's layer is the number of host units with device ancestors on the
longest path to it, then units are pushed as late as their consumers allow (so constants and
variable reads join the segment that uses them). Any path from one device unit to another
through a host unit strictly raises the layer, so device units of one layer that are connected
by direct device-device edges form a segment, and the contracted graph is acyclic by
construction (no merge needs a reachability search).

Tied edges must not cross a segment boundary: string tensors, ref tensors other than a TF1
variable's (whose op each segment copies, see ref_variables.py), resource handles that do not come
from a variable op, variants other than Optionals and TensorLists, and v1 cond branch tensors
(which may be dead) that no bridge can carry (see bridges.py). When a proposal leaves a tied edge
across a boundary, its device ends go to the host and the proposal is made again, until no tied
edge crosses. A v1 cond region holding a host op goes to the host whole first (regions.py).
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
from array import array
from collections.abc import Sequence
from typing import Callable, NamedTuple

from tensorflow.core.framework import types_pb2

from npu_sim_bridge.errors import UnsupportedGraphError
from npu_sim_bridge.graph.control_flow import Frames
from npu_sim_bridge.graph import shared_ints
from npu_sim_bridge.graph.name_index import new_index
from npu_sim_bridge.graph.names import node_name, parse_input
from npu_sim_bridge.graph.ports import input_ports, output_ports
from npu_sim_bridge.graph.view import GraphView
from npu_sim_bridge.native.loader import shim_function
from npu_sim_bridge.graph.op_categories import (CALLING_OPS, NEXT_ITERATION_OPS, PASS_THROUGH_OPS, SWITCH_OPS,
                                                 makes_passable_variant)
from npu_sim_bridge.passes.partition import bridges, ref_variables, regions
from npu_sim_bridge.report import reasons
from npu_sim_bridge.report.reasons import Reason
from npu_sim_bridge.passes.support import BOUNDARY_DTYPES

HOST = "host"
DEVICE = "device"
_INF = float("inf")
READ_REF = "ref read"
# Ops that do no arithmetic: a segment made only of them is not worth a GeOp.


@dataclasses.dataclass
class Layout:
    """The units and layers of a proposal's last round, for carrying it over added nodes (carry.py)."""

    unit_of: dict[str, int]
    frame: list[str]            # per unit: its outermost v1 while frame, "" for a node of the root frame
    device: Sequence[int]       # per unit: 1 on the device, 0 on the host
    layer: Sequence[int]        # per unit: the layer of a device unit
    reach_device: Sequence[float]  # per unit: the highest layer a device producer of it may take
    segment_of: Sequence[int]   # per unit: the index of its segment in the proposal's, -1 for a host unit
    split_frames: bool          # a frame tangled in a cycle was taken apart
    regions: list[list[str]]    # the v1 cond regions of the first round (regions.py)
    guards: Callable            # (producer, port) -> the v1 cond branches the tensor lives in


@dataclasses.dataclass
class Proposal:
    """Host reasons of the nodes that stay on the host, and the device segments (node names, in order)."""

    host: dict[str, Reason]
    segments: list[list[str]]
    bridges: list[bridges.Bridge] = dataclasses.field(default_factory=list)  # cond tensors crossing live
    rounds: int = 0
    layout: Layout | None = None


class _Edge(NamedTuple):
    producer: str
    port: int           # -1: control edge
    consumer: str
    source: int         # unit of the producer
    target: int         # unit of the consumer


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
        self.of: dict[str, int] = {}
        self.nodes: Sequence[Sequence[str]] = []
        self.frame: list[str] = []
        keys: dict[tuple[str, str], int] = {}
        if not frames:  # no v1 while frame: every node a unit of its own, numbered in `order`
            self.of = new_index(order)
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
        ops = list(map(view.op, order))  # not view.records(): its input tuples were a third of the peak
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

    def _links(self, view: GraphView, back_edge_sources: set[str]) -> list[Sequence[int]]:
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
        return _sorted_lists(succ)

    def _single_node_links(self, view: GraphView, order: list[str],
                           back_edge_sources: set[str]) -> list[Sequence[int]]:
        """`_links` when unit i is node order[i]: a node's consumers are its unit's successors. A unit
        without any holds the one empty tuple (an empty list per unit was a tenth of the peak)."""
        unit_at = self.of.__getitem__
        consumers_of = view.consumers_of
        succ: list = [()] * len(order)
        for source, name in enumerate(order):
            users = consumers_of(name)
            if not users or name in back_edge_sources:
                continue
            targets = sorted(set(map(unit_at, users)))  # one per edge in the index: a unit once
            if name in users:  # as in _links, a unit is not its own successor
                targets.remove(source)
            if targets:
                succ[source] = targets
        return succ

    def _topological(self) -> tuple[Sequence[int], list[int]]:
        """Kahn's algorithm, the lowest unit index first among the ready ones (deterministic).

        Units are numbered in topological node order, so without v1 frames every edge runs from a lower
        number to a higher; Kahn's would then give the numbering back, and one look at each unit's
        lowest successor (the lists are sorted) shows it.
        """
        count = len(self.nodes)
        if all(not targets or targets[0] > unit for unit, targets in enumerate(self.succ)):
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


def _sorted_lists(sets: list) -> list[Sequence[int]]:
    """Each set as a sorted list, None as the empty tuple (one object for all)."""
    return [sorted(units) if units else () for units in sets]


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


def propose(view: GraphView, order: list[str], frames: Frames, host: dict[str, Reason], *,
            kinds: EdgeKinds, is_compute: Callable[[str], bool], sink_all: bool) -> Proposal:
    """Segments for the nodes not in `host` (node -> reason); `host` is not modified.

    `is_compute(op)` says whether an op does arithmetic (segments without one stay on host);
    `sink_all` false keeps only the largest segment (full-sink mode).
    """
    host = dict(host)
    split: set[str] = set()
    rounds = 0
    units = None
    while True:
        rounds += 1
        if units is None:  # the units change only when a frame has to be split
            units = _Units(view, order, frames, split)
            guards = regions.branch_guards(view, units)
            if rounds == 1:  # the host ops the candidate test found keep their cond regions on host
                cond_regions = regions.cond_regions(view, units, guards)
                regions.keep_regions_whole(view, cond_regions, host)
        if units.stuck:
            # A frame tangled with outside nodes into a cycle of units: keep its nodes apart, on host.
            for unit in units.stuck:
                if units.frame[unit]:
                    split.add(units.frame[unit])
                    for name in units.nodes[unit]:
                        host.setdefault(name, reasons.host("frame_tangled", frame=units.frame[unit]))
            units = None
            continue
        device_unit = _unit_placement(units, host)
        segment_of, segments, layer, reach_device = _segments(units, device_unit)
        violations, crossings = _tied_violations(view, units, kinds, guards, segment_of)
        if violations:
            for edge, kind in violations:
                why = reasons.host("boundary_tensor", kind=kind, producer=edge.producer, consumer=edge.consumer)
                for name, unit in ((edge.producer, edge.source), (edge.consumer, edge.target)):
                    if device_unit[unit]:
                        for member in units.nodes[unit]:
                            host.setdefault(member, why)
            continue
        # Segments that do not sink go to the host, and the layout is checked again without them.
        if not _drop_segments(view, units, segments, host, is_compute, sink_all):
            break

    layout = Layout(units.of, units.frame, device_unit, layer, reach_device, segment_of, bool(split),
                    cond_regions, guards)
    proposal = Proposal(host=host, segments=[], rounds=rounds, bridges=crossings, layout=layout)
    proposal.segments = _in_order(units, segments)
    return proposal


def _in_order(units: _Units, segments) -> list[list[str]]:
    """Each segment's nodes (its units' members) in the order the units were numbered by."""
    order = units.names
    if units.single:  # unit i is order[i] alone: no index of the positions
        return [[order[unit] for unit in sorted(members)] for members in segments]
    position = dict(zip(order, shared_ints.counting(0, len(order))))
    return [sorted((name for unit in members for name in units.nodes[unit]), key=position.__getitem__)
            for members in segments]


def _drop_segments(view, units: _Units, segments, host: dict[str, Reason], is_compute, sink_all: bool) -> int:
    """Send segments without arithmetic to the host, and in full sink all but the largest; returns how
    many went (each node's host reason says why)."""
    dropped, kept = 0, []
    trivial = reasons.host("trivial_segment")
    for members in segments:
        nodes = [name for unit in members for name in units.nodes[unit]]
        if not any(is_compute(view.op(name)) for name in nodes):
            dropped += 1
            for name in nodes:
                host.setdefault(name, trivial)
            continue
        kept.append(nodes)
    if not sink_all and len(kept) > 1:
        sizes = [sum(1 for name in nodes if is_compute(view.op(name))) for nodes in kept]
        largest = max(range(len(kept)), key=lambda i: (sizes[i], -i))
        full_sink = reasons.host("full_sink")
        for index, nodes in enumerate(kept):
            if index == largest:
                continue
            dropped += 1
            for name in nodes:
                host.setdefault(name, full_sink)
    return dropped


def _unit_placement(units: _Units, host: dict[str, Reason]) -> bytearray:
    """1 for device units, 0 for host units; a frame with one host node goes to the host whole. A byte
    per unit: the layout keeps them from placement to partition."""
    if units.single:  # unit i is the i-th name alone
        return bytearray(name not in host for name in units.names)
    device = bytearray()
    for unit, nodes in enumerate(units.nodes):
        if len(nodes) == 1:  # most units: the node's own placement (a frame's reason would name it)
            device.append(nodes[0] not in host)
            continue
        host_nodes = [name for name in nodes if name in host]
        if host_nodes and units.frame[unit]:
            first = host_nodes[0]
            why = reasons.host("while_frame", frame=units.frame[unit], node=first, cause=host[first])
            for name in nodes:
                host.setdefault(name, why)
        device.append(not host_nodes)
    return device


def _segments(units: _Units, device: Sequence[int]):
    """Layer the device units and group each layer's connected device units into segments.

    Returns (segment index per unit, -1 for a host unit; the segments' units; layer per unit;
    reach_device per unit), as arrays of machine numbers: the layout keeps the per-unit ones from
    placement to partition, in four bytes each (a layer is below 2**24, so float32 holds every reach
    exactly, and infinity). The shim's kernel (NpuSimSegments) where this process loaded it, else
    `_segments_py`: the same answer, in a tenth of the time.
    """
    kernel = shim_function("NpuSimSegments")
    if kernel is None:
        return _segments_py(units, device)
    # The units' own numbering as the order is None: a list of an int object per unit, which the
    # kernel would make of a range, was a tenth of the peak on BERT 1 layer.
    order = None if units.order == range(len(units.succ)) else units.order
    segment_of, members, starts, layer, reach_device = (
        array(code, data) for code, data in zip("iiiif", kernel((order, units.succ, device))))
    return segment_of, [members[start:end] for start, end in zip(starts, starts[1:])], layer, reach_device


def _segments_py(units: _Units, device: Sequence[int]):
    """`_segments` in Python."""
    count = len(units.nodes)
    pred, succ = units.pred, units.succ
    # ASAP: a unit's layer is the highest layer among its sources, plus one after a host source
    # that has a device ancestor when the unit is a device unit. `stepped` holds that plus one.
    layer_asap = [0] * count
    stepped = [0] * count
    has_device_ancestor = [False] * count
    for unit in units.order:
        sources = pred[unit]
        if sources:
            if device[unit]:
                layer_asap[unit] = max(map(stepped.__getitem__, sources))
                has_device_ancestor[unit] = True
            else:
                layer_asap[unit] = max(map(layer_asap.__getitem__, sources))
                has_device_ancestor[unit] = any(map(has_device_ancestor.__getitem__, sources))
        else:
            has_device_ancestor[unit] = device[unit]
        stepped[unit] = layer_asap[unit] + (0 if device[unit] or not has_device_ancestor[unit] else 1)
    # ALAP: push units as late as their consumers allow. For a host unit, `bound` is the lowest
    # layer of a device descendant; `reach` and `reach_device` are what a producer reads of a unit
    # (a device producer must sit strictly below the bound of a host consumer).
    layer = [0] * count
    reach = [_INF] * count
    reach_device = [_INF] * count
    for unit in reversed(units.order):
        targets = succ[unit]
        if device[unit]:
            limit = min(map(reach_device.__getitem__, targets)) if targets else _INF
            layer[unit] = reach[unit] = reach_device[unit] = layer_asap[unit] if limit == _INF else int(limit)
        else:
            limit = min(map(reach.__getitem__, targets)) if targets else _INF
            reach[unit], reach_device[unit] = limit, limit - 1
    parent = list(range(count))
    # A device unit's layer, None for a host unit: device-device edges within a layer join segments.
    level_of = [level if on_device else None for level, on_device in zip(layer, device)]
    for unit in units.order:
        level = level_of[unit]
        if level is None:
            continue
        joined = [target for target in succ[unit] if level_of[target] == level]
        if not joined:
            continue
        a = unit
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        for b in joined:
            while parent[b] != b:
                parent[b] = parent[parent[b]]
                b = parent[b]
            if a != b:
                if a < b:
                    parent[b] = a
                else:
                    parent[a] = b
                    a = b
    groups: dict[int, list[int]] = {}
    for unit in units.order:
        if device[unit]:
            root = unit
            while parent[root] != root:
                root = parent[root]
            members = groups.get(root)
            if members is None:
                groups[root] = [unit]
            else:
                members.append(unit)
    # Groups were created in the order of their first member: already sorted by its rank.
    segments = [array("i", members) for members in groups.values()]
    segment_of = array("i", [-1]) * count
    for index, members in enumerate(segments):
        for unit in members:
            segment_of[unit] = index
    return segment_of, segments, array("i", layer), array("f", reach_device)


def _tied_violations(view: GraphView, units: _Units, kinds: EdgeKinds, guards, segment: Sequence[int]):
    """Edges that may not cross the boundary they cross, and the cond edges a bridge lets cross
    (`segment`: per unit, its segment's index, -1 for a host unit)."""
    violations, crossings = [], []
    for edge in units.edges_across(view, segment):
        producer, port, consumer, source, _ = edge
        kind = None
        if port >= 0:
            kind = kinds.tensor_kind(producer, port, consumer)
            if kind == READ_REF:
                kind = None if segment[source] < 0 else "ref (TF1 variable)"
        if kind is None:
            guard = guards(producer, port)
            if guard:
                bridge = bridges.bridge_for(view, producer, port, consumer, guard, guards,
                                            kinds.dtype(producer, port, consumer))
                if bridge is not None:
                    crossings.append(bridge)
                    continue
                kind = "v1 cond branch (may be dead)"
        if kind is not None:
            violations.append((_Edge(*edge), kind))
    return violations, crossings
