"""profiling_mode / profiling_options / ProfilingConfig: chrome-trace files of the selected steps, and `npu-sim profile`."""

import glob
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from npu_sim_bridge.errors import ConfigError
from npu_sim_bridge.npu_init import NPURunConfig, ProfilingConfig, npu_scope
from npu_sim_bridge.profiling import parse_profiling_options
from npu_sim_bridge.profiling.summary import summarize


def mixed_graph():
    """Two device segments around a host py_func, under mix_compile_mode."""
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [4, 8], name="x")
        w = tf.compat.v1.get_variable("w", [8, 8])
        y = tf.nn.relu(tf.matmul(x, w), name="dense/relu")
        with npu_scope.without_npu_compile_scope():
            z = tf.compat.v1.py_func(lambda a: a * 2, [y], tf.float32, name="host_fn")
        tf.reduce_sum(tf.matmul(tf.reshape(z, [4, 8]), w, name="head"), name="out")
        tf.compat.v1.global_variables_initializer()
    return graph


def run_steps(config, graph, steps=3):
    with tf.compat.v1.Session(graph=graph, config=config) as sess:
        sess.run(graph.get_operation_by_name("init"))
        for _ in range(steps):
            sess.run("out:0", {"x:0": np.ones([4, 8], np.float32)})


def test_session_with_profiling_mode_writes_a_trace_of_each_selected_step(tmp_path, npu_config):
    options = json.dumps({"output": str(tmp_path / "prof"), "task_trace": "on", "sim_steps": "1|3"})
    run_steps(npu_config(mix_compile_mode=True, profiling_mode=True, profiling_options=options), mixed_graph())
    files = sorted(glob.glob(str(tmp_path / "prof" / "*" / "trace_step_*.json")))
    assert [os.path.basename(f) for f in files] == ["trace_step_1.json", "trace_step_3.json"]
    trace = json.load(open(files[0]))
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    spans = [e for e in events if e["cat"] == "GeOp"]
    assert len(spans) == 2 and all(e["pid"] == 1 for e in spans)
    ops = {(e["name"], e["args"]["where"]): e for e in events if e["cat"] != "GeOp"}
    assert ops["host_fn", "host"]["pid"] == 2
    # The fetched "out" is the GeOp's Sum on the device, and the Identity keeping its name on the host.
    assert ops["out", "device"]["args"]["op"] == "Sum" and ops["out", "host"]["args"]["op"] == "Identity"
    for name in ("MatMul", "dense/relu", "head", "out"):  # inside a GeOp span, on that GeOp's track
        op = ops[name, "device"]
        span = next(s for s in spans if s["name"] == op["args"]["geop"])
        assert op["pid"] == 1 and span["ts"] <= op["ts"] and op["ts"] + op["dur"] <= span["ts"] + span["dur"]
    assert ops["MatMul", "device"]["args"]["geop"] != ops["head", "device"]["args"]["geop"]
    assert ops["MatMul", "device"]["args"]["op"].endswith("MatMul")  # TensorFlow's op type, from its timeline


def test_training_trace_alone_and_the_profiling_config_route(tmp_path):
    options = json.dumps({"output": str(tmp_path / "prof"), "training_trace": "on", "aicpu": "on"})
    run_config = NPURunConfig(mix_compile_mode=True, profiling_config=ProfilingConfig(True, options))
    run_steps(run_config.npu_session_config(), mixed_graph(), steps=1)
    files = glob.glob(str(tmp_path / "prof" / "*" / "trace_step_*.json"))
    assert len(files) == 2  # init and the one step
    events = [e for e in json.load(open(max(files)))["traceEvents"] if e["ph"] == "X"]
    assert {e["cat"] for e in events if e["pid"] == 1} == {"GeOp"}  # no ops inside without task_trace
    assert "host_fn" in {e["name"] for e in events if e["pid"] == 2}


def test_npu_sim_profile_prints_top_ops_host_and_device_per_step(tmp_path, npu_config):
    options = json.dumps({"output": str(tmp_path / "prof"), "sim_steps": "1-2"})
    run_steps(npu_config(mix_compile_mode=True, profiling_mode=True, profiling_options=options), mixed_graph())
    steps = summarize(str(tmp_path / "prof"))
    assert [s.step for s in steps] == [1, 2]
    assert all(s.device_us > 0 and s.host_us > 0 and len(s.geops) == 2 for s in steps)
    script = os.path.join(os.path.dirname(sys.executable), "npu-sim")
    command = [script] if os.path.exists(script) else [sys.executable, "-m", "npu_sim_bridge"]
    completed = subprocess.run(command + ["profile", str(tmp_path / "prof"), "--top", "3"], capture_output=True,
                               text=True, timeout=120, check=False)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.count("step ") == 2 and "GeOp " in completed.stdout
    assert "device" in completed.stdout and "host" in completed.stdout and "PyFunc" in completed.stdout


@pytest.mark.parametrize("text, words", [
    ("{bad", "not valid JSON"),
    ('{"task_trace": "yes"}', "'task_trace' is 'yes'"),
    ('{"training_trace": "off", "task_trace": "off"}', "nothing to trace"),
    ('{"sim_steps": "5-2"}', "sim_steps"),
    ('{"outptu": "/tmp"}', "unknown keys 'outptu'"),
])
def test_bad_profiling_options_are_named(text, words):
    with pytest.raises(ConfigError, match="profiling_options") as caught:
        parse_profiling_options(text)
    assert words in str(caught.value)


def test_a_session_with_bad_profiling_options_fails_its_run_with_the_message(npu_config):
    with pytest.raises(ConfigError, match="not valid JSON"):
        run_steps(npu_config(profiling_mode=True, profiling_options="{bad"), mixed_graph(), steps=1)
