"""The attrs the fusion pass leaves on a fused node (which rules made it, from which nodes) and how to read them."""

from __future__ import annotations

FUSION_ATTR = "_npu_sim_fusion"          # list(string): the rules that made the node, in the order they fired
FUSED_NODES_ATTR = "_npu_sim_fused_from"  # list(string): "<name>:<op>" of the original nodes it replaces

# TensorFlow's fused kernels and the op whose list, dtypes and device support they take.
FUSED_BASE = {"_FusedMatMul": "MatMul", "_FusedConv2D": "Conv2D"}


def fusion_rules(node) -> list[str]:
    """The rules that made `node` (empty when the fusion pass did not make it)."""
    if FUSION_ATTR not in node.attr:
        return []
    return [value.decode("utf-8") for value in node.attr[FUSION_ATTR].list.s]


def fused_from(node) -> list[tuple[str, str]]:
    """(name, op) of the original nodes a fused node replaces."""
    if FUSED_NODES_ATTR not in node.attr:
        return []
    pairs = []
    for value in node.attr[FUSED_NODES_ATTR].list.s:
        name, _, op = value.decode("utf-8").rpartition(":")
        pairs.append((name, op))
    return pairs


def fused_base_op(node) -> str | None:
    """For a node the fusion pass made: the op type it is judged as (MatMul for _FusedMatMul); else None."""
    if FUSION_ATTR not in node.attr:
        return None
    return FUSED_BASE.get(node.op)
