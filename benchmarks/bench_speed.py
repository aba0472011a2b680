"""The speed figures of the simulation side by side in one run: step time of emulated float16, rewrite time.

Rows (each ratio measured interleaved: A and B alternate within every repeat, so load on the machine
hits both alike; printed as the median over repeats and the range):

1. Small CNN training step (batch 32), allow_mix_precision with sim_fp16_execution=emulate / plain
   float32, on two session configurations, each with the same session options on both sides:
   - user: a hand-built ConfigProto naming NpuOptimizer (Grappler's remapper on), as the seed scripts
     write it; plain is ConfigProto();
   - npu_config_proto: the same ConfigProto passed through npu_config_proto (remapper and memory
     optimizer off); plain is that ConfigProto without the NpuOptimizer.
   Columns: the float16 rounding as one NpuSimRoundToFloat16 kernel (sim_fp16_rounding=kernel, what a
   Session uses now) and as the two Casts it replaced (sim_fp16_rounding=cast, the rounding before).
2. ResNet-50 training MetaGraph, one Grappler iteration, through the OptimizeGraph harness of
   bench_precision.py with only that optimizer enabled: the precision pass (sim_passes=precision) /
   TensorFlow's auto_mixed_precision_cpu, and the whole default pipeline (sim_passes=all) / the same.
   Grappler runs only the optimizer named there, so the remapper setting does not enter these rows.
   The graph is Keras ResNet50 as a TF 2.15 user builds it in graph mode (testing.models.resnet50:
   control flow v2, the learning phase a placeholder), and then the same graph as a Session's Grappler
   hands it to auto_mixed_precision_cpu (bench_precision.handed_over: after the pruner, the function
   optimizer, CSE, constant folding and the shape optimizer; batch norm's Ifs lowered, no library).
   On the graph as built, Grappler also runs each optimizer over every library function after the
   graph; NpuOptimizer's GeOp body still holds the Ifs there and, like every body, is left to its call
   with the branch functions it calls (passes/partition/call_config.py), so the whole pipeline's call
   skips work the others' calls do. Then, per configuration (user / npu_config_proto
   as in row 1), NpuOptimizer's own time (its Python entry, every call) inside a Session's whole
   Grappler run (every default optimizer, iteration and function) over auto_mixed_precision_cpu alone.
   With --profile: the step time per op type (TensorFlow step stats of 10 traced steps), plain vs
   kernel, to show where the rest of the cost is.
3. The model sweep's models (npu_sim_bridge.testing.sweep, benchmarks/bench_models.py): the training
   step of allow_mix_precision / plain (the sweep's "mixed" and "plain" session configurations: every
   pass, or NpuOptimizer with no pass), two Sessions on the model's graph fed the same batch,
   interleaved as in row 1, remapper on (a hand-built ConfigProto) and off (as npu_config_proto sets
   it); a few models by default, --models all for every one. Each row gives the wall-time ratio (the
   target: at most 1.10x) and the ratio of this process's CPU time per step, which load from other
   jobs on the machine disturbs less.

Run:  python benchmarks/bench_speed.py [--quick] [--only steps|rewrite|models] [--profile] [--repeats N]
      [--models all|NAME,...] [--remapper both|on|off]
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

import numpy  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.core.protobuf import config_pb2  # noqa: E402
from tensorflow.python.grappler import tf_optimizer  # noqa: E402

import bench_precision  # noqa: E402  (the OptimizeGraph harness; it also registers NpuOptimizer)
from interleave import interleaved_ratios  # noqa: E402
from npu_sim_bridge.config import from_dict  # noqa: E402
from npu_sim_bridge.graph.op_categories import CALL_OPS  # noqa: E402
from npu_sim_bridge.passes import ItemInfo, run_pipeline  # noqa: E402
from npu_sim_bridge.runtime.session import npu_config_proto  # noqa: E402
from npu_sim_bridge.testing import models  # noqa: E402
from npu_sim_bridge.testing.grappler import EntryCallLog  # noqa: E402

tf.compat.v1.disable_eager_execution()


def ratio_text(ratios: list[float], target: float | None = None) -> str:
    text = f"{statistics.median(ratios):5.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"
    return text + (f" target <= {target:.2f}" if target is not None else "")


# ------------------------------------------------------------------------------------ step time
def step_config(setting: str, kind: str) -> config_pb2.ConfigProto:
    """setting: user | npu_config_proto; kind: plain | kernel | cast (the rounding of the emulation)."""
    config = config_pb2.ConfigProto()
    custom = config.graph_options.rewrite_options.custom_optimizers.add()
    custom.name = "NpuOptimizer"
    custom.parameter_map["precision_mode"].s = b"allow_mix_precision"
    custom.parameter_map["sim_fp16_rounding"].s = kind.encode() if kind != "plain" else b"auto"
    if setting == "npu_config_proto":
        config = npu_config_proto(config)
    if kind == "plain":  # the same session options, without the NpuOptimizer
        del config.graph_options.rewrite_options.custom_optimizers[:]
    return config


def step_ratios(setting: str, rounds: int, steps: int, batch: int = 32) -> dict[str, list[float]]:
    """Per round, median step time of kernel and cast over plain; the three Sessions alternate step by step."""
    x, y = models.small_cnn_dataset(batch * 4, seed=0)
    sessions = {}
    for kind in ("plain", "kernel", "cast"):
        model = models.small_cnn(batch_size=batch)
        sess = tf.compat.v1.Session(graph=model.graph, config=step_config(setting, kind))
        sess.run(model.init_op)
        fetch = [model.loss, model.train_op]
        feed = {model.inputs["images"]: x[:batch], model.inputs["labels"]: y[:batch]}
        for _ in range(3):
            sess.run(fetch, feed)
        sessions[kind] = (sess, fetch, feed)
    return interleaved_ratios(sessions, rounds, steps)


def op_type_times(setting: str, kind: str, steps: int = 10, batch: int = 32) -> collections.Counter:
    """Microseconds per training step by executed op type (a GeOp's call is left out: its body's ops count)."""
    x, y = models.small_cnn_dataset(batch * 4, seed=0)
    model = models.small_cnn(batch_size=batch)
    totals: collections.Counter = collections.Counter()
    trace = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
    with tf.compat.v1.Session(graph=model.graph, config=step_config(setting, kind)) as sess:
        sess.run(model.init_op)
        feed = {model.inputs["images"]: x[:batch], model.inputs["labels"]: y[:batch]}
        for step in range(steps + 3):
            metadata = tf.compat.v1.RunMetadata()
            sess.run([model.loss, model.train_op], feed, options=trace, run_metadata=metadata)
            if step < 3:
                continue
            for device in metadata.step_stats.dev_stats:
                for stats in device.node_stats:
                    label = stats.timeline_label
                    op = label.split(" = ", 1)[1].split("(", 1)[0] if " = " in label else ""
                    if op and op not in CALL_OPS:  # a GeOp's call: its body's ops count
                        totals[op] += stats.all_end_rel_micros / steps
    return totals


def profile(setting: str) -> None:
    plain, sim = op_type_times(setting, "plain"), op_type_times(setting, "kernel")
    print(f"  {setting}: step time by op type, us per step (sum of kernel times; 2 cores run some at once)")
    print(f"    {'op type':<36} {'plain':>8} {'emulate':>8} {'diff':>8}")
    for op in sorted(set(plain) | set(sim), key=lambda o: -abs(sim[o] - plain[o]))[:14]:
        print(f"    {op:<36} {plain[op]:8.0f} {sim[op]:8.0f} {sim[op] - plain[op]:+8.0f}")
    print(f"    {'all':<36} {sum(plain.values()):8.0f} {sum(sim.values()):8.0f} "
          f"{sum(sim.values()) - sum(plain.values()):+8.0f}")


def step_time(args) -> None:
    print(f"(1) small CNN training step, allow_mix_precision (emulate) / plain float32, batch 32 "
          f"({args.rounds} rounds of {args.steps} interleaved steps; median (range) of the per-round ratios)")
    for setting, target in (("user", 1.10), ("npu_config_proto", 1.05)):
        ratios = step_ratios(setting, args.rounds, args.steps)
        print(f"  {setting:<17} float32 {statistics.median(ratios['plain_ms']):6.2f} ms | "
              f"rounding kernel {ratio_text(ratios['kernel'], target)} | "
              f"Cast round trips (before) {ratio_text(ratios['cast'])}", flush=True)
    if args.profile:
        for setting in ("user", "npu_config_proto"):
            profile(setting)


# ------------------------------------------------------------------------------------ rewrite time
def rewrite_time(args) -> dict:
    """Prints row 2; returns its per-repeat ratios: {"precision", "pipeline", "floor"} of the harness on the
    graph as built, the same under "handed_over" on the graph as a Session's Grappler hands it over, and,
    per configuration (user, npu_config_proto), {"precision", "pipeline"} of NpuOptimizer's own time."""
    # Keras ResNet50 as a TF 2.15 user builds it in graph mode (control flow v2: batch norm's learning-phase
    # conditionals are If ops with function bodies), trained with Momentum: the graph users hand to Grappler.
    model = models.resnet50(batch_size=2, image_size=64 if args.quick else 224)
    meta = model.meta_graph_def()
    figures = harness_ratios(meta, args.repeats, "the training MetaGraph as built")
    # What auto_mixed_precision_cpu rewrites in a Session: the same graph after the optimizers Grappler runs
    # before it (calls inlined, If and While lowered: no branch library is left).
    figures["handed_over"] = harness_ratios(bench_precision.handed_over(meta), args.repeats,
                                            "the same as a Session's Grappler hands it over")
    pipeline_breakdown(model, args.repeats)
    for setting in ("user", "npu_config_proto"):
        figures[setting] = session_rewrite_time(meta, setting, args.repeats)
    return figures


