"""The passes "placement" (host or device per node) and "partition" (device segments outlined into GeOps).

placement runs first: it applies the candidate test, keeps v1 while frames and cond regions with a
host op whole on the host, proposes the segments and publishes a `Placement` (host or device per
node) for the passes after it.
partition runs after them (precision adds Casts in between): placement's proposal is carried over
the added nodes where that gives what a fresh proposal gives (carry.py); otherwise nodes without a
decision get the candidate test and the segments are proposed again on the current graph. Each
segment becomes a FunctionDef called by a node `GeOp<graph>_<seq>`. A graph that already holds GeOps (the second
Grappler iteration) and function bodies are left alone.
"""

from __future__ import annotations

import functools
import itertools
import threading
from collections import Counter

from tensorflow.core.framework import attr_value_pb2
from tensorflow.core.protobuf import config_pb2

from npu_sim_bridge.graph.control_flow import Frames
from npu_sim_bridge.graph.op_categories import CALLING_OPS
from npu_sim_bridge.graph.outline import forget_colocation, function_library, outline
from npu_sim_bridge.graph.validate import topological_order
from npu_sim_bridge.passes.base import GraphPass, PassContext, PassResult
from npu_sim_bridge.passes.partition import bridges, carry, cluster, ref_variables, support
from npu_sim_bridge.passes.results import Placement, Proposed
from npu_sim_bridge.report import reasons
from npu_sim_bridge.report.reasons import Reason
from npu_sim_bridge.report.model import NodeDecision

GEOP_ATTR = "_npu_sim_geop"            # on a call node: the name of its GeOp
IN_GEOP_ATTR = "_npu_sim_in_geop"      # on a function body node: the GeOp that runs it
STUB_ATTR = "_npu_sim_geop_stub"       # on a node that keeps the name of a node now inside a GeOp

# Host reasons that hold in any mode: the adapter never sinks these, so they do not ask the
# user to enable mix_compile_mode.
INHERENT_PREDICATES = frozenset({
    support.graph_input, support.fed_by_session, support.variable, support.checkpoint_io,
    support.summary, support.data_input, support.queue,
})

_graph_numbers = itertools.count(1)
_graph_numbers_lock = threading.Lock()

# The GeOp bodies were optimized with the graph that holds them; Grappler need not run again
# when a call instantiates its function.
_CALL_CONFIG = config_pb2.ConfigProto()
_CALL_CONFIG.graph_options.rewrite_options.disable_meta_optimizer = True
CALL_CONFIG_PROTO = _CALL_CONFIG.SerializeToString()


def already_partitioned(ctx: PassContext) -> bool:
    """Whether the graph holds GeOps or GeOp bodies (an earlier NpuOptimizer run partitioned it)."""
    return any(GEOP_ATTR in node.attr or IN_GEOP_ATTR in node.attr for node in ctx.view.nodes())


def _decision(ctx: PassContext, name: str) -> NodeDecision:
    decision = ctx.report.nodes.get(name)
    if decision is None:
        node = ctx.view.get(name)  # None once the node has been outlined into a GeOp body
        decision = ctx.report.nodes[name] = NodeDecision(name=name, op=node.op if node else "")
    return decision


def _candidate_test(ctx: PassContext, functions) -> support.CandidateTest:
    support_ctx = support.SupportContext(
        ops_library=ctx.ops_library(), mix_compile=bool(ctx.options.get("mix_compile_mode")),
        functions=functions, fed=frozenset(support.node_names(ctx.item.feed)))
    return support.CandidateTest(support_ctx)


def _host_reasons(ctx: PassContext, names, test: support.CandidateTest, inherent: set[str]) -> dict[str, Reason]:
    reasons = {}
    protected = ctx.item.protected_nodes
    kinds = cluster.EdgeKinds(ctx.view, test.ctx.functions)
    for name in names:
        node = ctx.view.node(name)
        reason, predicate = test.explain(node)
        if reason is None and name in protected:
            reason = _protected_output_problem(name, kinds)
        if reason is not None:
            reasons[name] = reason
            if predicate in INHERENT_PREDICATES:
                inherent.add(name)
    return reasons


