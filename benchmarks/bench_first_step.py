"""Where a simulated first step goes, against the plain first step, on the sweep's Keras models.

    python benchmarks/bench_first_step.py [--models ResNet50,EfficientNetB0] [--rounds 2]

Per model (npu_sim_bridge.testing.zoo's Keras application as a TF1 training graph, batch 8):
1. first step, plain (ConfigProto()) vs simulated (the sweep's "mixed" run: allow_mix_precision, every
   pass, a hand-built ConfigProto with the remapper on): fresh Sessions, the two kinds interleaved,
   --rounds rounds, best kept. The variables' initializer runs first and is not counted. Beside the
   wall time, the process's CPU time of the step (every thread): on a machine other jobs load, the
   wall time grows with their load and the CPU time much less.
2. the simulated first step taken apart, in one more Session of each kind under TensorFlow's profiler
   (host events by name) and a wrapper around npu_sim_bridge.native.entry.optimize (every call
   NpuOptimizer makes into Python, by graph):
   - the rewrite: the pipeline on the training graph (report seconds, by pass), then the rest of the
     Python entry (parsing, serialising the GraphDef, the nothing-new check);
   - Grappler's later iterations and the function items (GeOp bodies): the entry's other calls;
   - the GeOp calls' first run (body instantiation, its kernels): the profiler's PartitionedCallOp
     or NpuSimGeOp events, over plain;
   - the first run of the kernels: kernel times of a traced first step, the rounding kernels apart;
   - the rest: what no trace shows (Grappler's C++ optimizers, session setup), by difference.
"""

from __future__ import annotations

import argparse
import collections
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.tsl.profiler.protobuf import xplane_pb2  # noqa: E402

from npu_sim_bridge.graph.op_categories import CALL_OPS, GEOP_KERNEL_OP  # noqa: E402
from npu_sim_bridge.testing.grappler import EntryCallLog  # noqa: E402
from npu_sim_bridge.report import history  # noqa: E402
from npu_sim_bridge.testing import sweep, zoo  # noqa: E402

_v1 = tf.compat.v1
_v1.disable_eager_execution()
ROUNDING_OPS = ("NpuSimRoundToFloat16",)
GEOP_EVENTS = ("PartitionedCallOp", ":" + GEOP_KERNEL_OP)  # a GeOp call's host event, either kind of call


# user: a hand-built ConfigProto (remapper on); npu_config_proto: the same passed through npu_config_proto
# (remapper off), its plain side without the NpuOptimizer. --setting picks one; a child process reads it here.
SETTINGS = ("user", "npu_config_proto")
SETTING_ENV = "BENCH_FIRST_STEP_SETTING"


def config(kind):
    plain = _v1.ConfigProto() if kind == "plain" else sweep.session_config("mixed", remapping=True)
    if os.environ.get(SETTING_ENV, "user") == "npu_config_proto":
        from npu_sim_bridge.runtime.session import npu_config_proto

        plain = npu_config_proto(sweep.session_config("mixed", remapping=True))
        if kind == "plain":
            del plain.graph_options.rewrite_options.custom_optimizers[:]
    return plain


def first_step(model, kind, feed, trace=False, before_step=None, proto=None, cpu=None):
    """Seconds of the first training step in a fresh Session (the initializer run before, uncounted;
    `before_step` called between the two); `proto`, when given, is the Session's ConfigProto instead of kind's.
    `cpu`, a list: the step's CPU seconds (the whole process, every thread) are appended to it."""
    with _v1.Session(graph=model.graph, config=config(kind) if proto is None else proto) as sess:
        sess.run(model.init_op)
        history.clear_reports()
        if before_step is not None:
            before_step()
        options = _v1.RunOptions(trace_level=_v1.RunOptions.FULL_TRACE) if trace else None
        metadata = _v1.RunMetadata()
        started, cpu_started = time.perf_counter(), time.process_time()
        sess.run([model.loss, model.train_op], feed, options=options, run_metadata=metadata)
        seconds = time.perf_counter() - started
        if cpu is not None:
            cpu.append(time.process_time() - cpu_started)
        second = _v1.RunMetadata()
        sess.run([model.loss, model.train_op], feed, options=options, run_metadata=second)
    return seconds, metadata, second


def kernel_seconds(metadata):
    """(all kernels, rounding kernels) summed over the step's node stats, in seconds."""
    total = rounding = 0.0
    for device in metadata.step_stats.dev_stats:
        for stats in device.node_stats:
            micros = stats.all_end_rel_micros / 1e6
            op = stats.timeline_label.split(" = ", 1)[1].split("(", 1)[0] if " = " in stats.timeline_label else ""
            if op in CALL_OPS:
                continue  # a GeOp's call: its body's ops count
            total += micros
            rounding += micros if op in ROUNDING_OPS else 0.0
    return total, rounding


