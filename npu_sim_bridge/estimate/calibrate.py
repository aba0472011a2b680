"""Fits the fitted constants (cube_efficiency, vector_traffic) to the two measured 910 throughputs of the facts file."""

from __future__ import annotations

import dataclasses

from npu_sim_bridge.estimate.hardware import FITTED, Hardware, hardware
from npu_sim_bridge.estimate.step import StepEstimate, estimate_step

# The measured runs: mixed precision, the training loop sunk to the device (ModelZoo scripts use
# iterations_per_loop=100 or more) with the data read on the device.
MEASURED_OPTIONS = {"precision_mode": "allow_mix_precision", "iterations_per_loop": "100"}


@dataclasses.dataclass(frozen=True)
class Anchor:
    """A measured throughput: model, batch, samples/s, and the builder arguments that make its graph."""

    name: str
    batch: int
    samples_per_s: float
    builder: str
    kwargs: dict


# MindSpore r0.5 benchmark page, one Ascend 910 (../shared/reference/ascend910_hardware.md). BERT is built
# without tf.nn.dropout: its RandomUniform has no AI Core kernel and would run on AI CPU, while the measured
# run used the vendor's dropout (DropOutGenMask/DropOutDoMask on the AI Core).
ANCHORS = (
    Anchor("ResNet-50 v1.5", 256, 2115.0, "resnet50", {"batch_size": 256}),
    Anchor("BERT-Large seq 128", 96, 269.0, "bert", {"batch_size": 96, "num_layers": 24, "hidden": 1024,
                                                    "heads": 16, "intermediate": 4096, "seq_len": 128,
                                                    "dropout": 0.0}),
)


def anchor_steps(anchors=ANCHORS, soc: str | None = None) -> list:
    """Each anchor's model built at its batch and estimated with the table's constants: [(anchor, step)]."""
    from npu_sim_bridge.estimate.api import estimate
    from npu_sim_bridge.testing import models

    result = []
    for anchor in anchors:
        model = getattr(models, anchor.builder)(**anchor.kwargs)
        result.append((anchor, estimate(model.meta_graph_def(), MEASURED_OPTIONS, soc=soc)))
    return result


def retime(step: StepEstimate, hw: Hardware) -> StepEstimate:
    """The same walked step timed with other constants (no rewrite, no shapes: the fit's inner loop)."""
    return estimate_step(step.walked, hw, step.batch, step.options)


def error(step: StepEstimate, anchor: Anchor) -> float:
    """Estimated over measured samples/s, minus one."""
    return step.samples_per_s / anchor.samples_per_s - 1.0


def _parts(step: StepEstimate, base: Hardware):
    """Per unit, arrays of each op's compute and memory time at cube_efficiency 1 and vector_traffic 1, and
    the time that depends on neither."""
    import numpy as np

    from npu_sim_bridge.estimate.timing import roofline_parts

    unit_hw = base.with_values(cube_efficiency=1.0, vector_traffic=1.0)
    arrays = {"cube": ([], []), "vector": ([], [])}
    fixed = step.by_unit["aicpu"] + step.by_unit["host"] + step.by_unit["transfers"] + step.run_overhead_us
    for item in step.ops:
        unit = item.record.work.unit
        if unit in arrays:
            compute, memory, _ = roofline_parts(item.record.work, unit_hw, item.record.width)
            if unit == "vector":
                compute = roofline_parts(item.record.work, base, item.record.width)[0]
            arrays[unit][0].append(compute)
            arrays[unit][1].append(memory)
            fixed += item.us - max(*roofline_parts(item.record.work, base, item.record.width)[:2])
    return {u: (np.array(c), np.array(m)) for u, (c, m) in arrays.items()}, fixed


def fit(pairs, base: Hardware | None = None) -> dict:
    """cube_efficiency and vector_traffic minimising the largest log error of samples/s over the anchors:
    a log grid from 0.01 to 1, then three finer grids around the best point."""
    import numpy as np

    base = base or hardware()
    prepared = [(anchor, step.batch, _parts(step, base)) for anchor, step in pairs]
    span, best = (np.log(0.01), 0.0), None
    for _ in range(4):
        grid = np.exp(np.linspace(span[0], span[1], 41))
        a, b = np.meshgrid(grid, grid, indexing="ij")
        worst = np.zeros_like(a)
        for anchor, batch, (arrays, fixed) in prepared:
            (cc, cm), (vc, vm) = arrays["cube"], arrays["vector"]
            cube = np.maximum(cc[None, :] / a.reshape(-1, 1), cm[None, :]).sum(axis=1).reshape(a.shape)
            vector = np.maximum(vc[None, :], vm[None, :] * b.reshape(-1, 1)).sum(axis=1).reshape(b.shape)
            rate = batch / ((cube + vector + fixed) * 1e-6)
            worst = np.maximum(worst, np.abs(np.log(rate / anchor.samples_per_s)))
        i, j = np.unravel_index(np.argmin(worst), worst.shape)
        best = (float(a[i, j]), float(b[i, j]))
        step = (span[1] - span[0]) / 10
        lo, hi = np.log(min(best)) - step, np.log(max(best)) + step
        span = (max(np.log(0.01), lo), min(0.0, hi))
    return {"cube_efficiency": round(best[0], 4), "vector_traffic": round(best[1], 4)}


def fitted_keys(hw: Hardware | None = None) -> list:
    """The constants the table marks fitted."""
    hw = hw or hardware()
    return [key for key, c in hw.constants.items() if c.source == FITTED]