def _protected_output_problem(name: str, kinds: cluster.EdgeKinds) -> str | None:
    for port in kinds.output_types(name):
        if port.is_ref:
            return reasons.host("protected_tensor", kind="ref")
        kind = support.BOUNDARY_DTYPES.get(port.dtype)
        if kind:
            return reasons.host("protected_tensor", kind=kind)
    return None


def _propose(ctx: PassContext, host: dict[str, Reason], functions) -> cluster.Proposal:
    order = topological_order(ctx.view)
    frames = Frames(ctx.view, order)
    library = ctx.ops_library()

    @functools.lru_cache(maxsize=None)  # asked for every segment member, round after round
    def is_compute(op: str) -> bool:
        if op in CALLING_OPS or op in functions:  # runs the arithmetic of its branches or body
            return True
        return op not in cluster.BOOKKEEPING_OPS and library.not_compute_kind(op) is None

    return cluster.propose(ctx.view, order, frames, host, kinds=cluster.EdgeKinds(ctx.view, functions),
                           is_compute=is_compute, sink_all=bool(ctx.options.get("mix_compile_mode")))


def fresh_proposal(ctx: PassContext, names, functions, inherent: set[str]) -> cluster.Proposal:
    """Propose the segments of the current graph again: placement's host nodes keep their reasons,
    nodes it has not seen get the candidate test (`inherent` gains those the adapter never sinks)."""
    placement = ctx.result(Placement)
    earlier = ctx.result(Proposed)
    test = _candidate_test(ctx, functions)
    if placement is None:
        host = _host_reasons(ctx, names, test, inherent)
    else:
        known_reasons = earlier.proposal.host if earlier else {}
        fresh = [name for name in names if placement.get(name) is None]
        host = _host_reasons(ctx, fresh, test, inherent)
        for name in names:
            if placement.get(name) == cluster.HOST:
                host[name] = known_reasons.get(name, reasons.host("by_placement"))
    return _propose(ctx, host, functions)


def carried_proposal(ctx: PassContext, functions) -> cluster.Proposal | None:
    """Placement's proposal carried over the nodes added since (carry.py), or None when it cannot be."""
    earlier = ctx.result(Proposed)
    if earlier is None or ctx.result(Placement) is None:
        return None
    test = _candidate_test(ctx, functions)
    protected = ctx.item.protected_nodes
    return carry.carry(ctx.view, earlier.proposal, earlier.journal,
                       lambda node: node.name not in protected and test(node) is None,
                       cluster.EdgeKinds(ctx.view, functions))


