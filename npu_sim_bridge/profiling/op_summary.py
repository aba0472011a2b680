"""`npu-sim profile --summary`: an op_summary-style CSV over steps, by role and op type.

One row per (role, task type, op type) over the selected steps: how many times the op type ran, its total,
average, minimum and maximum microseconds and its share of the role's op time. Column names are the real
profiler's where they apply: "Model Name", "OP Type" and "Task Type" from op_summary (the column list
npu_sim_bridge.estimate.output keeps), "Count", "Total Time(us)", "Avg Time(us)", "Min Time(us)",
"Max Time(us)" and "Ratio(%)" as the real profiler's op_statistic names them. "Model Name" is the step's
role (train, eval, init, checkpoint, unknown), so the init run and an evaluation are never mixed into the
training figures. "Task Type" is DEVICE for an op inside a GeOp (run on the CPU here) and HOST for a host op.
Where a trace holds the GeOps without their ops (training_trace only), each GeOp is one row of op type GeOp.

skip: the first `skip` training steps of each profiled Session (each run folder) are left out (warm-up).
The measured figures are CPU times of the simulation; the estimated NPU track is not counted.
"""

from __future__ import annotations

import collections
import csv
import dataclasses
import io
import os

from npu_sim_bridge.estimate.output import OP_SUMMARY_COLUMNS
from npu_sim_bridge.profiling.estimated import ESTIMATE_PID
from npu_sim_bridge.profiling.roles import TRAIN
from npu_sim_bridge.profiling.summary import load_traces, role_of

_OWN = tuple(name for name in OP_SUMMARY_COLUMNS if name in ("Model Name", "OP Type", "Task Type"))
STATISTIC_COLUMNS = ("Count", "Total Time(us)", "Avg Time(us)", "Min Time(us)", "Max Time(us)", "Ratio(%)")
COLUMNS = _OWN + STATISTIC_COLUMNS


@dataclasses.dataclass
class OpSummary:
    rows: list                     # dicts keyed by COLUMNS
    steps: dict                    # role -> [(run folder, step)] summed
    skipped: list                  # (run folder, step) of the training steps left out as warm-up


def op_summary(path: str, skip: int = 0) -> OpSummary:
    """Sum the step traces at `path` by role and op type, leaving out each run's first `skip` training steps."""
    times: dict = collections.defaultdict(list)
    steps: dict = collections.defaultdict(list)
    skipped: list = []
    trained: collections.Counter = collections.Counter()
    for file, trace in load_traces(path):
        run = os.path.dirname(file)
        role = role_of(trace)
        step = trace.get("metadata", {}).get("step")
        if role == TRAIN:
            trained[run] += 1
            if trained[run] <= skip:
                skipped.append((run, step))
                continue
        steps[role].append((run, step))
        events = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("pid") != ESTIMATE_PID]
        inner = any(e.get("cat") != "GeOp" and e.get("args", {}).get("where") == "device" for e in events)
        for event in events:
            is_geop = event.get("cat") == "GeOp"
            if is_geop and inner:  # the GeOp spans only when the trace has no ops inside them
                continue
            where = "DEVICE" if is_geop or event.get("args", {}).get("where") == "device" else "HOST"
            op_type = "GeOp" if is_geop else event.get("args", {}).get("op", event.get("cat", "?"))
            times[(role, where, op_type)].append(float(event["dur"]))
    totals = collections.Counter()
    for (role, _, _), values in times.items():
        totals[role] += sum(values)
    rows = []
    for (role, where, op_type), values in sorted(times.items(), key=lambda kv: (_order(kv[0][0]), -sum(kv[1]))):
        total = sum(values)
        rows.append({"Model Name": role, "OP Type": op_type, "Task Type": where, "Count": len(values),
                     "Total Time(us)": round(total, 3), "Avg Time(us)": round(total / len(values), 3),
                     "Min Time(us)": round(min(values), 3), "Max Time(us)": round(max(values), 3),
                     "Ratio(%)": round(100.0 * total / totals[role], 2) if totals[role] else 0.0})
    return OpSummary(rows, dict(steps), skipped)


def _order(role: str) -> tuple:
    return (role != TRAIN, role)


def to_csv(summary: OpSummary) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(summary.rows)
    return out.getvalue()


def describe_steps(summary: OpSummary, skip: int) -> str:
    """Which steps each role's rows sum, and which were skipped: the lines printed above or beside the CSV.
    With several runs (Sessions) the steps are named "<run>:<step>" and a last line names the runs' folders."""
    runs = sorted({run for picked in summary.steps.values() for run, _ in picked} | {run for run, _ in summary.skipped})
    index = {run: number for number, run in enumerate(runs, 1)} if len(runs) > 1 else {}
    lines = [f"{role}: {len(summary.steps[role])} step(s) {_steps_text(summary.steps[role], index)}"
             for role in sorted(summary.steps, key=_order)]
    if summary.skipped:
        lines.append(f"skipped (--skip {skip}, warm-up): training step(s) {_steps_text(summary.skipped, index)}")
    if TRAIN not in summary.steps:
        lines.append("no training step " + ("left after --skip" if summary.skipped else "in these traces")
                     + ": the rows are of other roles only")
    if "unknown" in summary.steps:
        lines.append("unknown: traces that do not record their role (written before roles were recorded, or "
                     "their fetches could not be resolved)")
    if index:
        lines.append("runs: " + "; ".join(f"{number} = {run}" for run, number in index.items()))
    return "\n".join(lines) + "\n"


def _steps_text(pairs: list, index: dict) -> str:
    numbers = [f"{index[run]}:{step}" if index else str(step) for run, step in pairs]
    return ", ".join(numbers[:12]) + (f", ... ({len(numbers) - 12} more)" if len(numbers) > 12 else "")


def to_dict(summary: OpSummary, skip: int) -> dict:
    return {"columns": list(COLUMNS), "rows": summary.rows, "skip": skip,
            "steps": {role: [{"run": run, "step": step} for run, step in picked]
                      for role, picked in summary.steps.items()},
            "skipped": [{"run": run, "step": step} for run, step in summary.skipped]}
