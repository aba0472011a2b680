"""A ConfigProto that runs only NpuOptimizer in Grappler, as tests and benchmarks hand to OptimizeGraph, and a log
of the calls Grappler makes into NpuOptimizer's Python entry."""

from __future__ import annotations

import time

from tensorflow.core.protobuf import config_pb2, rewriter_config_pb2

ONE = rewriter_config_pb2.RewriterConfig.ONE


def npu_only_config(parameters: dict[str, str] | None = None, iterations: int = ONE,
                    name: str = "NpuOptimizer") -> config_pb2.ConfigProto:
    """Grappler with only the custom optimizer `name` (misspellings included), `iterations` meta-optimizer
    iterations, on graphs of any size; `parameters` are its string parameter_map entries."""
    config = config_pb2.ConfigProto()
    rewrite = config.graph_options.rewrite_options
    rewrite.min_graph_nodes = -1
    rewrite.meta_optimizer_iterations = iterations
    rewrite.optimizers.append(name)
    custom = rewrite.custom_optimizers.add(name=name)
    for key, value in (parameters or {}).items():
        custom.parameter_map[key].s = value.encode()
    return config


class EntryCallLog:
    """Within `with`: wraps the shim's Python entry point (native/entry.optimize) and keeps (item id, seconds)
    of each call Grappler makes into NpuOptimizer."""

    def __init__(self):
        from npu_sim_bridge.native import entry

        self.calls: list[tuple[str, float]] = []
        self._entry = entry
        self._original = entry.optimize

    def __enter__(self):
        def timed(item_id, *args, **kwargs):
            started = time.perf_counter()
            try:
                return self._original(item_id, *args, **kwargs)
            finally:
                self.calls.append((item_id, time.perf_counter() - started))
        self._entry.optimize = timed
        return self

    def __exit__(self, *exc):
        self._entry.optimize = self._original