def harness_ratios(meta, repeats: int, graph: str) -> dict:
    """The harness rows on one MetaGraph: each optimizer alone, one Grappler iteration, interleaved."""
    body_nodes = sum(len(function.node_def) for function in meta.graph_def.library.function)
    configs = {which: bench_precision.optimize_config(which)
               for which in ("tf_amp", "npu", "npu_all", "npu_none", "fixed")}
    times = {which: [] for which in configs}
    entry_times = {which: [] for which in configs}
    for _ in range(repeats):
        for which, config in configs.items():
            with EntryCallLog() as log:
                started = time.perf_counter()
                tf_optimizer.OptimizeGraph(config, meta)
                times[which].append(time.perf_counter() - started)
            entry_times[which].append(sum(seconds for _, seconds in log.calls))
    nodes = len(meta.graph_def.node)
    ms = {which: statistics.median(values) * 1000 for which, values in times.items()}
    print(f"(2) rewrite time, Keras ResNet-50, {graph} ({nodes} nodes, {body_nodes} more in "
          f"{len(meta.graph_def.library.function)} library functions), only the optimizer named, one Grappler "
          f"iteration, {repeats} interleaved repeats (median ms; ratio median (range) per repeat)")

    def row(label, which, target):
        ratios = [a / b for a, b in zip(times[which], times["tf_amp"])]
        print(f"  {label:<54} {ms[which]:6.0f} ms vs {ms['tf_amp']:6.0f} ms  {ratio_text(ratios, target)}")
        return ratios

    figures = {"precision": row("precision pass / auto_mixed_precision_cpu", "npu", 1.0),
               "pipeline": row("whole default pipeline / auto_mixed_precision_cpu", "npu_all", 1.2),
               "floor": row("no pass at all (the floor) / auto_mixed_precision_cpu", "npu_none", None)}
    # What the ratios are made of: OptimizeGraph's own cost (the MetaGraph to a Grappler item, the graph
    # back), the same for every row, against what each optimizer adds to it.
    own = {which: statistics.median(entry_times[which]) * 1000 for which in ("npu", "npu_all", "npu_none")}
    print(f"  of which: the harness's fixed cost (Grappler's pruning alone) {ms['fixed']:.0f} ms; over it, "
          f"auto_mixed_precision_cpu {ms['tf_amp'] - ms['fixed']:.0f} ms; NpuOptimizer's Python entry "
          f"{own['npu_all']:.0f} ms (every pass), {own['npu']:.0f} ms (precision), {own['npu_none']:.0f} ms (no pass)")
    return figures


