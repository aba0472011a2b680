"""The "fusion" pass: applies the fusion rules the fusion_switch_file leaves on, before placement and precision.

Runs first, as the NPU's graph engine fuses before it decides precision. It first takes apart the
fused ops Grappler's remapper made (unfuse.py), in every graph and function body, so that the rules
alone decide. Function bodies (Grappler's function items) are otherwise left alone, and so is a graph
an earlier NpuOptimizer run already processed (Grappler runs the pipeline twice): then the fused
nodes it finds are only reported. Every match is reported: fused (on the fused node and on the nodes
it replaced), switched off, or not fired with the reason the rule's check gave. After every pass ran,
`finish` gives each node a rule fused away its fused op's list, dtype, placement and GeOp.
"""

from __future__ import annotations

import sys
from collections import Counter

from npu_sim_bridge.passes import support
from npu_sim_bridge.passes.base import GraphPass, PassContext, PassResult
from npu_sim_bridge.passes.fusion.marks import fused_from, fusion_rules
from npu_sim_bridge.passes.fusion.rules import FusionEnv, all_rules
from npu_sim_bridge.passes.fusion.switch import load_switch
from npu_sim_bridge.passes.fusion.unfuse import remapped_nodes, unfuse
from npu_sim_bridge.report.model import NodeDecision, node_dtype
from npu_sim_bridge.report.reasons import LazyReason, Reason
from npu_sim_bridge.report.reasons import reason as coded

REMAPPER_NOTE = ("Grappler's remapper fused {count} op(s) ({examples}) in a way the simulator cannot take "
                 "apart, so fusion_switch_file cannot switch them off; set rewrite_options.remapping = "
                 "RewriterConfig.OFF (npu_config_proto does) to let the fusion rules decide")


class FusionPass(GraphPass):
    """Fuse MatMul/Conv2D with BiasAdd (and Relu) into TensorFlow's fused kernels, rule by named rule."""

    name = "fusion"
    description = ("graph and UB fusion rules (MatMulBiasAddFusionPass, AABiasaddConvFusion, ...) onto "
                   "_FusedMatMul/_FusedConv2D, switched by fusion_switch_file")
    edits_library = False

    def __init__(self):
        # {node a rule fused away: the node it was fused into}, kept from `run` to `finish` (the pipeline
        # makes one pass object per run).
        self._absorbed: dict[str, str] = {}

    def run(self, ctx: PassContext) -> PassResult:
        view, report = ctx.view, ctx.report
        unfused = self._unfuse(ctx)
        if ctx.item.is_function:
            return PassResult(changed=bool(unfused), stats={"function_body": True, "unfused": len(unfused)})
        switch = load_switch(ctx.options.get("fusion_switch_file") or None)
        rules = all_rules()
        switch.check_names(rules)
        for text in switch.warnings:
            report.warn(text)
        states = {rule.name: switch.state(rule) for rule in rules}
        stats = {"rules": {name: ("on" if state.on else "off") for name, state in states.items()}}
        if unfused:
            stats["unfused"] = len(unfused)

        if report.rerun:  # a node carries the pipeline's stamp: an earlier run fused this graph
            existing = Counter(rule for node in view.nodes() for rule in fusion_rules(node))
            stats.update(already_processed=True, fused=dict(existing))
            return PassResult(changed=bool(unfused), stats=stats)

        from npu_sim_bridge.graph.outline import function_library

        candidate = support.CandidateTest(support.SupportContext(
            ops_library=ctx.ops_library(), mix_compile=bool(ctx.options.get("mix_compile_mode")),
            functions=function_library(view)), support.NODE_PREDICATES)
        env = FusionEnv(candidate=candidate, protected=ctx.item.protected_nodes,
                        native_fp16=(ctx.options.get("sim_fp16_execution") or "emulate") == "native")
        fired, off, refused = Counter(), Counter(), Counter()
        fusions: dict[str, _Fused] = {}  # fused node -> its reason, while the rules run
        op_chains: dict[tuple, tuple] = {}  # the ops of a fusion's nodes -> one tuple the reasons share
        for rule in rules:
            state = states[rule.name]
            roots = rule.root_ops
            # A rule's roots found from the op column (in numpy), in GraphDef order, as the graph is now.
            for name in view.graph_order_names() if roots is None else view.names_with_op_in(roots):
                node = view.get(name)
                match = rule.match(view, name, node) if node is not None else None
                if match is None:
                    continue
                if not state.on:
                    off[rule.name] += 1
                    _note(ctx, match.root, coded("fusion.switched_off", rule=rule.name, why=state.why))
                    continue
                reason = rule.check(view, match, env)
                if reason:
                    refused[rule.name] += 1
                    _note(ctx, match.root, coded("fusion.not_fired", rule=rule.name, why=reason))
                    continue
                fused = rule.rewrite(view, match, env)
                fired[rule.name] += 1
                self._report(ctx, fused, rule, match, fusions, op_chains)
        stats.update(fused=dict(fired), switched_off=dict(off), not_fired=dict(refused))
        return PassResult(changed=bool(fired), stats=stats)

    @staticmethod
    def _unfuse(ctx) -> list:
        """Take Grappler's remapper fusions apart (see unfuse.py); report each, warn about those left fused."""
        done, left = [], []
        for name in remapped_nodes(ctx.view):
            result = unfuse(ctx.view, name)
            if isinstance(result, str):
                left.append(name)
                _note(ctx, name, coded("fusion.remapper_kept", why=result))
                continue
            done.append(result)
            _note(ctx, name, coded("fusion.remapper_unfused", ops=[op for _, op in result.chain],
                                   fused=result.description))
            for part, op in result.chain[:-1]:
                _note(ctx, part, coded("fusion.remapper_rebuilt", node=name, fused=result.description))
        if left:
            ctx.report.warn(REMAPPER_NOTE.format(count=len(left), examples=", ".join(left[:3])))
        return done

    def _report(self, ctx, fused, rule, match, fusions: "dict[str, _Fused]", op_chains: dict) -> None:
        # The fused node keeps the root's name: match.root, the view's str (protobuf makes a new one
        # at each read of fused.name, and the absorbed map would keep one per fused node).
        root = match.root
        names, ops = zip(*fused_from(fused))
        earlier = fusions.get(match.nodes[0]) if len(match.nodes) == 2 else None
        if earlier is not None and names == earlier.names + (root,):
            names = None  # a fused node fused again with one more node: read from the earlier fusion
        elif names == match.nodes:  # not fused before: the view's strs (each name read from the attr is new)
            names = match.nodes
        else:  # the strs of the match and of the earlier fusions
            known = dict(zip(match.nodes, match.nodes))
            for name in match.nodes:
                before = fusions.get(name)
                if before is not None:
                    known.update(zip(before.names, before.names))
            names = tuple(known.get(name, name) for name in names)
        ops = op_chains.setdefault(ops, ops)
        note = fusions[root] = _Fused(rule.name, sys.intern(fused.op), root, names, ops, earlier)
        _note(ctx, root, note)
        absorbed = self._absorbed
        for name in match.nodes[:-1]:
            absorbed[name] = root
            _note(ctx, name, note)  # the same object: it words itself for a node fused away

    def finish(self, ctx: PassContext) -> None:
        """A node fused away runs as part of its fused op: it takes that op's list, dtype, placement and GeOp."""
        absorbed = self._absorbed
        for name in absorbed:
            target = name
            while target in absorbed:  # Conv2D -> fused conv -> fused conv with Relu
                target = absorbed[target]
            fused, record = ctx.report.nodes.get(target), ctx.report.nodes.get(name)
            if fused is None or record is None:
                continue
            record.list, record.dtype_after = fused.list, fused.dtype_after
            record.placement, record.geop = fused.placement, fused.geop
            if target != absorbed[name]:
                record.add_reason(coded("fusion.runs_inside", target=target, via=absorbed[name]))


