"""Precision modes on a graph with white, black and gray ops: report decisions, executed dtypes, errors."""

import json

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import rewriter_config_pb2

import npu_sim_bridge
from npu_sim_bridge.config import from_dict
from npu_sim_bridge.errors import ConfigError, PassError
from npu_sim_bridge.passes.precision import PrecisionModeError

F32, F16, BF16 = "float32", "float16", "bfloat16"
NODES = ("conv", "pool", "flat", "mm", "bias", "relu", "sm", "lg", "mean")

# Expected NPU dtype of each node. conv (white) and pool (gray) have float16 kernels only on the
# Ascend 910; mm is white, bias (AddV2), relu and sm gray, lg (Log) and mean (Mean) black.
EXPECTED = {
    "allow_mix_precision": dict(conv=F16, pool=F16, flat=F16, mm=F16, bias=F16, relu=F16, sm=F16, lg=F32,
                                mean=F32),
    "allow_mix_precision_fp16": dict(conv=F16, pool=F16, flat=F16, mm=F16, bias=F16, relu=F16, sm=F16,
                                     lg=F32, mean=F32),
    "allow_mix_precision_bf16": dict(conv=BF16, pool=BF16, flat=BF16, mm=BF16, bias=BF16, relu=BF16, sm=BF16,
                                     lg=F32, mean=F32),
    "force_fp16": dict.fromkeys(NODES, F16),
    "force_fp32": dict(dict.fromkeys(NODES, F32), conv=F16, pool=F16),
    "allow_fp32_to_fp16": dict(dict.fromkeys(NODES, F32), conv=F16, pool=F16),
    "allow_fp32_to_bf16": dict(dict.fromkeys(NODES, F32), conv=BF16, pool=BF16),
    "cube_fp16in_fp32out": dict(dict.fromkeys(NODES, F32), conv=F16, pool=F16, mm=F16),
}
V2 = {"mixed_float16": "allow_mix_precision", "mixed_bfloat16": "allow_mix_precision_bf16",
      "fp16": "force_fp16", "cube_fp16in_fp32out": "cube_fp16in_fp32out"}


def build(conv=True, keep_dtype=None):
    """x -> [Conv2D -> MaxPool] -> Reshape -> MatMul -> AddV2 -> Relu -> Softmax -> Log -> Mean."""
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 4, 4, 1], name="x")
        if conv:
            k = tf.compat.v1.get_variable("k", [2, 2, 1, 2], initializer=tf.compat.v1.constant_initializer(0.3))
            pooled = tf.nn.max_pool2d(tf.nn.conv2d(x, k, 1, "SAME", name="conv"), 2, 2, "SAME", name="pool")
            flat = tf.reshape(pooled, [2, 8], name="flat")
        else:
            flat = tf.reshape(x[:, :2], [2, 8], name="flat")
        w = tf.compat.v1.get_variable("w", [8, 3], initializer=tf.compat.v1.random_normal_initializer(seed=1))
        b = tf.compat.v1.get_variable("b", [3], initializer=tf.compat.v1.constant_initializer(0.1))
        # AddV2 rather than BiasAdd, so that the fusion pass leaves MatMul alone here.
        relu = tf.nn.relu(tf.add(tf.matmul(flat, w, name="mm"), b, name="bias"), name="relu")
        if keep_dtype:
            graph.get_operation_by_name(keep_dtype)._set_attr(
                "_keep_dtype", tf.compat.v1.AttrValue(b=True))
        lg = tf.math.log(tf.nn.softmax(relu, name="sm") + 1.0, name="lg")
        y = tf.identity(tf.reduce_mean(lg, name="mean"), name="y")
        out = tf.identity(relu, name="out")
        init = tf.compat.v1.global_variables_initializer()
    return graph, x, y, out, init


def feed_value():
    return np.linspace(-1.0, 2.0, 32, dtype=np.float32).reshape(2, 4, 4, 1)


def offline(options, conv=True, keep_dtype=None):
    graph, *_ = build(conv, keep_dtype)
    return npu_sim_bridge.rewrite(graph.as_graph_def(), options, fetches=["y", "out"])


def session_config(npu_config, **params):
    """As npu_config_proto builds it: NpuOptimizer, and Grappler's remapper off."""
    config = npu_config(**params)
    config.graph_options.rewrite_options.remapping = rewriter_config_pb2.RewriterConfig.OFF
    return config


