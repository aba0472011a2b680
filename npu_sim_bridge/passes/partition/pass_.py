"""The pass "partition": device segments outlined into GeOps.

It runs after placement (passes/placement/) and the passes in between (precision adds Casts): placement's
proposal is carried over the added nodes where that gives what a fresh proposal gives (carry.py); otherwise nodes without a
decision get the candidate test and the segments are proposed again on the current graph. Each
segment becomes a FunctionDef called by a node `GeOp<graph>_<seq>`. A graph that already holds GeOps (the second
Grappler iteration) and function bodies are left alone.
"""

from __future__ import annotations

import itertools
import threading
from collections import Counter

from tensorflow.core.framework import attr_value_pb2

from npu_sim_bridge.graph.attr_names import GEOP_ATTR, GEOP_STUB_ATTR, IN_GEOP_ATTR
from npu_sim_bridge.graph.outline import forget_colocation, function_library, outline
from npu_sim_bridge.passes.base import GraphPass, PassContext, PassResult
from npu_sim_bridge.passes.partition import bridges, carry, cluster, ref_variables
from npu_sim_bridge.passes.partition.call_config import KernelCalls, as_kernel_call, geop_attrs, needs_lowering
from npu_sim_bridge.passes.partition.carry import Proposed
from npu_sim_bridge.passes.placement.pass_ import (already_partitioned, carried_proposal, decision_of, fresh_proposal,
                                                   mark_all)
from npu_sim_bridge.passes.results import Placement
from npu_sim_bridge.report import reasons


_graph_numbers = itertools.count(1)
_graph_numbers_lock = threading.Lock()


class PartitionPass(GraphPass):
    """Outline each device segment into a FunctionDef called by a GeOp node."""

    name = "partition"
    reads = (Placement, Proposed)
    requires = (Placement,)  # placement's host nodes keep their reasons (without placement selected: tested here)
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
            if earlier is not None:  # not carried: its journal and segments go before proposing again
                earlier.keep_host_reasons_only()
            # Every name, only here: a carried proposal needs no list of them (it was a fiftieth of the peak)
            proposal = fresh_proposal(ctx, view.graph_order_names(), functions, inherent)
        # Nothing carries the proposal again: its units and layers go before the outlining.
        earlier, proposal.layout = None, None
        ctx.drop_result(Proposed)

        for name, reason in proposal.host.items():
            decision = decision_of(ctx, name)
            if decision.placement != cluster.HOST:
                decision.placement = cluster.HOST
                decision.add_reason(reason)
        bridged = _bridge(ctx, proposal, functions)
        mirrored = ref_variables.mirror_ref_variables(ctx.view, proposal.segments)
        geops, kernel_geops = self._outline_segments(ctx, proposal, functions)
        self._warn_full_sink(ctx, proposal, geops, inherent)
        return PassResult(changed=bool(geops), stats={
            "geops": len(geops), "geop_kernels": kernel_geops, "device_nodes": sum(len(nodes) for nodes in proposal.segments),
            "cond_bridges": bridged, "ref_variable_copies": mirrored,
            "host_nodes": len(proposal.host)})

    def _outline_segments(self, ctx: PassContext, proposal: cluster.Proposal, functions) -> tuple[list[str], int]:
        """(the GeOps, how many of them are NpuSimGeOps)"""
        if not proposal.segments:
            return [], 0
        view = ctx.view
        graph_number = _free_graph_number(view, functions, len(proposal.segments))
        protected = ctx.item.protected_nodes
        kernel_calls = KernelCalls(ctx)
        call_attrs, body_attrs = geop_attrs()
        kernel_geops = 0
        geops = []
        for sequence, members in enumerate(proposal.segments):
            geop = f"GeOp{graph_number}_{sequence}"
            result = outline(
                view, members, function_name=geop, call_name=geop, library=functions,
                keep_names=[name for name in members if name in protected],
                call_attrs={GEOP_ATTR: attr_value_pb2.AttrValue(s=geop.encode())},
                member_attrs={IN_GEOP_ATTR: attr_value_pb2.AttrValue(s=geop.encode())})
            # How the call runs its body, and whether the Session's Grappler pass sees it (call_config.py).
            body = functions[result.function]
            call = view.node(result.call)
            lowered = needs_lowering(body.node_def, functions)
            kernel = kernel_calls.wanted(lowered, call.device)
            for key, value in call_attrs.items():
                call.attr[key].CopyFrom(value)
            if kernel:
                as_kernel_call(view, result.call)
                kernel_geops += 1
            for key, value in body_attrs.items():
                body.attr[key].CopyFrom(value)
            for stub in result.stubs:
                view.node(stub).attr[GEOP_STUB_ATTR].s = geop.encode()
            mark_all(ctx, members, placement=cluster.DEVICE, geop=geop)
            geops.append(geop)
        view.compact()  # drop the outlined members now: the sweeps below go over the live nodes only
        forget_colocation(view)
        return geops, kernel_geops

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
        decision = decision_of(ctx, name)
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
