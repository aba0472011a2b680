"""The estimate as text for people, one JSON object for programs, and an op_summary-style CSV."""

from __future__ import annotations

import csv
import io
import json

from npu_sim_bridge.estimate.advisor import advise
from npu_sim_bridge.estimate.hardware import DEFAULT, FITTED
from npu_sim_bridge.estimate.ops import FREE
from npu_sim_bridge.estimate.step import StepEstimate

# The real profiler's op_summary columns (../shared/reference/ascend910_hardware.md), in its order.
OP_SUMMARY_COLUMNS = (
    "Model Name", "Model ID", "Task ID", "Stream ID", "Infer ID", "Op Name", "OP Type", "Task Type",
    "Task Start Time", "Task Duration(us)", "Task Wait Time(us)", "Block Dim", "Input Shapes", "Input Data Types",
    "Input Formats", "Output Shapes", "Output Data Types", "Output Formats", "aicore_time(us)", "total_cycles",
    "vec_time(us)", "vec_ratio", "mac_time(us)", "mac_ratio", "scalar_time(us)", "scalar_ratio", "memory_bound")
_TASK_TYPE = {"cube": "AI_CORE", "vector": "AI_CORE", "aicpu": "AI_CPU", "host": "HOST"}
NOTE = ("an estimate from a roofline model calibrated on two measured throughputs, not a measurement")
# The constants each unit's time rests on (npu_sim_bridge/estimate/hardware.py), for "rests_on".
UNIT_CONSTANTS = {
    "cube": ("cube_efficiency", "clock_mhz", "cube_cores", "task_overhead_us"),
    "vector": ("vector_traffic", "hbm_gbps", "hbm_efficiency", "vector_efficiency", "task_overhead_us"),
    "aicpu": ("aicpu_task_us", "aicpu_gflops", "aicpu_gbps"),
    "host": ("host_op_us", "host_gbps"),
    "transfers": ("host_link_gbps", "transfer_us"),
    "run_overhead": ("run_overhead_us",),
}


def to_dict(step: StepEstimate, top: int = 10, every_op: bool = False) -> dict:
    """The estimate as one JSON-ready object; `every_op` adds "ops": every op of the step with its unit and
    time, by the node name the report uses (join the two on it)."""
    low, high = step.range_us()
    costed = sorted((o for o in step.ops if o.record.work.unit != FREE), key=lambda o: -o.us)
    return {
        "note": NOTE,
        "soc": step.hw.soc,
        "batch": step.batch,
        "iterations_per_loop": step.iterations_per_loop,
        "step_ms": round(step.step_us / 1e3, 3),
        "step_ms_range": [round(low / 1e3, 3), round(high / 1e3, 3)],
        "samples_per_s": round(step.samples_per_s, 1) if step.samples_per_s else None,
        "samples_per_s_range": ([round(step.batch / (high * 1e-6), 1), round(step.batch / (low * 1e-6), 1)]
                                if step.samples_per_s and low > 0 else None),
        "rests_on": rests_on(step),
        "cube_peak_share": round(step.cube_peak_share, 4),
        "by_unit": {unit: round(us / 1e3, 3) for unit, us in step.by_unit.items()},
        "geops": {name: round(us / 1e3, 3) for name, us in step.geop_us.items()},
        "top_ops": [_op_row(o, step.step_us) for o in costed[:top]],
        "bottlenecks": [b.to_dict() for b in advise(step)],
        "constants": {row["key"]: {"value": row["value"], "unit": row["unit"], "source": row["source"]}
                      for row in step.hw.rows()},
        "dynamic": step.walked.loops,
        **({"ops": [_op_row(o, step.step_us) for o in step.ops]} if every_op else {}),
    }


def rests_on(step: StepEstimate, least: float = 0.01) -> list:
    """The units carrying at least `least` of the step, largest first, each with its share and the constants
    its time rests on (value and source: datasheet, derived, fitted or default)."""
    rows = []
    total = step.step_us
    for unit, us in sorted(step.by_unit.items(), key=lambda kv: -kv[1]):
        if not total or us / total < least:
            continue
        constants = {key: {"value": step.hw[key], "source": step.hw.constants[key].source}
                     for key in UNIT_CONSTANTS[unit]}
        rows.append({"unit": unit, "share": round(us / total, 4), "constants": constants})
    return rows


def _op_row(item, total) -> dict:
    r = item.record
    return {"name": r.name, "op": r.op, "unit": r.work.unit, "geop": r.geop, "us": round(item.us, 2),
            "share": round(item.us / total, 4) if total else 0.0, "bound": item.time.bound,
            "gflops": round(r.work.flops / 1e9, 4), "mbytes": round(r.work.bytes / 1e6, 3), "dtype": r.dtype}


