"""customize_dtypes (single ops or types kept float32) and NPU_SIM_FORCE_OPTIONS (options forced on a program)."""

import json

import numpy as np
import pytest
import tensorflow as tf

import npu_sim_bridge
from npu_sim_bridge.config import from_any
from npu_sim_bridge.errors import ConfigError
from npu_sim_bridge.passes.customize_dtypes import parse_customize_dtypes

MIX = {"precision_mode": "allow_mix_precision"}


def two_matmuls():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 4], name="x")
        a = tf.matmul(x, tf.ones([4, 4]), name="a")
        tf.matmul(a, tf.ones([4, 4]), name="b")
        tf.identity(tf.matmul(x, tf.ones([4, 4]), name="c"), name="out")
    return graph.as_graph_def()


def dtypes(report):
    return {name: report.nodes[name].dtype_after for name in ("a", "b", "c")}


def test_named_ops_and_types_keep_float32(tmp_path):
    path = tmp_path / "dtypes.cfg"
    path.write_text("# keep a in float32\na::InputDtype:float32,float32,OutputDtype:float32\n\n")
    report = npu_sim_bridge.rewrite(two_matmuls(), dict(MIX, customize_dtypes=str(path)), fetches=["out"]).report
    plain = npu_sim_bridge.rewrite(two_matmuls(), MIX, fetches=["out"]).report
    assert dtypes(plain)["a"] == "float16" and dtypes(report) == dict(dtypes(plain), a="float32")
    (kept,) = [r for r in report.nodes["a"].reasons if r.code == "dtypes.customize"]
    assert dict(kept.details) == {"path": str(path), "line": 2, "op_type": None}
    assert f"customize_dtypes '{path}' line 2 (its name): keeps float32" in report.nodes["a"].reason  # as read
    path.write_text("OpType::MatMulV2:InputDtype:float32,float32,OutputDtype:float32\n")
    report = npu_sim_bridge.rewrite(two_matmuls(), dict(MIX, customize_dtypes=str(path)), fetches=["out"]).report
    assert dtypes(report) == {"a": "float32", "b": "float32", "c": "float32"} != dtypes(plain)
    assert [r.get("op_type") for r in report.nodes["b"].reasons if r.code == "dtypes.customize"] == ["MatMulV2"]


@pytest.mark.parametrize("text, message", [
    ("a::InputDtype:float16,OutputDtype:float16", "line 1: dtype 'float16'; the simulator keeps a listed op in "
                                                    "float32"),
    ("\n\na InputDtype float32", "line 3: 'a InputDtype float32' is not 'Opname::InputDtype"),
    ("OpType::InputDtype:float32", "line 1: OpType:: needs a type name"),
])
def test_malformed_lines_name_the_line(text, message):
    with pytest.raises(ConfigError) as caught:
        parse_customize_dtypes(text, "f.cfg")
    assert message in str(caught.value) and "'f.cfg'" in str(caught.value)


def test_unknown_node_is_a_warning_and_missing_file_an_error(tmp_path):
    path = tmp_path / "dtypes.cfg"
    path.write_text("aa::InputDtype:float32,OutputDtype:float32\n")
    report = npu_sim_bridge.rewrite(two_matmuls(), dict(MIX, customize_dtypes=str(path)), fetches=["out"]).report
    assert any("no node is named 'aa' in this graph (did you mean 'a'?)" in w for w in report.warnings)
    with pytest.raises(npu_sim_bridge.NpuSimError, match="customize_dtypes file .* does not exist"):
        npu_sim_bridge.rewrite(two_matmuls(), dict(MIX, customize_dtypes=str(tmp_path / "nope.cfg")))


def test_forced_options_replace_what_the_program_sets(monkeypatch):
    monkeypatch.setenv("NPU_SIM_FORCE_OPTIONS", json.dumps({"precision_mode": "allow_fp32_to_fp16",
                                                            "modify_mixlist": ""}))
    options = from_any({"precision_mode_v2": "mixed_float16", "modify_mixlist": "/nowhere.json"})
    assert options["precision_mode"] == "allow_fp32_to_fp16" and not options["precision_mode_v2"]
    assert not options["modify_mixlist"]
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 4], name="x")
        tf.reduce_sum(tf.matmul(x, tf.fill([4, 4], 3e4)), name="out")   # inf in float16, finite in float32
    config = tf.compat.v1.ConfigProto()
    custom_op = config.graph_options.rewrite_options.custom_optimizers.add()
    custom_op.name = "NpuOptimizer"
    custom_op.parameter_map["precision_mode"].s = b"allow_mix_precision"
    with tf.compat.v1.Session(graph=graph, config=config) as sess:
        assert np.isfinite(sess.run("out:0", {"x:0": np.ones((2, 4), np.float32)}))


@pytest.mark.parametrize("text, message", [
    ("{nope", "NPU_SIM_FORCE_OPTIONS is not valid JSON"),
    ('{"precision_mod": "x"}', "names unknown option 'precision_mod'; did you mean precision_mode?"),
    ('["a"]', "must hold a JSON object"),
])
def test_bad_forced_options_say_what_is_wrong(monkeypatch, text, message):
    monkeypatch.setenv("NPU_SIM_FORCE_OPTIONS", text)
    with pytest.raises(ConfigError) as caught:
        from_any({})
    assert message in str(caught.value)
