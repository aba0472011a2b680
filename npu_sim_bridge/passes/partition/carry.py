"""Carrying placement's proposal over the conversions the precision pass inserts in between.

Partition needs the segments of the graph as it is after precision, which has put Casts (and
rounding nodes) on edges: a chain of new nodes, each reading one tensor, now sits between a
producer P and some of its consumers. Proposing again from scratch gives the placement's proposal
with each new node in the segment of its producer whenever:

- no node was removed, and every node whose inputs changed only had a data input `P:port`
  replaced by the end of a new chain that reads `P:port` (the journal of the view says which);
- each new node is a device candidate, reads one data input and has a consumer (so the host nodes
  and their reasons stay what they were);
- with P on the device, the new node joins P's unit (P in a while frame), or, as a unit of its own,
  takes P's layer: the lowest layer its consumers allow (the layout of the placement's last round)
  equals P's. The layers of the other units do not move then, since the new node hands on what P
  handed on;
- with P on the host (in the root frame), every consumer of the new node is in one segment, which
  the node joins at that segment's layer; the edge from P into it may cross as P's edges did;
- no tied edge and no v1 cond branch tensor leaves a new node for another segment, no v1 cond
  region is partly on the host, the placement needed no bridge and took no while frame apart
  (a new node lives in the cond branches of what it reads and joins its region).

Otherwise `carry` returns None and the partition proposes again. Segment members are listed in the
topological order of the current graph, as a fresh proposal lists them; when there are several
segments and while frames, their order could differ, so that case is proposed again too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Container, Iterator

from npu_sim_bridge.graph.journal import EditJournal
from npu_sim_bridge.graph.names import CONTROL_PORT, TensorRef, format_input, node_name, parse_input
from npu_sim_bridge.graph.op_categories import EXIT_OPS, NEXT_ITERATION_OPS
from npu_sim_bridge.graph.validate import ranks_in_force, topological_order
from npu_sim_bridge.graph.view import GraphView
from npu_sim_bridge.passes.partition.cluster import READ_REF, EdgeKinds, Proposal

_MAX_CHAIN = 16


@dataclasses.dataclass
class Proposed:
    """What placement proposed (a result it publishes), for partition to reuse while the graph is unchanged,
    or to carry over the nodes the passes in between add (`journal` records what they do)."""

    journal: EditJournal | None  # None once partition proposed again (see keep_host_reasons_only)
    proposal: Proposal
    inherent: set[str]        # host nodes the adapter never sinks (no "enable mix_compile_mode" advice)

    def keep_host_reasons_only(self) -> None:
        """Drop what only carrying reads (the journal, the segments and their layout), for a partition
        that proposes again and reads only the host reasons: they are not held through its proposal."""
        self.journal = None
        self.proposal = Proposal(host=self.proposal.host, segments=[])


def carry(view: GraphView, proposal: Proposal, journal: EditJournal, is_candidate,
          kinds: EdgeKinds) -> Proposal | None:
    """The proposal a fresh `propose` would make on the current graph, or None when it cannot be carried.

    `is_candidate(node)` says whether a new node passes the device-candidate test.
    """
    layout = proposal.layout
    if layout is None or journal.removed or layout.split_frames or proposal.bridges:
        return None
    # No node was removed since the journal opened (above), so every node it lists as added is there.
    new = journal.added
    if not new:
        return None
    host = proposal.host
    for members in layout.regions:  # a region partly on the host would now go there whole
        if any(name in host for name in members) and not all(name in host for name in members):
            return None
    unit_of = layout.unit_of

    def anchor(name: str) -> TensorRef | None:
        """The (producer, port) an added node's chain reads, or None if it is not such a chain. Walked
        at each call (a chain is at most _MAX_CHAIN long; no memo of every added node's)."""
        links = 0
        while name in new and links <= _MAX_CHAIN:
            links += 1
            inputs = view.input_texts(name)
            if len(inputs) != 1:
                return None
            ref = parse_input(inputs[0])
            if ref.port == CONTROL_PORT or (ref.node in new and ref.port != 0):
                return None
            if ref.node not in new:
                return ref
            name = ref.node
        return None

    # Changed inputs of the nodes that were there: only `P:port` -> the end of a new chain reading it.
    # Each such input is put back to the tensor its chain reads: the inputs must be those the node had.
    for name in journal.rewired():
        if name not in view:
            return None
        before = journal.inputs_before(view, name)
        now = view.input_texts(name)
        if len(now) != len(before):
            return None
        for text, was in zip(now, before):
            if text in new:  # (an input naming a new node's port 0 is its name)
                found = anchor(text)
                if found is None:
                    return None
                text = format_input(found)
            if text != was:
                return None

    # Each segment gets its new nodes, in the proposal's own lists: the proposal is not read again
    # whether or not it is carried (no copy of them).
    grown = proposal.segments
    host_anchored: dict[str, int] = {}  # a new node on a chain from a host node -> its segment
    for name in _deepest_first(new, view):
        found = anchor(name)
        if found is None or not is_candidate(view.node(name)):
            return None
        producer = found[0]
        unit = unit_of.get(producer)
        users = view.consumers_of(name)
        if unit is None or not users:
            return None
        for user in users:
            if user not in new and user not in unit_of:
                return None
        if producer in host:
            segment = _segment_of_users(layout, users, new, host_anchored)
            if segment is None or layout.frame[unit] or layout.guards(*found):
                return None
            kind = kinds.tensor_kind(producer, found[1], name)
            if kind is not None and kind != READ_REF:  # a variable's ref may enter a GeOp from the host
                return None
            host_anchored[name] = segment
            grown[segment].append(name)
            continue
        if not layout.device[unit]:
            return None
        if layout.frame[unit]:
            if view.op(producer) in EXIT_OPS or view.op(producer) in NEXT_ITERATION_OPS:
                return None  # the new node would leave P's frame
        else:
            if view.op(producer) in NEXT_ITERATION_OPS:
                return None
            # A new user is further along this node's chain, from the same producer: it was given the
            # producer's layer (the users come first), as this node is if its other users allow.
            layer = layout.layer[unit]
            reach = min(layer if user in new else
                        (layout.layer[unit_of[user]] if layout.device[unit_of[user]]
                         else layout.reach_device[unit_of[user]])
                        for user in users)
            if reach != layer:
                return None
        segment = layout.segment_of[unit]
        grown[segment].append(name)
        for user in users:
            if user in new:
                continue
            user_unit = unit_of[user]
            crosses = layout.segment_of[user_unit] != segment
            if crosses and (layout.guards(*found) or _tied(view, kinds, name, user)):
                return None  # a tied tensor or a v1 cond branch tensor would cross

    del host_anchored  # done with, before the ordering below
    segments, first = _in_topological_order(view, grown)
    del grown
    if len(segments) > 1:
        if any(layout.frame):
            return None
        segments.sort(key=first)
    # The host nodes in GraphDef order, which is their places' (no list of every name).
    place = view.place_lookup()  # the index's own lookup: no Python call per host node
    in_order = sorted((name for name in host if place(name) is not None), key=place)
    # A fresh proposal on this graph ends in its first round: nothing to drop, no tied edge.
    return Proposal(host={name: host[name] for name in in_order}, segments=segments,
                    bridges=[], rounds=1, layout=None)


def _in_topological_order(view: GraphView, grown: list[list[str]]):
    """Each segment's nodes in `topological_order(view)`'s order (`grown`'s lists go as they are
    sorted), and the key that orders segments by their first node the same way.

    A view validated since its last edit sorts each segment by its ranks (`ranks_in_force`), with no
    order of every node (see graph.places' design note)."""
    ranks = ranks_in_force(view)
    if ranks is not None:
        sort, place = ranks.sorted, view.place
        first = lambda members: (ranks[members[0]], place(members[0]))  # noqa: E731
    else:
        position = view.positions(topological_order(view, read_only=True))
        sort, first = position.sorted, lambda members: position(members[0])  # noqa: E731
    segments = []
    for index, members in enumerate(grown):
        segments.append(sort(members))
        grown[index] = None
    return segments, first


def _deepest_first(new, view: GraphView) -> Iterator[str]:
    """The added nodes, the deepest in their chain first (each one before the added node it reads).
    By depth, from a byte per node (no sorted list of them all)."""
    depths = bytearray(_chain_depth(name, new, view) for name in new)  # in `new`'s order
    for depth in sorted(set(depths), reverse=True):
        yield from (name for name, at in zip(new, depths) if at == depth)


def _chain_depth(name: str, new: "Container[str]", view: GraphView) -> int:
    """How many added nodes the chain up from `name` holds, itself included (at most _MAX_CHAIN + 1)."""
    depth = 0
    while name in new and depth <= _MAX_CHAIN:
        depth += 1
        inputs = view.input_texts(name)
        name = node_name(inputs[0]) if len(inputs) == 1 else ""
    return depth


def _segment_of_users(layout, users, new: "Container[str]", host_anchored: dict[str, int]) -> int | None:
    """The one segment every consumer of a new node is in, or None (a host consumer, several segments).
    A new consumer is on the node's chain from a host node: `host_anchored` has its segment."""
    found = {host_anchored.get(user) if user in new else layout.segment_of[layout.unit_of[user]]
             for user in users}
    segment = found.pop() if len(found) == 1 else None
    return None if segment is None or segment < 0 else segment


def _tied(view: GraphView, kinds: EdgeKinds, producer: str, consumer: str) -> bool:
    """Whether a data edge from a new node to a node of another segment or the host may not cross."""
    for text in view.input_texts(consumer):
        ref = parse_input(text)
        if ref.node == producer and ref.port != CONTROL_PORT and kinds.tensor_kind(producer, ref.port, consumer):
            return True
    return False
