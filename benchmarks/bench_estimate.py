"""The estimated Ascend 910 step of every model of the sweep, BERT-base and BERT-Large, and what estimating costs.

    .venv/bin/python benchmarks/bench_estimate.py [--models a,b] [--batch 64] [--no-step]

Options as the measured anchors ran: allow_mix_precision, iterations_per_loop=100. The sweep's Keras
applications leave the batch unknown: they are estimated at --batch (default 64) and the sweep's image sizes
(32x32 for most, so far less work than at 224x224); the others keep the batch they are built with. Prints
est. ms/step, samples/s, share of the cube peak and the top bottleneck; then the seconds estimating ResNet-50
takes (rewrite, shapes, costing; not building the graph) against one simulated training step of it on this
machine's CPU (batch 32: batch 256 needs tens of GB; estimating takes the same time at any batch).
"""

import argparse
import functools
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

OPTIONS = {"precision_mode": "allow_mix_precision", "iterations_per_loop": "100"}


def _builders():
    from npu_sim_bridge.testing import models, zoo

    builders = dict(zoo.sweep_builders())
    builders["resnet50_b256"] = functools.partial(models.resnet50, batch_size=256)
    builders["bert_base_b32"] = functools.partial(models.bert, batch_size=32, dropout=0.0)
    builders["bert_large_b96"] = functools.partial(models.bert, batch_size=96, num_layers=24, hidden=1024, heads=16,
                                                   intermediate=4096, dropout=0.0)
    return builders


def _row(name, build, batch):
    from npu_sim_bridge.estimate import estimate
    from npu_sim_bridge.estimate.advisor import advise

    model = build()
    began = time.perf_counter()
    step = estimate(model.meta_graph_def(), OPTIONS, batch=batch)
    took = time.perf_counter() - began
    found = advise(step)
    top = f"{found[0].code} {100 * found[0].share:.0f}%" if found else "-"
    rate = f"{step.samples_per_s:.0f}" if step.samples_per_s else "?"
    print(f"{name:<22}{step.batch or '?':>6}{step.step_us / 1e3:>10.2f}{rate:>10}"
          f"{100 * step.cube_peak_share:>8.1f}%  {top:<28}{took:>6.1f}", flush=True)
    return took


def _one_training_step_seconds() -> float:
    import numpy as np
    import tensorflow as tf

    import npu_sim_bridge  # noqa: F401  registers NpuOptimizer
    from npu_sim_bridge.testing import models, sweep

    model = models.resnet50(batch_size=32)
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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="", help="comma-separated names (default: all)")
    parser.add_argument("--batch", type=int, default=64, help="batch for graphs whose batch is unknown")
    parser.add_argument("--no-step", action="store_true", help="skip timing a simulated training step")
    args = parser.parse_args()
    builders = _builders()
    names = [n for n in args.models.split(",") if n] or list(builders)
    unknown = [n for n in names if n not in builders]
    if unknown:
        parser.error(f"unknown models {', '.join(unknown)}; known: {', '.join(builders)}")
    print(f"estimated Ascend910A step ({OPTIONS}); an estimate, not a measurement")
    print(f"{'model':<22}{'batch':>6}{'ms/step':>10}{'samples/s':>10}{'cube':>9}  {'top bottleneck':<28}{'est s':>6}")
    took = {}
    for name in names:
        try:
            took[name] = _row(name, builders[name], args.batch)
        except Exception as err:  # one model's failure is a row, not the end of the table
            print(f"{name:<22} failed: {type(err).__name__}: {str(err)[:120]}", flush=True)
    if not args.no_step:
        from npu_sim_bridge.testing import models
        estimating = took.get("resnet50_b256")
        if estimating is None:
            estimating = _row("resnet50_b32", functools.partial(models.resnet50, batch_size=32), args.batch)
        step = _one_training_step_seconds()
        print(f"\nResNet-50: estimating took {estimating:.1f} s; one simulated training step (batch 32, CPU) "
              f"took {step:.1f} s: {step / estimating:.1f}x")


if __name__ == "__main__":
    main()
