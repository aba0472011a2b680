"""One step's RunMetadata -> a chrome://tracing / Perfetto trace with each GeOp's ops inside its span.

TensorFlow's timeline module (tensorflow.python.client.timeline) turns the step stats into trace
events; this module only regroups them. The GeOps and their bodies come from the partition graphs
TensorFlow returns with the run metadata (RunOptions.output_partition_graphs, which hold the GeOp call
nodes but not their bodies) and the rewrite reports of this process (which name the nodes each GeOp
runs): a body op is an event whose time lies inside a GeOp's run and whose node name the GeOp runs.

Process "NPU (simulated device)": one track per GeOp; the GeOp call is a span, its ops are spans
nested inside it (ops that ran in parallel go on extra tracks "<GeOp> (parallel)"). Process "Host":
every other op. Each event keeps TensorFlow's args (node name, op type, inputs) plus "step",
"where" (device or host) and "geop".
"""

from __future__ import annotations

import json

from npu_sim_bridge.graph.attr_names import GEOP_ATTR
from npu_sim_bridge.graph.op_categories import EXECUTOR_PLUMBING_OPS

DEVICE_PID, HOST_PID = 1, 2


def geop_calls(partition_graphs) -> set[str]:
    """The GeOp call nodes of the graphs TensorFlow executed."""
    return {node.name for graph_def in partition_graphs for node in graph_def.node if GEOP_ATTR in node.attr}


def top_level_names(partition_graphs) -> set[str]:
    return {node.name for graph_def in partition_graphs for node in graph_def.node}


def geop_members(calls: set[str]) -> dict[str, set[str]]:
    """GeOp name -> the names of the nodes it runs, from this process's rewrite reports (GeOp names are unique
    in a process). Reports of Grappler's later iterations are left out: they see the GeOp calls, not the bodies."""
    from npu_sim_bridge.report import recent_reports

    members: dict[str, set[str]] = {}
    for report in recent_reports():
        if report.rerun:
            continue
        for decision in report.nodes.values():
            if decision.geop in calls and decision.name != decision.geop:
                members.setdefault(decision.geop, set()).add(decision.name)
    return members


def timeline_events(step_stats) -> list[dict]:
    """The complete ('X') op events TensorFlow's timeline module makes from the step stats."""
    from tensorflow.python.client import timeline

    chrome = json.loads(timeline.Timeline(step_stats).generate_chrome_trace_format(show_dataflow=False))
    return [event for event in chrome["traceEvents"] if event.get("ph") == "X"]


def build_trace(run_metadata, step: int, with_ops: bool = True, members: dict | None = None) -> dict:
    """The trace of one step. with_ops=False (training_trace only) leaves out the ops inside the GeOps.
    members: geop_members of the run's GeOp calls, when the caller has them."""
    names = geop_calls(run_metadata.partition_graphs)
    top_level = top_level_names(run_metadata.partition_graphs)
    if members is None:
        members = geop_members(names)
    events = [event for event in timeline_events(run_metadata.step_stats)
              if event["args"].get("op") not in EXECUTOR_PLUMBING_OPS]
    calls = [event for event in events if event["args"].get("name") in names]
    calls.sort(key=lambda event: event["ts"])
    tracks: dict[str, list[dict]] = {call["args"]["name"]: [] for call in calls}
    host: list[dict] = []
    for event in events:
        name = event["args"].get("name")
        if name in names:
            continue
        owner = _owner(event, name, calls, members, top_level)
        if owner is None:
            host.append(_tagged(event, step, "host", None))
        elif with_ops:
            tracks[owner].append(_tagged(event, step, "device", owner))
    out: list[dict] = [_process_name(DEVICE_PID, "NPU (simulated device)"), _process_name(HOST_PID, "Host")]
    next_tid = 1
    for call in calls:
        name = call["args"]["name"]
        span = _tagged(call, step, "device", name)
        span["name"] = name
        span["cat"] = "GeOp"
        lanes = _pack(tracks[name])
        for lane_index, lane in enumerate(lanes or [[]]):
            tid = next_tid
            next_tid += 1
            label = name if lane_index == 0 else f"{name} (parallel {lane_index})"
            out.append(_thread_name(DEVICE_PID, tid, label))
            if lane_index == 0:
                out.append(dict(span, pid=DEVICE_PID, tid=tid))
            out.extend(dict(event, pid=DEVICE_PID, tid=tid) for event in lane)
    for lane_index, lane in enumerate(_pack(host), 1):
        out.append(_thread_name(HOST_PID, lane_index, f"host ops {lane_index}"))
        out.extend(dict(event, pid=HOST_PID, tid=lane_index) for event in lane)
    return {"traceEvents": out, "displayTimeUnit": "ms",
            "metadata": {"step": step, "geops": [call["args"]["name"] for call in calls],
                         "source": "TensorFlow RunMetadata step_stats via tensorflow.python.client.timeline"}}


def _owner(event, name, calls, members, top_level) -> str | None:
    """The GeOp whose run holds this op: its time lies inside the GeOp's span, and its name is a node the
    GeOp runs (from the rewrite report) or, when no report says, no node of the executed top-level graph."""
    start, end = event["ts"], event["ts"] + event.get("dur", 0)
    inside = [call for call in calls if call["ts"] <= start and end <= call["ts"] + call.get("dur", 0)]
    for call in inside:
        known = members.get(call["args"]["name"])
        if known is not None and name in known:
            return call["args"]["name"]
    if name not in top_level:
        for call in inside:
            if call["args"]["name"] not in members:
                return call["args"]["name"]
    return None


def _tagged(event: dict, step: int, where: str, geop: str | None) -> dict:
    tagged = dict(event)
    tagged["name"] = event["args"].get("name", event.get("name", "?"))
    tagged["cat"] = event["args"].get("op", "Op")
    tagged["args"] = dict(event["args"], step=step, where=where, geop=geop)
    return tagged


def _pack(events: list[dict]) -> list[list[dict]]:
    """Events onto as few lanes as keep each lane free of overlaps (first lane that is free)."""
    lanes: list[list[dict]] = []
    ends: list[float] = []
    for event in sorted(events, key=lambda e: (e["ts"], -e.get("dur", 0))):
        for index, end in enumerate(ends):
            if event["ts"] >= end:
                lanes[index].append(event)
                ends[index] = event["ts"] + event.get("dur", 0)
                break
        else:
            lanes.append([event])
            ends.append(event["ts"] + event.get("dur", 0))
    return lanes


def _process_name(pid: int, name: str) -> dict:
    return {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}}


def _thread_name(pid: int, tid: int, name: str) -> dict:
    return {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}}
