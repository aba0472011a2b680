"""Dumps and overflow detection: enable_dump / dump_step / dump_mode / enable_dump_debug in Sessions."""

import glob
import json
import os

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import rewriter_config_pb2

import npu_sim_bridge
from npu_sim_bridge.cli.main import main as cli_main
from npu_sim_bridge.dumps import find_dumps, read_overflow


def mlp():
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.set_random_seed(3)
        x = tf.compat.v1.placeholder(tf.float32, [4, 8], name="x")
        w = tf.compat.v1.get_variable("w", initializer=np.full((8, 6), 0.5, np.float32))
        b = tf.compat.v1.get_variable("b", initializer=np.linspace(-1, 1, 6).astype(np.float32))
        hidden = tf.nn.relu(tf.nn.bias_add(tf.matmul(x, w, name="mm"), b, name="bias"), name="hidden")
        out = tf.reduce_sum(tf.square(hidden), name="out")
        train = tf.compat.v1.train.GradientDescentOptimizer(1e-3).minimize(out)
        init = tf.compat.v1.global_variables_initializer()
    return graph, out, train, init


def config_for(npu_config, **params):
    config = npu_config(**params)
    config.graph_options.rewrite_options.remapping = rewriter_config_pb2.RewriterConfig.OFF
    return config


def run_steps(config, feeds):
    graph, out, train, init = mlp()
    values = []
    with tf.compat.v1.Session(graph=graph, config=config) as sess:
        sess.run(init)
        for feed in feeds:
            values.append(sess.run([out, train], {"x:0": feed})[0])
    return values


def train_dump(dumps):
    """The dump of the training graph (the one with the most tensors)."""
    return max(dumps, key=lambda dump: len(dump.tensors))


def test_dump_writes_npy_files_at_the_chosen_steps(tmp_path, npu_config):
    config = config_for(npu_config, precision_mode="allow_mix_precision", enable_dump=True,
                        dump_path=str(tmp_path), dump_step="0|2-3")
    feeds = [np.full((4, 8), i + 1, np.float32) for i in range(5)]
    run_steps(config, feeds)
    dump = train_dump(find_dumps(str(tmp_path)))
    assert dump.steps() == [0, 2, 3]
    entries = {(t["op"], t["io"], t["slot"]): t for t in dump.tensors}
    fused = entries[("hidden", "output", 0)]
    assert fused["type"] == "_FusedMatMul" and fused["fusion"][0] == "MatMulBiasAddFusionPass"
    assert fused["dtype"] == "float16" and fused["graph_dtype"] == "float32"
    assert fused["fused_from"] == ["mm", "bias", "hidden"]
    assert all(t["io"] == "output" for t in dump.tensors)            # dump_mode defaults to output
    value = dump.load(0, fused)  # step 0 runs with the initial weights
    assert value.dtype == np.float16 and value.shape == (4, 6)
    expected = np.maximum(feeds[0] @ np.full((8, 6), 0.5, np.float32) + np.linspace(-1, 1, 6), 0)
    np.testing.assert_array_equal(value, expected.astype(np.float16))  # rounded once, as the NPU does
    assert not np.array_equal(dump.load(2, fused), value)
    orders = [t["order"] for t in dump.tensors]
    assert orders == sorted(orders)
    manifest = json.load(open(os.path.join(dump.folder, "manifest.json")))
    assert manifest["source_graph"]["nodes"]["mm"] == "MatMul"


def test_dump_mode_input_dumps_the_inputs(tmp_path, npu_config):
    config = config_for(npu_config, enable_dump=True, dump_path=str(tmp_path), dump_mode="input", dump_step="0")
    run_steps(config, [np.ones((4, 8), np.float32)])
    dump = train_dump(find_dumps(str(tmp_path)))
    assert {t["io"] for t in dump.tensors} == {"input"}
    fused = [t for t in dump.tensors if t["op"] == "hidden"]
    assert [t["slot"] for t in fused] == [0, 1, 2]                   # x, w, b of the fused MatMul
    np.testing.assert_array_equal(dump.load(0, fused[0]), np.ones((4, 8), np.float32))