def profiled(model, kind, feed):
    """(first-step seconds, host events {name: seconds}, entry calls, reports, first and second metadata)."""
    logdir = tempfile.mkdtemp(prefix="first_step_")
    try:
        with EntryCallLog() as calls:
            tf.profiler.experimental.start(logdir)
            try:
                seconds, first, second = first_step(model, kind, feed, before_step=calls.calls.clear)
            finally:
                tf.profiler.experimental.stop()
        reports = list(history.recent_reports())
        events = collections.Counter()
        for path in glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True):
            space = xplane_pb2.XSpace.FromString(open(path, "rb").read())
            for plane in space.planes:
                if not plane.name.startswith("/host:CPU"):
                    continue
                names = {key: meta.name for key, meta in plane.event_metadata.items()}
                for line in plane.lines:
                    for event in line.events:
                        events[names.get(event.metadata_id, "?")] += event.duration_ps / 1e12
        return seconds, events, calls.calls, reports, first, second
    finally:
        shutil.rmtree(logdir, ignore_errors=True)


def _matching(events, *needles):
    return sum(value for name, value in events.items() if any(needle in name for needle in needles))


def breakdown(name, model, feed):
    plain_s, plain_events, _, _, _, _ = profiled(model, "plain", feed)
    sim_s, events, calls, reports, _, _ = profiled(model, "simulated", feed)
    main = [r for r in reports if r.item_id == "tf_graph" and not r.rerun]
    main_report = max(main, key=lambda r: r.nodes_before) if main else None
    rewrite = main_report.seconds if main_report else 0.0
    print(f"  {name}: traced first step, plain {plain_s:.2f} s, simulated {sim_s:.2f} s")
    if main_report:
        passes = ", ".join(f"{p.name} {p.seconds * 1000:.0f}" for p in main_report.passes)
        print(f"    rewrite of the training graph ({main_report.nodes_before} nodes): {rewrite:.2f} s "
              f"(ms: {passes})")
    entry_s = sum(seconds for _, seconds in calls)
    geop_s = _matching(events, *GEOP_EVENTS) - _matching(plain_events, *GEOP_EVENTS)
    _, plain_first, _ = first_step(model, "plain", feed, trace=True)
    _, first, second = first_step(model, "simulated", feed, trace=True)
    (plain_kernels, _), (sim_kernels, rounding) = kernel_seconds(plain_first), kernel_seconds(first)
    (_, rounding_second) = kernel_seconds(second)
    rest = sim_s - plain_s - entry_s - geop_s - (sim_kernels - plain_kernels)
    print(f"    NpuOptimizer's Python entry, {len(calls)} calls (this Session's graphs and Grappler's later "
          f"iterations over them): {entry_s:.2f} s, of which the training graph's rewrite {rewrite:.2f} s")
    print(f"    GeOp calls' first run (PartitionedCallOp or NpuSimGeOp: instantiating each body, its kernels), "
          f"over plain: {geop_s:.2f} s")
    print(f"    kernels, summed over a traced first step: plain {plain_kernels:.2f} s, simulated {sim_kernels:.2f} s, "
          f"of which the rounding kernels {rounding:.2f} s (second step {rounding_second:.2f} s)")
    print(f"    the rest (Grappler's C++ optimizers on the rewritten graph and its functions, session setup; not "
          f"traced): {rest:.2f} s")
    top = [(n, s) for n, s in events.most_common(60) if s > 0.05][:30]
    print("    simulated: the longest host events (s, summed; nested events count in their parents too): "
          + "; ".join(f"{n} {s:.2f}" for n, s in top))


# One line of Grappler's meta optimizer at VLOG 1: an optimizer's name, the graph after it, its time.
_OPTIMIZER_LINE = re.compile(r"\] (?P<name>[^:]+?)(?:\{.*\})?: Graph size after: .*time = (?P<ms>[0-9.]+)ms")
_ITEM_LINE = re.compile(r"Starting optimization for grappler item: (?P<item>\S+)")


def grappler_child(name, kind):
    """In a child process started with Grappler's meta optimizer logging: one first step, after an uncounted
    one in another Session (imports, the initializer graph), with a mark where the counted one starts."""
    model = zoo.sweep_builders([name])[name]()
    feed = model.feed(np.random.default_rng(0))
    first_step(model, kind, feed)
    print(GRAPPLER_MARK, file=sys.stderr, flush=True)
    first_step(model, kind, feed)


