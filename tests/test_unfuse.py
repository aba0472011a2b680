"""Grappler's remapper fusions taken apart: bit-exact in float32, and the fusion switch decides under a hand-built
ConfigProto (remapping on, as in the seeds)."""

import json

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import config_pb2, rewriter_config_pb2
from tensorflow.python.grappler import tf_optimizer
from tensorflow.python.util import _pywrap_util_port

import npu_sim_bridge
from npu_sim_bridge.graph.view import GraphView
from npu_sim_bridge.passes.fusion.unfuse import remapped_nodes, unfuse

OUTPUTS = ["convout", "bnout", "cbnout", "mmout", "mmtanh", "mmleaky", "bnstats"]


def _const(rs, shape, low=None):
    values = rs.uniform(low, 2.0, shape) if low is not None else rs.normal(size=shape)
    return tf.constant(values.astype(np.float32))


def remapper_graph():
    """Every pattern the remapper fuses on the CPU: conv/matmul + bias + activation, conv + batch norm, BN + Relu."""
    rs = np.random.RandomState(0)
    graph = tf.Graph()
    with graph.as_default(), graph.device("/device:CPU:0"):
        x = tf.compat.v1.placeholder(tf.float32, [2, 8, 8, 3], name="x")
        c = tf.nn.conv2d(x, _const(rs, (3, 3, 3, 8)), 1, "SAME")
        r = tf.nn.relu(tf.nn.bias_add(c, _const(rs, 8)), name="convout")
        bn = tf.compat.v1.nn.fused_batch_norm(r, _const(rs, 8, 0.5), _const(rs, 8), _const(rs, 8), _const(rs, 8, 0.5),
                                              is_training=False)
        tf.nn.relu(bn[0], name="bnout")
        tf.identity(bn[1], name="bnstats")
        c2 = tf.nn.conv2d(x, _const(rs, (3, 3, 3, 8)), 1, "SAME")
        bn2 = tf.compat.v1.nn.fused_batch_norm(c2, _const(rs, 8, 0.5), _const(rs, 8), _const(rs, 8), _const(rs, 8, 0.5),
                                               is_training=False)
        tf.nn.relu6(bn2[0], name="cbnout")
        a = tf.compat.v1.placeholder(tf.float32, [4, 16], name="a")
        tf.nn.relu(tf.nn.bias_add(tf.matmul(a, _const(rs, (16, 5))), _const(rs, 5)), name="mmout")
        tf.tanh(tf.nn.bias_add(tf.matmul(a, _const(rs, (16, 5))), _const(rs, 5)), name="mmtanh")
        tf.nn.leaky_relu(tf.nn.bias_add(tf.matmul(a, _const(rs, (16, 5))), _const(rs, 5)), alpha=0.3, name="mmleaky")
        for name in OUTPUTS:
            graph.add_to_collection("train_op", graph.get_operation_by_name(name))
    return graph


def run_plain(graph_def):
    """Run a GraphDef with Grappler's rewrites off (so what runs is what the GraphDef says)."""
    config = config_pb2.ConfigProto()
    config.graph_options.rewrite_options.disable_meta_optimizer = True
    rs = np.random.RandomState(5)
    feed = {"x:0": rs.normal(size=(2, 8, 8, 3)).astype(np.float32) * 3, "a:0": rs.normal(size=(4, 16)).astype(np.float32)}
    with tf.Graph().as_default() as graph:
        tf.graph_util.import_graph_def(graph_def, name="")
        with tf.compat.v1.Session(graph=graph, config=config) as sess:
            return sess.run([f"{name}:0" for name in OUTPUTS], feed)


