"""The model sweep: what sinks, in how many GeOps, how much runs in float16, and what it costs.

    python benchmarks/bench_models.py [--models MobileNetV2,keras_cnn,...] [--steps 3] [--remapping]

Each model (every family of tf.keras.applications that builds as a TF1 training graph, at a small
input size; a TF1 batch-norm CNN with a training placeholder and a tf.cond dropout; a Keras CNN with
BatchNormalization and Dropout; user tf.cond and tf.while_loop; an LSTM with a v1 loop; a small BERT)
trains `--steps` steps from the same variables on the same batches in four Sessions:
plain (NpuOptimizer doing nothing), placement+partition in full sink and in mix_compile_mode, and
every pass under allow_mix_precision. Columns:

  heavy dev/total  cube ops and batch norms (forward and backward) on the device, full sink
  GeOps full/mix   GeOps in full sink and in mix_compile_mode
  crossings        groups of host ops between device segments in mix_compile_mode
  fp16 white       white-list ops on the device that run in float16 (allow_mix_precision)
  loss fp32/mixed  the loss after the steps, plain and allow_mix_precision, and their gap
  f32 identical    placement+partition losses bit-identical to plain (both modes)
  step ratio       mean step time allow_mix_precision / plain (emulated float16 on a CPU)

`--remapping` leaves Grappler's remapper on (a hand-built ConfigProto); by default it is off, as
npu_config_proto sets it.
"""

from __future__ import annotations

import argparse
import os
import time
import traceback

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

import npu_sim_bridge  # noqa: E402,F401  (registers NpuOptimizer)
from npu_sim_bridge.testing import sweep, zoo  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="", help="comma-separated names (default: all)")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--remapping", action="store_true", help="leave Grappler's remapper on")
    parser.add_argument("--learning-rate", type=float, default=0.01,
                        help="Momentum learning rate of the Keras applications (some diverge at 0.01 in 3 steps)")
    args = parser.parse_args()
    builders = zoo.sweep_builders(application_learning_rate=args.learning_rate)
    names = [n for n in args.models.split(",") if n] or list(builders)
    unknown = [n for n in names if n not in builders]
    if unknown:
        parser.error(f"unknown models {', '.join(unknown)}; known: {', '.join(builders)}")
    tf.get_logger().setLevel("ERROR")
    rows = []
    print(sweep.table([]), flush=True)
    for name in names:
        began = time.perf_counter()
        try:
            row = sweep.measure(name, builders[name], steps=args.steps, remapping=args.remapping)
        except Exception as err:  # a model that does not build or run is a row, not the end of the sweep
            traceback.print_exc()
            row = sweep.SweepRow(model=name, error=f"{type(err).__name__}: {str(err).splitlines()[0][:160]}")
        rows.append(row)
        print(sweep.table([row]).splitlines()[-1], f"  ({time.perf_counter() - began:.0f} s)", flush=True)
        for node, op, reason in row.heavy_on_host[:3]:
            print(f"  heavy op on host: {node} ({op}): {reason}")
    print()
    print(sweep.table(rows))


if __name__ == "__main__":
    main()
