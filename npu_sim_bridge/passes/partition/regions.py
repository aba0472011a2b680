"""v1 cond structure over the partition units: which branches a tensor lives in, and cond regions.

A tensor's guard is the set of (Switch, port) branches it depends on: a Switch adds itself (per
port), a Merge's output keeps only what all its data inputs share, a frame unit's outputs carry
what enters the frame. A cond region is the Switch nodes of a cond, the nodes inside its branches
and its Merge nodes: nodes are joined with every Switch in their guard (a Merge with every Switch
its inputs are guarded by), so a cond and the gradient cond that reads its branch tensors form
one region. A region that holds a host op stays whole on the host.
"""

from __future__ import annotations

from npu_sim_bridge.graph.names import node_name, parse_input
from npu_sim_bridge.graph.op_categories import MERGE_OPS, SWITCH_OPS
from npu_sim_bridge.graph.view import GraphView
from npu_sim_bridge.report import reasons
from npu_sim_bridge.report.reasons import Reason

_EMPTY = frozenset()


def no_guards(producer: str, port: int) -> frozenset:
    """The guards of a graph without v1 conds: every tensor lives in every case."""
    return _EMPTY


class BranchGuards:
    """(producer, port) -> the v1 cond branches, (Switch, port), the tensor lives in; port -1 for every
    output of a Switch. Kept for the nodes whose outputs live in a branch only: a node none of whose
    inputs does lives in none (most of a graph, and every node past the Merge of its cond), and is
    never looked at. `touched`: a byte per unit, set for the units that were looked at (a Switch, or a
    unit an input of which lives in a branch; 2 where its outputs live in one), which are the only ones
    a cond region can hold. branch_guards fills the two dicts it is made with."""

    __slots__ = ("_guard_of", "_switch_guard", "touched")

    def __init__(self, guard_of: dict[str, frozenset], switch_guard: dict[str, tuple[frozenset, frozenset]],
                 touched: bytearray):
        self._guard_of, self._switch_guard, self.touched = guard_of, switch_guard, touched

    def __call__(self, producer: str, port: int) -> frozenset:
        pair = self._switch_guard.get(producer)
        if pair is not None:
            return pair[0] | pair[1] if port < 0 else pair[min(port, 1)]
        return self._guard_of.get(producer, _EMPTY)


def branch_guards(view: GraphView, units):
    """Per unit, the v1 cond branches (Switch, port) its outputs depend on; port-wise for Switch.

    Returns a function (producer node, port) -> frozenset (`no_guards` for a graph without a Switch,
    else a BranchGuards). A Merge's output depends on what all its data inputs share; a Switch adds
    itself; a frame unit's outputs carry what enters it. The units are visited in topological order,
    and only those a Switch or a guarded tensor reaches through one link: the others live in no branch.
    """
    if not units.has_switch:
        return no_guards
    back_edge_sources = units.back_edge_sources
    unit_of, frame, succ = units.of, units.frame, units.succ
    touched = bytearray(len(units.nodes))
    for name in view.names_with_op_in(SWITCH_OPS):
        unit = unit_of.get(name)
        if unit is not None and not frame[unit]:
            touched[unit] = 1
    guard_of: dict[str, frozenset] = {}
    switch_guard: dict[str, tuple[frozenset, frozenset]] = {}
    guards = BranchGuards(guard_of, switch_guard, touched)

    for unit in units.order:
        if not touched[unit]:
            continue
        nodes = units.nodes[unit]
        if frame[unit]:
            entering = _EMPTY
            for name in nodes:
                for text in view.input_texts(name):
                    ref = parse_input(text)
                    if (ref.node not in view or ref.node in back_edge_sources
                            or unit_of[ref.node] == unit):
                        continue
                    entering = entering | guards(ref.node, ref.port)
            if entering:
                guard_of.update(dict.fromkeys(nodes, entering))
                touched[unit] = 2
        else:
            name, op = nodes[0], view.op(nodes[0])  # the index has both: no NodeDef is read
            if op in MERGE_OPS:  # what all its data inputs share: an input that is no unit does not count
                data: list[frozenset] = []
                control = _EMPTY
                for text in view.input_texts(name):
                    ref = parse_input(text)
                    if ref.node not in unit_of or ref.node in back_edge_sources:
                        continue
                    if ref.is_control:
                        control = control | guards(ref.node, ref.port)
                    else:
                        data.append(guards(ref.node, ref.port))
                guard = (frozenset.intersection(*data) if data else _EMPTY) | control
            else:  # the union of its inputs' (a name that is no unit has none); one set while they agree
                guard = _EMPTY
                for text in view.input_texts(name):
                    ref = parse_input(text)
                    if ref.node in back_edge_sources:
                        continue
                    found = guards(ref.node, ref.port)
                    if found and not found <= guard:
                        guard = guard | found if guard else found
            if op in SWITCH_OPS:
                switch_guard[name] = (guard | {(name, 0)}, guard | {(name, 1)})
                touched[unit] = 2
            elif guard:
                guard_of[name] = guard
                touched[unit] = 2
        if touched[unit] == 2:  # its outputs live in a branch: its successors are looked at
            for successor in succ[unit]:
                touched[successor] = touched[successor] or 1
    return guards


