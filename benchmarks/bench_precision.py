"""Cost of the precision pass, measured side by side with TensorFlow's own auto_mixed_precision_cpu pass.

(a) Rewrite time, allow_mix_precision, on ResNet-50 and BERT-base training MetaGraphs. Both passes run
    through the same harness, tensorflow.python.grappler.tf_optimizer.OptimizeGraph with one
    meta-optimizer iteration and only that optimizer enabled: NpuOptimizer (sim_passes=precision, so
    the pipeline's validation and report are included) vs auto_mixed_precision_cpu, and NpuOptimizer
    with no pass (sim_passes=none: the GraphDef's trip to Python and back, validation, report, stamps),
    the floor any Python pass starts from. Also the in-process
    pipeline time (npu_sim_bridge.passes.run_pipeline) and how it grows with BERT depth (1x/2x/4x
    layers: it should grow linearly, i.e. constant time per node). Target ratio <= 1.0.
(b) Step time of the small CNN: plain float32 vs allow_mix_precision with sim_fp16_execution=emulate
    (session config as npu_config_proto builds it: remapping off), training and forward steps,
    interleaved; also the NpuOptimizer without the precision pass (GeOp partitioning only), to show
    which part of the cost is the float16 emulation. TensorFlow's auto_mixed_precision_cpu segfaults on this CNN's training step in TF 2.15.1,
    so it is timed on forward steps only, in a subprocess (a crash there cannot stop this benchmark).
    Target: emulate training step <= 1.3x float32.
Run:  python benchmarks/bench_precision.py [--quick] [--repeats N] [--steps N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
from tensorflow.core.protobuf import config_pb2, meta_graph_pb2, rewriter_config_pb2  # noqa: E402
from tensorflow.python.grappler import tf_optimizer  # noqa: E402

import npu_sim_bridge  # noqa: E402,F401  (registers NpuOptimizer)
from npu_sim_bridge.config import from_dict  # noqa: E402
from npu_sim_bridge.passes import ItemInfo, run_pipeline  # noqa: E402
from npu_sim_bridge.testing import models  # noqa: E402
from npu_sim_bridge.testing.grappler import npu_only_config  # noqa: E402

tf.compat.v1.disable_eager_execution()
OFF = rewriter_config_pb2.RewriterConfig.OFF


# ------------------------------------------------------------------------------- (a) rewrite time
# The configurations of TensorFlow's own optimizers: auto_mixed_precision_cpu, and Grappler's pruning alone
# ("fixed": OptimizeGraph's own cost, the MetaGraph to a Grappler item and the graph back, with next to no pass).
_TF_OPTIMIZERS = {"tf_amp": "auto_mixed_precision_cpu", "fixed": "pruning"}


def optimize_config(which: str) -> config_pb2.ConfigProto:
    """A ConfigProto running only one Grappler optimizer, once."""
    if which not in _TF_OPTIMIZERS:
        # npu_none: no pass at all, the floor any Python pass starts from (GraphDef to Python and back,
        # validation, report, stamps); npu_all: the whole default pipeline.
        passes = {"npu_none": "none", "npu_all": "all"}.get(which, "precision")
        return npu_only_config({"precision_mode": "allow_mix_precision", "sim_passes": passes})
    config = config_pb2.ConfigProto()
    rewrite = config.graph_options.rewrite_options
    rewrite.min_graph_nodes = -1
    rewrite.meta_optimizer_iterations = rewriter_config_pb2.RewriterConfig.ONE
    rewrite.optimizers.append(_TF_OPTIMIZERS[which])
    return config


# Grappler's default optimizers that run before auto_mixed_precision_cpu in a Session, in that order
# (meta_optimizer.cc; the implementation selector and the debug stripper change nothing here).
_BEFORE_AMP = ("pruning", "function", "common_subgraph_elimination", "constfold", "shape")


def handed_over(meta):
    """`meta` with its graph as a Session's Grappler hands it to auto_mixed_precision_cpu.

    In a Session, TensorFlow's pass runs after the model pruner, the function optimizer (it inlines the
    calls and lowers control flow v2, If and While, to Switch and Merge), common subgraph elimination,
    constant folding and the shape optimizer; NpuOptimizer, a custom optimizer, runs after every default
    one, on a graph smaller still. Keras's batch norm in graph mode is an If per layer with two branch
    functions, so the graph as built holds a function library and the graph as handed over none. That
    matters to what the harness measures: Grappler runs the optimizer over every library function
    after the graph, except a GeOp body and the functions it calls, which it leaves to the GeOp's call
    (passes/partition/call_config.py).
    """
    config = config_pb2.ConfigProto()
    rewrite = config.graph_options.rewrite_options
    rewrite.min_graph_nodes = -1
    rewrite.meta_optimizer_iterations = rewriter_config_pb2.RewriterConfig.ONE
    rewrite.optimizers.extend(_BEFORE_AMP)
    result = meta_graph_pb2.MetaGraphDef()
    result.CopyFrom(meta)
    result.graph_def.CopyFrom(tf_optimizer.OptimizeGraph(config, meta))
    return result


def time_optimize(meta, repeats: int) -> dict[str, float]:
    """Best OptimizeGraph time per optimizer; the two alternate so that load on the machine hits both alike."""
    configs = {which: optimize_config(which) for which in ("tf_amp", "npu", "npu_none")}
    best = {which: float("inf") for which in configs}
    for _ in range(repeats):
        for which, config in configs.items():
            started = time.perf_counter()
            tf_optimizer.OptimizeGraph(config, meta)
            best[which] = min(best[which], time.perf_counter() - started)
    return best


def time_pipeline(model, repeats: int, passes: str = "precision") -> tuple[float, dict]:
    options = from_dict({"precision_mode": "allow_mix_precision", "sim_passes": passes})
    item = ItemInfo(id="bench", fetch=tuple(model.fetch_names()))
    graph_def = model.graph_def()
    times, stats = [], {}
    for _ in range(repeats):
        started = time.perf_counter()
        result = run_pipeline(graph_def, options, item)
        times.append(time.perf_counter() - started)
        stats = next((p.stats for p in result.report.passes if p.name == "precision"), {})
    return min(times), stats


def rewrite_time(args) -> None:
    print("(a) rewrite time, allow_mix_precision (best of %d)" % args.repeats)
    graphs = [("ResNet-50", lambda: models.resnet50(batch_size=2, image_size=224 if not args.quick else 64))]
    layers = (1, 2, 4) if args.quick else (3, 6, 12)
    for count in layers:
        graphs.append((f"BERT {count} layers", lambda count=count: models.bert(
            num_layers=count, hidden=768, heads=12, seq_len=128, vocab=30522, batch_size=2, intermediate=3072)))
    rows = []
    for label, build in graphs:
        model = build()
        meta = model.meta_graph_def()
        nodes = len(meta.graph_def.node)
        best = time_optimize(meta, args.repeats)
        tf_amp, ours, floor = best["tf_amp"], best["npu"], best["npu_none"]
        pipeline, stats = time_pipeline(model, args.repeats)
        rows.append((label, nodes, ours, tf_amp, pipeline))
        print(f"  {label:<16} {nodes:>6} nodes  NpuOptimizer {ours * 1000:7.0f} ms  "
              f"auto_mixed_precision_cpu {tf_amp * 1000:7.0f} ms  ratio {ours / tf_amp:5.2f}  "
              f"(no pass: {floor * 1000:.0f} ms, ratio {floor / tf_amp:4.2f})  "
              f"| in-process pipeline {pipeline * 1000:6.0f} ms ({pipeline / nodes * 1e6:5.1f} us/node; "
              f"{stats.get('nodes_dropped', 0)} dropped, {stats.get('casts_inserted', 0)} casts)")
    bert = [row for row in rows if row[0].startswith("BERT")]
    if len(bert) >= 2:
        first, last = bert[0], bert[-1]
        growth = (last[4] / first[4]) / (last[1] / first[1])
        print(f"  growth with BERT depth: pipeline time x{last[4] / first[4]:.2f} for nodes "
              f"x{last[1] / first[1]:.2f} (1.00 = linear; per-node time ratio {growth:.2f})")


# ------------------------------------------------------------------------------- (b) step time
def session_config(kind: str) -> config_pb2.ConfigProto | None:
    """plain: float32; tf_amp: TensorFlow's pass; sim: NpuOptimizer allow_mix_precision emulate;
    sim_no_precision: NpuOptimizer without the precision pass (placement and partition only)."""
    if kind == "plain":
        return config_pb2.ConfigProto()
    config = config_pb2.ConfigProto()
    if kind == "tf_amp":
        config.graph_options.rewrite_options.auto_mixed_precision_cpu = rewriter_config_pb2.RewriterConfig.ON
        return config
    # As npu_config_proto builds it: NpuOptimizer, remapping off.
    config.graph_options.rewrite_options.remapping = OFF
    custom = config.graph_options.rewrite_options.custom_optimizers.add()
    custom.name = "NpuOptimizer"
    custom.parameter_map["precision_mode"].s = b"allow_mix_precision"
    custom.parameter_map["sim_fp16_execution"].s = b"emulate"
    if kind == "sim_no_precision":
        custom.parameter_map["sim_passes"].s = b"placement,partition"
    return config


def cnn_step_times(kinds, steps: int, train: bool, batch: int) -> dict[str, list[float]]:
    """Per-kind step times; kinds run interleaved, one step each in turn, so load noise hits all alike."""
    x, y = models.small_cnn_dataset(batch * 4, seed=0)
    sessions = {}
    for kind in kinds:
        model = models.small_cnn(batch_size=batch)
        sess = tf.compat.v1.Session(graph=model.graph, config=session_config(kind))
        sess.run(model.init_op)
        fetch = [model.loss, model.train_op] if train else model.outputs["logits"]
        feed = {model.inputs["images"]: x[:batch], model.inputs["labels"]: y[:batch]}
        for _ in range(3):
            sess.run(fetch, feed)
        sessions[kind] = (sess, fetch, feed)
    times = {kind: [] for kind in kinds}
    for _ in range(steps):
        for kind in kinds:
            sess, fetch, feed = sessions[kind]
            started = time.perf_counter()
            sess.run(fetch, feed)
            times[kind].append(time.perf_counter() - started)
    for sess, _, _ in sessions.values():
        sess.close()
    return times


def tf_amp_worker(steps: int, batch: int) -> None:
    times = cnn_step_times(("plain", "tf_amp"), steps, train=False, batch=batch)
    print(json.dumps({kind: statistics.median(values) for kind, values in times.items()}))


def step_time(args) -> None:
    batch = 32
    print(f"(b) small CNN step time, batch {batch} (median of {args.steps} interleaved steps)")
    kinds = ("plain", "sim", "sim_no_precision")
    train = cnn_step_times(kinds, args.steps, train=True, batch=batch)
    forward = cnn_step_times(kinds, args.steps, train=False, batch=batch)
    for label, times in (("training step", train), ("forward step", forward)):
        plain, sim, bare = (statistics.median(times[kind]) for kind in kinds)
        print(f"  {label:<14} float32 {plain * 1000:7.2f} ms  allow_mix_precision emulate {sim * 1000:7.2f} ms  "
              f"ratio {sim / plain:5.2f}" + ("  (target <= 1.30)" if label == "training step" else "")
              + f"  | NpuOptimizer without the precision pass {bare * 1000:6.2f} ms (ratio {bare / plain:4.2f})")
    command = [sys.executable, os.path.abspath(__file__), "--tf-amp-worker", "--steps", str(args.steps)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        print(f"  forward step   auto_mixed_precision_cpu: the subprocess failed (exit {done.returncode}): "
              f"{done.stderr.strip().splitlines()[-1] if done.stderr.strip() else 'no message'}")
        return
    measured = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"  forward step   float32 {measured['plain'] * 1000:7.2f} ms  auto_mixed_precision_cpu "
          f"{measured['tf_amp'] * 1000:7.2f} ms  ratio {measured['tf_amp'] / measured['plain']:5.2f}  "
          "(TensorFlow's pass, in a subprocess)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller graphs, for a smoke run")
    parser.add_argument("--repeats", type=int, default=4, help="rewrites per graph (best is kept)")
    parser.add_argument("--steps", type=int, default=40, help="timed steps per configuration")
    parser.add_argument("--only", choices=("rewrite", "steps"), help="run one part only")
    parser.add_argument("--tf-amp-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.tf_amp_worker:
        tf_amp_worker(args.steps, batch=32)
        return
    if args.only != "steps":
        rewrite_time(args)
    if args.only != "rewrite":
        step_time(args)


if __name__ == "__main__":
    main()