def test_remapper_fusions_taken_apart_compute_the_same_bits():
    graph = remapper_graph()
    fused = tf_optimizer.OptimizeGraph(config_pb2.ConfigProto(), tf.compat.v1.train.export_meta_graph(graph=graph))
    ops = sorted({node.op for node in fused.node if node.op.startswith("_Fused")})
    # Batch norm + Relu fuses on the CPU only where oneDNN is on (TensorFlow's default on AVX-512 CPUs).
    assert ops == (["_FusedBatchNormEx"] if _pywrap_util_port.IsMklEnabled() else []) + ["_FusedConv2D", "_FusedMatMul"]
    view = GraphView(fused)
    names = remapped_nodes(view)
    results = [unfuse(view, name) for name in names]
    assert all(not isinstance(result, str) for result in results), results
    unfused = view.to_graph_def()
    assert not [node.op for node in unfused.node if node.op.startswith("_Fused")]
    chains = {result.description: [op for _, op in result.chain] for result in results}
    assert chains["_FusedConv2D[FusedBatchNorm, Relu6]"] == ["Conv2D", "FusedBatchNormV3", "Relu6"]
    assert chains["_FusedMatMul[BiasAdd, LeakyRelu]"] == ["MatMul", "BiasAdd", "LeakyRelu"]
    for expected, got in zip(run_plain(fused), run_plain(unfused)):
        np.testing.assert_array_equal(expected, got)  # bit-identical in float32
    for expected, got in zip(run_plain(graph.as_graph_def()), run_plain(unfused)):
        np.testing.assert_array_equal(expected, got)  # and the same as the graph before the remapper


# --------------------------------------------------------------- the issue's graph through a Session
def issue_graph():
    """Conv2D -> BiasAdd -> Relu -> MaxPool -> MatMul -> BiasAdd -> Softmax -> Log -> Sum."""
    rs = np.random.RandomState(0)
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 8, 8, 3], name="x")
        c = tf.nn.conv2d(x, _const(rs, (3, 3, 3, 8)), 1, "SAME", name="conv")
        r = tf.nn.relu(tf.nn.bias_add(c, _const(rs, 8), name="bias1"), name="relu")
        p = tf.reshape(tf.nn.max_pool2d(r, 2, 2, "VALID", name="pool"), [2, 128], name="flat")
        b2 = tf.nn.bias_add(tf.matmul(p, _const(rs, (128, 10)), name="matmul"), _const(rs, 10), name="bias2")
        tf.reduce_sum(tf.math.log(tf.nn.softmax(b2, name="softmax"), name="log"), name="sum")
    return graph


ISSUE_FEED = {"x:0": np.random.RandomState(1).normal(size=(2, 8, 8, 3)).astype(np.float32) * 3}
RULES = ["MatMulBiasAddFusionPass", "TbeConvElemwiseFusionPass"]  # the switchable rules this graph matches


def seed_config(tmp_path, remapping=True, switch=None):
    """A ConfigProto built by hand, as seeds 000 and 004 build it: Grappler's remapper stays on."""
    config = tf.compat.v1.ConfigProto()
    custom_op = config.graph_options.rewrite_options.custom_optimizers.add()
    custom_op.name = "NpuOptimizer"
    custom_op.parameter_map["precision_mode"].s = b"allow_mix_precision"
    if switch is not None:
        path = tmp_path / f"switch_{len(list(tmp_path.iterdir()))}.cfg"
        path.write_text(json.dumps({"Switch": switch}))
        custom_op.parameter_map["fusion_switch_file"].s = str(path).encode()
    if not remapping:
        config.graph_options.rewrite_options.remapping = rewriter_config_pb2.RewriterConfig.OFF
    return config


def session_run(config):
    npu_sim_bridge.clear_reports()
    with tf.compat.v1.Session(graph=issue_graph(), config=config) as sess:
        value = sess.run("sum:0", ISSUE_FEED)
    report = next(r for r in npu_sim_bridge.recent_reports() if r.item_id == "tf_graph" and not r.rerun)
    fusion = next(p.stats for p in report.passes if p.name == "fusion")
    return value, report, fusion.get("fused", {})


