"""`npu-sim profile --summary/--csv/--skip/--merge`, each step's role, and the estimated NPU track, on a Session
script and an Estimator script."""

import csv
import glob
import io
import json
import logging
import os

import numpy as np
import pytest
import tensorflow as tf

from npu_sim_bridge import estimate as estimate_package
from npu_sim_bridge.cli.main import main
from npu_sim_bridge.estimate.output import OP_SUMMARY_COLUMNS
from npu_sim_bridge.npu_init import NPUEstimator, NPUEstimatorSpec, NPURunConfig, ProfilingConfig, npu_scope
from npu_sim_bridge.profiling.op_summary import COLUMNS

ESTIMATED = "estimated NPU (Ascend910A)"


def session_script(config, steps=4):
    """A TF1 training script: init, `steps` training steps, one evaluation of the loss."""
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [4, 8], name="x")
        w = tf.compat.v1.get_variable("w", [8, 8])
        loss = tf.reduce_sum(tf.matmul(tf.nn.relu(tf.matmul(x, w)), w, name="head"), name="loss")
        train = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)
        init = tf.compat.v1.global_variables_initializer()
    feed = {x: np.ones([4, 8], np.float32)}
    with tf.compat.v1.Session(graph=graph, config=config) as sess:
        sess.run(init)
        for _ in range(steps):
            sess.run([train, loss], feed)
        sess.run(loss, feed)


def profile(capsys, *argv):
    status = main(["profile", *argv])
    out, err = capsys.readouterr()
    return status, out, err


