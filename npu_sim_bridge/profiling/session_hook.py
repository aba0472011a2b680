"""The Session.run wrapper: a Session whose NpuOptimizer has profiling_mode on traces the steps it selects.

Installed once when npu_sim_bridge loads the shim. For a Session without profiling the wrapper is
one cached attribute test. For a profiling Session, each selected step runs with FULL_TRACE and
output_partition_graphs added to the caller's RunOptions (the caller's RunMetadata still gets
everything), and writes <output>/<time>_<pid>_<n>/trace_step_<k>.json, n counting the process's profiled
Sessions, so the folders sort in the order the Sessions were made. Steps are the Session's runs,
counted from 0, as dump_step counts them. Each trace's metadata names the run's role (profiling/roles.py)
and, unless sim_estimate is off, the trace gets the estimated NPU track (profiling/estimated.py). When the
Session closes, its steps are merged into <folder>/trace_merged.json (profiling/merge.py).
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import threading
import time

from tensorflow.core.protobuf import config_pb2
from tensorflow.python.client import session as session_lib

from npu_sim_bridge.graph.attr_names import PROFILER_MARK

_installed = False
_lock = threading.Lock()
_sessions = itertools.count(1)  # profiled Sessions of this process, in the order they were made


class SessionProfiler:
    """Counts one Session's steps and writes the trace of each selected one."""

    def __init__(self, options, config=None):
        from npu_sim_bridge.profiling.estimated import EstimateCache
        from npu_sim_bridge.profiling.roles import RoleCache

        self.options = options
        # Two Sessions of one second (an Estimator's training and evaluation) sort by their number, not
        # by an address.
        self.folder = os.path.join(options.output,
                                   f"{time.strftime('%Y%m%d%H%M%S')}_{os.getpid()}_{next(_sessions):04d}")
        self.step = -1
        self.written: list[str] = []
        self.merged: str | None = None
        self._merged_steps = 0
        self._lock = threading.Lock()
        self._roles = RoleCache()
        self._estimates = EstimateCache(config) if options.estimate and config is not None else None

    def run(self, original, session, fetches, feed_dict, options, run_metadata):
        with self._lock:
            self.step += 1
            step = self.step
        if not self.options.selects(step):
            return original(session, fetches, feed_dict, options, run_metadata)
        role = self._roles.role_of(session.graph, fetches)
        traced = config_pb2.RunOptions()
        if options is not None:
            traced.CopyFrom(options)
        traced.trace_level = config_pb2.RunOptions.FULL_TRACE
        traced.output_partition_graphs = True
        metadata = config_pb2.RunMetadata()
        result = original(session, fetches, feed_dict, traced, metadata)
        if run_metadata is not None:
            run_metadata.MergeFrom(metadata)
        self._write(metadata, step, role, session.graph)
        return result

    def _write(self, metadata, step: int, role, graph) -> None:
        from npu_sim_bridge.fileio import write_atomic
        from npu_sim_bridge.profiling import estimated
        from npu_sim_bridge.profiling.estimated import ESTIMATED_ROLES
        from npu_sim_bridge.profiling.trace import build_trace, geop_calls, geop_members

        members = geop_members(geop_calls(metadata.partition_graphs))
        trace = build_trace(metadata, step, with_ops=self.options.task_trace, members=members)
        trace["metadata"]["role"] = role.to_dict()
        if self._estimates is not None and role.role not in ESTIMATED_ROLES:
            trace["metadata"]["estimate_skipped"] = (f"a {role.role} run: the estimated NPU track covers "
                                                     f"{', '.join(ESTIMATED_ROLES)} runs")
        elif self._estimates is not None:
            found, error = self._estimates.get(graph, role.fetches, role.role)
            trace["metadata"].update(estimated.metadata(found, error))
            measured: dict = {}
            for event in trace["traceEvents"]:
                if event.get("ph") == "X":
                    measured[event["name"]] = min(event["ts"], measured.get(event["name"], event["ts"]))
            if found is not None and measured:
                trace["traceEvents"].extend(estimated.estimate_events(found, measured, step, members))
        path = os.path.join(self.folder, f"trace_step_{step}.json")
        self._save(path, lambda: write_atomic(path, json.dumps(trace), what="profiling trace"))  # no 0-byte file
        self.written.append(path)

    def close(self) -> None:
        """Merge the steps written so far into trace_merged.json (again only when steps were added)."""
        from npu_sim_bridge.profiling.merge import MERGED_NAME, write_merged
        from npu_sim_bridge.profiling.summary import load_traces

        with self._lock:
            written = list(self.written)
        if not written or len(written) == self._merged_steps:
            return
        path = os.path.join(self.folder, MERGED_NAME)
        loaded = sorted((pair for file in written for pair in load_traces(file)),
                        key=lambda pair: pair[1]["metadata"]["step"])  # threads may finish steps out of order
        self._save(path, lambda: write_merged(loaded, path))
        self.merged, self._merged_steps = path, len(written)

    def _save(self, path: str, write) -> None:
        from npu_sim_bridge.errors import ConfigError

        try:
            os.makedirs(self.folder, exist_ok=True)
            write()
        except OSError as err:
            raise ConfigError(f"option profiling_options: cannot write the trace {path} ({err}); point \"output\" "
                              "at a writable folder") from err


def profiler_for(session) -> SessionProfiler | None:
    """The profiler of a Session whose config turns profiling_mode on (built once per Session), else None."""
    profiler = session.__dict__.get(PROFILER_MARK)
    if profiler is None:
        profiler = _make(getattr(session, "_config", None)) or False
        session.__dict__[PROFILER_MARK] = profiler
    return profiler or None


def _make(config) -> SessionProfiler | None:
    if config is None:
        return None
    from npu_sim_bridge.config.options import NPU_OPTIMIZER_NAME
    from npu_sim_bridge.profiling.options import parse_profiling_options

    for custom in config.graph_options.rewrite_options.custom_optimizers:
        if custom.name != NPU_OPTIMIZER_NAME:
            continue
        mode = custom.parameter_map.get("profiling_mode")
        if mode is None or not mode.b:
            return None
        raw = custom.parameter_map.get("profiling_options")
        return SessionProfiler(parse_profiling_options(raw.s if raw is not None else ""), config)
    return None


def install() -> None:
    """Wrap BaseSession.run and close once (every Session, MonitoredSession and Estimator run goes through them)."""
    global _installed
    with _lock:
        if _installed:
            return
        original = session_lib.BaseSession.run

        @functools.wraps(original)
        def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
            profiler = profiler_for(self)
            if profiler is None:
                return original(self, fetches, feed_dict, options, run_metadata)
            return profiler.run(original, self, fetches, feed_dict, options, run_metadata)

        original_close = session_lib.BaseSession.close

        @functools.wraps(original_close)
        def close(self):
            profiler = self.__dict__.get(PROFILER_MARK)
            try:
                if profiler:
                    profiler.close()
            finally:
                original_close(self)

        session_lib.BaseSession.run = run
        session_lib.BaseSession.close = close
        _installed = True