def to_json(step: StepEstimate, top: int = 10, every_op: bool = False) -> str:
    return json.dumps(to_dict(step, top, every_op), indent=2)


def to_text(step: StepEstimate, top: int = 10) -> str:
    """The estimate for people: the step, the split, top ops, bottlenecks and the constants it rests on."""
    d = to_dict(step, top)
    lines = [f"npu-sim estimate ({NOTE})", f"SoC {d['soc']}, batch {d['batch'] or 'unknown'}, "
             f"iterations_per_loop {d['iterations_per_loop']}",
             f"step: {d['step_ms']:.2f} ms (range {d['step_ms_range'][0]:.2f}-{d['step_ms_range'][1]:.2f} ms)"
             + (f", {d['samples_per_s']:.1f} samples/s (range {d['samples_per_s_range'][0]:.0f}-"
                f"{d['samples_per_s_range'][1]:.0f})" if d["samples_per_s"] else ", samples/s: give --batch")
             + f", {100 * d['cube_peak_share']:.1f}% of the cube peak", "", "by unit (ms):"]
    for unit, ms in d["by_unit"].items():
        share = 100 * ms / d["step_ms"] if d["step_ms"] else 0.0
        lines.append(f"  {unit:<13}{ms:10.3f}  {share:5.1f}%")
    if d["geops"]:
        lines += ["", "per GeOp (ms): " + ", ".join(f"{name} {ms:.3f}" for name, ms in d["geops"].items())]
    lines += ["", f"top {len(d['top_ops'])} ops:"]
    for row in d["top_ops"]:
        lines.append(f"  {row['us']:10.1f} us {100 * row['share']:5.1f}%  {row['unit']:<6} {row['bound']:<7} "
                     f"{row['op']:<24} {row['name']}")
    lines += ["", "bottlenecks:"]
    for b in d["bottlenecks"] or [{"code": "none", "share": 0, "ops": [], "advice": "none found"}]:
        lines.append(f"  {b['code']:<18} {100 * b['share']:5.1f}% of the step  {', '.join(b['ops'][:5])}")
        lines.append(f"      {b['advice']}")
    lines += ["", "rests on (share of the step: constants, [f]itted, [d]atasheet or derived, [g]uessed default; "
                  "npu_sim_bridge/estimate/hardware.py, --constant KEY=VALUE replaces one):"]
    mark = {FITTED: "f", DEFAULT: "g"}
    for row in d["rests_on"]:
        consts = ", ".join(f"{key}={c['value']:g}[{mark.get(c['source'], 'd')}]" for key, c in row["constants"].items())
        lines.append(f"  {row['unit']:<13}{100 * row['share']:5.1f}%  {consts}")
    lines.append("  the range: fitted units +-" + f"{100 * step.hw['uncertainty']:.0f}%, guessed units /x"
                 + f"{step.hw['default_spread']:g}, unknown shapes and loops added again")
    for note in d["dynamic"]:
        lines.append(f"unsure: {note}")
    return "\n".join(lines) + "\n"


def to_csv(step: StepEstimate) -> str:
    """An op_summary-style CSV: one row per device or host op, the real profiler's columns, empty where the
    estimate has nothing (wait times, formats, cycle counts)."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=OP_SUMMARY_COLUMNS, lineterminator="\n")
    writer.writeheader()
    start = 0.0
    for task, item in enumerate(o for o in step.ops if o.record.work.unit != FREE):
        r = item.record
        unit = r.work.unit
        on_core = unit in ("cube", "vector")
        writer.writerow({
            "Model Name": r.geop or "host", "Model ID": "", "Task ID": task, "Stream ID": "", "Infer ID": "",
            "Op Name": r.name, "OP Type": r.op, "Task Type": _TASK_TYPE.get(unit, ""),
            "Task Start Time": round(start, 3), "Task Duration(us)": round(item.us, 3), "Task Wait Time(us)": "",
            "Block Dim": item.time.cores_used or "", "Input Shapes": "", "Input Data Types": "",
            "Input Formats": "", "Output Shapes": "", "Output Data Types": (r.dtype or "").upper(),
            "Output Formats": "", "aicore_time(us)": round(item.us, 3) if on_core else "", "total_cycles": "",
            "vec_time(us)": round(item.us, 3) if unit == "vector" else "",
            "vec_ratio": "", "mac_time(us)": round(item.us, 3) if unit == "cube" else "", "mac_ratio": "",
            "scalar_time(us)": "", "scalar_ratio": "",
            "memory_bound": "" if not on_core else (1.5 if item.time.bound == "memory" else 0.5)})
        start += item.us
    return out.getvalue()
