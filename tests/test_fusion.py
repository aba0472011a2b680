"""The fusion pass: rules, fusion_switch_file, reports, numbers, and precision_tool's tf_config helpers."""

import atexit
import json
import os
import shutil
import tempfile
import warnings

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import rewriter_config_pb2

# precision_tool.tf_config reads its folder when imported, before any fixture runs.
_CONFIG_DIR = tempfile.mkdtemp(prefix="npu_sim_test_config_")
atexit.register(shutil.rmtree, _CONFIG_DIR, True)
os.environ.setdefault("NPU_SIM_CONFIG_DIR", _CONFIG_DIR)

import npu_sim_bridge  # noqa: E402
from npu_sim_bridge.cli.main import main as cli_main  # noqa: E402
from npu_sim_bridge.errors import ConfigError  # noqa: E402
from npu_sim_bridge.passes.fusion import FusionSwitchWarning, all_rules, load_switch, parse_switch  # noqa: E402
from npu_sim_bridge.passes.fusion.marks import FUSION_ATTR, fusion_rules  # noqa: E402
from npu_sim_bridge.passes.precision.boundary import DEVICE_SUFFIX  # noqa: E402

MIX = {"precision_mode": "allow_mix_precision"}


def dense_graph(scope_host=False, extra_consumer=False):
    """x -> MatMul -> BiasAdd -> Relu -> MatMul -> BiasAdd (out); conv -> BiasAdd -> Relu (conv_out)."""
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [4, 8], name="x")
        w1 = tf.constant(np.random.RandomState(0).normal(size=(8, 16)).astype(np.float32))
        b1 = tf.constant(np.linspace(-1, 1, 16).astype(np.float32))
        w2 = tf.constant(np.random.RandomState(1).normal(size=(16, 3)).astype(np.float32))
        b2 = tf.constant(np.linspace(0.3, 0.9, 3).astype(np.float32))
        if scope_host:
            from npu_sim_bridge.runtime.scopes import without_npu_compile_scope

            with without_npu_compile_scope():
                mm1 = tf.matmul(x, w1, name="d1/MatMul")
        else:
            mm1 = tf.matmul(x, w1, name="d1/MatMul")
        h = tf.nn.relu(tf.nn.bias_add(mm1, b1, name="d1/BiasAdd"), name="d1/Relu")
        if extra_consumer:
            tf.identity(mm1, name="peek")
        tf.nn.bias_add(tf.matmul(h, w2, name="d2/MatMul"), b2, name="out")
        img = tf.compat.v1.placeholder(tf.float32, [1, 6, 6, 3], name="img")
        f = tf.constant(np.random.RandomState(2).normal(size=(3, 3, 3, 4)).astype(np.float32))
        c = tf.nn.conv2d(img, f, 1, "SAME", name="c/Conv2D")
        tf.nn.relu(tf.nn.bias_add(c, tf.constant(np.ones(4, np.float32)), name="c/BiasAdd"), name="conv_out")
    return graph


FETCH = ["out", "conv_out"]


def rewrite(graph, **options):
    return npu_sim_bridge.rewrite(graph.as_graph_def(), dict(MIX, **options), fetches=FETCH)


def ops(graph_def):
    return {node.name: node for node in graph_def.node}


def body_nodes(graph_def):
    """Main-graph nodes, with the GeOp bodies' nodes taking precedence over the stubs keeping their names.
    A fetched op that leaves the device through a Cast runs as `<name>/NpuSimOnDevice` (its name is the
    Identity at the boundary, precision/boundary.py): the op is found under the fetched name."""
    nodes = ops(graph_def)
    for function in graph_def.library.function:
        nodes.update({node.name: node for node in function.node_def})
    suffix = "/" + DEVICE_SUFFIX
    nodes.update({name[:-len(suffix)]: node for name, node in list(nodes.items()) if name.endswith(suffix)})
    return nodes


