"""The npu-sim console script as a new user meets it: offline subcommands without a compiler, --version, info."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import npu_sim_bridge

SCRIPT = os.path.join(os.path.dirname(sys.executable), "npu-sim")
pytestmark = pytest.mark.skipif(not os.path.exists(SCRIPT), reason=f"the npu-sim console script {SCRIPT} is not "
                                "installed next to this Python (pip install -e .)")


def npu_sim(args, tmp_path, **env):
    """Run the console script in a clean environment: no compiler, an empty shim cache, TF's logging untouched."""
    environ = {key: value for key, value in os.environ.items()
               if key not in ("TF_CPP_MIN_LOG_LEVEL", "NPU_SIM_SKIP_NATIVE")}
    environ.update({"CXX": "/nonexistent/c++", "NPU_SIM_CACHE_DIR": str(tmp_path / "cache"),
                    "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}, **env)
    return subprocess.run([SCRIPT, *args], capture_output=True, text=True, env=environ, timeout=300, check=False)


def _graph_file(tmp_path):
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 4], name="x")
        y = tf.nn.relu(tf.matmul(x, tf.constant(np.ones((4, 4), np.float32))), name="y")
        tf.reduce_sum(tf.nn.softmax(y), name="out")
    path = tmp_path / "model.pb"
    path.write_bytes(graph.as_graph_def().SerializeToString())
    return str(path)


def test_offline_commands_work_without_a_compiler_and_build_nothing(tmp_path):
    mixlist = npu_sim(["mixlist", "MatMul"], tmp_path)
    assert mixlist.returncode == 0, mixlist.stderr
    assert "white" in mixlist.stdout and "Traceback" not in mixlist.stderr
    inspect = npu_sim(["inspect", _graph_file(tmp_path), "--json"], tmp_path)
    assert inspect.returncode == 0, inspect.stderr
    assert json.loads(inspect.stdout)["summary"]["nodes_before"] == 7
    rules = npu_sim(["fusion-rules"], tmp_path)
    assert rules.returncode == 0 and "MatMulBiasAddFusionPass" in rules.stdout
    assert not (tmp_path / "cache").exists()  # nothing was compiled or even looked up
    for output in (mixlist, inspect, rules):
        assert "oneDNN" not in output.stderr and "cpu_feature_guard" not in output.stderr


def test_help_and_version_do_not_load_tensorflow(tmp_path):
    helped = npu_sim(["--help"], tmp_path)
    assert helped.returncode == 0 and "profile" in helped.stdout and "info" in helped.stdout
    assert "oneDNN" not in helped.stderr and "cpu_feature_guard" not in helped.stderr
    assert helped.stderr == ""
    version = npu_sim(["--version"], tmp_path)
    assert version.returncode == 0
    assert version.stdout.strip() == f"npu-sim {npu_sim_bridge.__version__}"


def test_commands_that_run_sessions_still_need_the_shim(tmp_path):
    script = tmp_path / "script.py"
    script.write_text("print('ran')\n")
    ran = npu_sim(["run", str(script)], tmp_path)
    assert ran.returncode != 0
    assert "no C++ compiler found" in ran.stderr and "ran" not in ran.stdout


def test_info_names_soc_library_tensorflow_shim_and_options(tmp_path):
    completed = npu_sim(["info", "--json"], tmp_path, ASCEND_OPP_PATH="/usr/local/Ascend/opp")
    assert completed.returncode == 0, completed.stderr
    info = json.loads(completed.stdout)
    assert info["soc"] == "Ascend910"
    assert info["tensorflow"] == tf.__version__
    assert (info["ops_info"]["ops"], info["ops_info"]["white"], info["ops_info"]["black"]) == (831, 47, 95)
    assert info["ops_info"]["path"].endswith(("ops_info", "_ops_info_data"))
    assert info["shim"]["build_key"].startswith(f"tf{tf.__version__}-") and info["shim"]["built"] is False
    assert {"precision_mode", "mix_compile_mode", "profiling_mode"} <= set(info["options_that_act"])
    assert {"aoe_mode", "op_debug_level"} <= set(info["options_without_effect"])
    assert "DUMP_GE_GRAPH" in info["ascend_variables_honoured"] and "ASCEND_OPP_PATH" in info["ascend_variables_ignored"]
    text = npu_sim(["info"], tmp_path).stdout
    assert "simulated SoC: Ascend910" in text and "build key: tf" in text and "accepted without effect" in text


def test_the_first_import_says_it_is_compiling_and_later_imports_are_quiet(tmp_path):
    environ = {key: value for key, value in os.environ.items() if key not in ("NPU_SIM_SKIP_NATIVE", "CXX")}
    environ.update(NPU_SIM_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    command = [sys.executable, "-c", "import npu_sim_bridge"]
    first = subprocess.run(command, capture_output=True, text=True, env=environ, timeout=300, check=False)
    assert first.returncode == 0, first.stderr
    lines = [line for line in first.stderr.splitlines() if line.startswith("npu_sim_bridge:")]
    assert len(lines) == 2 and all(str(tmp_path) in line for line in lines)
    assert "compiling the NpuOptimizer shim into" in lines[0] and "compiling the name index into" in lines[1]
    second = subprocess.run(command, capture_output=True, text=True, env=environ, timeout=300, check=False)
    assert second.returncode == 0 and "npu_sim_bridge:" not in second.stderr