def executed(sess, fetches, feed):
    """Run once with a full trace: (values, {node name: output dtypes}, {node name: timeline label})."""
    metadata = tf.compat.v1.RunMetadata()
    options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
    values = sess.run(fetches, feed, options=options, run_metadata=metadata)
    dtypes, labels = {}, {}
    for device in metadata.step_stats.dev_stats:
        for stats in device.node_stats:
            dtypes[stats.node_name] = [tf.as_dtype(o.tensor_description.dtype).name for o in stats.output]
            labels[stats.node_name] = stats.timeline_label
    return values, dtypes, labels


def first_rewrite(name="mm"):
    """The report of the first precision rewrite of the graph holding `name`."""
    for report in npu_sim_bridge.recent_reports():
        record = next((p for p in report.passes if p.name == "precision"), None)
        if record and name in report.nodes and not record.stats.get("already_rewritten"):
            return report
    raise AssertionError(f"no precision report holds {name}")


def float_run(graph, x, fetches, init):
    with tf.compat.v1.Session(graph=graph) as sess:
        sess.run(init)
        return sess.run(fetches, {x: feed_value()})


@pytest.mark.parametrize("mode", sorted(EXPECTED))
def test_each_mode_decides_every_node(mode):
    graph_def, report = offline({"precision_mode": mode})
    got = {name: report.nodes[name].dtype_after for name in NODES}
    assert got == EXPECTED[mode]
    assert {report.nodes[n].list for n in ("mm", "conv")} == {"white"}
    assert report.nodes["lg"].list == "black" and report.nodes["relu"].list == "gray"
    assert report.nodes["x"].dtype_after == F32  # placeholders keep float32
    written = {node.name: node for node in graph_def.node}
    for name in ("out", "y"):  # fetched: whatever dtype they run in, they leave the device as float32
        assert written[name].op == "Identity" and written[name].attr["T"].type == tf.float32.as_datatype_enum


@pytest.mark.parametrize("mode_v2", sorted(V2))
def test_precision_mode_v2_maps_onto_precision_mode(mode_v2):
    _, report = offline({"precision_mode_v2": mode_v2})
    assert {name: report.nodes[name].dtype_after for name in NODES} == EXPECTED[V2[mode_v2]]


def test_default_mode_is_allow_fp32_to_fp16():
    _, report = offline({})
    assert {name: report.nodes[name].dtype_after for name in NODES} == EXPECTED["allow_fp32_to_fp16"]
    assert why(report, "conv") == ("precision.no_kernel", {"dtype": "float32"})
    assert why(report, "mm") == ("precision.mode_keeps", {"mode": "allow_fp32_to_fp16", "dtype": "float32"})
    assert report.nodes["mm"].reason == "allow_fp32_to_fp16: keeps float32"  # the text people read


def why(report, name):
    """The code and details of the node's one reason."""
    (reason,) = report.nodes[name].reasons
    return reason.code, dict(reason.details)


def test_reasons_name_the_rule():
    _, report = offline({"precision_mode": "allow_mix_precision"})
    assert why(report, "mm") == ("precision.white_list", {})
    assert why(report, "bias") == ("precision.gray_follows", {"rule": "gray list", "node": "mm"})
    assert why(report, "flat") == ("precision.gray_follows", {"rule": "gray list", "node": "pool"})
    assert why(report, "lg") == ("precision.black_list", {})
    assert why(report, "out") == ("precision.pass_through_follows", {"node": "relu"})  # fetched, decided as if not
    assert [r.code for r in report.nodes["mm/ReadVariableOp"].reasons][-1] in (
        "precision.variable", "precision.reads_variable")
    _, report = offline({"precision_mode": "cube_fp16in_fp32out"})
    assert why(report, "mm") == ("precision.cube_split", {})


def test_black_op_without_float32_kernel_is_an_ai_cpu_fallback_in_mix_precision(tmp_path):
    path = tmp_path / "mix.json"
    path.write_text('{"black-list": {"to-add": ["MaxPool"]}}')
    _, report = offline({"precision_mode": "allow_mix_precision", "modify_mixlist": str(path)})
    assert report.nodes["pool"].list == "black" and report.nodes["pool"].dtype_after == F32
    assert why(report, "pool") == ("precision.ai_cpu", {"rule": "modify_mixlist black-list to-add"})


