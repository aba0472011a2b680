"""The advisor: the bottlenecks of an estimated step, each with its share of the step and what to do about it."""

from __future__ import annotations

import dataclasses
from collections import Counter

from npu_sim_bridge.estimate.ops import AICPU, CUBE, FORMAT, HOST, VECTOR
from npu_sim_bridge.estimate.step import StepEstimate
from npu_sim_bridge.estimate.walk import PY_FUNCS


@dataclasses.dataclass
class Bottleneck:
    """One finding: a code, the step time it accounts for, the ops it names and the advice."""

    code: str
    us: float
    share: float
    ops: list
    advice: str

    def to_dict(self) -> dict:
        return {"code": self.code, "us": round(self.us, 1), "share": round(self.share, 4),
                "ops": self.ops[:10], "op_count": len(self.ops), "advice": self.advice}


def _names(items) -> list:
    counts = Counter(item.record.op for item in items)
    return [f"{op} x{n}" if n > 1 else op for op, n in counts.most_common()]


def advise(step: StepEstimate) -> list:
    """Every bottleneck found, the largest share first."""
    total = step.step_us or 1.0
    found: list = []

    def add(code, us, ops, advice):
        if ops or us:
            found.append(Bottleneck(code, us, us / total, ops, advice))

    device = [o for o in step.ops if o.record.geop is not None]
    aicpu = [o for o in device if o.record.work.unit == AICPU]
    if aicpu:
        add("aicpu_ops", sum(o.us for o in aicpu), _names(aicpu),
            "these ops run on the 4 AI CPU cores, not the AI Cores: replace them with ops the AI Core library has "
            "(e.g. tf.pad with mode CONSTANT instead of MirrorPad), or move them into the input pipeline")
    splitters = set(step.walked.splitters)
    host = [o for o in step.ops if o.record.work.unit == HOST]
    if host or splitters or len(step.walked.geops) > 1:
        us = sum(o.us for o in host) + sum(t for _, t in step.transfers) + _round_trips(step)
        named = _names([o for o in host if o.record.name in splitters] or host) or sorted(splitters)
        py = any(o.record.op in PY_FUNCS for o in host)
        where = (f"around {len(step.walked.geops)} GeOp(s), each GeOp a device launch with copies both ways"
                 if step.walked.geops else "and no GeOp runs: the report says why each node stayed there")
        add("host_split", us, named, f"{len(host)} ops of the step run on the host {where}" +
            ("; a py_func always runs on the host and keeps the ops next to it there: rewrite it in TensorFlow "
             "ops" if py else "; make them device ops or move them before or after the device part") +
            " (mix_compile_mode keeps such graphs running, it does not make them fast)")
    fp32 = [o for o in device if o.record.work.fp32_cube and o.time.convert_us > 0]
    if fp32:
        mode = step.options.get("precision_mode") or "the default"
        add("fp32_cube", sum(o.us for o in fp32), _names(fp32),
            f"float32 matmuls/convolutions under precision_mode {mode}: the 910's cube computes in float16 only, "
            "so each converts its inputs and output; use allow_mix_precision or allow_fp32_to_fp16")
    formats = [o for o in device if o.record.op in FORMAT]
    if formats:
        add("format_conversion", sum(o.us for o in formats), _names(formats),
            "Transpose/TransData ops move whole tensors without arithmetic: keep one data format (NHWC) "
            "through the model and avoid transposes around matmuls (use transpose_a/transpose_b)")
    small = [o for o in device if o.record.work.unit in (CUBE, VECTOR)
             and (o.time.bound == "launch" or o.time.cores_used < _cores(step, o))]
    if small:
        add("small_kernels", sum(o.us for o in small), _names(small),
            f"{len(small)} kernels are too small to fill the {int(step.hw['cube_cores'])} AI Cores or are "
            "dominated by their launch cost: raise the batch size, or fuse small ops")
    dynamic = [o for o in step.ops if not o.record.work.static]
    if dynamic or step.walked.loops:
        add("dynamic_shapes", sum(o.us for o in dynamic), _names(dynamic) + step.walked.loops,
            "shapes unknown before the run (or loops of unknown length) make the real toolchain compile per "
            "shape or fall back: give the batch and sequence static sizes (pad to a few fixed lengths, "
            "drop_remainder=True)")
    if step.iterations_per_loop == 1 and step.walked.geops:
        fed = sum(t for b, t in step.transfers if b.direction == "in")
        add("host_round_trip", step.run_overhead_us + fed, ["Session.run per step"],
            "every step returns to the host (iterations_per_loop=1): sink the loop with iterations_per_loop>1 "
            "(NPURunConfig(iterations_per_loop=N) or util.set_iteration_per_loop) and feed from a tf.data "
            "dataset on the device instead of feed_dict")
    return sorted(found, key=lambda b: -b.share)


def _round_trips(step: StepEstimate) -> float:
    extra = len(step.walked.geops) - 1
    return step.run_overhead_us * extra / max(len(step.walked.geops), 1) if extra > 0 else 0.0


def _cores(step: StepEstimate, item) -> int:
    key = "cube_cores" if item.record.work.unit == CUBE else "vector_cores"
    return int(step.hw[key])