class _Fused(LazyReason):
    """A fusion's reason, made when read: on the fused node "fusion.fused_by" ("fused by <rule>: <a> (<op>)
    + ... -> <fused op>"), on a node fused away "fusion.fused_into" ("fused into <root> (<fused op>) by
    <rule>"). One object per
    fusion, on all its nodes, and no tuple of names for a fused node fused again with one more node
    (a sentence per fusion, and one per node fused away, were a sixth of the peak on a dense graph)."""

    __slots__ = ("rule", "op", "root", "_names", "ops", "_earlier")

    def __init__(self, rule: str, op: str, root: str, names: "tuple[str, ...] | None", ops: tuple[str, ...],
                 earlier: "_Fused | None" = None):
        """`names` None: the earlier fusion's names and then `root`."""
        self.rule, self.op, self.root, self._names, self.ops = rule, op, root, names, ops
        self._earlier = earlier if names is None else None

    @property
    def names(self) -> tuple[str, ...]:
        """The original nodes the fused node replaces, in order."""
        return self._earlier.names + (self.root,) if self._names is None else self._names

    def reason_for(self, name: str) -> Reason:
        if name != self.root:
            return Reason("fusion.fused_into", {"root": self.root, "op": self.op, "rule": self.rule})
        return Reason("fusion.fused_by", {"rule": self.rule, "nodes": list(self.names), "ops": list(self.ops),
                                          "op": self.op})


def _note(ctx, name: str, text: "Reason | _Fused") -> NodeDecision:
    record = ctx.report.nodes.get(name)
    if record is None:
        node = ctx.view.get(name)
        dtype = node_dtype(node) if node is not None else None
        record = ctx.report.nodes[name] = NodeDecision(name=name, op=node.op if node is not None else "",
                                                       dtype_before=dtype, dtype_after=dtype)
    record.add_reason(text)
    return record
