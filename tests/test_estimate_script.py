"""`npu-sim estimate --script`: a TF1 script's first training step estimated with the shapes it feeds; the report
with every node's estimated unit and time (the "npu_unit"/"npu_us" keys the picture colours by)."""

import concurrent.futures
import json
import os
import subprocess
import sys
import textwrap

import pytest
import tensorflow as tf

from npu_sim_bridge.api import rewrite
from npu_sim_bridge.estimate import estimate
from npu_sim_bridge.estimate.annotate import annotate
from npu_sim_bridge.estimate.script import is_training, with_fed_shapes

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
v1 = tf.compat.v1

# A migrated Session script: its batch is unknown in the graph (None) and 48 in what it feeds.
TRAINING_SCRIPT = textwrap.dedent('''
    import numpy as np
    import tensorflow as tf
    from npu_bridge.npu_init import *

    x = tf.placeholder(tf.float32, [None, 8, 8, 3], name="images")
    y = tf.placeholder(tf.int32, [None], name="labels")
    h = tf.layers.conv2d(x, 16, 3, padding="same", activation=tf.nn.relu, name="conv")
    logits = tf.layers.dense(tf.layers.flatten(h), 4, name="head")
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    train_op = tf.train.MomentumOptimizer(0.1, 0.9).minimize(loss)
    config = tf.ConfigProto()
    custom_op = config.graph_options.rewrite_options.custom_optimizers.add()
    custom_op.name = "NpuOptimizer"
    custom_op.parameter_map["precision_mode"].s = tf.compat.as_bytes("allow_mix_precision")
    custom_op.parameter_map["iterations_per_loop"].i = 10
    rng = np.random.default_rng(0)
    with tf.Session(config=npu_config_proto(config_proto=config)) as sess:
        sess.run(tf.global_variables_initializer())
        print("INITIALIZED")
        try:
            for step in range(3):
                sess.run(train_op, {x: rng.random((48, 8, 8, 3), dtype=np.float32),
                                    y: rng.integers(0, 4, 48).astype(np.int32)})
                print("TRAINED", step)
        except Exception:
            print("CAUGHT")
        finally:
            print("CLEANUP")
''')
# A script that never trains: it only evaluates.
EVAL_SCRIPT = textwrap.dedent('''
    import tensorflow as tf
    x = tf.placeholder(tf.float32, [None, 4], name="x")
    with tf.Session() as sess:
        print(sess.run(tf.reduce_sum(x), {x: [[1.0, 2.0, 3.0, 4.0]]}))
''')


def _estimate_cli(*args):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
               PYTHONPATH=os.pathsep.join(filter(None, [REPO_ROOT, os.environ.get("PYTHONPATH")])))
    return subprocess.run([sys.executable, "-m", "npu_sim_bridge", "estimate", *args], capture_output=True,
                          text=True, env=env, timeout=300, check=False)


@pytest.fixture(name="runs", scope="module")
def runs_fixture(tmp_path_factory):
    folder = tmp_path_factory.mktemp("estimate_script")
    (folder / "train.py").write_text(TRAINING_SCRIPT)
    (folder / "evaluate.py").write_text(EVAL_SCRIPT)
    calls = {"train": ("--json", "--report", str(folder / "report"), "--script", str(folder / "train.py")),
             "evaluate": ("--script", str(folder / "evaluate.py"))}
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(_estimate_cli, *args) for name, args in calls.items()}
        return {name: future.result() for name, future in futures.items()}, folder


def test_script_is_stopped_at_its_first_training_step_and_estimated_at_the_fed_batch(runs):
    result = runs[0]["train"]
    assert result.returncode == 0, result.stderr[-2000:]
    found = json.loads(result.stdout)  # the script's prints went to stderr: stdout is the one object
    assert found["batch"] == 48 and found["iterations_per_loop"] == 10
    assert found["by_unit"]["cube"] > 0 and found["by_unit"]["vector"] > 0
    assert found["samples_per_s"] == pytest.approx(48 / (found["step_ms"] / 1e3), rel=1e-3)
    assert found["step_ms_range"][0] < found["step_ms"] < found["step_ms_range"][1]
    assert "INITIALIZED" in result.stderr and "CLEANUP" in result.stderr
    assert "TRAINED" not in result.stderr and "CAUGHT" not in result.stderr


