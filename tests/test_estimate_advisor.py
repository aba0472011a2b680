"""The advisor names each bottleneck on a graph built to have it; estimate's shapes, --batch, CLI and CSV."""

import csv
import io
import json

import numpy as np
import pytest
import tensorflow as tf

from npu_sim_bridge.estimate import estimate
from npu_sim_bridge.estimate.advisor import advise
from npu_sim_bridge.estimate.output import OP_SUMMARY_COLUMNS, to_csv, to_dict

v1 = tf.compat.v1
MIXED = {"precision_mode": "allow_mix_precision"}


def _train(loss, var_list=None):
    return v1.train.GradientDescentOptimizer(0.1).minimize(loss, var_list=var_list, name="train_op")


def _codes(step):
    return {b.code: b for b in advise(step)}


def _mirror_pad_graph():
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, [8, 16, 16, 3], name="x")
        padded = tf.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]], mode="REFLECT")
        w = v1.get_variable("w", [3, 3, 3, 8])
        y = tf.nn.conv2d(padded, w, strides=1, padding="VALID")
        train = _train(tf.reduce_mean(y * y))
    return g, train


def test_mirror_pad_runs_on_aicpu_and_the_advisor_says_so():
    g, train = _mirror_pad_graph()
    step = estimate(g, MIXED, fetches=[train.name])
    aicpu = _codes(step)["aicpu_ops"]
    assert any(name.startswith("MirrorPad") for name in aicpu.ops)
    assert 0 < aicpu.share <= 1
    assert step.by_unit["aicpu"] > 0
    # the 910B preset's library has it on the AI Core
    later = estimate(g, MIXED, fetches=[train.name], soc="Ascend910B1")
    assert "aicpu_ops" not in _codes(later)


def test_py_func_in_the_middle_splits_the_graph():
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, [16, 32], name="x")
        w1 = v1.get_variable("w1", [32, 32])
        w2 = v1.get_variable("w2", [32, 4])
        h = tf.matmul(x, w1)
        mid = v1.py_func(lambda a: a * 2, [h], tf.float32, name="on_host")
        mid.set_shape([16, 32])
        loss = tf.reduce_sum(tf.matmul(mid, w2))
        train = _train(loss, var_list=[w2])
    step = estimate(g, MIXED, fetches=[train.name])
    split = _codes(step)["host_split"]
    assert "PyFunc" in split.ops
    assert split.share > 0 and step.by_unit["host"] > 0
    assert "py_func" in split.advice


def _mlp_graph():
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, [64, 256], name="x")
        w = v1.get_variable("w", [256, 256])
        train = _train(tf.reduce_sum(tf.matmul(x, w)))
    return g, train


def test_float32_matmul_under_must_keep_origin_dtype():
    g, train = _mlp_graph()
    kept = estimate(g, {"precision_mode": "must_keep_origin_dtype"}, fetches=[train.name])
    found = _codes(kept)["fp32_cube"]
    assert any(name.startswith("MatMul") for name in found.ops)
    assert "must_keep_origin_dtype" in found.advice
    mixed = estimate(g, MIXED, fetches=[train.name])
    assert "fp32_cube" not in _codes(mixed)
    assert mixed.by_unit["cube"] < kept.by_unit["cube"]


def test_a_host_round_trip_every_step_without_loop_sinking():
    g, train = _mlp_graph()
    plain = estimate(g, MIXED, fetches=[train.name])
    trip = _codes(plain)["host_round_trip"]
    assert trip.share > 0 and "iterations_per_loop" in trip.advice
    sunk = estimate(g, {**MIXED, "iterations_per_loop": "100"}, fetches=[train.name])
    assert "host_round_trip" not in _codes(sunk)
    assert sunk.by_unit["run_overhead"] == pytest.approx(plain.by_unit["run_overhead"] / 100)


def test_transpose_is_a_format_conversion_and_tiny_kernels_are_small():
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, [4, 8], name="x")
        w = v1.get_variable("w", [4, 8])
        train = _train(tf.reduce_sum(tf.transpose(x * w) * 3.0))
    codes = _codes(estimate(g, MIXED, fetches=[train.name]))
    assert any(name.startswith("Transpose") for name in codes["format_conversion"].ops)
    assert codes["small_kernels"].share > 0


def test_unknown_batch_is_dynamic_until_batch_is_given():
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, [None, 64], name="x")
        w = v1.get_variable("w", [64, 48])
        train = _train(tf.reduce_sum(tf.matmul(x, w)))
    unknown = estimate(g, MIXED, fetches=[train.name])
    assert "dynamic_shapes" in _codes(unknown)
    known = estimate(g, MIXED, fetches=[train.name], batch=32)
    assert "dynamic_shapes" not in _codes(known)
    matmul = next(o for o in known.ops if o.record.op == "MatMul" and o.record.name == "MatMul")
    assert matmul.record.work.flops == 2 * 32 * 64 * 48
    assert known.batch == 32 and known.samples_per_s == pytest.approx(32 / (known.step_us * 1e-6))


def test_json_and_csv_shapes(tmp_path):
    from npu_sim_bridge.cli.main import main

    g, train = _mirror_pad_graph()
    path = tmp_path / "g.meta"
    path.write_bytes(v1.train.export_meta_graph(graph=g).SerializeToString())
    out = tmp_path / "ops.csv"
    buf = io.StringIO()
    import contextlib
    with contextlib.redirect_stdout(buf):
        assert main(["estimate", str(path), "--param", "precision_mode=allow_mix_precision", "--json",
                     "--all-ops", "--csv", str(out)]) == 0
    data = json.loads(buf.getvalue())
    for key in ("step_ms", "samples_per_s", "by_unit", "bottlenecks", "constants", "step_ms_range"):
        assert key in data
    assert data["step_ms_range"][0] < data["step_ms"] < data["step_ms_range"][1]
    pad = next(row for row in data["ops"] if row["op"] == "MirrorPad")
    assert pad["unit"] == "aicpu" and pad["us"] > 0
    assert data["samples_per_s"] == pytest.approx(8 / (data["step_ms"] / 1e3), rel=1e-3)
    rows = list(csv.DictReader(out.read_text().splitlines()))
    assert tuple(rows[0].keys()) == OP_SUMMARY_COLUMNS
    assert {"AI_CPU", "AI_CORE"} <= {row["Task Type"] for row in rows}
    assert all(row["Task Wait Time(us)"] == "" for row in rows)


def test_cli_errors_name_the_thing(tmp_path, capsys):
    from npu_sim_bridge.cli.main import main

    g, _ = _mlp_graph()
    path = tmp_path / "g.meta"
    path.write_bytes(v1.train.export_meta_graph(graph=g).SerializeToString())
    assert main(["estimate", str(path), "--constant", "cube_speed=2"]) == 1
    assert "cube_speed" in capsys.readouterr().err
    assert main(["estimate", str(path), "--constant", "cube_efficiency"]) == 2
    assert main(["estimate", str(path), "--batch", "0"]) == 2
    assert main(["estimate", str(tmp_path / "missing.pb")]) != 0


def test_a_static_batch_is_the_graphs_own():
    g, train = _mlp_graph()  # x is [64, 256]
    step = estimate(g, MIXED, fetches=[train.name], batch=8)
    assert step.batch == 64
