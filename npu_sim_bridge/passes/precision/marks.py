"""The attrs the precision pass leaves on the nodes it inserts or retypes, so a later run recognises them."""

from __future__ import annotations

MARK_ATTR = "_npu_sim_precision"     # "<mode>:<execution>" on every node the pass inserted or retyped
INSERTED_ATTR = "_npu_sim_inserted"  # on the Casts (and rounding kernels) the pass inserted
ORIG_PREFIX = "_npu_sim_orig_"       # the original value of a type attr the pass changed

# The emulation's float16 rounding as one kernel (native/npu_ops.cc): float32 in, float32 out holding
# exactly what Cast(float32 -> float16) then Cast(float16 -> float32) give.
ROUND_OP = "NpuSimRoundToFloat16"
CONVERSION_OPS = frozenset({"Cast", ROUND_OP})


def setting(mode: str, emulate: bool) -> str:
    """The mark value for a mode and execution, e.g. 'allow_mix_precision:emulate'."""
    return f"{mode}:{'emulate' if emulate else 'native'}"


def is_inserted(node) -> bool:
    return INSERTED_ATTR in node.attr and node.attr[INSERTED_ATTR].b


def is_inserted_conversion(node) -> bool:
    """A Cast or float16 rounding kernel the precision pass inserted."""
    return node.op in CONVERSION_OPS and is_inserted(node)
