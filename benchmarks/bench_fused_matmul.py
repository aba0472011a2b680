"""A fused MatMul taken apart on the CPU (passes/fusion/apart.py) against kept fused: kernels and training steps.

    python benchmarks/bench_fused_matmul.py [--parts kernels,steps] [--models A,B] [--rounds 5]

kernels  Per shape of a grid (the sizes of the sweep's dense layers and LSTM cells among them), a graph of
         100 MatMul -> BiasAdd (-> Relu) against one of 100 _FusedMatMul, weights fed as a training step
         feeds a variable's value: microseconds per op, best of the rounds, the two graphs interleaved, and
         whether the two forms give the same bits.
steps    Per sweep model and configuration (user: a hand-built ConfigProto, npu_config_proto: Grappler's
         remapper off), the simulated Session's steady step with the fused MatMuls apart (the product) and
         kept fused, each over the plain Session's, interleaved (interleave.py, rounds of at least 0.5 s),
         the fused MatMuls taken apart, and whether both give the same losses, bit for bit.

TensorFlow must run with oneDNN (TF_ENABLE_ONEDNN_OPTS unset on a CPU with AVX-512, or =1): without it the
product keeps every fused MatMul, and the script says so and stops (exit status 2).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import npu_sim_bridge  # noqa: E402
from npu_sim_bridge.passes.fusion import apart  # noqa: E402

OPS_PER_GRAPH = 100
# (rows, inner, columns): the sweep's cond MLP (16 x 32 -> 64 -> 32 -> 4), its LSTM cell (4 x 96 -> 128),
# a BERT-small dense layer and two larger ones.
SHAPES = [(16, 32, 64), (16, 64, 32), (16, 32, 4), (4, 96, 128), (32, 128, 128), (64, 256, 1024),
          (128, 768, 768)]
MODELS = "user_cond_mlp,user_while_mlp,lstm_v1,bert_small,cnn_channels_first,keras_cnn"


def _fused_attrs(fused_ops) -> dict:
    from tensorflow.core.framework import attr_value_pb2 as av

    return {"T": av.AttrValue(type=tf.float32.as_datatype_enum), "num_args": av.AttrValue(i=1),
            "fused_ops": av.AttrValue(list=av.AttrValue.ListValue(s=[op.encode() for op in fused_ops])),
            "transpose_a": av.AttrValue(b=False), "transpose_b": av.AttrValue(b=False),
            "epsilon": av.AttrValue(f=1e-4)}


def _kernel_graph(form: str, shape, fused_ops, rng):
    """(graph, fetch, feed, first output) of OPS_PER_GRAPH ops of one form on distinct weights."""
    rows, inner, columns = shape
    graph = tf.Graph()
    feed = {}
    with graph.as_default():
        a = tf.constant(rng.standard_normal((rows, inner)).astype(np.float32))
        bias = tf.constant(rng.standard_normal(columns).astype(np.float32))
        outputs = []
        for index in range(OPS_PER_GRAPH):
            weights = tf.compat.v1.placeholder(tf.float32, (inner, columns))
            feed[weights] = rng.standard_normal((inner, columns)).astype(np.float32)
            if form == "apart":
                out = tf.nn.bias_add(tf.matmul(a, weights), bias)
                out = tf.nn.relu(out) if "Relu" in fused_ops else out
            else:
                out = graph.create_op("_FusedMatMul", [a, weights, bias], [tf.float32], name=f"fused_{index}",
                                      attrs=_fused_attrs(fused_ops)).outputs[0]
            outputs.append(tf.reduce_sum(out))
        fetch = tf.add_n(outputs)
    return graph, fetch, feed, outputs[0].op.inputs[0]


def kernel_rows(rounds: int, runs: int = 20) -> list[dict]:
    config = tf.compat.v1.ConfigProto()
    config.graph_options.rewrite_options.disable_meta_optimizer = True
    config.graph_options.optimizer_options.opt_level = tf.compat.v1.OptimizerOptions.L0  # no CSE, no folding
    rows = []
    for shape, fused_ops in itertools.product(SHAPES, (("BiasAdd",), ("BiasAdd", "Relu"))):
        sessions, firsts = {}, {}
        for form in ("apart", "fused"):
            graph, fetch, feed, first = _kernel_graph(form, shape, fused_ops, np.random.default_rng(0))
            sess = tf.compat.v1.Session(graph=graph, config=config)
            for _ in range(3):
                sess.run(fetch, feed)
            sessions[form] = (sess, fetch, feed)
            firsts[form] = sess.run(first, feed)
        best = {form: float("inf") for form in sessions}
        for _ in range(rounds):
            for form, (sess, fetch, feed) in sessions.items():
                started = time.perf_counter()
                for _ in range(runs):
                    sess.run(fetch, feed)
                best[form] = min(best[form], (time.perf_counter() - started) / runs / OPS_PER_GRAPH * 1e6)
        for sess, _, _ in sessions.values():
            sess.close()
        same = np.array_equal(firsts["apart"].view(np.uint32), firsts["fused"].view(np.uint32))
        rows.append({"shape": shape, "fused_ops": fused_ops, "apart_us": best["apart"], "fused_us": best["fused"],
                     "same_bits": bool(same)})
    return rows


@contextlib.contextmanager
def kept_fused():
    """Rewrites made inside keep every fused MatMul fused (the product's step switched off)."""
    real = apart.onednn_enabled
    apart.onednn_enabled = lambda: False
    try:
        yield
    finally:
        apart.onednn_enabled = real


def step_row(name: str, setting: str, rounds: int, steps: int, min_round_s: float) -> dict:
    import bench_cost
    from interleave import interleaved_ratios
    from npu_sim_bridge.testing import zoo

    model = zoo.sweep_builders()[name]()
    configs = bench_cost.session_configs(setting, layout_plain=name in bench_cost.PLAIN_NEEDS_LAYOUT)
    fetch = [model.loss, model.train_op]
    feed = model.feed(np.random.default_rng(0))
    sessions, losses, taken_apart = {}, {}, {}
    for kind, config in (("plain", configs["plain"]), ("apart", configs["simulated"]), ("fused", configs["simulated"])):
        sess = tf.compat.v1.Session(graph=model.graph, config=config)
        npu_sim_bridge.clear_reports()
        with kept_fused() if kind == "fused" else contextlib.nullcontext():
            sess.run(model.init_op)  # the rewrite happens at a graph's first run
            losses[kind] = [sess.run(fetch, feed)[0] for _ in range(3)]
        taken_apart[kind] = sum(record.stats.get("fused_matmuls_apart", 0) for report in npu_sim_bridge.recent_reports()
                                for record in report.passes if record.name == apart.FusedMatMulApartPass.name)
        sessions[kind] = (sess, fetch, feed)
    ratios = interleaved_ratios(sessions, rounds, steps, min_round_s=min_round_s)
    same = np.array_equal(np.asarray(losses["apart"], np.float32).view(np.uint32),
                          np.asarray(losses["fused"], np.float32).view(np.uint32))
    return {"model": name, "setting": setting, "plain_ms": statistics.median(ratios["plain_ms"]),
            "apart": statistics.median(ratios["apart"]), "fused": statistics.median(ratios["fused"]),
            "apart_range": (min(ratios["apart"]), max(ratios["apart"])),
            "fused_range": (min(ratios["fused"]), max(ratios["fused"])), "same_losses": bool(same),
            "taken_apart": taken_apart["apart"], "taken_apart_kept_fused": taken_apart["fused"]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="kernels,steps")
    parser.add_argument("--models", default=MODELS, help=f"sweep models for the steps part (default {MODELS})")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=5, help="steps part: at least this many steps a round")
    parser.add_argument("--min-round-s", type=float, default=0.5)
    args = parser.parse_args(argv)
    tf.compat.v1.disable_eager_execution()
    if not apart.onednn_enabled():
        print("bench_fused_matmul: TensorFlow runs without oneDNN here (TF_ENABLE_ONEDNN_OPTS), so every fused "
              "MatMul stays fused and there is nothing to compare")
        return 2
    parts = args.parts.split(",")
    if "kernels" in parts:
        print(f"kernels: microseconds per op, best of {args.rounds} rounds, {OPS_PER_GRAPH} ops a graph")
        print(f"{'rows x inner x columns':<24}{'ops':<16}{'apart':>9}{'fused':>9}{'apart/fused':>13}  same bits")
        for row in kernel_rows(args.rounds):
            shape = " x ".join(map(str, row["shape"]))
            print(f"{shape:<24}{'+'.join(row['fused_ops']):<16}{row['apart_us']:>9.2f}{row['fused_us']:>9.2f}"
                  f"{row['apart_us'] / row['fused_us']:>12.2f}x  {'yes' if row['same_bits'] else 'NO'}", flush=True)
    if "steps" in parts:
        import bench_cost

        print(f"steps: simulated steady step over the plain one, median of {args.rounds} interleaved rounds (range)")
        print(f"{'model':<20}{'configuration':<18}{'plain ms':>9}{'apart':>24}{'kept fused':>24}  apart  same losses")
        for name, setting in itertools.product(args.models.split(","), bench_cost.SETTINGS):
            row = step_row(name, setting, args.rounds, args.steps, args.min_round_s)
            cells = [f"{row[kind]:.3f}x ({row[kind + '_range'][0]:.2f}-{row[kind + '_range'][1]:.2f})"
                     for kind in ("apart", "fused")]
            print(f"{name:<20}{setting:<18}{row['plain_ms']:>9.2f}{cells[0]:>24}{cells[1]:>24}  "
                  f"{row['taken_apart']:>5}  {'yes' if row['same_losses'] else 'NO'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
