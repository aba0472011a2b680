"""ResNet-50 training step on a GPU: sim_fp16_execution=native (real float16 kernels) / plain float32.

Where the NPU runs an op in float16, `native` runs TensorFlow's own float16 kernel (Casts at the
boundaries, variables float32), so on a GPU with float16 units the step should get faster, where the
default `emulate` rounds float32 values and can only cost time. This script measures both against
plain float32 (Keras ResNet-50, Momentum, softmax cross-entropy; `testing.models.resnet50`).

Each ratio is measured interleaved: the Sessions (plain, native, emulate) alternate step by step, and
each round's ratio is the median step time over plain's; printed as the median over rounds and the
range. Two session configurations, each with the same session options on both sides:
  - user: a hand-built ConfigProto naming NpuOptimizer (allow_mix_precision, Grappler's remapper
    on), as the seed scripts write it; plain is the same ConfigProto without the NpuOptimizer;
  - npu_config_proto: that ConfigProto passed through npu_config_proto; plain likewise without it.
Every Session grows its GPU memory as needed (allow_growth), the same on both sides.

It needs TensorFlow built with CUDA and a GPU it can see; without one it says so and exits with
status 2. `--device cpu` runs the same measurement on the CPU, to check the script where there is no
GPU: TensorFlow's CPU float16 kernels are slow, so that figure says nothing of a GPU.

Run:  python benchmarks/bench_gpu.py [--batch 64] [--image 224] [--rounds 5] [--steps 10] [--device gpu|cpu]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.core.protobuf import config_pb2  # noqa: E402

import npu_sim_bridge  # noqa: E402  (registers NpuOptimizer with Grappler)
from interleave import interleaved_ratios  # noqa: E402
from npu_sim_bridge.runtime.session import npu_config_proto  # noqa: E402
from npu_sim_bridge.testing import models  # noqa: E402

tf.compat.v1.disable_eager_execution()

KINDS = ("plain", "native", "emulate")


def session_config(setting: str, kind: str, device: str) -> config_pb2.ConfigProto:
    """setting: user | npu_config_proto; kind: plain (no NpuOptimizer) | native | emulate."""
    config = config_pb2.ConfigProto()
    config.gpu_options.allow_growth = True
    if device == "cpu":
        config.device_count["GPU"] = 0
    custom = config.graph_options.rewrite_options.custom_optimizers.add()
    custom.name = "NpuOptimizer"
    custom.parameter_map["precision_mode"].s = b"allow_mix_precision"
    custom.parameter_map["sim_fp16_execution"].s = (b"emulate" if kind == "plain" else kind.encode())
    if setting == "npu_config_proto":
        config = npu_config_proto(config)
    if kind == "plain":  # the same session options, without the NpuOptimizer
        del config.graph_options.rewrite_options.custom_optimizers[:]
    return config


def float16_nodes() -> int:
    """Nodes the last rewrite of the main graph runs in float16 (its report), to show it happened."""
    reports = [report for report in npu_sim_bridge.recent_reports() if report.item_id == "tf_graph"]
    if not reports:
        return 0
    return sum(1 for record in reports[-1].nodes.values() if record.dtype_after == "float16")


def step_ratios(setting: str, args) -> dict[str, list[float]]:
    """Per round: native's and emulate's median step time over plain's, and plain's in ms."""
    rng = np.random.default_rng(0)
    sessions, lowered = {}, {}
    for kind in KINDS:
        model = models.resnet50(batch_size=args.batch, image_size=args.image, with_saver=False)
        npu_sim_bridge.clear_reports()
        sess = tf.compat.v1.Session(graph=model.graph, config=session_config(setting, kind, args.device))
        sess.run(model.init_op)
        fetch = [model.loss, model.train_op]
        feed = model.feed(rng)
        for _ in range(args.warmup):
            sess.run(fetch, feed)
        lowered[kind] = float16_nodes()
        sessions[kind] = (sess, fetch, feed)
    if lowered["native"] == 0:
        raise SystemExit(f"{setting}: the rewrite ran no node in float16 (no NpuOptimizer report of the "
                         "training graph): the figures would not measure float16")
    print(f"  {setting}: nodes running float16 after the rewrite: native {lowered['native']}, "
          f"emulate {lowered['emulate']} (rounded in float32), plain {lowered['plain']}", flush=True)
    return interleaved_ratios(sessions, args.rounds, args.steps)


def ratio_text(ratios: list[float]) -> str:
    return f"{statistics.median(ratios):5.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("gpu", "cpu"), default="gpu")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--image", type=int, default=224)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10, help="interleaved steps per round")
    parser.add_argument("--warmup", type=int, default=3, help="steps per Session before timing")
    parser.add_argument("--settings", default="user,npu_config_proto",
                        help="comma-separated: user, npu_config_proto")
    args = parser.parse_args()
    settings = [s.strip() for s in args.settings.split(",") if s.strip()]
    unknown = sorted(set(settings) - {"user", "npu_config_proto"})
    if unknown or not settings:
        parser.error(f"--settings names {', '.join(unknown) or 'nothing'}; it takes user, npu_config_proto")
    gpus = tf.config.list_physical_devices("GPU")
    if args.device == "gpu" and not gpus:
        print(f"no GPU that TensorFlow {tf.__version__} can use (built with CUDA: "
              f"{tf.test.is_built_with_cuda()}): run where one is, or pass --device cpu to check the "
              "script on the CPU", file=sys.stderr)
        return 2
    where = ", ".join(tf.config.experimental.get_device_details(g).get("device_name", g.name) for g in gpus) \
        if args.device == "gpu" else "CPU (not the GPU row: TensorFlow's CPU float16 kernels are slow)"
    print(f"ResNet-50 training step, batch {args.batch}, image {args.image}, on {where}; TensorFlow "
          f"{tf.__version__}; {args.rounds} rounds of {args.steps} interleaved steps, median (range) "
          "of the per-round ratios to plain float32")
    for setting in settings:
        ratios = step_ratios(setting, args)
        print(f"  {setting:<17} float32 {statistics.median(ratios['plain_ms']):8.2f} ms "
              f"({args.batch / statistics.median(ratios['plain_ms']) * 1000:7.1f} images/s) | "
              f"native {ratio_text(ratios['native'])} | emulate {ratio_text(ratios['emulate'])}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