def cond_regions(view: GraphView, units, tensor_guard) -> list[list[str]]:
    """The v1 cond regions of the root frame (node names, in unit order); frames are units of their own."""
    if tensor_guard is no_guards:  # no Switch: no cond
        return []
    parent: dict[str, str] = {}

    def find(name: str) -> str:
        root = name
        while parent.setdefault(root, root) != root:
            root = parent[root]
        while parent[name] != root:
            parent[name], name = root, parent[name]
        return root

    def join(a: str, b: str) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)

    # A unit branch_guards did not look at lives in no branch and reads no tensor that does: no region.
    touched, frame, unit_of = tensor_guard.touched, units.frame, units.of

    def root_frame_switches(guard) -> list[str]:  # a region's root is its least name, whatever the join order
        return list({switch for switch, _ in guard if switch in unit_of and not frame[unit_of[switch]]})

    looked_at = [unit for unit in units.order if touched[unit] and not frame[unit]]
    # Most nodes of a branch share one guard set. Its Switches are joined at the first node that has it;
    # every later node joins the first of them only (the same regions, a join per node, not per Switch).
    joined: dict[frozenset, str | None] = {}
    for unit in looked_at:
        name = units.nodes[unit][0]
        if view.op(name) in MERGE_OPS:
            switches = set()
            for text in view.input_texts(name):
                ref = parse_input(text)
                if ref.is_control or ref.node not in unit_of or ref.node in units.back_edge_sources:
                    continue
                switches.update(tensor_guard(ref.node, ref.port))
            switches = root_frame_switches(switches)
        else:
            guard = tensor_guard(name, -1)
            if guard in joined:
                first = joined[guard]
                if first is not None:
                    join(name, first)
                continue
            switches = root_frame_switches(guard)
            joined[guard] = switches[0] if switches else None
        for switch in switches:
            join(name, switch)
    groups: dict[str, list[str]] = {}
    for unit in looked_at:  # every node joined is one of them (a Switch is looked at)
        name = units.nodes[unit][0]
        if name in parent:
            groups.setdefault(find(name), []).append(name)
    return [members for members in groups.values() if len(members) > 1]


def keep_regions_whole(view: GraphView, regions: list[list[str]], host: dict[str, Reason]) -> None:
    """A cond region with a host op goes to the host whole; the reason names the op that kept it there."""
    for members in regions:
        first = next((name for name in members if name in host), None)
        if first is None:
            continue
        switch = next((view.node(name) for name in members if view.op(name) in SWITCH_OPS), None)
        predicate = node_name(switch.input[1]) if switch is not None and len(switch.input) > 1 else "?"
        why = reasons.host("cond_region", predicate=predicate, node=first, cause=host[first])
        for name in members:
            host.setdefault(name, why)