def pipeline_breakdown(model, repeats: int) -> None:
    """Where the whole pipeline's time goes, in process: median ms per pass (each with the validation
    after it); the rest is the GraphDef copy, the input graph's check, the stamps and the output."""
    options = from_dict({"precision_mode": "allow_mix_precision", "sim_passes": "all"})
    item = ItemInfo(id="bench", fetch=tuple(model.fetch_names()))
    graph_def = model.graph_def()
    totals, passes = [], collections.defaultdict(list)
    for _ in range(repeats):
        report = run_pipeline(graph_def, options, item).report
        totals.append(report.seconds * 1000)
        for record in report.passes:
            passes[record.name].append(record.seconds * 1000)
    parts = ", ".join(f"{name} {statistics.median(values):.0f}" for name, values in passes.items())
    rest = statistics.median(totals) - sum(statistics.median(values) for values in passes.values())
    print(f"  in-process pipeline {statistics.median(totals):.0f} ms: {parts}, the rest {rest:.0f} (ms, medians)")


def session_rewrite_config(setting: str, which: str) -> config_pb2.ConfigProto:
    """The Grappler configuration of a Session: a hand-built ConfigProto as the seed scripts write it
    ("user": Grappler's default optimizers, the remapper on) or that ConfigProto through
    npu_config_proto (remapper off). which: npu (NpuOptimizer, precision pass), npu_all (every pass),
    or anything else for the same options without NpuOptimizer."""
    config = config_pb2.ConfigProto()
    rewrite = config.graph_options.rewrite_options
    if which.startswith("npu"):
        custom = rewrite.custom_optimizers.add()
        custom.name = "NpuOptimizer"
        custom.parameter_map["precision_mode"].s = b"allow_mix_precision"
        custom.parameter_map["sim_passes"].s = b"all" if which == "npu_all" else b"precision"
    if setting == "npu_config_proto":
        config = npu_config_proto(config)
        if not which.startswith("npu"):  # the same session options, without the NpuOptimizer
            rewrite = config.graph_options.rewrite_options
            rewrite.ClearField("memory_optimization")  # npu_config_proto keeps a hand-built config's setting
            del rewrite.custom_optimizers[:]
    return config