def test_step_counter_restarts_in_a_new_session(tmp_path, npu_config):
    config = config_for(npu_config, enable_dump=True, dump_path=str(tmp_path), dump_step="1")
    run_steps(config, [np.ones((4, 8), np.float32)] * 2)
    run_steps(config, [np.ones((4, 8), np.float32)])                 # only step 0: nothing dumped
    dumps = [d for d in find_dumps(str(tmp_path)) if d.steps()]
    assert len(dumps) == 1 and dumps[0].steps() == [1]


def test_overflow_detection_names_the_first_overflowing_op(tmp_path, npu_config, capsys):
    config = config_for(npu_config, precision_mode="allow_mix_precision", enable_dump_debug=True,
                        dump_path=str(tmp_path))
    values = run_steps(config, [np.ones((4, 8), np.float32), np.full((4, 8), 3e4, np.float32)])
    assert np.isfinite(values[0]) and not np.isfinite(values[1])
    records = read_overflow(str(tmp_path))
    assert [r["step"] for r in records] == [1]
    first = records[0]["first"]
    assert first["op"] == "hidden" and first["type"] == "_FusedMatMul" and first["dtype"] == "float16"
    assert cli_main(["overflow", str(tmp_path)]) == 0
    assert "step 1: first overflowing op hidden (_FusedMatMul, float16" in capsys.readouterr().out


def test_second_grappler_iteration_does_not_instrument_again(tmp_path):
    graph, out, train, _ = mlp()
    options = {"enable_dump": True, "dump_path": str(tmp_path)}
    first = npu_sim_bridge.rewrite(graph.as_graph_def(), options, fetches=["out", train.name])
    second = npu_sim_bridge.rewrite(first.graph_def, options, fetches=["out", train.name])
    stats = next(p.stats for p in second.report.passes if p.name == "dump")
    assert stats == {"already_instrumented": True}
    assert len(second.graph_def.library.function) == len(first.graph_def.library.function)


def failing_run(config):
    with pytest.raises(tf.errors.InvalidArgumentError) as caught:
        run_steps(config, [np.ones((4, 8), np.float32)])
    return str(caught.value)


def test_dump_path_that_is_not_a_directory_fails_the_session_with_the_key(tmp_path, npu_config):
    not_a_dir = tmp_path / "file.txt"
    not_a_dir.write_text("x")
    message = failing_run(config_for(npu_config, enable_dump=True, dump_path=str(not_a_dir)))
    assert "dump_path" in message and "is not a directory" in message and str(not_a_dir) in message


def test_malformed_dump_step_fails_the_session_with_the_value(tmp_path, npu_config):
    message = failing_run(config_for(npu_config, enable_dump=True, dump_path=str(tmp_path), dump_step="5-2"))
    assert "dump_step" in message and "5-2" in message and "first step is not below its last step" in message


def test_dump_path_that_does_not_exist_fails_with_what_to_do(tmp_path, npu_config):
    message = failing_run(config_for(npu_config, enable_dump_debug=True, dump_path=str(tmp_path / "missing")))
    assert "does not exist" in message and "create the directory" in message


def test_dumps_need_device_segments(tmp_path):
    graph, out, train, _ = mlp()
    result = npu_sim_bridge.rewrite(graph.as_graph_def(), {"enable_dump": True, "dump_path": str(tmp_path),
                                                           "sim_passes": "fusion,placement,precision,dump"},
                                    fetches=["out"])
    assert any("no device segment (GeOp)" in text for text in result.report.warnings)
    assert not glob.glob(str(tmp_path / "*" / "*" / "manifest.json"))


def two_overflows():
    """big: a MatMul whose float16 result overflows; acc: a Sum of finite float16 values whose total overflows."""
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [4, 64], name="x")
        big = tf.matmul(x, tf.constant(np.full((64, 8), 400.0, np.float32)), name="big")
        small = tf.matmul(x, tf.constant(np.full((64, 512), 0.5, np.float32)), name="small")   # ~100 each
        acc = tf.reduce_sum(tf.multiply(small, 2.0, name="double"), axis=1, name="acc")        # ~1e5 in all
        tf.add(tf.reduce_max(tf.multiply(big, 1.0, name="pass_on"), axis=1), acc * 1.0, name="out")
    return graph


