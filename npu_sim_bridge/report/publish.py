"""The publishing step: what one rewrite leaves behind, written once the pure pipeline has returned.

The callers at the boundary (native/entry.py for a Session's graphs, api.py for `rewrite`) call
`dump_request()` before the pipeline (so it keeps the DUMP_GE_GRAPH stages asked for) and `publish()`
after it, which writes, in this order:
  - the report into the process history (npu_sim_bridge.recent_reports());
  - the files the passes left (PassContext.leave_file: the dump pass's manifest);
  - the DUMP_GE_GRAPH files (envvars/graph_dump.py);
  - the INFO log of the rewrite (envvars/logs.py);
  - the report files and views where sim_report_dir says (<graph id>.json/.txt/.pbtxt/.html, TensorBoard);
  - for a Session's graph (`announce`) and NPU_SIM_SUMMARY=1, its one-line summary on stderr
    (report/summary.py); an offline rewrite (`rewrite`, `npu-sim inspect`, an estimate) prints none.
A later Grappler iteration over an already rewritten graph (`report.rerun`) is only remembered.
"""

from __future__ import annotations

import dataclasses
import os

from npu_sim_bridge.envvars import graph_dump
from npu_sim_bridge.envvars.logs import log_rewrite
from npu_sim_bridge.errors import ConfigError
from npu_sim_bridge.fileio import OutputError, unique_base, write_atomic
from npu_sim_bridge.report import history

__all__ = ["Published", "dump_request", "publish"]


@dataclasses.dataclass
class Published:
    """Where one rewrite's files went (empty where nothing was asked for)."""

    report: str = ""                                     # the JSON report's path
    dumps: list[str] = dataclasses.field(default_factory=list)   # DUMP_GE_GRAPH files
    files: list[str] = dataclasses.field(default_factory=list)   # the files the passes left (dump manifest)
    summary_printed: bool = False                        # its summary line is out (report/summary.py)


def dump_request(environ=None) -> graph_dump.DumpRequest | None:
    """What DUMP_GE_GRAPH asks for (None: nothing); pass its `wants` to run_pipeline as `keep_stage`."""
    return graph_dump.from_environment(environ)


def publish(result, options, dump: graph_dump.DumpRequest | None = None, announce: bool = False) -> Published:
    """Write what the rewrite `result` (a PipelineResult) leaves behind, as `options` and `dump` ask;
    `announce`: a Session's graph, whose summary line NPU_SIM_SUMMARY asks for.

    Raises ConfigError naming sim_report_dir or DUMP_GRAPH_PATH when a folder cannot be written, and
    OutputError naming a file the passes left when it cannot be written.
    """
    report = result.report
    published = Published()
    report.published = published
    history.remember(report)
    if report.rerun:  # one file set per graph, not one per Grappler iteration
        return published
    published.files = [_write_left_file(left) for left in result.files]
    if dump is not None:
        published.dumps = dump.write(report.graph_id, result.stages, result.graph_def)
    log_rewrite(report)  # at INFO (ASCEND_GLOBAL_LOG_LEVEL=1): passes, GeOps, casts
    directory = options.get("sim_report_dir")
    if directory:
        published.report = _write_report(directory, result)
    from npu_sim_bridge.report import summary

    if announce and summary.wanted():
        summary.print_line(report)
    return published


def _write_left_file(left) -> str:
    """Write a file a pass left (a FileToWrite), its folder made first; returns its path."""
    try:
        os.makedirs(os.path.dirname(left.path), exist_ok=True)
    except OSError as err:
        raise OutputError(f"cannot write {left.what} {left.path!r}: its folder cannot be made ({err.strerror}); "
                          "check the folder's permissions and free space") from None
    write_atomic(left.path, left.text, left.what)  # the whole file or none
    return left.path


def _write_report(directory: str, result) -> str:
    """Write the report files into `directory`; returns the JSON report's path."""
    report = result.report
    base = None
    try:
        os.makedirs(directory, exist_ok=True)
        base = unique_base(directory, report.graph_id)  # a reused folder keeps earlier runs' reports
        write_atomic(base + ".json", report.to_json(), "report")
        write_atomic(base + ".txt", report.to_text(), "report")
        from npu_sim_bridge.report.views import write_views

        # .pbtxt before/after, TensorBoard run, HTML picture
        write_views(base, report, result.graph_as_it_came(), result.graph_def)
    except OSError as err:
        if base is not None and os.path.exists(base + ".json") and not os.path.getsize(base + ".json"):
            os.unlink(base + ".json")  # the name claimed for a report that could not be written
        raise ConfigError(
            f"option sim_report_dir {directory!r}: cannot write the report there ({err}); "
            "point it at a writable directory") from err
    return base + ".json"