def session_rewrite_time(meta, setting: str, repeats: int) -> dict:
    """NpuOptimizer's own time inside a Session's whole Grappler run (every default optimizer, iteration
    and function, as a Session's first step runs them) under one configuration: every call Grappler
    makes into its Python entry, summed, with the precision pass or every pass; over
    auto_mixed_precision_cpu alone, one iteration (it cannot run in Grappler's default set here:
    OptimizeGraph gives its nodes no devices). A difference of whole runs cannot stand in: the
    rewritten graph leaves Grappler's later optimizers less to do. Interleaved; per repeat one ratio."""
    configs = {which: session_rewrite_config(setting, which) for which in ("npu", "npu_all")}
    configs["tf_amp"] = bench_precision.optimize_config("tf_amp")
    times = {which: [] for which in configs}
    whole = {which: [] for which in configs}
    for _ in range(repeats):
        for which, config in configs.items():
            with EntryCallLog() as log:
                started = time.perf_counter()
                tf_optimizer.OptimizeGraph(config, meta)
                whole[which].append(time.perf_counter() - started)
            spent = sum(seconds for _, seconds in log.calls)
            times[which].append(spent if which != "tf_amp" else whole[which][-1])
    print(f"  {setting}: NpuOptimizer's own time in a Session's whole Grappler run (that run "
          f"{statistics.median(whole['npu']) * 1000:.0f} ms): precision pass {statistics.median(times['npu']) * 1000:.0f}"
          f" ms, every pass {statistics.median(times['npu_all']) * 1000:.0f} ms; auto_mixed_precision_cpu alone "
          f"{statistics.median(times['tf_amp']) * 1000:.0f} ms (medians)")
    figures = {}
    for key, label, which, target in (("precision", "precision pass / auto_mixed_precision_cpu", "npu", 1.0),
                                      ("pipeline", "whole default pipeline / auto_mixed_precision_cpu", "npu_all", 1.2)):
        figures[key] = [a / b for a, b in zip(times[which], times["tf_amp"])]
        print(f"    {label:<54} {ratio_text(figures[key], target)}")
    return figures