GRAPPLER_MARK = "BENCH_FIRST_STEP_COUNTED"


def grappler_times(name, kind):
    """{(item, optimizer): milliseconds} of one first step's Grappler runs, read from the meta optimizer's
    log in a child process: item is "main graph" (the Session's training graph), "GeOp bodies" (a GeOp
    body, as the Session's pass or its call's instantiation optimizes it) or "functions" (other library
    functions). What the log gives before the training graph's item (the initializer's run) is dropped."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="0", TF_CPP_VMODULE="meta_optimizer=1")
    child = subprocess.run([sys.executable, os.path.abspath(__file__), "--grappler-child", name, kind],
                           env=env, capture_output=True, text=True, timeout=3600)
    if child.returncode != 0:
        raise RuntimeError(f"the Grappler log of {name} ({kind}) failed: {child.stderr.strip().splitlines()[-1:]}")
    times = parse_grappler_log(child.stderr)
    if not times:
        raise RuntimeError(f"the Grappler log of {name} ({kind}) names no optimizer: TF_CPP_VMODULE was not read")
    return times


def parse_grappler_log(text):
    """{(item, optimizer): milliseconds} from a meta optimizer log (see grappler_times), counted from the mark."""
    times, item, counted = collections.Counter(), None, False
    for line in text.splitlines():
        if GRAPPLER_MARK in line:
            counted = True
        elif counted and (match := _ITEM_LINE.search(line)):
            if match["item"] == "tf_graph":  # a Session's graph: the initializer's, then the step's
                times, item = collections.Counter(), "main graph"
            else:
                item = "GeOp bodies" if match["item"].startswith("GeOp") else "functions"
        elif counted and item and (match := _OPTIMIZER_LINE.search(line)):
            times[item, match["name"].strip()] += float(match["ms"])
    return times


def grappler_breakdown(name):
    """Milliseconds per Grappler optimizer over one first step, plain beside simulated, biggest gaps first."""
    plain, simulated = grappler_times(name, "plain"), grappler_times(name, "simulated")
    keys = sorted(set(plain) | set(simulated), key=lambda key: -(simulated[key] - plain[key]))
    print(f"    Grappler per optimizer over the training step's graphs (ms): total plain {sum(plain.values()):.0f}, "
          f"simulated {sum(simulated.values()):.0f}")
    for item, optimizer in keys:
        if max(plain[item, optimizer], simulated[item, optimizer]) >= 1.0:
            print(f"      {item:<12} {optimizer:<32} plain {plain[item, optimizer]:8.1f}  simulated "
                  f"{simulated[item, optimizer]:8.1f}  {simulated[item, optimizer] - plain[item, optimizer]:+8.1f}")


def main():
    if sys.argv[1:2] == ["--grappler-child"]:
        grappler_child(*sys.argv[2:4])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="ResNet50,EfficientNetB0")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--no-breakdown", action="store_true")
    parser.add_argument("--grappler", action="store_true",
                        help="also each Grappler optimizer's time in the first step, plain beside simulated "
                             "(two child processes per model, with the meta optimizer's log on)")
    parser.add_argument("--setting", choices=SETTINGS, default="user",
                        help="the session configuration of both sides (default: a hand-built ConfigProto)")
    args = parser.parse_args()
    os.environ[SETTING_ENV] = args.setting  # the Grappler children read it too
    names = [name for name in args.models.split(",") if name]
    builders = {name: build for name, build in zoo.sweep_builders(names).items() if name in names}
    print(f"first training step, simulated (allow_mix_precision, {args.setting} configuration) / plain, fresh Sessions "
          f"interleaved, best of {args.rounds}")
    for name, build in builders.items():
        model = build()
        feed = model.feed(np.random.default_rng(0))
        best = {"plain": float("inf"), "simulated": float("inf")}
        cpu = {kind: [] for kind in best}
        for _ in range(args.rounds):
            for kind in best:
                best[kind] = min(best[kind], first_step(model, kind, feed, cpu=cpu[kind])[0])
        nodes = len(model.graph.as_graph_def().node)
        plain_cpu, sim_cpu = min(cpu["plain"]), min(cpu["simulated"])
        print(f"  {name:<16} {nodes:>6} nodes  plain {best['plain']:6.2f} s  simulated {best['simulated']:6.2f} s  "
              f"{best['simulated'] / best['plain']:5.2f}x | CPU time plain {plain_cpu:6.2f} s  simulated "
              f"{sim_cpu:6.2f} s  {sim_cpu / plain_cpu:5.2f}x", flush=True)
        if not args.no_breakdown:
            breakdown(name, model, feed)
        if args.grappler:
            grappler_breakdown(name)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
