"""Propose device segments: maximal groups of device nodes whose contraction creates no cycle (units.py:
the units and their links; edge_kinds.py: which tensors may not cross a boundary).

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
from array import array
from collections.abc import Sequence
from typing import Callable, NamedTuple

import numpy

from npu_sim_bridge.graph import shared_ints
from npu_sim_bridge.graph.control_flow import Frames
from npu_sim_bridge.graph.view import GraphView
from npu_sim_bridge.native.loader import shim_function
from npu_sim_bridge.passes.partition import bridges, regions
from npu_sim_bridge.passes.partition.edge_kinds import READ_REF, EdgeKinds
from npu_sim_bridge.passes.partition.units import Links, UnitsByPlace, _Units
from npu_sim_bridge.report import reasons
from npu_sim_bridge.report.reasons import Reason

HOST = "host"
DEVICE = "device"
_INF = float("inf")


@dataclasses.dataclass
class Layout:
    """The units and layers of a proposal's last round, for carrying it over added nodes (carry.py)."""

    unit_of: "dict[str, int] | UnitsByPlace"  # name -> unit (by place where every unit is one node)
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


def propose(view: GraphView, order: list[str], frames: Frames, host: dict[str, Reason], *,
            kinds: EdgeKinds, is_compute: Callable[[str], bool], sink_all: bool,
            with_layout: bool = True) -> Proposal:
    """Segments for the nodes not in `host` (node -> reason); `host` is not modified.

    `is_compute(op)` says whether an op does arithmetic (segments without one stay on host);
    `sink_all` false keeps only the largest segment (full-sink mode); `with_layout` false: a proposal
    nothing carries, with no layout (its units and layers go before the segments' lists are made).
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

    layout = None
    if with_layout:
        layout = Layout(units.of, units.frame, device_unit, layer, reach_device, segment_of, bool(split),
                        cond_regions, guards)
    proposal = Proposal(host=host, segments=[], rounds=rounds, bridges=crossings, layout=layout)
    order, nodes = units.names, None if units.single else units.nodes
    del units, device_unit, layer, reach_device, segment_of, guards  # (those the layout keeps stay with it)
    proposal.segments = _in_order(order, nodes, segments)
    return proposal


def _in_order(order: list[str], nodes, segments) -> list[list[str]]:
    """Each segment's nodes (its units' members, `nodes` per unit, or None when unit i is the node
    order[i] alone) in the order the units were numbered by (`order`)."""
    if nodes is None:  # no index of the positions
        return [list(map(order.__getitem__, _sorted_units(members))) for members in segments]
    position = dict(zip(order, shared_ints.counting(0, len(order))))
    return [sorted((name for unit in members for name in nodes[unit]), key=position.__getitem__)
            for members in segments]


def _sorted_units(members: Sequence[int]) -> array:
    """A segment's units in their order, as an array (sorted in numpy: no int object per unit is held,
    where a sorted list of the largest segment's was a twentieth of the rewrite's peak)."""
    return array("q", numpy.sort(numpy.asarray(members, dtype=numpy.int64)).tobytes())


def _drop_segments(view, units: _Units, segments, host: dict[str, Reason], is_compute, sink_all: bool) -> int:
    """Send segments without arithmetic to the host, and in full sink all but the largest; returns how
    many went (each node's host reason says why)."""
    dropped, kept = 0, []  # kept: the segments that stay, as their units (a list of names each was a twentieth of the peak)
    trivial = reasons.host("trivial_segment")

    def nodes_of(members):
        return (name for unit in members for name in units.nodes[unit])

    def ops_of(members):
        return map(view.op, nodes_of(members))

    for members in segments:
        if not any(map(is_compute, ops_of(members))):
            dropped += 1
            for name in nodes_of(members):
                host.setdefault(name, trivial)
        elif not sink_all:
            kept.append(members)
    if not sink_all and len(kept) > 1:
        sizes = [sum(map(bool, map(is_compute, view.ops_of(nodes_of(members))))) for members in kept]
        largest = max(range(len(kept)), key=lambda i: (sizes[i], -i))
        full_sink = reasons.host("full_sink")
        for index, members in enumerate(kept):
            if index == largest:
                continue
            dropped += 1
            for name in nodes_of(members):
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
    succ = (units.succ.starts, units.succ.targets) if isinstance(units.succ, Links) else units.succ
    found = list(kernel((order, succ, device)))
    for index, code in enumerate("iiiif"):  # each bytes object goes as its array comes (both were a sixth of the peak)
        found[index] = array(code, found[index])
    segment_of, members, starts, layer, reach_device = found
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
