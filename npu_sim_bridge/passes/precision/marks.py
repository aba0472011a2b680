"""The attrs the precision pass leaves on the nodes it inserts or retypes, so a later run recognises them."""

from __future__ import annotations

MARK_ATTR = "_npu_sim_precision"     # "<mode>:<execution>" on every node the pass inserted or retyped
INSERTED_ATTR = "_npu_sim_inserted"  # on the Casts the pass inserted
ORIG_PREFIX = "_npu_sim_orig_"       # the original value of a type attr the pass changed


def setting(mode: str, emulate: bool) -> str:
    """The mark value for a mode and execution, e.g. 'allow_mix_precision:emulate'."""
    return f"{mode}:{'emulate' if emulate else 'native'}"


def is_inserted(node) -> bool:
    return INSERTED_ATTR in node.attr and node.attr[INSERTED_ATTR].b


def recorded(nodes) -> set[str]:
    """The settings recorded by an earlier run on these nodes (empty when none was rewritten)."""
    return {node.attr[MARK_ATTR].s.decode() for node in nodes if MARK_ATTR in node.attr}
