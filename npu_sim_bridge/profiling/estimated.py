"""The "estimated NPU" track of a profiling trace: npu_sim_bridge.estimate's ops of the step laid end to end.

Beside the measured CPU time of each step, the trace gets a process "estimated NPU (<SoC>)" holding what the
step would take on the SoC by npu_sim_bridge.estimate (a roofline model, not a measurement): one track per
GeOp with the GeOp as a span and its ops inside, one track of host ops, and one of host<->device copies and
the per-run overhead. The ops start at the step's first measured event and follow one another: GeOps and
host ops in the order the step ran them, the ops of a GeOp in the order the estimate lists them. Each
event's args carry its unit (cube, vector, aicpu, host), bound and estimated microseconds, and "estimate": true.

The estimate rewrites the Session's graph offline, so its GeOp names are its own; each estimated GeOp is
named after the measured GeOp whose body shares most of its nodes (from this process's rewrite reports).
It is computed once per graph and fetch set (EstimateCache), not per step, and only for training,
evaluation and unknown runs (ESTIMATED_ROLES; the metadata of an init, checkpoint or bookkeeping run says
"estimate_skipped"). When it fails, the trace's metadata says why under "estimate_error" and a warning
names the graph and the reason; the run goes on.
"""

from __future__ import annotations

import logging
import math

ESTIMATE_PID = 3
ESTIMATED_GEOP = "GeOp (estimated)"  # the category of an estimated GeOp's span (a measured one's is "GeOp")
ESTIMATED_ROLES = ("train", "eval", "unknown")  # init, checkpoint and bookkeeping runs are not the model's step
_LOG = logging.getLogger("npu_sim_bridge")
_DROPPED = ("sim_report_dir", "profiling_mode", "profiling_options")  # the estimate writes no second report


def _estimate_options(options) -> dict:
    """The Session's explicit parameter_map keys, without dumps, profiling and the report folder (the
    estimate costs the model, and its offline rewrite writes no files)."""
    given = {name: options[name] for name in options.explicit
             if name not in _DROPPED and "dump" not in name}
    given["sim_report_dir"] = ""  # also when NPU_SIM_REPORT_DIR is set
    return given


class EstimateCache:
    """One estimate per (graph, fetch set) of a profiled Session: its JSON-ready dict, or the reason it failed."""

    def __init__(self, config):
        self._config = config
        self._known: dict = {}

    def get(self, graph, fetches: tuple, label: str) -> tuple[dict | None, str | None]:
        """(the estimate as npu_sim_bridge.estimate.output.to_dict gives it with every op, None) or
        (None, the reason it failed). `label` names the graph in the warning."""
        key = (id(graph), fetches)
        if key not in self._known:
            self._known[key] = self._compute(graph, fetches, label)
        return self._known[key]

    def _compute(self, graph, fetches, label):
        from npu_sim_bridge.config import from_config_proto
        from npu_sim_bridge.estimate import estimate
        from npu_sim_bridge.estimate.output import to_dict

        try:
            options = from_config_proto(self._config)
            step = estimate(_pruned(graph, fetches), _estimate_options(options), fetches=list(fetches) or None)
            return to_dict(step, top=0, every_op=True), None
        except Exception as err:  # noqa: BLE001 - any failure of the add-on estimate is told, and the run goes on
            reason = f"{type(err).__name__}: {err}"
            _LOG.warning("profiling: no estimated NPU track for the %s graph (fetches %s): %s", label,
                         ", ".join(fetches[:3]) or "none", reason)
            return None, reason


def _pruned(graph, fetches: tuple):
    """The part of `graph` a run of `fetches` executes (as the Session prunes it), or the whole graph."""
    from tensorflow.core.framework import graph_pb2

    graph_def = graph.as_graph_def()
    if not fetches:
        return graph_def
    by_name = {node.name: node for node in graph_def.node}
    keep: set = set()
    stack = [name for name in fetches if name in by_name]
    while stack:
        name = stack.pop()
        if name in keep:
            continue
        keep.add(name)
        stack.extend(source.lstrip("^").split(":")[0] for source in by_name[name].input
                     if source.lstrip("^").split(":")[0] in by_name)
    pruned = graph_pb2.GraphDef()
    pruned.versions.CopyFrom(graph_def.versions)
    pruned.library.CopyFrom(graph_def.library)
    pruned.node.extend(node for node in graph_def.node if node.name in keep)
    return pruned


