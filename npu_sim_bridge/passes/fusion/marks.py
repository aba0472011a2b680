"""The attrs the fusion pass leaves on a fused node (which rules made it, from which nodes) and how to read them."""

from __future__ import annotations

from npu_sim_bridge.graph.attr_names import FUSED_FROM_ATTR, FUSION_ATTR



def fusion_rules(node) -> list[str]:
    """The rules that made `node` (empty when the fusion pass did not make it)."""
    if FUSION_ATTR not in node.attr:
        return []
    return [value.decode("utf-8") for value in node.attr[FUSION_ATTR].list.s]


def fused_from(node) -> list[tuple[str, str]]:
    """(name, op) of the original nodes a fused node replaces."""
    if FUSED_FROM_ATTR not in node.attr:
        return []
    pairs = []
    for value in node.attr[FUSED_FROM_ATTR].list.s:
        name, _, op = value.decode("utf-8").rpartition(":")
        pairs.append((name, op))
    return pairs