def read_csv(path):
    with open(path, encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_session_summary_csv_skips_warm_up_and_keeps_init_and_eval_apart(tmp_path, npu_config, capsys):
    options = json.dumps({"output": str(tmp_path / "prof")})
    session_script(npu_config(profiling_mode=True, profiling_options=options))
    status, out, _ = profile(capsys, str(tmp_path / "prof"), "--summary", "--skip", "1", "--csv",
                             str(tmp_path / "ops.csv"))
    assert status == 0
    assert "train: 3 step(s) 2, 3, 4" in out and "init: 1 step(s) 0" in out and "eval: 1 step(s) 5" in out
    assert "skipped (--skip 1, warm-up): training step(s) 1" in out
    rows = read_csv(tmp_path / "ops.csv")
    assert tuple(rows[0]) == COLUMNS
    by_role = {}
    for row in rows:
        by_role.setdefault(row["Model Name"], []).append(row)
    assert set(by_role) == {"train", "init", "eval"}
    train = {row["OP Type"]: row for row in by_role["train"]}
    # Each training step runs one optimizer update on the device: three steps after the skipped one.
    assert train["ResourceApplyGradientDescent"]["Count"] == "3"
    assert train["ResourceApplyGradientDescent"]["Task Type"] == "DEVICE"
    assert "ResourceApplyGradientDescent" not in {row["OP Type"] for row in by_role["eval"] + by_role["init"]}
    assert "AssignVariableOp" in {row["OP Type"] for row in by_role["init"]}
    for role_rows in by_role.values():
        assert sum(float(row["Ratio(%)"]) for row in role_rows) == pytest.approx(100, abs=0.1)
        for row in role_rows:
            count, total = int(row["Count"]), float(row["Total Time(us)"])
            assert float(row["Avg Time(us)"]) == pytest.approx(total / count, abs=0.01)
            assert float(row["Min Time(us)"]) <= float(row["Avg Time(us)"]) <= float(row["Max Time(us)"])
    # Printed without --csv: the same rows after the lines naming the steps.
    status, out, _ = profile(capsys, str(tmp_path / "prof"), "--summary", "--skip", "1")
    assert status == 0 and len(list(csv.DictReader(io.StringIO(out[out.index("Model Name"):])))) == len(rows)
    status, out, _ = profile(capsys, str(tmp_path / "prof"), "--summary", "--skip", "1", "--json")
    summary = json.loads(out)["summary"]
    assert status == 0 and len(summary["rows"]) == len(rows) and [s["step"] for s in summary["skipped"]] == [1]


def test_the_run_writes_an_estimated_npu_track_once_per_graph_and_a_merged_trace(tmp_path, npu_config,
                                                                                   monkeypatch, capsys):
    calls = []
    real = estimate_package.estimate
    monkeypatch.setattr(estimate_package, "estimate", lambda *a, **k: calls.append(k["fetches"]) or real(*a, **k))
    options = json.dumps({"output": str(tmp_path / "prof")})
    session_script(npu_config(profiling_mode=True, profiling_options=options))
    assert len(calls) == 2  # the training and the evaluation graph; not once per step, nor for the init run
    folder, = glob.glob(str(tmp_path / "prof" / "*"))
    assert "init run" in json.load(open(os.path.join(folder, "trace_step_0.json")))["metadata"]["estimate_skipped"]
    step = json.load(open(os.path.join(folder, "trace_step_2.json")))
    assert step["metadata"]["role"]["role"] == "train"
    assert "not a measurement" in step["metadata"]["estimate"]["note"]
    estimated = [e for e in step["traceEvents"] if e.get("pid") == step["metadata"]["estimate"]["pid"]]
    assert {"name": ESTIMATED} in [e["args"] for e in estimated if e["name"] == "process_name"]
    ops = [e for e in estimated if e["ph"] == "X" and e["cat"] != "GeOp (estimated)" and e["args"].get("op")]
    assert {"cube", "vector"} <= {e["args"]["unit"] for e in ops} and all(e["args"]["estimate"] for e in ops)
    measured_geops = step["metadata"]["geops"]
    spans = [e for e in estimated if e["ph"] == "X" and e["cat"] == "GeOp (estimated)"]
    assert [e["name"] for e in spans] == measured_geops  # named after the measured GeOp it estimates
    inside = [e for e in ops if e["args"]["geop"] == spans[0]["name"]]
    assert sum(e["dur"] for e in inside) == pytest.approx(spans[0]["dur"])
    ends = sorted((e["ts"], e["ts"] + e["dur"]) for e in inside)
    assert all(a[1] == pytest.approx(b[0]) for a, b in zip(ends, ends[1:]))  # end to end
    # The measured figures leave the estimate out.
    status, out, _ = profile(capsys, os.path.join(folder, "trace_step_2.json"), "--json")
    assert status == 0 and "estimate" not in {row["where"] for row in json.loads(out)[0]["by_op_type"]}

    merged = json.load(open(os.path.join(folder, "trace_merged.json")))
    steps = [e for e in merged["traceEvents"] if e.get("cat") == "step"]
    assert [e["name"] for e in steps] == ["step 0 (init)"] + [f"step {k} (train)" for k in range(1, 5)] \
        + ["step 5 (eval)"]
    assert all(a["ts"] + a["dur"] <= b["ts"] for a, b in zip(steps, steps[1:]))  # one time line, in order
    step_x = [e for e in step["traceEvents"] if e["ph"] == "X"]
    assert len([e for e in merged["traceEvents"] if e["ph"] == "X" and e["cat"] != "step"
                and e["args"]["step"] == 2]) == len(step_x)
    tracks = [e["args"]["name"] for e in merged["traceEvents"] if e.get("name") == "thread_name"]
    assert len(tracks) == len(set((e["pid"], e["args"]["name"]) for e in merged["traceEvents"]
                                  if e.get("name") == "thread_name"))  # one track per name across steps
    status, _, err = profile(capsys, os.path.join(folder, "trace_merged.json"), "--summary")
    assert status == 1 and "is a merged trace" in err and "trace_merged.json" in err
    status, out, _ = profile(capsys, str(tmp_path / "prof"), "--merge", str(tmp_path / "all.json"))
    assert status == 0 and "merged 6 step trace(s)" in out
    assert len(json.load(open(tmp_path / "all.json"))["traceEvents"]) == len(merged["traceEvents"])


def test_a_failing_estimate_is_told_in_the_trace_and_a_warning_and_the_run_goes_on(tmp_path, npu_config,
                                                                                     monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise ValueError("no shape for node x")

    monkeypatch.setattr(estimate_package, "estimate", broken)
    options = json.dumps({"output": str(tmp_path / "prof"), "sim_steps": "1"})
    with caplog.at_level(logging.WARNING, logger="npu_sim_bridge"):
        session_script(npu_config(profiling_mode=True, profiling_options=options), steps=1)
    trace = json.load(open(glob.glob(str(tmp_path / "prof" / "*" / "trace_step_1.json"))[0]))
    assert trace["metadata"]["estimate_error"] == "ValueError: no shape for node x"
    assert not [e for e in trace["traceEvents"] if e.get("pid") == 3]
    warned = [r.getMessage() for r in caplog.records if "estimated NPU track" in r.getMessage()]
    assert len(warned) == 1 and "train graph" in warned[0] and "no shape for node x" in warned[0]


def test_the_estimated_track_runs_geops_and_host_ops_in_the_measured_order(tmp_path, npu_config):
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [4, 8], name="x")
        w = tf.compat.v1.get_variable("w", [8, 8])
        y = tf.nn.relu(tf.matmul(x, w), name="first")
        with npu_scope.without_npu_compile_scope():
            z = tf.compat.v1.py_func(lambda a: a * 2, [y], tf.float32, name="host_fn")
        tf.reduce_sum(tf.matmul(tf.reshape(z, [4, 8]), w, name="second"), name="out")
        init = tf.compat.v1.global_variables_initializer()
    options = json.dumps({"output": str(tmp_path / "prof"), "sim_steps": "1"})
    with tf.compat.v1.Session(graph=graph, config=npu_config(mix_compile_mode=True, profiling_mode=True,
                                                             profiling_options=options)) as sess:
        sess.run(init)
        sess.run("out:0", {x: np.ones([4, 8], np.float32)})
    trace = json.load(open(glob.glob(str(tmp_path / "prof" / "*" / "trace_step_1.json"))[0]))
    estimated = sorted((e for e in trace["traceEvents"] if e.get("pid") == 3 and e["ph"] == "X"),
                       key=lambda e: e["ts"])
    start = {e["name"]: e["ts"] for e in estimated}
    assert start["first"] < start["host_fn"] < start["second"]  # GeOp, the host op it feeds, the next GeOp
    assert estimated[0]["ts"] == min(e["ts"] for e in trace["traceEvents"] if e["ph"] == "X" and e["pid"] != 3)


def test_a_training_trace_without_ops_sums_its_geops_and_host_ops(tmp_path, npu_config, capsys):
    options = json.dumps({"output": str(tmp_path / "prof"), "training_trace": "on", "sim_estimate": "off"})
    session_script(npu_config(profiling_mode=True, profiling_options=options), steps=2)
    status, out, _ = profile(capsys, str(tmp_path / "prof"), "--summary")
    rows = list(csv.DictReader(io.StringIO(out[out.index("Model Name"):])))
    train = {(row["OP Type"], row["Task Type"]): row for row in rows if row["Model Name"] == "train"}
    assert status == 0 and train["GeOp", "DEVICE"]["Count"] == "2"  # one GeOp per step, its ops not traced
    assert {where for _, where in train} == {"DEVICE", "HOST"}


def test_sim_estimate_off_leaves_the_estimated_track_out(tmp_path, npu_config):
    options = json.dumps({"output": str(tmp_path / "prof"), "sim_steps": "1", "sim_estimate": "off"})
    session_script(npu_config(profiling_mode=True, profiling_options=options), steps=1)
    trace = json.load(open(glob.glob(str(tmp_path / "prof" / "*" / "trace_step_1.json"))[0]))
    assert "estimate" not in trace["metadata"] and not [e for e in trace["traceEvents"] if e.get("pid") == 3]


def test_estimator_summary_names_training_evaluation_and_checkpoint_runs(tmp_path, capsys):
    def model_fn(features, labels, mode):
        logits = tf.compat.v1.layers.dense(features, 1, name="dense")
        loss = tf.compat.v1.losses.mean_squared_error(labels, logits)
        train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
            loss, global_step=tf.compat.v1.train.get_or_create_global_step())
        return NPUEstimatorSpec(mode, loss=loss, train_op=train_op)

    def input_fn():
        x = np.random.RandomState(0).rand(16, 3).astype(np.float32)
        return tf.compat.v1.data.Dataset.from_tensor_slices((x, x.sum(axis=1, keepdims=True))).batch(4)

    options = json.dumps({"output": str(tmp_path / "prof"), "sim_estimate": "off"})
    config = NPURunConfig(model_dir=str(tmp_path / "model"), profiling_config=ProfilingConfig(True, options))
    estimator = NPUEstimator(model_fn, config=config)
    estimator.train(input_fn, steps=3)
    estimator.evaluate(input_fn, steps=2)
    assert len(glob.glob(str(tmp_path / "prof" / "*" / "trace_merged.json"))) == 2  # train and evaluate Sessions
    status, out, _ = profile(capsys, str(tmp_path / "prof"), "--csv", str(tmp_path / "ops.csv"), "--skip", "1")
    assert status == 0 and "skipped (--skip 1, warm-up): training step(s) 1:8" in out  # run 1, step 8
    assert "runs: 1 = " in out and "; 2 = " in out
    rows = read_csv(tmp_path / "ops.csv")
    roles = {row["Model Name"] for row in rows}
    # The final save and the evaluation's restore; the readiness checks and the hooks' global step reads.
    assert {"train", "eval", "init", "checkpoint", "other"} <= roles
    apply_rows = [row for row in rows if row["OP Type"] == "ResourceApplyGradientDescent"]
    assert [(row["Model Name"], row["Count"]) for row in apply_rows] == [("train", "4")]  # 2 steps x kernel, bias
    assert "train: 2 step(s)" in out and "eval: " in out
    eval_types = {row["OP Type"] for row in rows if row["Model Name"] == "eval"}
    assert "ResourceApplyGradientDescent" not in eval_types and "VarIsInitializedOp" not in eval_types


