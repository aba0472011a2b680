"""The pass "placement": host or device per node.

It applies the candidate test (passes/support.py), keeps v1 while frames and cond regions with a host op
whole on the host, proposes the segments (partition/cluster.py) and publishes a `Placement` (host or device per
node) for the passes after it, and a `Proposed` (partition/carry.py) that partition reuses or carries over the
nodes the passes in between add. A graph that already holds GeOps (the second Grappler iteration) is read from
its GeOps; a function body marks only its own host ops (its call site decides where it runs).
"""

from __future__ import annotations

import functools

from npu_sim_bridge.graph.attr_names import GEOP_ATTR, GEOP_STUB_ATTR, IN_GEOP_ATTR
from npu_sim_bridge.graph.control_flow import Frames
from npu_sim_bridge.graph.op_categories import BOOKKEEPING_OPS, CALLING_OPS, RUNTIME_OPS
from npu_sim_bridge.graph.outline import function_library
from npu_sim_bridge.graph.validate import topological_order
from npu_sim_bridge.passes import support
from npu_sim_bridge.passes.base import GraphPass, PassContext, PassResult
from npu_sim_bridge.passes.partition import carry, cluster
from npu_sim_bridge.passes.partition.carry import Proposed
from npu_sim_bridge.passes.results import Placement
from npu_sim_bridge.report import reasons
from npu_sim_bridge.report.model import NodeDecision
from npu_sim_bridge.report.reasons import Reason


# Host reasons that hold in any mode: the adapter never sinks these, so they do not ask the
# user to enable mix_compile_mode.
INHERENT_PREDICATES = frozenset({
    support.graph_input, support.fed_by_session, support.variable, support.checkpoint_io,
    support.summary, support.data_input, support.queue,
})

def already_partitioned(ctx: PassContext) -> bool:
    """Whether the graph holds GeOps or GeOp bodies (an earlier NpuOptimizer run partitioned it; a body
    Grappler inlined keeps its nodes' marks and stamps)."""
    if ctx.came_unstamped():
        return False
    return any(GEOP_ATTR in node.attr or IN_GEOP_ATTR in node.attr for node in ctx.view.nodes())


def decision_of(ctx: PassContext, name: str) -> NodeDecision:
    decision = ctx.report.nodes.get(name)
    if decision is None:
        decision = ctx.report.nodes[name] = NodeDecision(name=name, op=op_of(ctx.view, name))
    return decision


def op_of(view, name: str) -> str:
    """The op of a node the report has no record of yet ("" once it is outlined into a GeOp body)."""
    node = view.get(name)
    return node.op if node else ""


def mark_all(ctx: PassContext, names, **values) -> None:
    """Set report fields (placement, geop) of many nodes at once, each node recorded as decision_of does."""
    ctx.report.nodes.mark(names, functools.partial(op_of, ctx.view), **values)


def candidate_test(ctx: PassContext, functions) -> support.CandidateTest:
    support_ctx = support.SupportContext(
        ops_library=ctx.ops_library(), mix_compile=bool(ctx.options.get("mix_compile_mode")),
        functions=functions, fed=frozenset(support.node_names(ctx.item.feed)))
    return support.CandidateTest(support_ctx)


def host_reasons(ctx: PassContext, names, test: support.CandidateTest, inherent: set[str]) -> dict[str, Reason]:
    reasons = {}
    protected = ctx.item.protected_nodes
    kinds = cluster.EdgeKinds(ctx.view, test.ctx.functions)
    for name in names:
        node = ctx.view.node(name)
        reason, predicate = test.explain(node)
        if reason is None and name in protected:
            reason = protected_output_problem(name, kinds)
        if reason is not None:
            reasons[name] = reason
            if predicate in INHERENT_PREDICATES:
                inherent.add(name)
    return reasons


def protected_output_problem(name: str, kinds: cluster.EdgeKinds) -> str | None:
    for port in kinds.output_types(name):
        if port.is_ref:
            return reasons.host("protected_tensor", kind="ref")
        kind = support.BOUNDARY_DTYPES.get(port.dtype)
        if kind:
            return reasons.host("protected_tensor", kind=kind)
    return None


