"""What NpuOptimizer costs on each of Grappler's calls, on the user's configuration.

Grappler calls a custom optimizer once per meta-optimizer iteration (twice by default) and once per
library function it optimizes, GeOp bodies included. Only the first call on the graph has work to
do; the later ones must cost next to nothing. This script runs a ResNet-50 training MetaGraph
through tensorflow.python.grappler.tf_optimizer.OptimizeGraph with:

  user     a hand-built ConfigProto naming NpuOptimizer (allow_mix_precision), Grappler's default
           optimizers on and its default two iterations, as the seed scripts write it;
  only     the same with NpuOptimizer the only optimizer (Grappler's `optimizers` list), two iterations;
  plain    the user's ConfigProto without NpuOptimizer (TensorFlow's own optimizers alone).

It prints the time of each NpuOptimizer call (the first rewrite, the later iteration, the GeOp
body items), the ratio of the later calls to the first, and the whole OptimizeGraph time of `user`
against `plain` (best of --repeats, the configurations alternating in every repeat).

Run:  python benchmarks/bench_iterations.py [--image-size 64] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
from tensorflow.core.protobuf import config_pb2, rewriter_config_pb2  # noqa: E402
from tensorflow.python.grappler import tf_optimizer  # noqa: E402

import npu_sim_bridge  # noqa: E402,F401  (registers NpuOptimizer)
from npu_sim_bridge.testing.grappler import EntryCallLog  # noqa: E402
from npu_sim_bridge.testing import models  # noqa: E402

tf.compat.v1.disable_eager_execution()


def config(kind: str) -> config_pb2.ConfigProto:
    proto = config_pb2.ConfigProto()
    rewrite = proto.graph_options.rewrite_options
    rewrite.min_graph_nodes = -1
    rewrite.meta_optimizer_iterations = rewriter_config_pb2.RewriterConfig.TWO
    if kind == "plain":
        return proto
    if kind == "only":
        rewrite.optimizers.append("NpuOptimizer")
    custom = rewrite.custom_optimizers.add()
    custom.name = "NpuOptimizer"
    custom.parameter_map["precision_mode"].s = b"allow_mix_precision"
    return proto


def describe(calls: list[tuple[str, float]]) -> str:
    graph = [seconds for item_id, seconds in calls if item_id == "tf_graph" or item_id == "graph_to_optimize"]
    bodies = [seconds for item_id, seconds in calls if item_id.startswith("GeOp")]
    others = [seconds for item_id, seconds in calls if item_id not in ("tf_graph", "graph_to_optimize")
              and not item_id.startswith("GeOp")]
    first = graph[0] if graph else 0.0
    parts = [f"first rewrite {first * 1000:6.0f} ms"]
    for index, seconds in enumerate(graph[1:], start=2):
        parts.append(f"iteration {index} {seconds * 1000:4.0f} ms ({seconds / first:.3f}x)")
    if bodies:
        parts.append("GeOp body items " + ", ".join(f"{s * 1000:.0f}" for s in bodies) + " ms "
                     f"(largest {max(bodies) / first:.3f}x)")
    if others:
        parts.append(f"{len(others)} other function items {sum(others) * 1000:.0f} ms in all")
    return "; ".join(parts)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    model = models.resnet50(batch_size=2, image_size=args.image_size)
    meta = model.meta_graph_def()
    print(f"ResNet-50 training MetaGraph: {len(meta.graph_def.node)} nodes, image {args.image_size}")
    best: dict[str, float] = {}
    logs: dict[str, list] = {}
    for _ in range(args.repeats):
        for kind in ("plain", "user", "only"):
            with EntryCallLog() as log:
                started = time.perf_counter()
                tf_optimizer.OptimizeGraph(config(kind), meta)
                seconds = time.perf_counter() - started
            if seconds < best.get(kind, float("inf")):
                best[kind], logs[kind] = seconds, log.calls
    for kind in ("user", "only"):
        print(f"  {kind:<5} NpuOptimizer calls: {describe(logs[kind])}")
    print(f"  whole OptimizeGraph: user {best['user'] * 1000:.0f} ms, plain {best['plain'] * 1000:.0f} ms "
          f"({best['user'] / best['plain']:.2f}x); only NpuOptimizer {best['only'] * 1000:.0f} ms")


if __name__ == "__main__":
    main()