def test_summary_columns_are_the_real_profilers_names_where_they_apply():
    assert COLUMNS[:3] == ("Model Name", "OP Type", "Task Type")
    assert set(COLUMNS[:3]) <= set(OP_SUMMARY_COLUMNS)  # the one op_summary column list, not a copy


def test_a_malformed_trace_gives_one_line_naming_the_file(tmp_path, capsys):
    bad = tmp_path / "trace_step_3.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "name": "MatMul", "dur": 5, "ts": "soon"}]}')
    for argv in (["--summary"], ["--merge", str(tmp_path / "m.json")], ["--json", "--summary"]):
        status, out, err = profile(capsys, str(bad), *argv)
        message = (json.loads(out)["error"]["message"] if "--json" in argv else err).strip()
        assert status == 1 and "\n" not in message and str(bad) in message and "ts = 'soon'" in message
    assert not (tmp_path / "m.json").exists()
    status, _, err = profile(capsys, str(tmp_path), "--skip", "-1")
    assert status == 2 and "not a whole number" in err


def test_a_merged_step_spans_its_measured_events_not_the_estimated_track():
    """An estimate longer than the step's rest (a millisecond step on a loaded CPU) must not make the step
    span reach into the next step's."""
    from npu_sim_bridge.profiling.merge import merge_traces

    def step_trace(step, start):
        return {"metadata": {"step": step, "role": {"role": "train"}, "estimate": {"pid": 3}},
                "traceEvents": [{"ph": "X", "pid": 1, "tid": 1, "ts": start, "dur": 100, "name": "GeOp"},
                                {"ph": "X", "pid": 3, "tid": 1, "ts": start, "dur": 500, "name": "GeOp (estimated)"}]}

    merged = merge_traces([("run/trace_step_1.json", step_trace(1, 1000)),
                           ("run/trace_step_2.json", step_trace(2, 1200))])
    spans = [(e["ts"], e["dur"]) for e in merged["traceEvents"] if e.get("cat") == "step"]
    assert spans == [(1000, 100), (1200, 100)]
    # the estimated events themselves stay in the merged trace
    assert len([e for e in merged["traceEvents"] if e.get("pid") == 3 and e["ph"] == "X"]) == 2
