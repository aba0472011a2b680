"""One line per rewritten graph: what it is for, what the NPU runs of it, and where its files went.

  npu-sim: 002_train (train: fetches loss, train_op: 10 optimizer updates (ApplyMomentum x10)):
    1 GeOps (282 ops on the NPU), 30 host ops; float16 75 of 210 float ops on the NPU (36%);
    report /tmp/r/002_train.json; graph dumps /tmp/ge (6 files); tensor dumps /tmp/d/<stamp>/002_train;
    traces /tmp/prof
(printed on one line). `npu-sim run` prints one for every graph of the run when the script ends; in a
plain Session, NPU_SIM_SUMMARY=1 prints each one on stderr as soon as the graph is rewritten.
"""

from __future__ import annotations

import os
import sys

__all__ = ["SUMMARY_ENV", "line", "print_line", "summarized", "wanted"]

SUMMARY_ENV = "NPU_SIM_SUMMARY"
_FLOATS = frozenset({"float16", "float32", "bfloat16", "float64"})


def wanted(environ=None) -> bool:
    """Whether NPU_SIM_SUMMARY asks for a line per graph as it is rewritten (1, true, yes, on)."""
    environ = os.environ if environ is None else environ
    return environ.get(SUMMARY_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def summarized(report) -> bool:
    """Whether the report's line was printed already (each graph's line is printed once)."""
    return report.published is not None and report.published.summary_printed


def print_line(report, file=None) -> None:
    if report.published is not None:
        report.published.summary_printed = True
    print(line(report), file=file or sys.stderr, flush=True)


def line(report) -> str:
    """The summary line of a rewritten graph's report."""
    counts = report.counts or {}
    role = report.role
    head = f"npu-sim: {report.graph_id}" + (f" ({role.name}: {role.why})" if role else "")
    on_npu = [d for d in report.nodes.values() if d.placement == "device" and d.dtype_after in _FLOATS]
    half = sum(1 for d in on_npu if d.dtype_after == "float16")
    share = (f"float16 {half} of {len(on_npu)} float ops on the NPU ({100 * half // len(on_npu)}%)" if on_npu
             else "no float op on the NPU")
    parts = [f"{counts.get('geops', 0)} GeOps ({counts.get('inside_geops', 0)} ops on the NPU), "
             f"{counts.get('outside_geops', 0)} host ops", share]
    published = report.published
    if published is not None and published.report:
        parts.append(f"report {published.report}")
    if published is not None and published.dumps:
        parts.append(f"graph dumps {os.path.dirname(published.dumps[0])} ({len(published.dumps)} files)")
    options = report.options
    if (options.get("enable_dump") or options.get("enable_dump_debug")) and counts.get("geops"):
        from npu_sim_bridge.passes.dump import layout

        parts.append("tensor dumps " + os.path.join(os.path.abspath(options.get("dump_path") or "."),
                                                    layout.run_stamp(), report.graph_id))
    if options.get("profiling_mode"):
        parts.append("traces " + _trace_folder(options.get("profiling_options")))
    return f"{head}: " + "; ".join(parts)


def _trace_folder(text) -> str:
    from npu_sim_bridge.profiling.options import parse_profiling_options

    return parse_profiling_options(text).output