def test_script_report_gives_every_node_its_estimated_unit_and_time(runs):
    result, folder = runs[0]["train"], runs[1]
    assert result.returncode == 0, result.stderr[-2000:]
    found = json.loads(result.stdout)
    reports = sorted((folder / "report").glob("*.json"))
    assert len(reports) == 1 and reports[0].with_suffix(".html").exists() and reports[0].with_suffix(".txt").exists()
    report = json.loads(reports[0].read_text())
    assert report["summary"]["estimate"]["step_ms"] == found["step_ms"]
    assert report["summary"]["estimate"]["by_unit"] == found["by_unit"]
    nodes = {row["name"]: row for row in report["nodes"]}
    assert all("npu_unit" in row and "npu_us" in row for row in nodes.values())
    conv = nodes["gradients/conv/Conv2D_grad/Conv2DBackpropFilter"]
    assert conv["npu_unit"] == "cube" and conv["npu_us"] > 0
    assert sum(row["npu_us"] or 0 for row in nodes.values()) <= found["step_ms"] * 1e3
    assert nodes["conv/kernel/Initializer/random_uniform/RandomUniform"]["npu_unit"] is None  # init: not in the step
    assert nodes["conv/kernel/Initializer/random_uniform/RandomUniform"]["npu_us"] is None
    units = {row["npu_unit"] for row in nodes.values()}
    assert units <= {"cube", "vector", "aicpu", "host", None}


def test_script_without_a_training_step_is_an_error_that_says_what_to_do(runs):
    result = runs[0]["evaluate"]
    assert result.returncode == 1
    message = result.stderr.strip().splitlines()[-1]
    assert message.startswith("npu-sim estimate: error: script") and "without a training step" in message


def test_training_fetches_are_told_from_others_and_fed_shapes_are_set():
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, [None, 6], name="x")
        w = v1.get_variable("w", [6, 2])
        loss = tf.reduce_mean(tf.matmul(x, w), name="loss")
        train = v1.train.GradientDescentOptimizer(0.1).minimize(loss, name="train_op")
        init = v1.global_variables_initializer()
    graph_def = g.as_graph_def()
    assert is_training(graph_def, [train.name])
    assert not is_training(graph_def, [init.name]) and not is_training(graph_def, ["loss:0"])
    fed = with_fed_shapes(graph_def, {"x": [12, 6]})
    step = estimate(fed, {"precision_mode": "allow_mix_precision"}, fetches=[train.name])
    assert step.batch == 12


def test_a_rewrite_report_carries_the_estimate_only_when_annotated():
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, [16, 32], name="x")
        w = v1.get_variable("w", [32, 8])
        train = v1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(tf.matmul(x, w)), name="train_op")
    plain = rewrite(g, {"precision_mode": "allow_mix_precision"}, fetches=[train.name]).report.to_dict()
    assert "estimate" not in plain["summary"] and all("npu_unit" not in row for row in plain["nodes"])
    step = estimate(g, {"precision_mode": "allow_mix_precision"}, fetches=[train.name])
    annotated = annotate(step.rewrite.report, step).to_dict()
    matmul = next(row for row in annotated["nodes"] if row["op"] == "MatMul" and "grad" not in row["name"])
    assert matmul["npu_unit"] == "cube" and matmul["npu_us"] > 0
    assert annotated["summary"]["estimate"]["step_ms"] == pytest.approx(step.step_us / 1e3, abs=1e-3)
    assert "estimated NPU step" in step.rewrite.report.to_text()


@pytest.mark.parametrize("argv, says", [
    (["estimate"], "give either GRAPH"),
    (["estimate", "model.pb", "--script", "train.py"], "give either GRAPH"),
    (["estimate", "--fetch", "loss", "--script", "train.py"], "--fetch is for GRAPH"),
    (["estimate", "--script", "no_such_script.py"], "does not exist"),
])
def test_estimate_command_line_mistakes_say_what_to_do(argv, says, capsys, tmp_path, monkeypatch):
    from npu_sim_bridge.cli.main import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("")
    assert main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("npu-sim estimate: error:") and says in lines[0]