def switch_file(tmp_path, text, name="switch.cfg"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_rules_fuse_matmul_conv_bias_and_relu_onto_fused_kernels():
    result = rewrite(dense_graph())
    nodes = body_nodes(result.graph_def)
    assert "d1/MatMul" not in nodes and "d1/BiasAdd" not in nodes and "c/Conv2D" not in nodes
    relu = nodes["d1/Relu"]
    assert relu.op == "_FusedMatMul" and list(relu.attr["fused_ops"].list.s) == [b"BiasAdd", b"Relu"]
    assert fusion_rules(relu) == ["MatMulBiasAddFusionPass", "TbeFullyconnectionElemwiseDequantFusionPass"]
    assert nodes["out"].op == "_FusedMatMul" and fusion_rules(nodes["out"]) == ["MatMulBiasAddFusionPass"]
    conv = nodes["conv_out"]
    assert conv.op == "_FusedConv2D" and list(conv.attr["fused_ops"].list.s) == [b"BiasAdd", b"Relu"]
    assert fusion_rules(conv) == ["AABiasaddConvFusion", "TbeConvElemwiseFusionPass"]
    stats = next(p.stats for p in result.report.passes if p.name == "fusion")
    assert stats["fused"] == {"MatMulBiasAddFusionPass": 2, "AABiasaddConvFusion": 1,
                              "TbeConvElemwiseFusionPass": 1, "TbeFullyconnectionElemwiseDequantFusionPass": 1}
    reasons = {name: [(r.code, dict(r.details)) for r in result.report.nodes[name].reasons]
               for name in ("d1/BiasAdd", "d1/Relu", "d1/MatMul")}
    assert ("fusion.fused_into", {"root": "d1/Relu", "op": "_FusedMatMul",
                                  "rule": "TbeFullyconnectionElemwiseDequantFusionPass"}) in reasons["d1/BiasAdd"]
    # A node fused twice names every original node, the first fusion's among them, in order.
    assert reasons["d1/Relu"][0] == ("fusion.fused_by", {
        "rule": "TbeFullyconnectionElemwiseDequantFusionPass", "nodes": ["d1/MatMul", "d1/BiasAdd", "d1/Relu"],
        "ops": ["MatMul", "BiasAdd", "Relu"], "op": "_FusedMatMul"})
    assert reasons["d1/MatMul"][0] == ("fusion.fused_into", {"root": "d1/BiasAdd", "op": "_FusedMatMul",
                                                             "rule": "MatMulBiasAddFusionPass"})
    assert ("fusion.runs_inside", {"target": "d1/Relu", "via": "d1/BiasAdd"}) in reasons["d1/MatMul"]
    # What people read: the fused node's sentence names its nodes and their ops.
    assert result.report.nodes["d1/Relu"].reason.startswith(
        "fused by TbeFullyconnectionElemwiseDequantFusionPass: d1/MatMul (MatMul) + d1/BiasAdd (BiasAdd) + "
        "d1/Relu (Relu) -> _FusedMatMul")


def test_precision_treats_fused_kernels_like_their_base_op():
    report = rewrite(dense_graph()).report
    fused = report.nodes["d1/Relu"]                                 # _FusedMatMul[BiasAdd, Relu]
    assert fused.list == "white" and fused.dtype_after == "float16"  # decided as MatMul
    assert fused.placement == "device"


def test_fusion_moves_the_float16_rounding_point():
    """Fused: the bias is added before rounding; unfused: the MatMul result is rounded first."""
    graph = dense_graph()
    off = rewrite(graph, fusion_switch_file=os.path.join(os.path.dirname(npu_sim_bridge.__file__),
                                                         "precision_tool", "fusion_off.cfg")).graph_def
    on = rewrite(graph).graph_def
    feed = {"x:0": np.random.RandomState(3).normal(size=(4, 8)).astype(np.float32) * 3,
            "img:0": np.ones((1, 6, 6, 3), np.float32)}
    results = []
    for graph_def in (off, on):
        with tf.Graph().as_default() as g:
            tf.graph_util.import_graph_def(graph_def, name="")
            with tf.compat.v1.Session(graph=g) as sess:
                results.append(sess.run("out:0", feed))
    assert not np.array_equal(results[0], results[1])
    np.testing.assert_allclose(results[0], results[1], rtol=2e-2, atol=2e-2)


def test_switch_all_off_with_a_per_rule_override_and_an_unswitchable_rule(tmp_path):
    path = switch_file(tmp_path, '{"Switch": {"GraphFusion": {"ALL": "off", "MatMulBiasAddFusionPass": "on"},'
                                 ' "UBFusion": {"ALL": "off"}}}')
    result = rewrite(dense_graph(), fusion_switch_file=path)
    nodes = body_nodes(result.graph_def)
    assert nodes["out"].op == "_FusedMatMul" and nodes["d1/BiasAdd"].op == "_FusedMatMul"
    assert nodes["d1/Relu"].op == "Relu"                       # UB fusion off
    assert nodes["c/BiasAdd"].op == "_FusedConv2D"             # AABiasaddConvFusion cannot be switched off
    switched = [r for r in result.report.nodes["d1/Relu"].reasons if r.code == "fusion.switched_off"]
    assert [r.get("rule") for r in switched] == ["TbeFullyconnectionElemwiseDequantFusionPass"]
    rows = {rule.name: load_switch(path).state(rule) for rule in all_rules()}
    assert rows["AABiasaddConvFusion"].on and "cannot be switched off" in rows["AABiasaddConvFusion"].why


def test_seed_switch_file_with_trailing_comma_and_comments_parses(tmp_path):
    text = ('{ "Switch":{ "GraphFusion":{ "ConvToFullyConnectionFusionPass":"off", // not simulated\n'
            ' "MatMulBiasAddFusionPass":"off", }, "UBFusion":{ "TbePool2dQuantFusionPass":"off" } } }')
    with warnings.catch_warnings():
        warnings.simplefilter("error", FusionSwitchWarning)  # known real rule names do not warn
        switch = load_switch(switch_file(tmp_path, text))
        switch.check_names(all_rules())
    assert switch.sections["GraphFusion"]["MatMulBiasAddFusionPass"] is False


def test_unknown_rule_and_unswitchable_rule_warn(tmp_path):
    path = switch_file(tmp_path, '{"Switch": {"GraphFusion": {"MatMulBiasAddFusionPas": "off", '
                                 '"AABiasaddConvFusion": "off"}}}')
    with pytest.warns(FusionSwitchWarning) as caught:
        report = rewrite(dense_graph(), fusion_switch_file=path).report
    texts = " | ".join(str(w.message) for w in caught)
    assert "'MatMulBiasAddFusionPas'" in texts and "did you mean 'MatMulBiasAddFusionPass'" in texts
    assert "AABiasaddConvFusion cannot be switched off" in texts
    assert any("MatMulBiasAddFusionPas" in text for text in report.warnings)


@pytest.mark.parametrize("text, expected", [
    ('{"Switch": {"GraphFusion": {"ALL": "of"}}}', "GraphFusion ALL is 'of'; it should be \"on\" or \"off\""),
    ('{"Switch": {"GraphFusion": {"ALL": "off"}\n  "UBFusion": {}}}', "line 2, column 3"),
    ('{"GraphFusion": {"ALL": "off"}}', 'must hold an object with a "Switch" key'),
    ('{"Switch": {"GraphFusions": {}}}', "did you mean 'GraphFusion'"),
])
def test_malformed_switch_file_names_the_file_and_the_place(tmp_path, text, expected):
    path = switch_file(tmp_path, text)
    with pytest.raises(npu_sim_bridge.NpuSimError) as caught:
        rewrite(dense_graph(), fusion_switch_file=path)
    assert path in str(caught.value) and expected in str(caught.value)


def test_missing_switch_file_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="fusion_switch_file .* does not exist"):
        load_switch(str(tmp_path / "nope.cfg"))


