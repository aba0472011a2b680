"""Every step's trace in one chrome://tracing / Perfetto file, on one time line.

The step traces already share TensorFlow's clock (microseconds since the epoch), so merging keeps each
event's time and regroups the tracks: a track of one name (a GeOp, "host ops 1", an estimated GeOp) is one
track across the steps, and a process "Steps" gets one span per step, named with its step number, role and
run folder, so warm-up, init and evaluation runs stand out. A step's span is that of its measured events,
not of the estimated NPU track. A profiled Session writes its merged trace, trace_merged.json, into its
run folder when it closes; `npu-sim profile TRACE --merge OUT` merges any set.
"""

from __future__ import annotations

import json
import os

from npu_sim_bridge.profiling.summary import role_of

STEPS_PID = 0
MERGED_NAME = "trace_merged.json"


def merge_traces(loaded: list[tuple[str, dict]]) -> dict:
    """One trace from (path, trace) pairs in step order (as summary.load_traces gives them)."""
    out: list[dict] = [{"ph": "M", "name": "process_name", "pid": STEPS_PID, "tid": 0, "args": {"name": "Steps"}},
                       {"ph": "M", "name": "thread_name", "pid": STEPS_PID, "tid": 1, "args": {"name": "steps"}}]
    tids: dict[tuple, int] = {}
    named_processes: set = set()
    steps = []
    for path, trace in loaded:
        meta = trace.get("metadata", {})
        names = {(e.get("pid"), e.get("tid")): str(e.get("args", {}).get("name")) for e in trace["traceEvents"]
                 if e.get("ph") == "M" and e.get("name") == "thread_name" and isinstance(e.get("args"), dict)}
        timed = []
        for event in trace["traceEvents"]:
            if event.get("ph") == "M":
                if event.get("name") != "thread_name" and (event.get("pid"), event.get("name")) not in named_processes:
                    named_processes.add((event.get("pid"), event.get("name")))
                    out.append(event)
                continue
            pid = event.get("pid")
            label = names.get((pid, event.get("tid")), f"track {event.get('tid')}")
            key = (pid, label)
            if key not in tids:
                tids[key] = 1 + sum(1 for known in tids if known[0] == pid)
                out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tids[key], "args": {"name": label}})
            moved = dict(event, tid=tids[key])
            timed.append(moved)
            out.append(moved)
        # The step's span is what was measured: the estimated NPU track (profiling/estimated.py) starts with
        # the measured GeOp but lasts what the estimate says, and may run past the next step's start.
        estimate_pid = (meta.get("estimate") or {}).get("pid")
        measured = [e for e in timed if estimate_pid is None or e.get("pid") != estimate_pid] or timed
        if timed:
            start = min(e["ts"] for e in measured)
            end = max(e["ts"] + e.get("dur", 0) for e in measured)
            role = role_of(trace)
            step = meta.get("step")
            out.append({"ph": "X", "pid": STEPS_PID, "tid": 1, "ts": start, "dur": end - start, "cat": "step",
                        "name": f"step {step} ({role})",
                        "args": {"step": step, "role": role, "file": path,
                                 "run": os.path.basename(os.path.dirname(path))}})
        steps.append({"file": path, "step": meta.get("step"), "role": meta.get("role"),
                      **{key: meta[key] for key in ("estimate", "estimate_error", "estimate_skipped") if key in meta}})
    return {"traceEvents": out, "displayTimeUnit": "ms",
            "metadata": {"merged": steps, "source": "trace_step_*.json files merged by npu_sim_bridge.profiling"}}


def write_merged(loaded: list[tuple[str, dict]], path: str) -> str:
    from npu_sim_bridge.fileio import write_atomic

    write_atomic(path, json.dumps(merge_traces(loaded)), what="merged profiling trace")
    return path
