"""What the CPU layout's Transposes cost a channels-first training step, against the same model channels-last.

Trains testing/channels_first.cnn (Conv2D, depthwise, Conv3D, max/avg pools 2D and 3D, fused batch
norm on the channel axis) channels-first and channels-last from the same weights on the same
batches, in Sessions naming NpuOptimizer (force_fp32, mix_compile_mode on and off). Each step
alternates the layouts, so load on the machine hits both alike. It prints the median step time of
each, their ratio, the largest loss and variable differences after the steps, and the ops laid out.
Set TF_ENABLE_ONEDNN_OPTS=0 to measure without oneDNN (where TensorFlow has no NCHW CPU kernels).

Run:  python benchmarks/bench_layout.py [--batch 16] [--image-size 32] [--steps 20]
"""

from __future__ import annotations

import argparse
import collections
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.core.protobuf.rewriter_config_pb2 import RewriterConfig  # noqa: E402

import npu_sim_bridge  # noqa: E402,F401  (registers NpuOptimizer)
from npu_sim_bridge.testing import channels_first  # noqa: E402

tf.compat.v1.disable_eager_execution()
_v1 = tf.compat.v1


def _config(mix: bool) -> _v1.ConfigProto:
    config = _v1.ConfigProto()
    custom = config.graph_options.rewrite_options.custom_optimizers.add()
    custom.name = "NpuOptimizer"
    custom.parameter_map["precision_mode"].s = b"force_fp32"
    custom.parameter_map["mix_compile_mode"].b = mix
    config.graph_options.rewrite_options.remapping = RewriterConfig.OFF
    return config


def measure(mix: bool, batch: int, image_size: int, depth: int, steps: int) -> dict:
    npu_sim_bridge.clear_reports()
    sessions, models, times, losses = {}, {}, collections.defaultdict(list), collections.defaultdict(list)
    for data_format in channels_first.FORMATS:
        model = channels_first.cnn(data_format, batch_size=batch, image_size=image_size, depth=depth)
        models[data_format] = model
        sessions[data_format] = _v1.Session(graph=model.graph, config=_config(mix))
        sessions[data_format].run(model.init_op)
    try:
        for step in range(steps + 1):
            for data_format, model in models.items():
                feed = model.feed(np.random.default_rng(step))
                began = time.perf_counter()
                loss, _ = sessions[data_format].run([model.loss, model.train_op], feed)
                if step:  # the first step builds the graph and rewrites it
                    times[data_format].append(time.perf_counter() - began)
                losses[data_format].append(float(loss))
        variables = {}
        for data_format, model in models.items():
            with model.graph.as_default():
                variables[data_format] = sessions[data_format].run(_v1.trainable_variables())
    finally:
        for session in sessions.values():
            session.close()
    laid_out = collections.Counter(
        d.op for r in npu_sim_bridge.recent_reports() if r.item_id == "tf_graph" and not r.rerun
        for d in r.nodes.values() if any(reason.code.startswith("layout.cpu") for reason in d.reasons))
    first, last = (np.median(times[f]) for f in ("channels_first", "channels_last"))
    return {
        "first_ms": first * 1e3, "last_ms": last * 1e3, "ratio": first / last,
        "loss_diff": max(abs(a - b) for a, b in zip(losses["channels_first"], losses["channels_last"])),
        "variable_diff": max(float(np.max(np.abs(a - b))) for a, b in zip(variables["channels_first"],
                                                                        variables["channels_last"])),
        "laid_out": laid_out,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--depth", type=int, default=8)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    print(f"oneDNN: TF_ENABLE_ONEDNN_OPTS={os.environ.get('TF_ENABLE_ONEDNN_OPTS', '(unset)')}; "
          f"batch {args.batch}, images {args.image_size}^2, volumes {args.depth}x{args.image_size}^2, "
          f"{args.steps} steps")
    print(f"{'mix_compile_mode':<17} {'NCHW ms':>9} {'NHWC ms':>9} {'ratio':>6} {'loss diff':>10} {'var diff':>10}")
    for mix in (False, True):
        row = measure(mix, args.batch, args.image_size, args.depth, args.steps)
        print(f"{str(mix):<17} {row['first_ms']:>9.2f} {row['last_ms']:>9.2f} {row['ratio']:>6.2f} "
              f"{row['loss_diff']:>10.2e} {row['variable_diff']:>10.2e}")
    print("laid out (op: count):", ", ".join(f"{op} {n}" for op, n in sorted(row["laid_out"].items())))


if __name__ == "__main__":
    main()
