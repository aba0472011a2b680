"""The Ascend environment variables a migrated script's launch script sets: logging, graph dumps, the rest named."""

import glob
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format

import npu_sim_bridge
from npu_sim_bridge.envvars import ignored_variables

SCRIPT = textwrap.dedent("""
    import numpy as np
    import tensorflow as tf
    import npu_sim_bridge
    from npu_sim_bridge.npu_init import npu_config_proto
    tf.compat.v1.disable_eager_execution()
    x = tf.compat.v1.placeholder(tf.float32, [2, 4], name="x")
    w = tf.constant(np.ones((4, 4), np.float32))
    out = tf.reduce_sum(tf.nn.softmax(tf.matmul(x, w) + 1.0), name="out")
    config = npu_config_proto()
    config.graph_options.rewrite_options.custom_optimizers[0].parameter_map["precision_mode"].s = \\
        b"allow_mix_precision"
    with tf.compat.v1.Session(config=config) as sess:
        sess.run(out, {x: np.ones((2, 4), np.float32)})
    print("WARNINGS", npu_sim_bridge.recent_reports()[0].warnings)
""")


def run_script(tmp_path, **env):
    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("ASCEND_", "DUMP_"))}
    environ.update(PYTHONPATH=os.pathsep.join(p for p in sys.path if p), **env)
    completed = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=environ,
                               timeout=300, check=False)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return completed


def test_log_level_info_to_stdout_says_what_each_rewrite_did_and_names_ignored_variables(tmp_path):
    completed = run_script(tmp_path, ASCEND_GLOBAL_LOG_LEVEL="1", ASCEND_SLOG_PRINT_TO_STDOUT="1",
                           ASCEND_OPP_PATH="/usr/local/Ascend/opp", HCCL_WHITELIST_DISABLE="1")
    lines = [line for line in completed.stdout.splitlines() if "NPU_SIM(" in line]
    text = "\n".join(lines)
    assert "[INFO]" in text and "NpuOptimizer rewrote graph" in text
    assert "pass precision: changed" in text and "GeOps: 1 (GeOp" in text and "casts added:" in text
    assert "[DEBUG]" not in text
    note = "Ascend environment variables accepted without effect in simulation: ASCEND_OPP_PATH, HCCL_WHITELIST_DISABLE"
    assert completed.stdout.count(note) >= 1
    warnings_line = next(line for line in completed.stdout.splitlines() if line.startswith("WARNINGS"))
    assert warnings_line.count("ASCEND_OPP_PATH") == 1


def test_log_level_error_is_quiet_and_without_stdout_the_records_go_to_a_plog_file(tmp_path):
    quiet = run_script(tmp_path, ASCEND_GLOBAL_LOG_LEVEL="3", ASCEND_SLOG_PRINT_TO_STDOUT="1")
    assert "NPU_SIM(" not in quiet.stdout
    plog = tmp_path / "plog"
    filed = run_script(tmp_path, ASCEND_GLOBAL_LOG_LEVEL="0", ASCEND_PROCESS_LOG_PATH=str(plog))
    assert "NPU_SIM(" not in filed.stdout
    (log_file,) = glob.glob(str(plog / "plog-*.log"))
    content = open(log_file).read()
    assert "NpuOptimizer rewrote graph" in content and "pass partition" in content


def test_ignored_variables_skip_the_honoured_and_the_simulators_own():
    environ = {"ASCEND_GLOBAL_LOG_LEVEL": "1", "DUMP_GE_GRAPH": "1", "NPU_SIM_REPORT_DIR": "/tmp", "HCCL_EXEC_TIMEOUT": "9",
               "ASCEND_DEVICE_ID": "0", "GE_USE_STATIC_MEMORY": "1", "PATH": "/bin", "JOB_ID": "10087"}
    assert ignored_variables(environ) == ["ASCEND_DEVICE_ID", "GE_USE_STATIC_MEMORY", "JOB_ID"]


def _session_run(npu_config):
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 4], name="x")
        w = tf.constant(np.arange(16, dtype=np.float32).reshape(4, 4), name="weights")
        out = tf.reduce_sum(tf.nn.relu(tf.matmul(x, w, name="mm")), name="out")
    with tf.compat.v1.Session(graph=graph, config=npu_config(precision_mode="allow_mix_precision")) as sess:
        return sess.run(out, {x: np.ones((2, 4), np.float32)})


def _dumped(folder):
    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(folder, "ge_proto_*.txt")))