class PlacementPass(GraphPass):
    """Decide host or device for every node and say why a node stays on the host."""

    name = "placement"
    description = ("host or device per node: the device op list, without_npu_compile_scope, PyFunc, "
                   "checkpoint, summary, dataset, string and queue ops, whole v1 while frames and cond regions")
    edits_library = False

    def run(self, ctx: PassContext) -> PassResult:
        view = ctx.view
        names = view.graph_order_names()
        if ctx.item.is_function:
            return self._function_body(ctx, names)
        if already_partitioned(ctx):
            return self._partitioned(ctx, names)
        functions = function_library(view)
        inherent: set[str] = set()
        host = _host_reasons(ctx, names, _candidate_test(ctx, functions), inherent)
        proposal = _propose(ctx, host, functions)
        on_host = proposal.host
        # Every node of `names` is in the layout's unit index, as the proposal saw them.
        ctx.publish(Placement(seen=proposal.layout.unit_of, host=on_host))
        ctx.publish(Proposed(view.open_journal(), proposal, inherent))
        hosted = 0
        for name in names:
            decision = _decision(ctx, name)
            why = on_host.get(name)
            if why is None:
                decision.placement = cluster.DEVICE
            else:
                decision.placement = cluster.HOST
                decision.add_reason(why)
                hosted += 1
        return PassResult(changed=False, stats={
            "host": hosted, "device": len(names) - hosted,
            "segments": len(proposal.segments), "rounds": proposal.rounds})

    def _function_body(self, ctx: PassContext, names) -> PassResult:
        """A function body: its call site decides where it runs; only its own host ops are marked."""
        test = support.CandidateTest(support.SupportContext(
            ops_library=ctx.ops_library(), mix_compile=bool(ctx.options.get("mix_compile_mode")),
            functions=function_library(ctx.view)), support.NODE_PREDICATES)
        placement = {}
        for name in names:
            node = ctx.view.node(name)
            reason = None if node.op in support.RUNTIME_OPS else test(node)
            placement[name] = cluster.HOST if reason else cluster.DEVICE
            decision = _decision(ctx, name)
            decision.placement = placement[name]
            if reason:
                decision.add_reason(reason)
        ctx.publish(Placement.of(placement))
        return PassResult(changed=False, stats={"function_body": True})

    def _partitioned(self, ctx: PassContext, names) -> PassResult:
        placement = {}
        for name in names:
            node = ctx.view.node(name)
            decision = _decision(ctx, name)
            if GEOP_ATTR in node.attr:
                placement[name] = decision.placement = cluster.DEVICE
                decision.geop = name
            elif STUB_ATTR in node.attr:
                placement[name] = decision.placement = cluster.HOST
                decision.geop = node.attr[STUB_ATTR].s.decode()
                decision.add_reason(reasons.host("geop_stub", geop=decision.geop))
            else:
                placement[name] = decision.placement = cluster.HOST
                decision.add_reason(reasons.host("outside_geops"))
        ctx.publish(Placement.of(placement))
        return PassResult(changed=False, stats={"already_partitioned": True})


