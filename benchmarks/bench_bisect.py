"""Runs npu-sim bisect needs against the number of candidate ops, guided by the dumps and not.

Each model has N parallel MatMul branches (MatMul -> Mul -> summed); K of them overflow float16
(activations near 1e5). Candidates: the N MatMul nodes, the N Mul nodes and the adds after them.
Printed per model: candidate types and nodes, the runs of the type and node searches (guided by the
overflow flags and the dump compare, and in graph order), the total runs, and k·(log2 n + 1) for scale.
Run:  python benchmarks/bench_bisect.py
"""

import math
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from npu_sim_bridge.bisect import bisect_graph  # noqa: E402

tf.compat.v1.disable_eager_execution()


def branches(n, culprits):
    rs = np.random.RandomState(n)
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [8, 64], name="x")
        parts = []
        for index in range(n):
            big = index in culprits
            weights = rs.uniform(400, 800, (64, 8)) if big else rs.normal(0, 0.1, (64, 8))
            mm = tf.matmul(x, tf.constant(weights.astype(np.float32)), name=f"branch{index}/MatMul")
            parts.append(tf.multiply(mm, 1e-3 if big else 1.0, name=f"branch{index}/scale"))
        total = parts[0]
        for index, part in enumerate(parts[1:], start=1):
            total = tf.add(total, part, name=f"sum{index}")
        tf.reduce_sum(total, axis=1, name="out")
    return graph.as_graph_def()


def main():
    feed = {"x:0": np.abs(np.random.RandomState(1).normal(3, 1, (8, 64))).astype(np.float32)}
    rows = [("branches", "culprits", "cand. types", "cand. nodes", "guided search runs", "unguided search runs",
             "total runs (guided)", "k*(log2 n+1)", "found")]
    for n, k in ((4, 1), (16, 1), (64, 1), (16, 2), (64, 2), (64, 3)):
        culprits = set(range(1, n, max(1, n // k)))
        culprits = set(sorted(culprits)[:k])
        graph = branches(n, culprits)
        guided = bisect_graph(graph, ["out"], feeds=feed, progress=None)
        blind = bisect_graph(graph, ["out"], feeds=feed, guided=False, progress=None)
        expected = sorted(f"branch{i}/MatMul" for i in culprits)
        ok = sorted(guided.fix.nodes) == expected and sorted(blind.fix.nodes) == expected
        rows.append((str(n), str(k), str(len(guided.candidate_types)), str(len(guided.candidate_nodes)),
                     str(guided.search_runs), str(blind.search_runs), str(guided.runs),
                     f"{k * (math.log2(len(guided.candidate_nodes)) + 1):.0f}", "yes" if ok else "NO"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.rjust(width) for cell, width in zip(row, widths)))


if __name__ == "__main__":
    main()
