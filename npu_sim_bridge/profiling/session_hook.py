"""The Session.run wrapper: a Session whose NpuOptimizer has profiling_mode on traces the steps it selects.

Installed once when npu_sim_bridge loads the shim. For a Session without profiling the wrapper is
one cached attribute test. For a profiling Session, each selected step runs with FULL_TRACE and
output_partition_graphs added to the caller's RunOptions (the caller's RunMetadata still gets
everything), and writes <output>/<time>_<pid>/trace_step_<k>.json. Steps are the Session's runs,
counted from 0, as dump_step counts them.
"""

from __future__ import annotations

import functools
import json
import os
import threading
import time

from tensorflow.core.protobuf import config_pb2
from tensorflow.python.client import session as session_lib

_ATTR = "_npu_sim_profiler"
_installed = False
_lock = threading.Lock()


class SessionProfiler:
    """Counts one Session's steps and writes the trace of each selected one."""

    def __init__(self, options):
        self.options = options
        self.folder = os.path.join(options.output, f"{time.strftime('%Y%m%d%H%M%S')}_{os.getpid()}_{id(self):x}")
        self.step = -1
        self.written: list[str] = []
        self._lock = threading.Lock()

    def run(self, original, session, fetches, feed_dict, options, run_metadata):
        with self._lock:
            self.step += 1
            step = self.step
        if not self.options.selects(step):
            return original(session, fetches, feed_dict, options, run_metadata)
        traced = config_pb2.RunOptions()
        if options is not None:
            traced.CopyFrom(options)
        traced.trace_level = config_pb2.RunOptions.FULL_TRACE
        traced.output_partition_graphs = True
        metadata = config_pb2.RunMetadata()
        result = original(session, fetches, feed_dict, traced, metadata)
        if run_metadata is not None:
            run_metadata.MergeFrom(metadata)
        self._write(metadata, step)
        return result

    def _write(self, metadata, step: int) -> None:
        from npu_sim_bridge.errors import ConfigError
        from npu_sim_bridge.fileio import write_atomic
        from npu_sim_bridge.profiling.trace import build_trace

        trace = build_trace(metadata, step, with_ops=self.options.task_trace)
        path = os.path.join(self.folder, f"trace_step_{step}.json")
        try:
            os.makedirs(self.folder, exist_ok=True)
            write_atomic(path, json.dumps(trace), what="profiling trace")  # no 0-byte file on a full disk
        except OSError as err:
            raise ConfigError(f"option profiling_options: cannot write the trace {path} ({err}); point \"output\" "
                              "at a writable folder") from err
        self.written.append(path)


def profiler_for(session) -> SessionProfiler | None:
    """The profiler of a Session whose config turns profiling_mode on (built once per Session), else None."""
    profiler = session.__dict__.get(_ATTR)
    if profiler is None:
        profiler = _make(getattr(session, "_config", None)) or False
        session.__dict__[_ATTR] = profiler
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
        return SessionProfiler(parse_profiling_options(raw.s if raw is not None else ""))
    return None


def install() -> None:
    """Wrap BaseSession.run once (every Session, MonitoredSession and Estimator run goes through it)."""
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

        session_lib.BaseSession.run = run
        _installed = True