def test_force_fp32_black_op_without_float32_kernel_is_an_ai_cpu_fallback(tmp_path):
    from npu_sim_bridge.ops_info import builtin_library_path

    library = tmp_path / "ops_info"  # the built-in library with MaxPool black-listed
    library.mkdir()
    for source in builtin_library_path().glob("*.json"):
        data = json.loads(source.read_text(encoding="utf-8"))
        if source.name.startswith("aic-"):
            data["MaxPool"]["precision_reduce"] = {"flag": "false"}
        (library / source.name).write_text(json.dumps(data), encoding="utf-8")
    _, report = offline({"precision_mode": "force_fp32", "sim_ops_info_path": str(library)})
    assert report.nodes["pool"].list == "black"
    assert (report.nodes["pool"].dtype_after, report.nodes["conv"].dtype_after) == (F32, F16)
    assert why(report, "pool") == ("precision.ai_cpu", {"rule": "black list"})
    assert why(report, "conv") == ("precision.no_kernel", {"dtype": "float32"})


def test_must_keep_origin_dtype_with_conv2d_names_the_op():
    with pytest.raises(PassError) as caught:
        offline({"precision_mode": "must_keep_origin_dtype"})
    assert isinstance(caught.value.__cause__, PrecisionModeError)
    assert isinstance(caught.value.__cause__, ConfigError)
    message = str(caught.value)
    assert ("precision_mode must_keep_origin_dtype: ops Conv2D (conv), MaxPool (pool) have no float32 support "
            "on Ascend 910; use allow_fp32_to_fp16 or allow_mix_precision") in message
    _, report = offline({"precision_mode": "must_keep_origin_dtype"}, conv=False)
    assert {report.nodes[n].dtype_after for n in ("mm", "relu", "lg")} == {F32}


def test_must_keep_origin_dtype_in_a_session_fails_sess_run(npu_config):
    graph, x, y, out, init = build()
    with tf.compat.v1.Session(graph=graph, config=session_config(
            npu_config, precision_mode_v2="origin")) as sess:
        with pytest.raises(tf.errors.InvalidArgumentError) as caught:
            sess.run(init)
            sess.run(y, {x: feed_value()})
    assert "precision_mode_v2 origin: ops Conv2D (conv), MaxPool (pool) have no float32 support" in str(caught.value)


def test_modify_mixlist_needs_a_mix_precision_mode(npu_config, tmp_path):
    path = tmp_path / "mix.json"
    path.write_text('{"black-list": {"to-add": ["MatMul"]}}')
    with pytest.raises(ConfigError, match="modify_mixlist is set, but precision_mode is 'force_fp16'.*"
                                          "set precision_mode to allow_mix_precision"):
        from_dict({"precision_mode": "force_fp16", "modify_mixlist": str(path)})
    graph, x, y, out, init = build()
    config = session_config(npu_config, precision_mode="force_fp16", modify_mixlist=str(path))
    with tf.compat.v1.Session(graph=graph, config=config) as sess:
        with pytest.raises(tf.errors.InvalidArgumentError, match="modify_mixlist is set, but precision_mode"):
            sess.run(init)


@pytest.mark.parametrize("mode, execution", [
    ("allow_mix_precision", "native"), ("allow_mix_precision", "emulate"), ("force_fp16", "native"),
    ("force_fp32", "native"), ("allow_fp32_to_fp16", "native"), ("cube_fp16in_fp32out", "native"),
    ("allow_mix_precision_bf16", "emulate"),
])
def test_session_runs_each_mode(npu_config, mode, execution):
    graph, x, y, out, init = build()
    with tf.compat.v1.Session(graph=graph, config=session_config(
            npu_config, precision_mode=mode, sim_fp16_execution=execution)) as sess:
        sess.run(init)
        values, dtypes, labels = executed(sess, [y, out], {x: feed_value()})
    report = first_rewrite()
    expected = EXPECTED[mode]
    for name in ("conv", "pool", "mm", "bias", "relu", "mean"):
        assert report.nodes[name].dtype_after == expected[name], name
        lowered = expected[name] != F32
        if execution == "native" and not (mode == "cube_fp16in_fp32out" and name in ("mm", "conv")):
            assert dtypes[name] == [expected[name]], name
        else:  # emulated: the float32 kernel runs on rounded inputs
            assert dtypes[name][0] == F32, name
            if lowered and name in ("mm", "conv"):  # a weight input comes through a float16 round trip
                assert "/NpuSimRound_0_" in labels[name], labels[name]
    reference = float_run(graph, x, [y, out], init)
    np.testing.assert_allclose(values[0], reference[0], rtol=0.02, atol=0.01)
    np.testing.assert_allclose(values[1], reference[1], rtol=0.02, atol=0.01)


def test_emulated_results_are_float16_rounded(npu_config):
    graph, x, y, out, init = build(conv=False)
    with tf.compat.v1.Session(graph=graph, config=session_config(
            npu_config, precision_mode="allow_mix_precision")) as sess:
        sess.run(init)
        value = sess.run(out, {x: feed_value()})
    assert value.dtype == np.float32
    np.testing.assert_array_equal(value, value.astype(np.float16).astype(np.float32))
    reference = float_run(graph, x, out, init)
    assert not np.array_equal(value, reference)
    np.testing.assert_allclose(value, reference, rtol=1e-3, atol=1e-3)


