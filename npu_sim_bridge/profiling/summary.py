"""`npu-sim profile TRACE`: the top ops by time, host vs device, per step, from trace files this package wrote."""

from __future__ import annotations

import collections
import dataclasses
import glob
import json
import os

from npu_sim_bridge.errors import NpuSimError
from npu_sim_bridge.profiling.estimated import ESTIMATE_PID
from npu_sim_bridge.profiling.roles import UNKNOWN


@dataclasses.dataclass
class StepSummary:
    step: int
    path: str
    role: str = UNKNOWN         # train, eval, init, checkpoint (profiling.roles), unknown when the trace does not say
    device_us: float = 0.0      # GeOp spans: the time the simulated device was busy
    host_us: float = 0.0        # host ops
    geops: dict = dataclasses.field(default_factory=dict)             # GeOp -> microseconds
    ops: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # (where, op type) -> us
    nodes: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # (where, node, op) -> us


def trace_files(path: str) -> list[str]:
    if os.path.isfile(path):
        return [path]
    if os.path.isdir(path):
        found = glob.glob(os.path.join(path, "**", "trace_step_*.json"), recursive=True)
        if found:
            return sorted(found, key=lambda p: (os.path.dirname(p), _step_of(p)))
        raise NpuSimError(f"no trace_step_*.json file under {path}: profile a Session with profiling_mode on "
                          "(profiling_options '{\"output\":\"DIR\"}') and pass that DIR")
    raise NpuSimError(f"trace {path} does not exist: pass a trace_step_*.json file or the profiling output folder")


def _step_of(path: str) -> int:
    digits = os.path.basename(path)[len("trace_step_"):-len(".json")]
    return int(digits) if digits.isdigit() else -1


def load_traces(path: str) -> list[tuple[str, dict]]:
    """(file, trace) of every step trace at `path`, checked; a malformed one raises naming the file."""
    loaded = []
    for file in trace_files(path):
        try:
            with open(file, encoding="utf-8") as handle:
                trace = json.load(handle)
            events = trace["traceEvents"]
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise NpuSimError(f"trace {file} cannot be read as a chrome trace ({err}); pass a file that "
                              "npu_sim_bridge's profiling wrote") from None
        if not isinstance(trace.get("metadata", {}), dict):
            raise NpuSimError(f"trace {file}: metadata is not an object; pass a trace_step_*.json file that "
                              "npu_sim_bridge's profiling wrote")
        if "merged" in trace.get("metadata", {}):
            raise NpuSimError(f"trace {file} is a merged trace of several steps; pass its run folder or the "
                              "trace_step_*.json files it was merged from")
        # A step the profiling wrote may hold no timed event (a run of nothing but a NoOp group).
        _check_events(file, events, allow_empty="geops" in trace.get("metadata", {}))
        loaded.append((file, trace))
    return loaded


def role_of(trace: dict) -> str:
    """The step's role from the trace's metadata ("unknown" for a trace that does not say)."""
    role = trace.get("metadata", {}).get("role")
    return role.get("role", UNKNOWN) if isinstance(role, dict) else UNKNOWN


def summarize(path: str) -> list[StepSummary]:
    steps = []
    for file, trace in load_traces(path):
        summary = StepSummary(step=trace.get("metadata", {}).get("step", _step_of(file)), path=file,
                              role=role_of(trace))
        for event in trace["traceEvents"]:
            if event.get("ph") != "X" or event.get("pid") == ESTIMATE_PID:
                continue
            duration = float(event["dur"])
            args = event.get("args", {})
            if event.get("cat") == "GeOp":
                summary.device_us += duration
                summary.geops[event["name"]] = summary.geops.get(event["name"], 0.0) + duration
                continue
            where = args.get("where", "host")
            if where == "host":
                summary.host_us += duration
            summary.ops[(where, args.get("op", event.get("cat", "?")))] += duration
            summary.nodes[(where, event.get("name", "?"), args.get("op", "?"))] += duration
        steps.append(summary)
    return steps


def _check_events(file: str, events, allow_empty: bool = False) -> None:
    """A chrome trace's events: a list of objects, with at least one timed ("X") event, each with a
    number of microseconds in `dur` (a malformed trace read as 0.000 ms would look like a fast step)."""
    remedy = "; pass a trace_step_*.json file that npu_sim_bridge's profiling wrote"
    if not isinstance(events, list) or not all(isinstance(event, dict) for event in events):
        raise NpuSimError(f"trace {file}: traceEvents is not a list of event objects{remedy}")
    timed = [event for event in events if event.get("ph") == "X"]
    if not timed and not allow_empty:
        raise NpuSimError(f"trace {file} holds no timed event (\"ph\": \"X\"), so there is nothing to sum{remedy}")
    for index, event in enumerate(timed):
        duration = event.get("dur")
        if isinstance(duration, bool) or not isinstance(duration, (int, float)) or not duration >= 0:
            raise NpuSimError(f"trace {file}: timed event {event.get('name', index)!r} has no duration in microseconds "
                              f"(dur = {duration!r}){remedy}")
        start = event.get("ts")
        if isinstance(start, bool) or not isinstance(start, (int, float)):
            raise NpuSimError(f"trace {file}: timed event {event.get('name', index)!r} has no start time in "
                              f"microseconds (ts = {start!r}){remedy}")
        if not isinstance(event.get("args", {}), dict):
            raise NpuSimError(f"trace {file}: timed event {event.get('name', index)!r} has args that are not an "
                              f"object{remedy}")


def format_summary(steps: list[StepSummary], top: int = 10) -> str:
    lines = []
    for summary in steps:
        total = summary.device_us + summary.host_us
        share = (100.0 * summary.device_us / total) if total else 0.0
        lines.append(f"step {summary.step} ({summary.role}): device {summary.device_us / 1000:.3f} ms in "
                     f"{len(summary.geops)} GeOp(s), host {summary.host_us / 1000:.3f} ms (device {share:.0f}% of op "
                     f"time)  [{summary.path}]")
        for name, micros in sorted(summary.geops.items(), key=lambda kv: -kv[1]):
            lines.append(f"  GeOp {name}: {micros / 1000:.3f} ms")
        lines.append(f"  top {top} ops by time:")
        for (where, node, op), micros in summary.nodes.most_common(top):
            lines.append(f"    {micros / 1000:9.3f} ms  {where:6}  {op:24} {node}")
    return "\n".join(lines) + "\n"


def to_json(steps: list[StepSummary], top: int = 10) -> str:
    return json.dumps([{
        "step": s.step, "role": s.role, "path": s.path, "device_ms": s.device_us / 1000, "host_ms": s.host_us / 1000,
        "geops_ms": {k: v / 1000 for k, v in s.geops.items()},
        "top_ops": [{"where": w, "node": n, "op": o, "ms": us / 1000} for (w, n, o), us in s.nodes.most_common(top)],
        "by_op_type": [{"where": w, "op": o, "ms": us / 1000} for (w, o), us in s.ops.most_common()],
    } for s in steps], indent=2)