def estimate_events(estimate: dict, measured: dict, step: int, members: dict) -> list[dict]:
    """Trace events (metadata and "X" spans on ESTIMATE_PID) of one step's estimate, from the step's first
    measured event on. `measured`: the name of each measured GeOp and host op -> its start; the GeOps and
    host ops of the estimate follow in that order. `members`: measured GeOp -> the node names it runs, to
    name the estimated GeOps after."""
    start_us = min(measured.values())
    names = _geop_names(estimate["ops"], members)
    tids: dict[str, int] = {}
    out = [{"ph": "M", "name": "process_name", "pid": ESTIMATE_PID, "tid": 0,
            "args": {"name": f"estimated NPU ({estimate['soc']})"}},
           {"ph": "M", "name": "process_sort_index", "pid": ESTIMATE_PID, "tid": 0, "args": {"sort_index": 3}}]

    def track(label: str) -> int:
        if label not in tids:
            tids[label] = len(tids) + 1
            out.append({"ph": "M", "name": "thread_name", "pid": ESTIMATE_PID, "tid": tids[label],
                        "args": {"name": f"{label} (estimated)"}})
        return tids[label]

    def span(tid, ts, us, name, cat, args):
        out.append({"ph": "X", "pid": ESTIMATE_PID, "tid": tid, "ts": ts, "dur": us, "name": name, "cat": cat,
                    "args": dict(args, step=step, where="estimate", estimate=True)})

    ops = [row for row in estimate["ops"] if row["us"] > 0]
    bodies: dict[str, list] = {}
    segments = []  # a host op, or a GeOp with its body, in the order the step ran them (estimate order else)
    for position, row in enumerate(ops):
        if row["geop"] is None:
            segments.append((measured.get(row["name"], math.inf), position, None, [row]))
        elif row["geop"] not in bodies:
            bodies[row["geop"]] = [row]
            segments.append((measured.get(names[row["geop"]], math.inf), position, row["geop"], bodies[row["geop"]]))
        else:
            bodies[row["geop"]].append(row)
    cursor = float(start_us)
    for _, _, geop, rows in sorted(segments, key=lambda segment: segment[:2]):
        if geop is None:
            span(track("host ops"), cursor, rows[0]["us"], rows[0]["name"], rows[0]["op"], _op_args(rows[0]))
            cursor += rows[0]["us"]
            continue
        tid = track(names[geop])
        total = sum(item["us"] for item in rows)
        span(tid, cursor, total, names[geop], ESTIMATED_GEOP,
             {"geop": names[geop], "estimate_geop": geop, "unit": "GeOp", "us": round(total, 3)})
        for item in rows:
            span(tid, cursor, item["us"], item["name"], item["op"], _op_args(item, names[geop]))
            cursor += item["us"]
    extra = estimate["by_unit"]
    for label, key in (("host<->device copies", "transfers"), ("run overhead", "run_overhead")):
        micros = extra.get(key, 0.0) * 1e3
        if micros > 0:
            span(track(label), cursor, micros, label, key, {"unit": key, "us": round(micros, 3)})
            cursor += micros
    return out


def _op_args(row: dict, geop: str | None = None) -> dict:
    return {"op": row["op"], "unit": row["unit"], "bound": row["bound"], "us": row["us"], "geop": geop,
            "gflops": row["gflops"], "mbytes": row["mbytes"], "dtype": row["dtype"]}


def _geop_names(ops: list, members: dict) -> dict:
    """Estimated GeOp -> the measured GeOp sharing most of its body's node names (else its own name)."""
    bodies: dict[str, set] = {}
    for row in ops:
        if row["geop"] is not None:
            bodies.setdefault(row["geop"], set()).add(row["name"])
    names = {}
    for geop, body in bodies.items():
        best = max(members.items(), key=lambda kv: len(kv[1] & body), default=None)
        names[geop] = best[0] if best is not None and best[1] & body else geop
    return names


def metadata(estimate: dict | None, error: str | None) -> dict:
    """What the trace's metadata says of the estimate: its SoC, step time and note, or why there is none."""
    if estimate is None:
        return {"estimate_error": error}
    return {"estimate": {"soc": estimate["soc"], "step_ms": estimate["step_ms"],
                         "step_ms_range": estimate["step_ms_range"], "geops_ms": estimate["geops"],
                         "note": estimate["note"], "pid": ESTIMATE_PID}}