def test_dump_ge_graph_writes_every_stage_and_each_geop_body_under_ascend_names(tmp_path, monkeypatch, npu_config):
    monkeypatch.setenv("DUMP_GE_GRAPH", "1")
    monkeypatch.setenv("DUMP_GRAPH_LEVEL", "1")
    monkeypatch.setenv("DUMP_GRAPH_PATH", str(tmp_path))
    assert _session_run(npu_config) == pytest.approx(2 * 120.0)
    names = _dumped(tmp_path)
    graph_id = npu_sim_bridge.recent_reports()[0].graph_id
    stages = [name.split(f"_graph_{graph_id}_")[1] for name in names if f"_graph_{graph_id}_" in name]
    # Every pass that ran (the dump pass runs only with enable_dump), in pipeline order.
    assert stages == ["PreRunBegin.txt", "AfterFusion.txt", "AfterPlacement.txt", "AfterPrecision.txt",
                      "AfterPartition.txt", "PreRunAfterBuild.txt"]
    assert [int(name[9:17]) for name in names] == sorted(int(name[9:17]) for name in names)
    (build,) = [name for name in names if name.endswith("_Build.txt")]
    assert "_graph_GeOp" in build
    body = text_format.Parse(open(tmp_path / build).read(), tf.compat.v1.GraphDef())
    with tf.Graph().as_default():  # the body opens as an ordinary graph (Netron, TensorBoard, import_graph_def)
        tf.graph_util.import_graph_def(body, name="")
    assert {"mm", "out"} <= {node.name for node in body.node}
    after = text_format.Parse(open(tmp_path / next(n for n in names if n.endswith("AfterPrecision.txt"))).read(),
                              tf.compat.v1.GraphDef())
    # allow_mix_precision put float16 casts in (in a Session each round trip is one rounding kernel)
    assert any(node.op in ("Cast", "NpuSimRoundToFloat16") for node in after.node)
    weights = next(node for node in body.node if node.name == "weights")
    assert weights.attr["value"].tensor.tensor_content  # level 1 keeps constant data


def test_dump_levels_choose_stages_and_detail(tmp_path, monkeypatch, npu_config):
    monkeypatch.setenv("DUMP_GE_GRAPH", "2")
    monkeypatch.setenv("DUMP_GRAPH_PATH", str(tmp_path / "default"))
    _session_run(npu_config)
    names = _dumped(tmp_path / "default")  # DUMP_GRAPH_LEVEL 2: the trustlisted stages only
    assert [name.rsplit("_", 1)[1] for name in names] == ["PreRunBegin.txt", "PreRunAfterBuild.txt", "Build.txt"]
    build = text_format.Parse(open(tmp_path / "default" / names[-1]).read(), tf.compat.v1.GraphDef())
    weights = next(node for node in build.node if node.name == "weights")
    assert not weights.attr["value"].tensor.tensor_content and weights.attr["value"].tensor.tensor_shape.dim

    monkeypatch.setenv("DUMP_GE_GRAPH", "3")
    monkeypatch.setenv("DUMP_GRAPH_LEVEL", "AfterPartition|Build")
    monkeypatch.setenv("DUMP_GRAPH_PATH", str(tmp_path / "named"))
    _session_run(npu_config)
    names = _dumped(tmp_path / "named")
    # Stages whose name contains a part, as CANN matches them: "Build" also picks PreRunAfterBuild.
    assert [name.rsplit("_", 1)[1] for name in names] == ["AfterPartition.txt", "PreRunAfterBuild.txt", "Build.txt"]
    graph = text_format.Parse(open(tmp_path / "named" / names[0]).read(), tf.compat.v1.GraphDef())
    assert graph.node and all(not node.attr for node in graph.node)


def test_a_bad_dump_ge_graph_value_fails_the_run_with_its_name(monkeypatch, npu_config):
    monkeypatch.setenv("DUMP_GE_GRAPH", "full")
    with pytest.raises(tf.errors.InvalidArgumentError, match="DUMP_GE_GRAPH=full is invalid"):
        _session_run(npu_config)


@pytest.fixture(name="restored_logger")
def restored_logger_fixture():
    import logging

    logger = logging.getLogger("npu_sim_bridge")
    saved = (logger.level, list(logger.handlers), logger.propagate)
    yield logger
    logger.setLevel(saved[0])
    logger.handlers[:] = saved[1]
    logger.propagate = saved[2]


def test_log_level_values_printing_alone_and_a_bad_value(restored_logger):
    import logging

    from npu_sim_bridge.envvars import apply_logging_environment

    assert apply_logging_environment({}) is None
    apply_logging_environment({"ASCEND_SLOG_PRINT_TO_STDOUT": "1"})  # printing without a level: CANN's default
    assert restored_logger.level == logging.ERROR
    apply_logging_environment({"ASCEND_GLOBAL_LOG_LEVEL": "0", "ASCEND_SLOG_PRINT_TO_STDOUT": "1"})
    assert restored_logger.level == logging.DEBUG
    assert sum(1 for h in restored_logger.handlers if getattr(h, "_npu_sim_ascend_env", False)) == 1
    apply_logging_environment({"ASCEND_GLOBAL_LOG_LEVEL": "4", "ASCEND_SLOG_PRINT_TO_STDOUT": "1"})
    assert not restored_logger.isEnabledFor(logging.CRITICAL)  # 4 is "null": nothing at all
    with pytest.warns(UserWarning, match="ASCEND_GLOBAL_LOG_LEVEL='debug' is invalid"):
        assert apply_logging_environment({"ASCEND_GLOBAL_LOG_LEVEL": "debug"}) is None