def test_all_off_changes_the_mixed_numbers_with_the_remapper_on(tmp_path):
    on, _, fused_on = session_run(seed_config(tmp_path))
    off, _, fused_off = session_run(seed_config(tmp_path, switch={"GraphFusion": {"ALL": "off"},
                                                                    "UBFusion": {"ALL": "off"}}))
    assert on != off and np.isfinite(off)
    assert set(fused_on) == {"AABiasaddConvFusion", *RULES}
    assert fused_off == {"AABiasaddConvFusion": 1}  # the NPU cannot switch that one off
    plain_on, _, _ = session_run(seed_config(tmp_path, remapping=False))
    assert plain_on == on  # the remapper setting no longer matters


@pytest.mark.parametrize("rule", RULES)
def test_a_single_rule_off_changes_exactly_its_fusion(tmp_path, rule):
    kind = "GraphFusion" if rule == "MatMulBiasAddFusionPass" else "UBFusion"
    all_on, _, fused_on = session_run(seed_config(tmp_path))
    value, report, fused = session_run(seed_config(tmp_path, switch={kind: {rule: "off"}}))
    assert set(fused_on) - set(fused) == {rule}
    assert {name: count for name, count in fused.items() if name != rule} == \
        {name: count for name, count in fused_on.items() if name != rule}
    switched = [n.name for n in report.nodes.values()
                if any(r.code == "fusion.switched_off" and r.get("rule") == rule for r in n.reasons)]
    assert switched == (["bias2"] if rule == "MatMulBiasAddFusionPass" else ["relu"])
    if rule == "MatMulBiasAddFusionPass":
        assert value != all_on  # the bias is added after the float16 rounding now
    switch = {"GraphFusion": {"ALL": "off"}, "UBFusion": {"ALL": "off"}}
    switch[kind][rule] = "on"
    _, _, fused_only = session_run(seed_config(tmp_path, switch=switch))
    assert set(fused_only) == {"AABiasaddConvFusion", rule}


@pytest.mark.parametrize("remapping", [True, False])
def test_fused_away_nodes_carry_their_fused_ops_decisions(tmp_path, remapping):
    _, report, _ = session_run(seed_config(tmp_path, remapping=remapping))
    absorbed = {"conv": "relu", "bias1": "relu", "matmul": "bias2"} if not remapping else \
        {"relu/Conv2D": "relu", "relu/BiasAdd": "relu", "bias2/MatMul": "bias2"}
    for name, target in absorbed.items():
        node, fused = report.nodes[name], report.nodes[target]
        assert fused.dtype_after == "float16" and fused.placement == "device" and fused.geop
        assert (node.list, node.dtype_after, node.placement, node.geop) == \
            (fused.list, fused.dtype_after, fused.placement, fused.geop)
        assert "fusion.fused_into" in [r.code for r in node.reasons]


def test_a_fused_op_the_simulator_cannot_rebuild_stays_fused_and_is_reported():
    graph = tf.Graph()
    with graph.as_default():
        a = tf.compat.v1.placeholder(tf.float32, [2, 3], name="a")
        b = tf.constant(np.ones((3, 4), np.float32), name="b")
        bias = tf.constant(np.ones(4, np.float32), name="bias")
        tf.identity(tf.matmul(a, b, name="mm"), name="out")
    graph_def = graph.as_graph_def()
    node = next(n for n in graph_def.node if n.name == "mm")
    node.op = "_FusedMatMul"
    node.input.append("bias")
    node.attr["num_args"].i = 1
    node.attr["fused_ops"].list.s.extend([b"BiasAdd", b"Softplus"])
    report = npu_sim_bridge.rewrite(graph_def, {"precision_mode": "allow_mix_precision"}, fetches=["out"]).report
    (kept,) = [r for r in report.nodes["mm"].reasons if r.code == "fusion.remapper_kept"]
    assert "fused op 'Softplus' has no primitive this simulator rebuilds" in kept.get("why")
    assert any("mm" in text and "cannot take apart" in text for text in report.warnings)