# ------------------------------------------------------------------------------------ model sweep
def model_sweep(args) -> None:
    try:
        from npu_sim_bridge.testing import sweep, zoo
    except ImportError:
        print("(3) model sweep: not on this branch (npu_sim_bridge.testing.sweep, from benchmarks/bench_models.py, "
              "is missing); no model rows")
        return
    builders = zoo.sweep_builders()
    names = list(builders) if args.models == "all" else [n for n in args.models.split(",") if n]
    unknown = [n for n in names if n not in builders]
    if unknown:
        print(f"(3) model sweep: unknown models {', '.join(unknown)}; known: {', '.join(builders)}")
        return
    print(f"(3) model sweep step ratio, allow_mix_precision / plain ({args.sweep_rounds} rounds of "
          f"{args.sweep_steps} interleaved steps; median (range) of the per-round ratios)")
    for remapping in {"both": (True, False), "on": (True,), "off": (False,)}[args.remapper]:
        setting = "user (remapper on)" if remapping else "npu_config_proto"
        for name in names:
            try:
                ratios = model_ratios(sweep, builders[name], remapping, args.sweep_rounds, args.sweep_steps)
                figure = (f"plain {statistics.median(ratios['plain_ms']):8.1f} ms | wall "
                          f"{ratio_text(ratios['mixed'], 1.10)} | cpu {ratio_text(ratios['mixed_cpu'])}")
            except Exception as err:  # one model that fails is a row, not the end of the benchmark
                figure = f"failed: {type(err).__name__}: {str(err).splitlines()[0][:120]}"
            print(f"  {setting:<19} {name:<24} {figure}", flush=True)


def model_ratios(sweep, build, remapping: bool, rounds: int, steps: int) -> dict[str, list[float]]:
    """Per round, the "mixed" Session's median step time over the "plain" one's, on one model graph:
    wall time ("mixed", and "plain_ms") and this process's CPU time ("mixed_cpu"), which other jobs on
    the machine disturb less (it counts the work done, not the waits for a core). Interleaved step by
    step, two warm-up steps each, as session_ratios."""
    model = build()
    fetch = [model.loss, model.train_op]
    feed = model.feed(numpy.random.default_rng(0))
    sessions = {}
    for run in ("plain", "mixed"):
        sess = tf.compat.v1.Session(graph=model.graph, config=sweep.session_config(run, remapping))
        sess.run(model.init_op)
        for _ in range(2):  # the rewrite and the first run's allocations
            sess.run(fetch, feed)
        sessions[run] = sess
    ratios: dict[str, list[float]] = {"mixed": [], "mixed_cpu": [], "plain_ms": []}
    try:
        for _ in range(rounds):
            wall, cpu = timed_steps(sessions, fetch, feed, steps)
            ratios["plain_ms"].append(statistics.median(wall["plain"]) * 1000)
            ratios["mixed"].append(statistics.median(wall["mixed"]) / statistics.median(wall["plain"]))
            ratios["mixed_cpu"].append(statistics.median(cpu["mixed"]) / statistics.median(cpu["plain"]))
    finally:
        for sess in sessions.values():
            sess.close()
    return ratios


