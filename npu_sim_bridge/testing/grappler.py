"""A ConfigProto that runs only NpuOptimizer in Grappler, as tests and benchmarks hand to OptimizeGraph."""

from __future__ import annotations

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
