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


def branch_guards(view: GraphView, units):
    """Per unit, the v1 cond branches (Switch, port) its outputs depend on; port-wise for Switch.

    Returns a function (producer node, port) -> frozenset. A Merge's output depends on what all
    its data inputs share; a Switch adds itself; a frame unit's outputs carry what enters it.
    """
    if not units.has_switch:
        return no_guards
    back_edge_sources = units.back_edge_sources
    unit_guard: dict[int, frozenset] = {}
    switch_guard: dict[str, tuple[frozenset, frozenset]] = {}

    def tensor_guard(producer: str, port: int) -> frozenset:
        unit = units.of[producer]
        if producer in switch_guard:
            pair = switch_guard[producer]
            return pair[0] | pair[1] if port < 0 else pair[min(port, 1)]
        return unit_guard.get(unit, _EMPTY)

    for unit in units.order:
        nodes = units.nodes[unit]
        if units.frame[unit]:
            entering = _EMPTY
            for name in nodes:
                for text in view.input_texts(name):
                    ref = parse_input(text)
                    if (ref.node not in view or ref.node in back_edge_sources
                            or units.of[ref.node] == unit):
                        continue
                    entering = entering | tensor_guard(ref.node, ref.port)
            unit_guard[unit] = entering
            continue
        name, op = nodes[0], view.op(nodes[0])  # the index has both: no NodeDef is read
        data: list[frozenset] = []
        control = _EMPTY
        for text in view.input_texts(name):
            ref = parse_input(text)
            if ref.node not in units.of or ref.node in back_edge_sources:
                continue
            guard = tensor_guard(ref.node, ref.port)
            if ref.is_control:
                control = control | guard
            else:
                data.append(guard)
        if op in MERGE_OPS:
            merged = frozenset.intersection(*data) if data else _EMPTY
            unit_guard[unit] = merged | control
        else:
            combined = control.union(*data) if data else control
            unit_guard[unit] = combined
            if op in SWITCH_OPS:
                switch_guard[name] = (combined | {(name, 0)}, combined | {(name, 1)})
    return tensor_guard


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

    for unit in units.order:
        if units.frame[unit]:
            continue
        name = units.nodes[unit][0]
        if view.op(name) in MERGE_OPS:
            switches = set()
            for text in view.input_texts(name):
                ref = parse_input(text)
                if ref.is_control or ref.node not in units.of or ref.node in units.back_edge_sources:
                    continue
                switches.update(switch for switch, _ in tensor_guard(ref.node, ref.port))
        else:
            switches = {switch for switch, _ in tensor_guard(name, -1)}
        for switch in switches:
            if switch in units.of and not units.frame[units.of[switch]]:
                join(name, switch)
    groups: dict[str, list[str]] = {}
    for unit in units.order:
        if not units.frame[unit]:
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
