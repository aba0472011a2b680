"""Overhead of the NpuOptimizer bridge itself: time to the first training step, with vs without.

Builds a ResNet-50 training graph once, then alternates fresh Sessions on it:
  plain   - a ConfigProto without NpuOptimizer
  bridge  - NpuOptimizer installed with sim_passes=none (shim, serialization, validation,
            report: everything but the rewrite passes)
Each timed run covers Session creation, the variable initializer and the first training step
(where Grappler runs). Prints the medians and their ratio (target: bridge/plain <= 1.1).
Run:  python benchmarks/bench_bridge_overhead.py [--repeats 5] [--image-size 224] [--batch 2]
"""

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import npu_sim_bridge  # noqa: E402
from npu_sim_bridge.testing import models  # noqa: E402

tf.compat.v1.disable_eager_execution()


def config(with_bridge: bool) -> tf.compat.v1.ConfigProto:
    proto = tf.compat.v1.ConfigProto()
    if with_bridge:
        custom_op = proto.graph_options.rewrite_options.custom_optimizers.add()
        custom_op.name = "NpuOptimizer"
        custom_op.parameter_map["sim_passes"].s = b"none"
    return proto


def first_step_seconds(model, feed, with_bridge: bool) -> float:
    started = time.perf_counter()
    with tf.compat.v1.Session(graph=model.graph, config=config(with_bridge)) as sess:
        sess.run(model.init_op)
        sess.run(model.train_op, feed)
    return time.perf_counter() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--batch", type=int, default=2)
    args = parser.parse_args()

    model = models.resnet50(batch_size=args.batch, image_size=args.image_size)
    feed = model.feed(np.random.default_rng(0))
    nodes = len(model.graph.as_graph_def().node)
    print(f"ResNet-50 training graph: {nodes} nodes, batch {args.batch}, image {args.image_size}")
    first_step_seconds(model, feed, False)  # warm TensorFlow's own one-time costs
    timings = {"plain": [], "bridge": []}
    for _ in range(args.repeats):
        for name in ("plain", "bridge"):
            timings[name].append(first_step_seconds(model, feed, name == "bridge"))
    reports = [r for r in npu_sim_bridge.recent_reports() if r.nodes_before >= nodes // 2]
    plain = statistics.median(timings["plain"])
    bridge = statistics.median(timings["bridge"])
    for name, values in timings.items():
        print(f"{name:>6}: median {statistics.median(values):.3f} s  "
              f"(runs: {', '.join(f'{v:.3f}' for v in values)})")
    if reports:
        per_call = statistics.median(r.seconds for r in reports)
        per_run = sum(r.seconds for r in reports) / args.repeats
        print(f"pipeline time per Grappler call on the main graph: median {per_call * 1000:.1f} ms "
              f"over {len(reports)} calls; {per_run:.3f} s per Session = "
              f"{per_run / plain * 100:.1f}% of the plain time to first step")
    print(f"ratio bridge/plain (medians): {bridge / plain:.3f}  (target <= 1.10)")
    print(f"ratio bridge/plain (fastest runs): {min(timings['bridge']) / min(timings['plain']):.3f}")


if __name__ == "__main__":
    main()
