"""The attrs the precision pass leaves on the nodes it inserts or retypes, so a later run recognises them."""

from __future__ import annotations

from npu_sim_bridge.graph.attr_names import INSERTED_ATTR, ORIG_PREFIX, PRECISION_ATTR  # noqa: F401 (read by the precision modules)
from npu_sim_bridge.graph.op_categories import ROUND_OP

CONVERSION_OPS = frozenset({"Cast", ROUND_OP})


def setting(mode: str, emulate: bool) -> str:
    """The mark value for a mode and execution, e.g. 'allow_mix_precision:emulate'."""
    return f"{mode}:{'emulate' if emulate else 'native'}"


def is_inserted(node) -> bool:
    return INSERTED_ATTR in node.attr and node.attr[INSERTED_ATTR].b


def is_inserted_conversion(node) -> bool:
    """A Cast or float16 rounding kernel the precision pass inserted."""
    return node.op in CONVERSION_OPS and is_inserted(node)