def test_check_says_why_a_rule_did_not_fire():
    report = rewrite(dense_graph(extra_consumer=True)).report
    assert "MatMulBiasAddFusionPass did not fire: d1/MatMul (MatMul) is also read by peek" in \
        report.nodes["d1/BiasAdd"].reason
    report = rewrite(dense_graph(scope_host=True)).report
    assert "does not run on the device (host: in without_npu_compile_scope)" in report.nodes["d1/BiasAdd"].reason


@pytest.mark.parametrize("device", ["/job:localhost/replica:0/task:0/device:CPU:0",
                                    "/job:localhost/replica:0/task:0/device:GPU:0"])
def test_a_graph_placed_on_a_gpu_keeps_its_convolution_and_bias_apart(device):
    """TensorFlow's GPU _FusedConv2D refuses a bias alone when the step runs; its _FusedMatMul forms run."""
    from npu_sim_bridge.config import from_dict
    from npu_sim_bridge.passes import ItemInfo, run_pipeline

    graph = dense_graph().as_graph_def()
    for node in graph.node:
        node.device = device
    options = from_dict(dict(MIX, sim_passes="fusion"))
    result = run_pipeline(graph, options, ItemInfo(id="tf_graph", fetch=tuple(FETCH)))
    nodes = ops(result.graph_def)
    stats = next(p.stats for p in result.report.passes if p.name == "fusion")
    if "GPU" not in device:
        assert nodes["d1/Relu"].op == nodes["out"].op == "_FusedMatMul" and nodes["conv_out"].op == "_FusedConv2D"
        assert "c/Conv2D" not in nodes and stats["not_fired"] == {}
        return
    assert (nodes["c/Conv2D"].op, nodes["c/BiasAdd"].op, nodes["conv_out"].op) == ("Conv2D", "BiasAdd", "Relu")
    reason = result.report.nodes["c/BiasAdd"].reason
    assert "AABiasaddConvFusion did not fire: c/BiasAdd is placed on /job:localhost/replica:0/task:0/device:GPU:0" \
        in reason and "Fusion is not implemented: [BiasAdd]" in reason
    if tf.test.is_built_with_cuda():  # the MatMul forms run on a GPU
        assert nodes["d1/Relu"].op == nodes["out"].op == "_FusedMatMul"
        assert stats["not_fired"] == {"AABiasaddConvFusion": 1}
    else:  # no GPU kernel is registered at all: the kernel lookup refuses them
        assert "TensorFlow has no DT_FLOAT _FusedMatMul kernel" in result.report.nodes["out"].reason
        assert stats["not_fired"] == {"AABiasaddConvFusion": 1, "MatMulBiasAddFusionPass": 2}


