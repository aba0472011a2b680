"""The estimated Ascend 910 step of every model of the sweep at its usual training size, BERT-base and BERT-Large,
side by side with published 910 figures; then what estimating ResNet-50 costs against one simulated step of it.

    .venv/bin/python benchmarks/bench_estimate.py [--models a,b] [--no-step] [--step-batch 32]

Sizes and batches: npu_sim_bridge/estimate/sweep.py (Keras applications at their default input size, 224 or
299, 1,000 classes, a usual per-device batch; the sweep's small graphs as built). Options as the measured anchors
ran: allow_mix_precision, iterations_per_loop=100. Per model: est. ms/step (and its range), samples/s, share of
the cube peak, the top bottleneck, the published per-device samples/s where there is one, and the seconds the
estimate took (rewrite, shapes, costing; not building the graph).

Then ResNet-50 at 224x224: estimating at batch 256 and at the step batch, against one simulated training step
(NpuOptimizer in a Session on this machine's CPU; the second step, as the first compiles) at the step batch:
batch 256 needs tens of GB and minutes per step on a CPU, so the step is timed at --step-batch (default 32).
Estimating costs the same at any batch (it reads shapes, it computes nothing).
"""

import argparse
import gc
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

OPTIONS = {"precision_mode": "allow_mix_precision", "iterations_per_loop": "100"}


def _row(model, published):
    from npu_sim_bridge.estimate import estimate
    from npu_sim_bridge.estimate.advisor import advise

    built = model.build()
    meta = built.meta_graph_def()
    del built
    phases = {}
    began = time.perf_counter()
    step = estimate(meta, OPTIONS, batch=model.batch, timings=phases)
    took = time.perf_counter() - began
    found = advise(step)
    top = f"{found[0].code} {100 * found[0].share:.0f}%" if found else "-"
    low, high = step.range_us()
    rate = f"{step.samples_per_s:.0f}" if step.samples_per_s else "?"
    known = published.get(model.name)
    versus = f"{known.samples_per_s:>8.0f} {100 * (step.samples_per_s / known.samples_per_s - 1):+6.0f}%" \
        if known and step.samples_per_s else f"{'-':>8} {'':>7}"
    print(f"{model.name:<19}{model.size:>9}{step.batch or '?':>6}{step.step_us / 1e3:>9.1f}"
          f"{f'{low / 1e3:.0f}-{high / 1e3:.0f}':>12}{rate:>9}{100 * step.cube_peak_share:>7.1f}%  {top:<24}"
          f"{versus}{took:>7.1f}", flush=True)
    return took, phases


def _one_training_step_seconds(batch: int) -> float:
    import numpy as np
    import tensorflow as tf

    import npu_sim_bridge  # noqa: F401  registers NpuOptimizer
    from npu_sim_bridge.testing import models, sweep

    model = models.resnet50(batch_size=batch)
    config = sweep.session_config("mixed")
    with tf.compat.v1.Session(graph=model.graph, config=config) as sess:
        sess.run(model.init_op)
        times = []
        for step in range(2):  # the first step rewrites and compiles, as on the NPU; the second is timed
            feed = model.feed(np.random.default_rng(step))
            began = time.perf_counter()
            sess.run(model.train_op, feed)
            times.append(time.perf_counter() - began)
    return times[-1]


def main() -> None:
    from npu_sim_bridge.estimate.sweep import PUBLISHED, sweep_models

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="", help="comma-separated names (default: all)")
    parser.add_argument("--no-step", action="store_true", help="skip timing a simulated training step")
    parser.add_argument("--step-batch", type=int, default=32, help="batch of the simulated ResNet-50 step")
    args = parser.parse_args()
    available = sweep_models()
    names = [n for n in args.models.split(",") if n] or list(available)
    unknown = [n for n in names if n not in available]
    if unknown:
        parser.error(f"unknown models {', '.join(unknown)}; known: {', '.join(available)}")
    print(f"estimated Ascend910A training step ({OPTIONS}); an estimate, not a measurement; 'published' is a "
          f"per-device 910 figure (npu_sim_bridge/estimate/sweep.py), '+x%' the estimate's gap to it")
    print(f"{'model':<19}{'input':>9}{'batch':>6}{'ms/step':>9}{'range ms':>12}{'samples/s':>9}{'cube':>8}  "
          f"{'top bottleneck':<24}{'published':>9}{'gap':>7}{'est s':>7}")
    took = {}
    for name in names:
        try:
            took[name] = _row(available[name], PUBLISHED)
        except Exception as err:  # noqa: BLE001 - one model's failure is a row of the table, not its end
            print(f"{name:<19} failed: {type(err).__name__}: {str(err)[:160]}", flush=True)
        gc.collect()
    if args.no_step:
        return
    from dataclasses import replace

    from npu_sim_bridge.testing import models

    wide = took.get("resnet50_b256") or _row(available["resnet50_b256"], PUBLISHED)
    small_model = replace(available["resnet50_b32"], name=f"resnet50_b{args.step_batch}",
                          build=lambda: models.resnet50(batch_size=args.step_batch), batch=args.step_batch)
    small = took.get(small_model.name) or _row(small_model, PUBLISHED)
    gc.collect()
    step = _one_training_step_seconds(args.step_batch)
    print("\nResNet-50 224x224, estimating (phases in s) against one simulated training step on this CPU:")
    for label, (seconds, phases) in ((f"estimate b256", wide), (f"estimate b{args.step_batch}", small)):
        split = ", ".join(f"{k} {v:.1f}" for k, v in phases.items())
        print(f"  {label:<16}{seconds:>7.1f} s  ({split})")
    print(f"  {f'step b{args.step_batch}':<16}{step:>7.1f} s")
    print(f"  one step at b{args.step_batch} takes {step / small[0]:.1f}x estimating at b{args.step_batch} and "
          f"{step / wide[0]:.1f}x estimating at b256 (a step at b256 computes {256 // args.step_batch}x more)")


if __name__ == "__main__":
    main()