@pytest.mark.parametrize("mode, expected", [
    ("all", {("big", "aicore_overflow"), ("acc", "atomic_overflow")}),
    ("aicore_overflow", {("big", "aicore_overflow")}),
    ("atomic_overflow", {("acc", "atomic_overflow")}),
])
def test_dump_debug_mode_picks_ai_core_or_atomic_add_overflow(tmp_path, npu_config, mode, expected):
    config = config_for(npu_config, precision_mode="allow_mix_precision", enable_dump_debug=True,
                        dump_path=str(tmp_path), dump_debug_mode=mode)
    with tf.compat.v1.Session(graph=two_overflows(), config=config) as sess:
        value = sess.run("out:0", {"x:0": np.full((4, 64), 3.0, np.float32)})
    assert not np.all(np.isfinite(value))
    records = read_overflow(str(tmp_path))
    flagged = {(entry["op"], entry["kind"]) for record in records for entry in record["ops"]}
    assert flagged == expected  # pass_on, the max and out only pass the inf on: not flagged
    manifest = json.load(open(glob.glob(os.path.join(str(tmp_path), "*", "*", "manifest.json"))[0]))
    assert manifest["options"]["dump_debug_mode"] == mode


def test_a_dump_write_that_fails_leaves_no_file_and_names_the_file_and_what_to_do(tmp_path):
    """NpuSimWriteFileAtomic, the op every dump file is written with: the whole file or none."""
    from npu_sim_bridge.native.loader import load_npu_ops
    from npu_sim_bridge.passes.dump.npy_graph import write_failure

    ops = load_npu_ops()
    (tmp_path / "taken").write_text("a file where the step folder should go")
    graph = tf.Graph()
    with graph.as_default():
        path = tf.compat.v1.placeholder(tf.string, [])
        write = ops.npu_sim_write_file_atomic(path, tf.constant(b"\x93NUMPY payload"))
    with tf.compat.v1.Session(graph=graph) as sess:
        sess.run(write, {path: str(tmp_path / "dump" / "step_0" / "a.npy")})
        with pytest.raises(tf.errors.OpError) as raised:
            sess.run(write, {path: str(tmp_path / "taken" / "step_0" / "b.npy")})
    assert (tmp_path / "dump" / "step_0" / "a.npy").read_bytes() == b"\x93NUMPY payload"
    line = write_failure(raised.value)
    assert line.startswith(f"npu-sim dump: cannot write {tmp_path / 'taken' / 'step_0' / 'b.npy'} (creating its folder")
    assert "set dump_path to a folder you can write" in line and "\n" not in line
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a.npy", "dump", "step_0", "taken"]


def test_the_pipeline_leaves_the_manifest_to_the_publishing_step(tmp_path):
    """The rewrite itself writes nothing: the dump pass hands its manifest over, and the publishing step at
    the boundary writes it (rewrite() and a Session's NpuOptimizer both publish)."""
    from npu_sim_bridge.config import from_dict
    from npu_sim_bridge.passes import ItemInfo, run_pipeline
    from npu_sim_bridge.report.publish import publish

    graph, out, train, _ = mlp()
    options = from_dict({"enable_dump": True, "dump_path": str(tmp_path)})
    result = run_pipeline(graph.as_graph_def(), options, ItemInfo(id="dumped", fetch=("out", train.name)))
    assert [left.what for left in result.files] == ["dump manifest"]
    assert not list(tmp_path.rglob("*"))  # nothing written yet
    published = publish(result, options)
    assert published.files == [result.files[0].path]
    manifest = json.load(open(result.files[0].path))
    assert manifest["source_graph"]["nodes"]["mm"] == "MatMul"
    assert json.loads(result.files[0].text) == manifest