class PartitionPass(GraphPass):
    """Outline each device segment into a FunctionDef called by a GeOp node."""

    name = "partition"
    reads = (Placement, Proposed)
    description = "device segments become GeOp<graph>_<seq> calls of FunctionDefs (mixed compute / full sink)"

    def run(self, ctx: PassContext) -> PassResult:
        earlier = ctx.result(Proposed)  # placement proposes only on a graph not partitioned yet
        if ctx.item.is_function or (earlier is None and already_partitioned(ctx)):
            return PassResult(changed=False)
        view = ctx.view
        functions = function_library(view)
        inherent: set[str] = set(earlier.inherent) if earlier else set()
        proposal = earlier.proposal if earlier else None
        view.close_journal()  # what this pass changes is not for anyone to carry
        if earlier is not None and earlier.journal.changed(view):
            proposal = carried_proposal(ctx, functions)  # the passes in between changed the graph
        if proposal is None:
            # Every name, only here: a carried proposal needs no list of them (it was a fiftieth of the peak)
            proposal = fresh_proposal(ctx, view.graph_order_names(), functions, inherent)
        # Nothing carries the proposal again: its units and layers go before the outlining.
        earlier, proposal.layout = None, None
        ctx.drop_result(Proposed)

        for name, reason in proposal.host.items():
            decision = _decision(ctx, name)
            if decision.placement != cluster.HOST:
                decision.placement = cluster.HOST
                decision.add_reason(reason)
        bridged = _bridge(ctx, proposal, functions)
        mirrored = ref_variables.mirror_ref_variables(ctx.view, proposal.segments)
        geops = self._outline_segments(ctx, proposal, functions)
        self._warn_full_sink(ctx, proposal, geops, inherent)
        return PassResult(changed=bool(geops), stats={
            "geops": len(geops), "device_nodes": sum(len(nodes) for nodes in proposal.segments),
            "cond_bridges": bridged, "ref_variable_copies": mirrored,
            "host_nodes": len(proposal.host)})

    def _outline_segments(self, ctx: PassContext, proposal: cluster.Proposal, functions) -> list[str]:
        if not proposal.segments:
            return []
        view = ctx.view
        graph_number = _free_graph_number(view, functions, len(proposal.segments))
        protected = ctx.item.protected_nodes
        geops = []
        for sequence, members in enumerate(proposal.segments):
            geop = f"GeOp{graph_number}_{sequence}"
            result = outline(
                view, members, function_name=geop, call_name=geop, library=functions,
                keep_names=[name for name in members if name in protected],
                call_attrs={GEOP_ATTR: attr_value_pb2.AttrValue(s=geop.encode()),
                            "config_proto": attr_value_pb2.AttrValue(s=CALL_CONFIG_PROTO)},
                member_attrs={IN_GEOP_ATTR: attr_value_pb2.AttrValue(s=geop.encode())})
            for stub in result.stubs:
                view.node(stub).attr[STUB_ATTR].s = geop.encode()
            for name in members:
                decision = _decision(ctx, name)
                decision.placement = cluster.DEVICE
                decision.geop = geop
            geops.append(geop)
        view.compact()  # drop the outlined members now: the sweeps below go over the live nodes only
        forget_colocation(view)
        ctx.publish(Placement.of({node.name: (cluster.DEVICE if GEOP_ATTR in node.attr else cluster.HOST)
                               for node in view.nodes()}))
        return geops

    def _warn_full_sink(self, ctx: PassContext, proposal: cluster.Proposal, geops, inherent) -> None:
        if ctx.options.get("mix_compile_mode"):
            return
        notable = {name: reason for name, reason in proposal.host.items()
                   if name not in inherent and reason.code != "host.trivial_segment"}
        if not notable:
            return
        ops = Counter(ctx.view.op(name) if name in ctx.view else ctx.report.nodes[name].op
                      for name in notable)
        listed = ", ".join(f"{op} x{count}" if count > 1 else op for op, count in sorted(ops.items()))
        sunk = geops[0] if geops else "none"
        ctx.report.warn(
            f"mix_compile_mode is off (full sink): only the largest device segment ({sunk}) sinks and "
            f"{len(notable)} nodes stay on the host ({listed}); enable mixed compute with "
            "parameter_map['mix_compile_mode'].b = True (NPURunConfig(mix_compile_mode=True)) so that "
            "the host runs them by design; the report gives each node's reason")


def _bridge(ctx: PassContext, proposal: cluster.Proposal, functions) -> int:
    """Let the v1 cond tensors the segments cut cross live (see bridges.py); returns how many edges."""
    if not proposal.bridges:
        return 0
    # The segment of each bridge's ends only (a dict of every member was a tenth of the partition's peak).
    ends = {end for bridge in proposal.bridges for end in (bridge.producer, bridge.consumer)}
    segment_of = {name: index for index, nodes in enumerate(proposal.segments) for name in nodes if name in ends}
    wanted = [b for b in proposal.bridges if segment_of.get(b.producer) != segment_of.get(b.consumer)]
    if not wanted:
        return 0
    kinds = cluster.EdgeKinds(ctx.view, functions)
    added = bridges.apply_bridges(ctx.view, wanted, segment_of,
                                  lambda producer, port: kinds.dtype(producer, port, ""))
    for name, index in added.items():
        decision = _decision(ctx, name)
        if index is None:
            decision.placement = cluster.HOST
            decision.add_reason(reasons.host("cond_bridge"))
        else:
            proposal.segments[index].append(name)
    return len(wanted)


def _free_graph_number(view, functions, count: int) -> int:
    """The next graph number whose GeOp names are free in the graph and its library."""
    with _graph_numbers_lock:
        while True:
            number = next(_graph_numbers)
            names = [f"GeOp{number}_{sequence}" for sequence in range(count)]
            if not any(name in view or name in functions for name in names):
                return number
