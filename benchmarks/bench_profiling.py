"""What profiling_mode costs a training loop: no profiling, profiling without and with the estimated NPU track.

For each model (npu_sim_bridge.testing.models), one Session per variant runs the init op and STEPS training
steps; the figures are the wall time of the first training step (the estimate is computed there), the
median of the later steps, and Session.close (where the merged trace is written). Variants:
  plain      NpuOptimizer without profiling_mode
  trace      profiling_mode, profiling_options {"sim_estimate": "off"}  (what profiling cost before the track)
  estimate   profiling_mode with the estimated NPU track (the default)
Run the same script on the code before the change with --before (its profiling_options has no
sim_estimate key, so the "trace" variant leaves it out).

Run:  python benchmarks/bench_profiling.py [--models small_cnn,resnet50] [--steps 5] [--before]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

import npu_sim_bridge  # noqa: E402,F401  (loads the NpuOptimizer shim)
from npu_sim_bridge.testing import models  # noqa: E402

tf.compat.v1.disable_eager_execution()


def config(profiling: dict | None):
    proto = tf.compat.v1.ConfigProto()
    custom = proto.graph_options.rewrite_options.custom_optimizers.add()
    custom.name = "NpuOptimizer"
    if profiling is not None:
        custom.parameter_map["profiling_mode"].b = True
        custom.parameter_map["profiling_options"].s = json.dumps(profiling).encode()
    return proto


def measure(model, proto, steps: int) -> dict:
    import numpy as np

    rng = np.random.default_rng(0)
    times = []
    with tf.compat.v1.Session(graph=model.graph, config=proto) as sess:
        sess.run(model.init_op)
        for _ in range(steps):
            feed = model.feed(rng)
            start = time.perf_counter()
            sess.run([model.train_op, model.loss], feed)
            times.append(time.perf_counter() - start)
        start = time.perf_counter()
    closed = time.perf_counter() - start
    return {"first_s": times[0], "later_median_s": statistics.median(times[1:]) if len(times) > 1 else None,
            "close_s": closed}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="small_cnn,resnet50")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--before", action="store_true", help="the code before the estimated track")
    args = parser.parse_args()
    builders = models.all_builders()
    print(f"{'model':<10} {'variant':<9} {'first step s':>13} {'later median s':>15} {'close s':>8}")
    for name in args.models.split(","):
        model = builders[name]()
        out = tempfile.mkdtemp(prefix="bench_profiling_")
        variants = [("plain", None), ("trace", {"output": out} if args.before else {"output": out,
                                                                                      "sim_estimate": "off"})]
        if not args.before:
            variants.append(("estimate", {"output": out}))
        for variant, profiling in variants:
            row = measure(model, config(profiling), args.steps)
            later = f"{row['later_median_s']:.3f}" if row["later_median_s"] is not None else "-"
            print(f"{name:<10} {variant:<9} {row['first_s']:13.3f} {later:>15} {row['close_s']:8.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
