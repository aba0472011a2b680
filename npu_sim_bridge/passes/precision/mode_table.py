"""What each precision mode makes of an operator-library op: the dtype it runs in on the NPU and why, or
None where the gray rule (gray.py) decides; and the error of must_keep_origin_dtype.

An op without the kernel a mode wants takes the other dtype; a black op without a float32 kernel runs
float32 as an AI CPU fallback (force_fp32 and the mix modes). Only the mix-precision modes leave gray
ops to the gray rule; in the others every op decides for itself.
"""

from __future__ import annotations

import collections

from npu_sim_bridge.errors import ConfigError, UnsupportedGraphError
from npu_sim_bridge.passes.precision.lists import BLACK, WHITE
from npu_sim_bridge.passes.precision.plan import FP16, FP32, MIX_MODES, ModeInfo, Plan, name_of


class PrecisionModeError(UnsupportedGraphError, ConfigError):
    """The precision mode cannot be honoured for ops of this graph (must_keep_origin_dtype)."""


def supports(info, dtype: int) -> bool:
    """Whether the op `info` describes has a kernel for `dtype` on Ascend 910."""
    if dtype == FP32:
        return info.supports_fp32
    if dtype == FP16:
        return info.supports_fp16
    # The Ascend 910 library lists no bfloat16; a half-precision kernel stands for it.
    return info.supports_bf16 or info.supports_fp16


def fixed_decision(plan: Plan, info, mode_info: ModeInfo, why, must_keep_failures: list):
    """(npu dtype, reason) for a library op, or None when the gray rule decides. `why(code, **details)`
    makes the reason; a must_keep_origin_dtype op without its kernel is appended to `must_keep_failures`
    as (op, node, dtype)."""
    mode, low, orig = mode_info.mode, mode_info.low, plan.orig
    sup = lambda dtype: supports(info, dtype)  # noqa: E731
    if mode == "force_fp32":
        if sup(FP32):
            return FP32, why("precision.forced", mode=mode) if orig == FP32 else \
                why("precision.forced_up", mode=mode, dtype=name_of(orig))
        if plan.colour == BLACK:
            return FP32, why("precision.ai_cpu", rule=plan.rule)
        return FP16, why("precision.no_kernel", dtype="float32")
    if mode == "force_fp16":
        if sup(FP16):
            return FP16, why("precision.forced", mode=mode)
        return FP32, why("precision.no_kernel", dtype="float16")
    if mode not in MIX_MODES:
        if mode == "cube_fp16in_fp32out" and info.is_cube and orig == FP32:
            plan.cube_split = True
            return FP16, why("precision.cube_split")
        if sup(orig):
            return orig, why("precision.mode_keeps", mode=mode_info.mode_text, dtype=name_of(orig))
        if mode == "must_keep_origin_dtype":
            must_keep_failures.append((plan.op, plan.name, orig))
            return orig, why("precision.mode_keeps", mode=mode_info.mode_text, dtype=name_of(orig))
        if orig == FP32:
            return low, why("precision.no_kernel", dtype="float32")
        return FP32, why("precision.no_kernel", dtype=name_of(orig))
    # allow_mix_precision(_fp16/_bf16): only float32 ops are lowered.
    if orig != FP32:
        if sup(orig):
            return orig, why("precision.mix_keeps", dtype=name_of(orig))
        return FP32, why("precision.no_kernel", dtype=name_of(orig))
    if not sup(FP32):
        if plan.colour == BLACK:
            return FP32, why("precision.ai_cpu", rule=plan.rule)
        return low, why("precision.no_kernel", dtype="float32")
    if not sup(low):
        return FP32, why("precision.list_no_kernel", rule=plan.rule, dtype=name_of(low))
    if plan.colour == WHITE:
        return low, _list_reason(plan, "precision.white_list", why)
    if plan.colour == BLACK:
        return FP32, _list_reason(plan, "precision.black_list", why)
    return None


def _list_reason(plan: Plan, code: str, why):
    """A white or black list op's reason: the built-in list's, or the modify_mixlist rule that put it there."""
    if plan.rule == ("white list" if code == "precision.white_list" else "black list"):
        return why(code)
    return why("precision.modify_mixlist", rule=plan.rule)


def must_keep_error(mode_info: ModeInfo, failures: list[tuple[str, str, int]]) -> PrecisionModeError:
    """The one error naming every op (op, node, dtype) must_keep_origin_dtype could not keep."""
    by_op: dict[str, list[str]] = collections.OrderedDict()
    dtypes = set()
    for op, name, dtype in failures:
        by_op.setdefault(op, []).append(name)
        dtypes.add(name_of(dtype))

    def listed(names):
        shown = ", ".join(names[:5])
        return shown + (f" and {len(names) - 5} more" if len(names) > 5 else "")

    parts = [f"{op} ({listed(names)})" for op, names in by_op.items()]
    subject = f"op {parts[0]} has" if len(parts) == 1 and len(by_op[next(iter(by_op))]) == 1 else \
        f"ops {', '.join(parts)} have"
    return PrecisionModeError(
        f"{mode_info.mode_key} {mode_info.mode_text}: {subject} no {' or '.join(sorted(dtypes))} support "
        f"on Ascend 910; use allow_fp32_to_fp16 or allow_mix_precision")
