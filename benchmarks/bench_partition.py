"""Mixed compute cost: a training step split into GeOps around host ops vs the same graph unpartitioned,
and the time the placement and partition passes take on the ResNet-50 training graph.

    python benchmarks/bench_partition.py [--steps 30] [--rounds 7] [--skip-resnet]

Both training sessions run the same tf.Graph with NpuOptimizer configured the same way except
`sim_passes` ('placement,partition' vs 'none'); they are timed in alternating short blocks and the
ratio is the median of the per-block ratios, so that load from other processes hits both alike.
Ratios above 1 mean the GeOp version is slower.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.core.framework import attr_value_pb2  # noqa: E402
from tensorflow.core.protobuf.rewriter_config_pb2 import RewriterConfig  # noqa: E402

import npu_sim_bridge  # noqa: E402
from npu_sim_bridge.testing import models  # noqa: E402

v1 = tf.compat.v1


def _config(passes: str, mix: bool = True) -> v1.ConfigProto:
    config = v1.ConfigProto(allow_soft_placement=True)
    custom = config.graph_options.rewrite_options.custom_optimizers.add()
    custom.name = "NpuOptimizer"
    custom.parameter_map["mix_compile_mode"].b = mix
    custom.parameter_map["sim_passes"].s = passes.encode()
    config.graph_options.rewrite_options.remapping = RewriterConfig.OFF
    config.graph_options.rewrite_options.memory_optimization = RewriterConfig.OFF
    return config


def _cnn_with_host_ops(batch: int = 32):
    """A small CNN with three host ops: a py_func, an op in without_npu_compile_scope, a summary."""
    graph = tf.Graph()
    with graph.as_default():
        v1.set_random_seed(0)
        images = v1.placeholder(tf.float32, [batch, 28, 28, 1], name="images")
        labels = v1.placeholder(tf.int32, [batch], name="labels")
        init = v1.glorot_uniform_initializer(seed=1)
        x = v1.layers.conv2d(images, 16, 5, padding="same", activation=tf.nn.relu, kernel_initializer=init)
        x = v1.layers.max_pooling2d(x, 2, 2)
        x = v1.numpy_function(lambda v: np.maximum(v, 0.0).astype(np.float32), [x], tf.float32,
                              name="host_clip")                                   # host op 1
        x.set_shape([batch, 14, 14, 16])
        with graph._attr_scope({"_without_npu_compile": attr_value_pb2.AttrValue(b=True)}):
            x = tf.multiply(x, 0.5, name="host_scale")                             # host op 2
        x = v1.layers.conv2d(x, 32, 5, padding="same", activation=tf.nn.relu, kernel_initializer=init)
        x = v1.layers.max_pooling2d(x, 2, 2)
        x = tf.reshape(x, [batch, 7 * 7 * 32])
        x = v1.layers.dense(x, 64, activation=tf.nn.relu, kernel_initializer=init)
        logits = v1.layers.dense(x, 10, kernel_initializer=init)
        loss = v1.losses.sparse_softmax_cross_entropy(labels, logits)
        summary = v1.summary.scalar("loss", loss)                                 # host op 3
        train = v1.train.AdamOptimizer(1e-3).minimize(loss)
        initializer = v1.global_variables_initializer()
    rng = np.random.default_rng(0)
    feed = {images: rng.random((batch, 28, 28, 1), dtype=np.float32),
            labels: rng.integers(0, 10, batch).astype(np.int32)}
    return graph, [loss, train, summary], initializer, feed


def bench_training_step(steps: int, rounds: int) -> dict:
    graph, fetches, initializer, feed = _cnn_with_host_ops()
    sessions = {}
    for label, passes in (("partitioned", "placement,partition"), ("unpartitioned", "none")):
        sess = v1.Session(graph=graph, config=_config(passes))
        sess.run(initializer)
        for _ in range(5):
            sess.run(fetches, feed)
        sessions[label] = sess
    geops = sorted({geop for report in npu_sim_bridge.recent_reports() for geop in report.summary["geops"]})
    times = {label: [] for label in sessions}
    ratios = []
    for _ in range(rounds):
        block = {}
        for label, sess in sessions.items():
            started = time.perf_counter()
            for _ in range(steps):
                sess.run(fetches, feed)
            block[label] = (time.perf_counter() - started) / steps
            times[label].append(block[label])
        ratios.append(block["partitioned"] / block["unpartitioned"])
    for sess in sessions.values():
        sess.close()
    median = {label: statistics.median(values) for label, values in times.items()}
    return {"median_s": median, "ratio": statistics.median(ratios), "geops": geops,
            "ratio_quartiles": statistics.quantiles(ratios, n=4) if len(ratios) >= 4 else ratios}


def bench_resnet_partition() -> list[dict]:
    model = models.resnet50()
    graph_def = model.graph_def()
    rows = []
    for mix in (True, False):
        started = time.perf_counter()
        _, report = npu_sim_bridge.rewrite(
            graph_def, {"mix_compile_mode": mix, "sim_passes": "placement,partition"},
            fetches=model.fetch_names())
        total = time.perf_counter() - started
        seconds = {record.name: record.seconds for record in report.passes}
        rows.append({"mix_compile_mode": mix, "nodes": len(graph_def.node), "total_s": total,
                     "placement_s": seconds.get("placement", 0.0), "partition_s": seconds.get("partition", 0.0),
                     "geops": len(report.summary["geops"]),
                     "host_nodes": report.summary["placements"].get("host", 0)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5, help="training steps per timed block")
    parser.add_argument("--rounds", type=int, default=60, help="alternating blocks per configuration")
    parser.add_argument("--skip-resnet", action="store_true", help="skip the ResNet-50 partition timing")
    args = parser.parse_args()
    tf.compat.v1.disable_eager_execution()

    step = bench_training_step(args.steps, args.rounds)
    print("training step, small CNN with 3 host ops (py_func, without_npu_compile_scope, summary), "
          f"mix_compile_mode on, GeOps {', '.join(step['geops'])}")
    print(f"  partitioned   {step['median_s']['partitioned'] * 1000:8.2f} ms/step")
    print(f"  unpartitioned {step['median_s']['unpartitioned'] * 1000:8.2f} ms/step")
    low, _, high = step["ratio_quartiles"]
    print(f"  ratio partitioned / unpartitioned: {step['ratio']:.3f}x, median of {args.rounds} side-by-side "
          f"blocks (quartiles {low:.3f}-{high:.3f}; target <= 1.05x)")
    if not args.skip_resnet:
        print("partition passes on the ResNet-50 training graph (offline rewrite)")
        for row in bench_resnet_partition():
            print(f"  mix_compile_mode={str(row['mix_compile_mode']):5} nodes {row['nodes']}: placement "
                  f"{row['placement_s'] * 1000:7.1f} ms + partition {row['partition_s'] * 1000:7.1f} ms "
                  f"(rewrite total {row['total_s'] * 1000:7.1f} ms), {row['geops']} GeOp(s), "
                  f"{row['host_nodes']} host nodes")


if __name__ == "__main__":
    main()