def propose(ctx: PassContext, host: dict[str, Reason], functions, with_layout: bool = True) -> cluster.Proposal:
    order = topological_order(ctx.view, read_only=True)  # the view's own list: propose only reads it
    frames = Frames(ctx.view, order)
    library = ctx.ops_library()

    @functools.lru_cache(maxsize=None)  # asked for every segment member, round after round
    def is_compute(op: str) -> bool:
        if op in CALLING_OPS or op in functions:  # runs the arithmetic of its branches or body
            return True
        return op not in BOOKKEEPING_OPS and library.not_compute_kind(op) is None

    return cluster.propose(ctx.view, order, frames, host, kinds=cluster.EdgeKinds(ctx.view, functions),
                           is_compute=is_compute, sink_all=bool(ctx.options.get("mix_compile_mode")),
                           with_layout=with_layout)


def fresh_proposal(ctx: PassContext, names, functions, inherent: set[str]) -> cluster.Proposal:
    """Propose the segments of the current graph again: placement's host nodes keep their reasons,
    nodes it has not seen get the candidate test (`inherent` gains those the adapter never sinks)."""
    placement = ctx.result(Placement)
    earlier = ctx.result(Proposed)
    test = candidate_test(ctx, functions)
    if placement is None:
        host = host_reasons(ctx, names, test, inherent)
    else:
        known_reasons = earlier.proposal.host if earlier else {}
        fresh = [name for name in names if placement.get(name) is None]
        host = host_reasons(ctx, fresh, test, inherent)
        for name in names:
            if placement.get(name) == cluster.HOST:
                host[name] = known_reasons.get(name, reasons.host("by_placement"))
        del fresh
    del names  # the caller's list of every name goes before proposing (it was a twentieth of the peak)
    return propose(ctx, host, functions, with_layout=False)  # nothing carries it again: no layout


def carried_proposal(ctx: PassContext, functions) -> cluster.Proposal | None:
    """Placement's proposal carried over the nodes added since (carry.py), or None when it cannot be."""
    earlier = ctx.result(Proposed)
    if earlier is None or ctx.result(Placement) is None:
        return None
    test = candidate_test(ctx, functions)
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
    produces = (Placement,)

    def run(self, ctx: PassContext) -> PassResult:
        view = ctx.view
        names = view.graph_order_names()
        if ctx.item.is_function:
            return self._function_body(ctx, names)
        if already_partitioned(ctx):
            return self._partitioned(ctx, names)
        functions = function_library(view)
        inherent: set[str] = set()
        host = host_reasons(ctx, names, candidate_test(ctx, functions), inherent)
        proposal = propose(ctx, host, functions)
        on_host = proposal.host
        # Every node of `names` is in the layout's unit index, as the proposal saw them.
        ctx.publish(Placement(seen=proposal.layout.unit_of, host=on_host))
        ctx.publish(Proposed(view.open_journal(), proposal, inherent))
        hosted = [name for name in names if name in on_host]
        mark_all(ctx, names, placement=cluster.DEVICE)  # every node's record, in graph order
        mark_all(ctx, hosted, placement=cluster.HOST)
        for name in hosted:
            ctx.report.nodes[name].add_reason(on_host[name])
        return PassResult(changed=False, stats={
            "host": len(hosted), "device": len(names) - len(hosted),
            "segments": len(proposal.segments), "rounds": proposal.rounds})

    def _function_body(self, ctx: PassContext, names) -> PassResult:
        """A function body: its call site decides where it runs; only its own host ops are marked."""
        test = support.CandidateTest(support.SupportContext(
            ops_library=ctx.ops_library(), mix_compile=bool(ctx.options.get("mix_compile_mode")),
            functions=function_library(ctx.view)), support.NODE_PREDICATES)
        placement = {}
        for name in names:
            node = ctx.view.node(name)
            reason = None if node.op in RUNTIME_OPS else test(node)
            placement[name] = cluster.HOST if reason else cluster.DEVICE
            decision = decision_of(ctx, name)
            decision.placement = placement[name]
            if reason:
                decision.add_reason(reason)
        ctx.publish(Placement.of(placement))
        return PassResult(changed=False, stats={"function_body": True})

    def _partitioned(self, ctx: PassContext, names) -> PassResult:
        placement = {}
        for name in names:
            node = ctx.view.node(name)
            decision = decision_of(ctx, name)
            if GEOP_ATTR in node.attr:
                placement[name] = decision.placement = cluster.DEVICE
                decision.geop = name
            elif GEOP_STUB_ATTR in node.attr:
                placement[name] = decision.placement = cluster.HOST
                decision.geop = node.attr[GEOP_STUB_ATTR].s.decode()
                decision.add_reason(reasons.host("geop_stub", geop=decision.geop))
            else:
                placement[name] = decision.placement = cluster.HOST
                decision.add_reason(reasons.host("outside_geops"))
        ctx.publish(Placement.of(placement))
        return PassResult(changed=False, stats={"already_partitioned": True})