def test_float16_overflow_gives_inf_in_emulate_mode(npu_config):
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 2], name="x")
        y = tf.identity(tf.matmul(x, x, name="mm") * 0.001, name="y")
    big = np.full((2, 2), 300.0, np.float32)  # 300 * 300 * 2 = 180000 > 65504
    with tf.compat.v1.Session(graph=graph, config=session_config(
            npu_config, precision_mode="allow_mix_precision", sim_fp16_execution="emulate")) as sess:
        value = sess.run(y, {x: big})
    assert np.isinf(value).all()
    with tf.compat.v1.Session(graph=graph) as sess:
        assert np.allclose(sess.run(y, {x: big}), 180.0)


def test_modify_mixlist_in_a_session(npu_config, tmp_path):
    path = tmp_path / "mix.json"
    path.write_text('{"black-list": {"to-add": ["MatMulV2"]}, "white-list": {"to-remove": ["MatMulV2"]}}')
    graph, x, y, out, init = build()
    with tf.compat.v1.Session(graph=graph, config=session_config(
            npu_config, precision_mode="allow_mix_precision", modify_mixlist=str(path))) as sess:
        sess.run(init)
        sess.run([y, out], {x: feed_value()})
    report = first_rewrite()
    assert report.nodes["mm"].list == "black" and report.nodes["mm"].dtype_after == F32
    assert why(report, "mm") == ("precision.modify_mixlist", {
        "rule": "modify_mixlist black-list to-add (MatMulV2), white-list to-remove (MatMulV2)"})
    assert report.nodes["bias"].dtype_after == F32
    assert why(report, "bias") == ("precision.gray_follows", {"rule": "gray list", "node": "mm", "dtype": "float32"})
    assert report.nodes["pool"].dtype_after == F16


def test_remove_only_makes_the_op_gray_and_it_follows(tmp_path):
    path = tmp_path / "mix.json"
    path.write_text('{"white-list": {"to-remove": ["MatMul"]}}')
    _, report = offline({"precision_mode": "allow_mix_precision", "modify_mixlist": str(path)})
    assert report.nodes["mm"].list == "gray" and report.nodes["mm"].dtype_after == F16
    assert why(report, "mm") == ("precision.gray_follows", {"rule": "modify_mixlist white-list to-remove",
                                                            "node": "flat"})
    assert report.nodes["mm"].reason == "gray (modify_mixlist white-list to-remove): follows flat"  # as read
    _, report = offline({"precision_mode": "allow_mix_precision", "modify_mixlist": str(path)}, conv=False)
    assert report.nodes["mm"].dtype_after == F32
    assert why(report, "mm") == ("precision.gray_undecided", {"rule": "modify_mixlist white-list to-remove",
                                                              "dtype": "float32"})


def test_keep_dtype_scope_attr_keeps_the_node():
    _, report = offline({"precision_mode": "force_fp16"}, keep_dtype="relu")
    assert report.nodes["relu"].dtype_after == F32 and report.nodes["relu"].reason == "keep_dtype_scope"
    assert report.nodes["bias"].dtype_after == F16


def test_gray_rule_with_several_inputs():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 2], name="x")
        low = tf.matmul(x, x, name="low")                  # white: dropped
        high = tf.math.log(x, name="high")                 # black: kept
        tf.add(low, x, name="low_and_input")               # placeholders do not decide
        tf.add(low, high, name="low_and_high")             # a kept input keeps it
        undecided = tf.multiply(x, 2.0, name="undecided")  # nothing decided before it
        tf.add(undecided, low, name="after_undecided")     # undecided inputs do not decide either
    # fetches=[]: nothing is fetched, so the outputs are not kept in their dtype and the gray rule decides them
    _, report = npu_sim_bridge.rewrite(graph.as_graph_def(), {"precision_mode": "allow_mix_precision"}, fetches=[])
    decisions = {name: (report.nodes[name].dtype_after, report.nodes[name].reason)
                 for name in ("low_and_input", "low_and_high", "undecided", "after_undecided")}
    assert decisions == {
        "low_and_input": (F16, "gray: follows low"),
        "low_and_high": (F32, "gray: follows high (float32)"),
        "undecided": (F32, "gray: no decided float input, keeps float32"),
        "after_undecided": (F16, "gray: follows low"),
    }
