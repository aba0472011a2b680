"""How the rewrite grows with the graph: time per node and memory, from BERT 1 layer to 120 and to 100k nodes.

The whole default pipeline (every pass, allow_mix_precision), in process (`run_pipeline`), on
  - BERT training graphs (Adam, softmax cross-entropy) of 1, 2, 4, 8, 12, 24 and 120 layers: the
    node count grows with depth, the tensor sizes do not enter the rewrite, so the encoder is built
    narrow; 120 layers (99k nodes, a minute to build) is a real model's structure at the synthetic
    graph's largest size;
  - synthetic forward graphs of 10k, 30k and 100k nodes (`testing.synthetic.scoped_graph`: dense
    blocks in name scopes, every 40th block marked for the host), under mix_compile_mode.

Per graph: nodes, GraphDef size, the median pipeline time over the repeats (after one run not
counted) and its time per node, the time of each pass, and the memory of one run in a fresh process
(after a run on a small graph there, for the imports and caches every process fills once):
the peak of Python's own allocations (tracemalloc) and how far the process's peak resident set grew
over the run (it also holds the protobuf arenas tracemalloc cannot see), each as a multiple of the
GraphDef's serialized size. Linear growth means a constant time per node: the last column divides
each graph's time per node by the smallest BERT's.

For the BERT graphs up to 24 layers, the same resident-set growth inside Grappler (tf_optimizer.OptimizeGraph, one
iteration, one optimizer enabled; each in a fresh process after a run on a small graph), side by
side: NpuOptimizer's whole pipeline, NpuOptimizer with no pass (the GraphDef through the shim, the
checks and the report), and TensorFlow's own auto_mixed_precision_cpu. Grappler's copies of the graph
count on every side, so this is what a user's process sees.

Run:  python benchmarks/bench_scale.py [--quick] [--repeats N]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import time
import tracemalloc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
from tensorflow.core.protobuf import meta_graph_pb2  # noqa: E402
from tensorflow.python.grappler import tf_optimizer  # noqa: E402

import bench_precision  # noqa: E402  (the OptimizeGraph harness)

from npu_sim_bridge.config import from_dict  # noqa: E402
from npu_sim_bridge.passes import ItemInfo, run_pipeline  # noqa: E402
from npu_sim_bridge.testing import models  # noqa: E402
from npu_sim_bridge.testing.synthetic import scoped_graph  # noqa: E402

tf.compat.v1.disable_eager_execution()
_NARROW_BERT = dict(hidden=64, heads=2, seq_len=16, vocab=100, intermediate=128)


def labels(quick: bool) -> list[str]:
    bert = (1, 4, 12) if quick else (1, 2, 4, 8, 12, 24, 120)
    synthetic = (10, 30) if quick else (10, 30, 100)
    return [f"BERT {layers} layers" for layers in bert] + [f"synthetic {size}k" for size in synthetic]


def build(label: str):
    """(GraphDef, fetch names, extra options) of a graph named as `labels` names it."""
    kind, count = label.split()[:2]
    if kind == "BERT":
        model = models.bert(num_layers=int(count), with_saver=False, **_NARROW_BERT)
        return model.graph_def(), model.fetch_names(), {}
    return scoped_graph(int(count[:-1]) * 1000), ["out"], {"mix_compile_mode": True}


def _inputs(fetch, extra):
    options = from_dict({"precision_mode": "allow_mix_precision", "sim_passes": "all", **extra})
    return options, ItemInfo(id="scale", fetch=tuple(fetch))


def time_pipeline(graph_def, fetch, extra, repeats: int) -> dict:
    options, item = _inputs(fetch, extra)
    run_pipeline(graph_def, options, item)  # lazy imports and caches, not counted
    totals, passes = [], collections.defaultdict(list)
    for _ in range(repeats):
        started = time.perf_counter()
        report = run_pipeline(graph_def, options, item).report
        totals.append(time.perf_counter() - started)
        for record in report.passes:
            passes[record.name].append(record.seconds)
    return {"seconds": statistics.median(totals),
            "passes": {name: statistics.median(values) for name, values in passes.items()}}


def _resident_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")  # Linux: the peak resident set (VmHWM) starts again from the current one


def _peak_resident_mb() -> float:
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024  # kilobytes


def memory_of(label: str) -> None:
    """In a process of its own: the memory of one pipeline run on the graph, printed as JSON."""
    graph_def, fetch, extra = build(label)
    options, item = _inputs(fetch, extra)
    # The first run in a process imports modules and fills caches (the op library among them): done
    # on a small graph first, so that the figures are the graph's own.
    run_pipeline(scoped_graph(300), *_inputs(["out"], {"mix_compile_mode": True}))
    before = _resident_mb()
    _reset_peak()  # the peak so far is importing TensorFlow's, which the pipeline run may never reach
    run_pipeline(graph_def, options, item)
    peak = _peak_resident_mb()
    # tracemalloc's own records take memory too: its run comes after the resident set was read.
    tracemalloc.start()
    run_pipeline(graph_def, options, item)
    traced = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    print(json.dumps({"traced_mb": traced, "rss_growth_mb": max(0.0, peak - before)}))


GRAPPLER_SIDES = ("npu_all", "npu_none", "tf_amp")


def grappler_memory_of(label: str, side: str) -> None:
    """In a process of its own: how far OptimizeGraph grows the resident set on a BERT graph, as JSON."""
    layers = int(label.split()[1])
    meta = models.bert(num_layers=layers, with_saver=False, **_NARROW_BERT).meta_graph_def()
    config = bench_precision.optimize_config(side)  # one optimizer, one iteration
    # Grappler's, the shim's and the pipeline's first-run costs, on a small graph first.
    small = meta_graph_pb2.MetaGraphDef(graph_def=scoped_graph(300))
    small.collection_def["train_op"].node_list.value.append("out")
    tf_optimizer.OptimizeGraph(config, small)
    before = _resident_mb()
    _reset_peak()
    tf_optimizer.OptimizeGraph(config, meta)
    print(json.dumps({"rss_growth_mb": max(0.0, _peak_resident_mb() - before)}))


def measure_memory(label: str, side: str | None = None) -> dict:
    command = [sys.executable, os.path.abspath(__file__), "--memory-of", label]
    done = subprocess.run(command + (["--grappler-side", side] if side else []),
                          capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"the memory run of {label} ({side or 'in process'}) failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer and smaller graphs, 2 repeats")
    parser.add_argument("--repeats", type=int, help="pipeline runs per graph (default 3, quick 2)")
    parser.add_argument("--memory-of", help=argparse.SUPPRESS)  # the child process of measure_memory
    parser.add_argument("--grappler-side", choices=GRAPPLER_SIDES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_of:
        if args.grappler_side:
            grappler_memory_of(args.memory_of, args.grappler_side)
        else:
            memory_of(args.memory_of)
        return
    repeats = args.repeats or (2 if args.quick else 3)
    print(f"whole default pipeline, allow_mix_precision, in process; median of {repeats} runs per graph")
    print(f"{'graph':<18} {'nodes':>7} {'GraphDef':>9} {'ms':>8} {'us/node':>8}  {'passes (ms)':<58} "
          f"{'traced peak':>11} {'RSS growth':>10} {'per node vs first':>17}")
    first = None
    for label in labels(args.quick):
        graph_def, fetch, extra = build(label)
        nodes, size_mb = len(graph_def.node), graph_def.ByteSize() / 2**20
        row = time_pipeline(graph_def, fetch, extra, repeats)
        memory = measure_memory(label)
        per_node = row["seconds"] / nodes * 1e6
        first = first or per_node
        parts = ", ".join(f"{name} {seconds * 1000:.0f}" for name, seconds in row["passes"].items())
        print(f"{label:<18} {nodes:>7} {size_mb:>6.1f} MB {row['seconds'] * 1000:>8.0f} {per_node:>8.1f}  {parts:<58} "
              f"{memory['traced_mb'] / size_mb:>10.1f}x {memory['rss_growth_mb'] / size_mb:>9.1f}x "
              f"{per_node / first:>16.2f}x", flush=True)
    # Up to 24 layers: each side builds the graph again in a process of its own.
    bert = [label for label in labels(args.quick) if label.startswith("BERT") and int(label.split()[1]) <= 24]
    print("\nresident-set growth inside Grappler (OptimizeGraph, one iteration), over the GraphDef's size")
    print(f"{'graph':<18} {'NpuOptimizer, all passes':>24} {'NpuOptimizer, no pass':>22} "
          f"{'auto_mixed_precision_cpu':>25} {'all passes / TF':>16}")
    for label in bert:
        size_mb = build(label)[0].ByteSize() / 2**20
        growth = {side: measure_memory(label, side)["rss_growth_mb"] / size_mb for side in GRAPPLER_SIDES}
        print(f"{label:<18} {growth['npu_all']:>23.1f}x {growth['npu_none']:>21.1f}x {growth['tf_amp']:>24.1f}x "
              f"{growth['npu_all'] / growth['tf_amp']:>15.2f}x", flush=True)


if __name__ == "__main__":
    main()