def test_fusion_is_idempotent():
    first = rewrite(dense_graph()).graph_def
    second = npu_sim_bridge.rewrite(first, MIX, fetches=FETCH)
    assert [n.op for n in second.graph_def.node] == [n.op for n in first.node]
    stats = next(p.stats for p in second.report.passes if p.name == "fusion")
    assert stats["already_processed"] and not second.report.passes[0].changed


def session_run(graph, config, fetch="out:0"):
    with tf.compat.v1.Session(graph=graph, config=config) as sess:
        return sess.run(fetch, {"x:0": np.ones((4, 8), np.float32)})


def test_session_route_fuses_the_same_with_the_remapper_on_or_off(npu_config):
    def fused_stats():
        return [p.stats for r in npu_sim_bridge.recent_reports() for p in r.passes
                if p.name == "fusion" and p.stats.get("fused") and not p.stats.get("already_processed")]

    config = npu_config(precision_mode="allow_mix_precision")
    on = session_run(dense_graph(), config)  # remapping left on: Grappler's remapper fuses before NpuOptimizer
    remapped = fused_stats()
    assert remapped and remapped[0]["unfused"] == 2  # its two _FusedMatMul nodes were taken apart
    npu_sim_bridge.clear_reports()
    config.graph_options.rewrite_options.remapping = rewriter_config_pb2.RewriterConfig.OFF
    off = session_run(dense_graph(), config)
    plain = fused_stats()
    assert plain and plain[0]["fused"]["MatMulBiasAddFusionPass"] == 2
    assert remapped[0]["fused"] == plain[0]["fused"]
    np.testing.assert_array_equal(on, off)