def timed_steps(sessions: dict, fetch, feed, steps: int) -> tuple[dict, dict]:
    """({name: wall seconds per step}, {name: process CPU seconds per step}): `steps` steps of every Session
    of `sessions` ({name: Session}), taken in turns."""
    wall: dict[str, list[float]] = {name: [] for name in sessions}
    cpu: dict[str, list[float]] = {name: [] for name in sessions}
    for _ in range(steps):
        for name, sess in sessions.items():
            began, began_cpu = time.perf_counter(), time.process_time()
            sess.run(fetch, feed)
            wall[name].append(time.perf_counter() - began)
            cpu[name].append(time.process_time() - began_cpu)
    return wall, cpu


def session_ratios(model, configs: dict, rounds: int, steps: int, min_round_s: float = 0.0) -> dict[str, list[float]]:
    """Per round, each Session's median step time over the "plain" one's: one Session per {kind: ConfigProto}
    on the model's graph, fed the same batch, two warm-up steps each, then interleaved (at least `steps`
    steps a round, more where the plain steps take under `min_round_s` seconds: interleave.py)."""
    fetch = [model.loss, model.train_op]
    feed = model.feed(numpy.random.default_rng(0))
    sessions = {}
    for run, config in configs.items():
        sess = tf.compat.v1.Session(graph=model.graph, config=config)
        sess.run(model.init_op)
        for _ in range(2):  # the rewrite and the first run's allocations
            sess.run(fetch, feed)
        sessions[run] = (sess, fetch, feed)
    return interleaved_ratios(sessions, rounds, steps, min_round_s=min_round_s)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats and a smaller ResNet-50 input")
    parser.add_argument("--only", choices=("steps", "rewrite", "models"), help="run one part only")
    parser.add_argument("--repeats", type=int, help="rewrite repeats (default 5, quick 2)")
    parser.add_argument("--rounds", type=int, help="step-time rounds (default 7, quick 3)")
    parser.add_argument("--steps", type=int, help="steps per kind and round (default 15, quick 5)")
    parser.add_argument("--profile", action="store_true", help="also the step time per op type")
    parser.add_argument("--models", default="tf1_batchnorm_cnn,keras_cnn,MobileNetV2,bert_small",
                        help="model sweep: comma-separated names, or all (each takes about a minute)")
    parser.add_argument("--sweep-rounds", type=int, help="model sweep: rounds per model (default 7, quick 3)")
    parser.add_argument("--sweep-steps", type=int, help="model sweep: steps per Session and round (default 15, quick 5)")
    parser.add_argument("--remapper", choices=("both", "on", "off"), default="both",
                        help="model sweep: the configurations, remapper on (a hand-built ConfigProto), off "
                             "(as npu_config_proto sets it) or both (the default)")
    args = parser.parse_args()
    args.repeats = args.repeats or (2 if args.quick else 5)
    args.rounds = args.rounds or (3 if args.quick else 7)
    args.steps = args.steps or (5 if args.quick else 15)
    args.sweep_rounds = args.sweep_rounds or (3 if args.quick else 7)
    args.sweep_steps = args.sweep_steps or (5 if args.quick else 15)
    if args.only in (None, "steps"):
        step_time(args)
    if args.only in (None, "rewrite"):
        rewrite_time(args)
    if args.only in (None, "models"):
        model_sweep(args)


if __name__ == "__main__":
    main()
