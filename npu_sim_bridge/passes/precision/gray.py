"""The gray rule of the mix-precision modes, and its fixed point over loops.

A gray op drops to the low dtype only if every float input that comes from a decided op comes from a
dropped op, and at least one does. Inputs from placeholders, constants, variable reads and other
non-deciding nodes (sources, fed nodes, opaque ops, and gray or plumbing nodes whose own inputs are all
non-deciding) do not decide. A gray op with no decided float input keeps its dtype and does not decide
either. Plumbing ops pass the decision of their inputs through by the same rule (in every mode). Loops
(v1 frames: Merge <- NextIteration) settle to a fixed point: votes only move up the order undecided <
dropped < kept, so iterating until nothing changes terminates. A NextIteration then carries the dtype
of its Merge, so no Cast sits on the back edge.
"""

from __future__ import annotations

import collections

from npu_sim_bridge.graph.names import parse_input
from npu_sim_bridge.passes.precision.plan import (FIXED_ATTRS, FOLLOWERS, GRAY, HIGH, INSERTED, LOW, NONE,
                                                  PLUMBING, Follows, Plan, name_of)
from npu_sim_bridge.report.reasons import Reason
from npu_sim_bridge.report.reasons import reason as coded


class GrayRule:
    """Settles the plans of the nodes that follow their inputs (gray, plumbing, inserted) in one graph."""

    def __init__(self, view, plans: dict[str, Plan], low: int, why):
        self.view = view
        self.plans = plans
        self.low = low    # the mode's low dtype
        self.why = why    # why(code, **details): the Decider's shared reasons
        self.edges: dict[str, list] = {}

    def _float_edges(self, name: str) -> list:
        """(producer, port, input position) of the float data inputs of a node, read with `_triples`: kept
        flat, three items an edge (a tuple per edge stayed in the interpreter's free list after the rule,
        a twentieth of the precision pass's peak on a 10k-node graph)."""
        edges = self.edges.get(name)
        if edges is None:
            plan = self.plans[name]
            edges = []
            for position, text in enumerate(self.view.input_texts(name)):  # the view's str objects
                if text.startswith("^"):
                    break
                if position < len(plan.sig.inputs) and plan.sig.inputs[position].is_float:
                    ref = parse_input(text)
                    edges += ref.node, ref.port, position
            self.edges[name] = edges
        return edges

    def _vote(self, producer: str, port: int) -> int:
        plan = self.plans.get(producer)
        return plan.vote_of_port(port) if plan is not None else NONE

    def _combine(self, edges) -> tuple[int, str | None, int | None]:
        vote, follows, port = NONE, None, None
        for producer, out_port, _ in _triples(edges):
            value = self._vote(producer, out_port)
            if value == HIGH:
                return HIGH, producer, out_port
            if value == LOW and follows is None:
                vote, follows, port = LOW, producer, out_port
        return vote, follows, port

    @staticmethod
    def _governed(plan: Plan, edges: list) -> list:
        """The edges (flat, as `_float_edges`) into the inputs whose dtype a type attr of the plan sets."""
        governed = []
        for producer, out_port, position in _triples(edges):
            if plan.sig.inputs[position].type_attr in plan.attrs:
                governed += producer, out_port, position
        return governed

    def _named(self, producer: str | None) -> str | None:
        """The node a reason names: an inserted Cast stands for the node it reads."""
        plan = self.plans.get(producer) if producer is not None else None
        while plan is not None and plan.role == INSERTED and plan.follows is not None:
            producer = plan.follows
            plan = self.plans.get(producer)
        return producer

    def _update(self, plan: Plan) -> bool:
        edges = self._float_edges(plan.name)
        if plan.port_votes is not None:  # IdentityN: element i follows input i
            changed = False
            for producer, out_port, position in _triples(edges):
                value = self._vote(producer, out_port)
                if position < len(plan.port_votes) and value != plan.port_votes[position]:
                    plan.port_votes[position] = value
                    source = self.plans.get(producer)
                    plan.port_npu[position] = source.npu_of_port(out_port) if value != NONE else \
                        plan.sig.outputs[position].dtype
                    changed = True
            return changed
        if plan.role == INSERTED:
            vote, follows, port = self._combine(edges)
            npu = self.plans[follows].npu_of_port(port) if follows is not None else None
        elif plan.role == PLUMBING:
            vote, follows, port = self._combine(self._governed(plan, edges))
            npu = self.plans[follows].npu_of_port(port) if follows is not None else plan.orig
        else:
            if plan.op in FIXED_ATTRS:  # a batch norm follows its data inputs, not its float32 statistics
                edges = self._governed(plan, edges)
            vote, follows, port = self._combine(edges)
            npu = self.low if vote == LOW else plan.orig
        if vote == plan.vote and npu == plan.npu and follows == plan.follows:
            return False
        plan.vote, plan.follows, plan.npu = vote, follows, npu
        return True

    def settle(self) -> None:
        plans = self.plans
        # The followers, asked of their plans (a set of their names was a tenth of the pass's peak).
        queue = collections.deque(name for name, plan in plans.items() if plan.role in FOLLOWERS)
        queued = set(queue)
        while queue:
            name = queue.popleft()
            queued.discard(name)
            if self._update(plans[name]):
                for consumer in self.view.consumers(name):
                    plan = plans.get(consumer)
                    if plan is not None and plan.role in FOLLOWERS and consumer not in queued:
                        queue.append(consumer)
                        queued.add(consumer)
        for name, plan in plans.items():
            if plan.role not in FOLLOWERS or plan.role == INSERTED:
                continue
            if plan.role == GRAY:
                plan.reason = self._gray_reason(plan)
            elif plan.port_votes is not None:
                plan.reason = self.why("precision.pass_through_ports")
            elif plan.follows is not None:
                plan.reason = Follows(None, self._named(plan.follows))
            else:
                plan.reason = self.why("precision.pass_through_undecided")

    def _gray_reason(self, plan: Plan) -> "Reason | Follows":
        named = self._named(plan.follows)
        if plan.vote == LOW:
            return Follows(plan.rule, named)
        if plan.vote == HIGH:
            return Follows(plan.rule, named, name_of(self.plans[named].npu) or "float32")
        return self.why("precision.gray_undecided", rule=plan.rule, dtype=name_of(plan.orig))

    def match_loop_merges(self) -> None:
        """A NextIteration feeding a lowered Merge carries the Merge's dtype (casts go before it)."""
        for plan in self.plans.values():
            if plan.op != "NextIteration" or plan.role != PLUMBING or plan.vote == LOW:
                continue
            for consumer in self.view.consumers(plan.name):
                merge = self.plans.get(consumer)
                if merge is not None and merge.op == "Merge" and merge.vote == LOW:
                    plan.vote, plan.npu = LOW, merge.npu
                    plan.reason = coded("precision.loop_merge", merge=merge.name)
                    break


def _triples(edges: list):
    """(producer, port, position) of each edge of a flat list (`GrayRule._float_edges`)."""
    return zip(edges[0::3], edges[1::3], edges[2::3])