def test_npu_run_config_takes_the_fusion_switch_file(tmp_path):
    from npu_sim_bridge.npu_init import NPURunConfig

    path = switch_file(tmp_path, '{"Switch": {"GraphFusion": {"MatMulBiasAddFusionPass": "off"}}}')
    run_config = NPURunConfig(fusion_switch_file=path, precision_mode="allow_mix_precision")
    result = npu_sim_bridge.rewrite(dense_graph().as_graph_def(), run_config.npu_session_config(), fetches=FETCH)
    nodes = body_nodes(result.graph_def)
    assert nodes["d2/MatMul"].op == "MatMul" and nodes["out"].op == "BiasAdd"
    assert nodes["conv_out"].op == "_FusedConv2D"  # the other rules stay on


def test_cli_lists_the_rules_and_their_state(tmp_path, capsys):
    assert cli_main(["fusion-rules"]) == 0
    out = capsys.readouterr().out
    for rule in all_rules():
        assert rule.name in out
    assert "AABiasaddConvFusion" in out and "cannot be switched off" in out
    path = switch_file(tmp_path, '{"Switch": {"UBFusion": {"ALL": "off"}}}')
    assert cli_main(["fusion-rules", "--fusion-switch-file", path, "--json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)["rules"]}
    assert rows["TbeConvElemwiseFusionPass"]["state"] == "off" and rows["MatMulBiasAddFusionPass"]["state"] == "on"


# ------------------------------------------------------------------------- precision_tool.tf_config
def test_tf_config_session_dump_config_combines_actions(tmp_path, monkeypatch):
    monkeypatch.setenv("NPU_SIM_PRECISION_DATA_DIR", str(tmp_path / "precision_data"))
    import npu_sim_bridge.precision_tool.tf_config as npu_tf_config

    config = npu_tf_config.session_dump_config(None, action="fusion_off|dump")
    custom = config.graph_options.rewrite_options.custom_optimizers[0]
    assert custom.name == "NpuOptimizer"
    assert custom.parameter_map["fusion_switch_file"].s.decode() == npu_tf_config.FUSION_OFF_FILE
    assert custom.parameter_map["enable_dump"].b and custom.parameter_map["dump_mode"].s == b"all"
    assert os.path.isdir(custom.parameter_map["dump_path"].s.decode())
    assert config.graph_options.rewrite_options.remapping == rewriter_config_pb2.RewriterConfig.OFF
    assert parse_switch(open(npu_tf_config.FUSION_OFF_FILE).read()).sections["UBFusion"] == {"ALL": False}
    assert os.path.isfile(npu_tf_config.FUSION_SWITCH_FILE)
    fresh = npu_tf_config.ensure_fusion_switch_file(str(tmp_path / "config" / "fusion_switch.cfg"))
    switch = json.load(open(fresh))
    assert switch["Switch"]["GraphFusion"]["MatMulBiasAddFusionPass"] == "on"
    assert switch["Switch"]["UBFusion"]["TbeConvElemwiseFusionPass"] == "on"
    custom = npu_tf_config.update_custom_op(custom, action="fusion_switch")
    assert custom.parameter_map["fusion_switch_file"].s.decode() == npu_tf_config.FUSION_SWITCH_FILE
    with pytest.raises(ValueError, match="unknown part 'fusion_of'"):
        npu_tf_config.session_dump_config(None, action="fusion_of|dump")
    with pytest.raises(ValueError, match="dump and overflow"):
        npu_tf_config.update_custom_op(custom, action="dump|overflow")


def test_precision_tool_tf_config_imports_through_the_alias():
    from npu_sim_bridge.runtime.alias import install_alias, uninstall_alias

    install_alias()
    try:
        import precision_tool.tf_config as npu_tf_config  # noqa: F401
        import npu_sim_bridge.precision_tool.tf_config as real

        assert npu_tf_config is real
    finally:
        uninstall_alias()
