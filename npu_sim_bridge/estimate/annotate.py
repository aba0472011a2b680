"""The estimate attached to the rewrite's report: every node's unit and time, and the report files written with it.

Only `npu-sim estimate --report DIR` (or a caller of `annotate`) pays for this; a Session's own rewrite
leaves the report without estimate keys. Each node row of the report JSON gets "npu_unit" (cube, vector,
aicpu, host; None for a node the step does not run, or runs without a kernel) and "npu_us" (microseconds
per step; 0.0 for a node the step runs without a kernel, None for a node it does not run); the summary gets
"estimate" (step_ms, step_ms_range, samples_per_s, cube_peak_share, by_unit in ms, soc, note).
"""

from __future__ import annotations

import os

from npu_sim_bridge.estimate.ops import FREE
from npu_sim_bridge.estimate.output import to_dict
from npu_sim_bridge.estimate.step import StepEstimate


def node_estimates(step: StepEstimate) -> dict:
    """{node name: (unit or None, microseconds per step)} for every op the step runs (an op run more than
    once, as a function body called twice, sums its runs)."""
    found: dict = {}
    for item in step.ops:
        unit = item.record.work.unit
        name = item.record.name
        us = 0.0 if unit == FREE else item.us
        before = found.get(name)
        found[name] = (before[0] if before and before[0] else (None if unit == FREE else unit),
                       round((before[1] if before else 0.0) + us, 3))
    return found


def estimate_summary(step: StepEstimate) -> dict:
    """The summary's "estimate" object: the step, its range, samples/s and the split by unit (ms)."""
    d = to_dict(step, top=0)
    keys = ("note", "soc", "batch", "iterations_per_loop", "step_ms", "step_ms_range", "samples_per_s",
            "cube_peak_share", "by_unit")
    return {key: d[key] for key in keys}


def annotate(report, step: StepEstimate):
    """Attach the estimate to `report` (the rewrite's Report): its JSON and text then carry it. Returns it."""
    report.estimate = {"summary": estimate_summary(step), "nodes": node_estimates(step)}
    return report


def write_report(step: StepEstimate, directory: str, before) -> list:
    """Write the annotated report of the estimated graph to `directory`: <graph id>.json and .txt, the graphs
    before and after (.pbtxt), a TensorBoard run and the HTML picture. Returns the paths written."""
    from npu_sim_bridge.errors import ConfigError
    from npu_sim_bridge.fileio import unique_base, write_atomic
    from npu_sim_bridge.report.views import write_views

    report = annotate(step.rewrite.report, step)
    try:
        os.makedirs(directory, exist_ok=True)
        base = unique_base(directory, report.graph_id)
        write_atomic(base + ".json", report.to_json(), "report")
        write_atomic(base + ".txt", report.to_text(), "report")
        return [base + ".json", base + ".txt", *write_views(base, report, before, step.rewrite.graph_def)]
    except OSError as err:
        raise ConfigError(f"--report {directory!r}: cannot write the report there ({err}); "
                          "point it at a writable directory") from err
