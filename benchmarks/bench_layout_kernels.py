"""Where a channels-first sweep model's steady step goes: kernels and their times by op type, per Session kind.

For one sweep model (default cnn_channels_first) and each configuration (user, npu_config_proto) it opens
bench_cost's three Sessions (plain: NpuOptimizer sim_passes=none, the CPU layout alone; simulated: every
pass; geop_floor: the partition pass alone), traces steady steps (RunOptions FULL_TRACE) and prints, per
op type, the kernels each Session runs per step and their summed microseconds; then the Transposes, the
step's wall time and the process's CPU time per step with the Sessions interleaved step by step (the
machine is shared: the CPU time and the kernel counts move less with the load than the wall time).

`--first-step-only` switches the layout's second step off (passes/layout/chains.py and boundary.py: every
laid-out op between its own Transposes, as before that step), for a before/after in one tree.

Run:  python benchmarks/bench_layout_kernels.py [--model cnn_channels_first] [--steps 20] [--rounds 5]
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import bench_cost  # noqa: E402
from npu_sim_bridge.graph.op_categories import CALL_OPS  # noqa: E402
from npu_sim_bridge.testing import zoo  # noqa: E402

tf.compat.v1.disable_eager_execution()
KINDS = ("plain", "simulated", "geop_floor")
CALLS = tuple(CALL_OPS) + ("GeOp",)


def traced(sess, fetch, feed, steps: int) -> tuple[collections.Counter, collections.Counter]:
    """({op type: kernels per step}, {op type: microseconds per step}); function calls are left out (their
    bodies' kernels count)."""
    counts: collections.Counter = collections.Counter()
    micros: collections.Counter = collections.Counter()
    options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
    for _ in range(steps):
        metadata = tf.compat.v1.RunMetadata()
        sess.run(fetch, feed, options=options, run_metadata=metadata)
        for device in metadata.step_stats.dev_stats:
            if "/stream" in device.device or "/memcpy" in device.device:
                continue
            for stats in device.node_stats:
                label = stats.timeline_label
                op = label.split(" = ", 1)[1].split("(", 1)[0] if " = " in label else ""
                if op and op not in CALLS:
                    counts[op] += 1 / steps
                    micros[op] += stats.all_end_rel_micros / steps
    return counts, micros


def transposes(figures: collections.Counter) -> float:
    """The Transposes' figure (oneDNN's kernel is _MklTranspose)."""
    return figures["Transpose"] + figures["_MklTranspose"]


def timed(sessions: dict, rounds: int, steps: int) -> dict[str, dict[str, float]]:
    """{kind: {"wall_ms", "cpu_ms"}}: medians over the rounds of each round's median step, interleaved."""
    walls = {kind: [] for kind in sessions}
    cpus = {kind: [] for kind in sessions}
    for _ in range(rounds):
        wall = {kind: [] for kind in sessions}
        cpu = {kind: [] for kind in sessions}
        for _ in range(steps):
            for kind, (sess, fetch, feed) in sessions.items():
                started, cpu_started = time.perf_counter(), time.process_time()
                sess.run(fetch, feed)
                wall[kind].append(time.perf_counter() - started)
                cpu[kind].append(time.process_time() - cpu_started)
        for kind in sessions:
            walls[kind].append(statistics.median(wall[kind]) * 1000)
            cpus[kind].append(statistics.median(cpu[kind]) * 1000)
    return {kind: {"wall_ms": statistics.median(walls[kind]), "cpu_ms": statistics.median(cpus[kind])}
            for kind in sessions}


def measure(name: str, setting: str, steps: int, rounds: int) -> None:
    builders = zoo.sweep_builders()
    if name not in builders:
        raise SystemExit(f"unknown sweep model {name!r}: choose from {', '.join(builders)}")
    model = builders[name]()
    feed = model.feed(np.random.default_rng(0))
    fetch = [model.loss, model.train_op]
    configs = bench_cost.session_configs(setting, layout_plain=name in bench_cost.PLAIN_NEEDS_LAYOUT)
    sessions = {}
    for kind in KINDS:
        sess = tf.compat.v1.Session(graph=model.graph, config=configs[kind])
        sess.run(model.init_op)
        for _ in range(3):
            sess.run(fetch, feed)
        sessions[kind] = (sess, fetch, feed)
    profiles = {kind: traced(*sessions[kind], steps) for kind in KINDS}
    times = timed(sessions, rounds, steps)
    for sess, _, _ in sessions.values():
        sess.close()
    print(f"\n{name}, {setting}: kernels per step and their summed us, by op type (largest count, then time, differences first)")
    print(f"  {'op type':<34}" + "".join(f" {kind + ' n':>14} {'us':>7}" for kind in KINDS))
    ops = set().union(*(counts for counts, _ in profiles.values()))
    plain_micros = profiles["plain"][1]
    plain_counts = profiles["plain"][0]
    for op in sorted(ops, key=lambda o: (-abs(profiles["simulated"][0][o] - plain_counts[o]),
                                         -abs(profiles["simulated"][1][o] - plain_micros[o])))[:16]:
        print(f"  {op:<34}" + "".join(f" {profiles[kind][0][op]:14.0f} {profiles[kind][1][op]:7.0f}"
                                      for kind in KINDS))
    print(f"  {'all kernels':<34}" + "".join(f" {sum(profiles[kind][0].values()):14.0f} "
                                             f"{sum(profiles[kind][1].values()):7.0f}" for kind in KINDS))
    print(f"  {'Transposes':<34}" + "".join(f" {transposes(profiles[kind][0]):14.0f} "
                                            f"{transposes(profiles[kind][1]):7.0f}" for kind in KINDS))
    plain = times["plain"]
    print(f"  step ({rounds} rounds of {steps} interleaved steps, median): " + ", ".join(
        f"{kind} {figures['wall_ms']:.2f} ms wall ({figures['wall_ms'] / plain['wall_ms']:.2f}x), "
        f"{figures['cpu_ms']:.2f} ms CPU ({figures['cpu_ms'] / plain['cpu_ms']:.2f}x)"
        for kind, figures in times.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="cnn_channels_first", help="a sweep model (testing/zoo.py)")
    parser.add_argument("--settings", default=",".join(bench_cost.SETTINGS),
                        help="comma-separated configurations: user, npu_config_proto")
    parser.add_argument("--steps", type=int, default=20, help="traced steps, and steps per timed round")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds")
    parser.add_argument("--first-step-only", action="store_true",
                        help="switch the CPU layout's second step off (cancel, follow, results across calls)")
    args = parser.parse_args()
    if args.first_step_only:
        from npu_sim_bridge.passes.layout import boundary, chains

        chains.chain = lambda scope: None
        boundary.export_results = lambda graph, bodies, library: 0
        print("the CPU layout's first step only")
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    for setting in args.settings.split(","):
        measure(args.model, setting, args.steps, args.rounds)


if __name__ == "__main__":
    main()
