"""Fusion: named fusion rules of Ascend's graph engine as rewrites onto TensorFlow's fused kernels.

marks.py   the attrs a fused node carries (rules, original nodes) and the op it is judged as
switch.py  the fusion_switch_file (GraphFusion / UBFusion, ALL and per-rule entries)
rules.py   the rules: pattern (match), check (why it does not fire), rewrite
pass_.py   the GraphPass named "fusion"
apart.py   on a CPU with oneDNN, a fused MatMul of a GeOp body runs as its ops (the same bits, cheaper)
"""

from npu_sim_bridge.passes.fusion.apart import FusedMatMulApartPass
from npu_sim_bridge.passes.fusion.pass_ import FusionPass
from npu_sim_bridge.passes.fusion.rules import FusionRule, all_rules
from npu_sim_bridge.passes.fusion.switch import FusionSwitch, FusionSwitchWarning, load_switch, parse_switch

__all__ = ["FusedMatMulApartPass", "FusionPass", "FusionRule", "FusionSwitch", "FusionSwitchWarning", "all_rules",
           "load_switch", "parse_switch", "describe_rules"]


def describe_rules(fusion_switch_file: str | None = None) -> tuple[list[dict], list[str]]:
    """(one row per rule: name, kind, pattern, fused op, can be switched off, state, description; warnings)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FusionSwitchWarning)
        switch = load_switch(fusion_switch_file)
        rules = all_rules()
        switch.check_names(rules)
    rows = []
    for rule in rules:
        state = switch.state(rule)
        rows.append({"name": rule.name, "kind": rule.kind, "pattern": rule.pattern, "fused_op": rule.fused_op,
                     "can_switch_off": rule.can_disable, "state": "on" if state.on else "off",
                     "why": state.why, "description": rule.description})
    return rows, list(switch.warnings)
