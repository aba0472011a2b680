"""The model sweep's fast subset: control flow, Keras layers and variant tensors sink whole into GeOps.

Each model trains in Sessions (the route a migrated script takes) from the same variables on the
same batches: plain, placement+partition (full sink and mix_compile_mode) and allow_mix_precision.
benchmarks/bench_models.py runs the whole sweep.
"""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf.rewriter_config_pb2 import RewriterConfig

import npu_sim_bridge
from npu_sim_bridge.testing import models, sweep, zoo

v1 = tf.compat.v1


def _assert_sinks_whole(row: sweep.SweepRow, loss_gap: bool = True):
    assert row.heavy_share >= 0.99, row.heavy_on_host[:5]
    assert row.geops_full == 1
    assert row.geops_mix <= 1 + row.host_crossings
    assert row.bit_identical, row.losses                     # placement+partition change no float32 bit
    if loss_gap:
        assert row.geops_mixed_precision == 1                # Casts break no cond, frame or segment
        assert row.white_fp16 == row.white_total > 0         # every white op runs in float16
        assert row.loss_gap < 0.02, row.losses


@pytest.mark.parametrize("name", ["tf1_batchnorm_cnn", "keras_cnn", "user_cond_mlp", "user_while_mlp", "lstm_v1"])
def test_model_with_control_flow_sinks_into_one_geop(name):
    row = sweep.measure(name, zoo.sweep_builders(applications=())[name])
    _assert_sinks_whole(row)
    # The float32 floor run trained on the batches rounded to float16: a real, small perturbation.
    assert len(row.histories["fp32_in16"]) == len(row.histories["plain"]) == 4
    assert 0 < row.fp32_floor_max < 0.02, row.histories


def test_keras_cnn_sinks_whole_with_grapplers_remapper_on():
    # A hand-built ConfigProto leaves the remapper on: it fuses Conv2D+BiasAdd before NpuOptimizer runs.
    row = sweep.measure("keras_cnn", zoo.keras_cnn, remapping=True, runs=("plain", "pp_full", "pp_mix"))
    _assert_sinks_whole(row, loss_gap=False)


def test_keras_mobilenet_v2_sinks_into_one_geop():
    # MobileNetV2(alpha=0.35) at 32x32: 100 learning-phase batch-norm conds and their gradients.
    row = sweep.measure("MobileNetV2", zoo.sweep_builders(applications=("MobileNetV2",))["MobileNetV2"],
                        steps=1, runs=("plain", "pp_full"))
    assert row.heavy_total > 300
    assert row.heavy_share == 1.0 and row.geops_full == 1 and row.bit_identical


# ---------------------------------------------------------------- a host op between forward and backward
def _bn_cnn_with_host_op():
    """A TF1 batch-norm CNN whose logits pass through a py_func: forward and gradient are two segments."""
    with zoo.tf1_graph_mode(), models._building(seed=0) as graph:  # seeded, so every build is the same
        images = v1.placeholder(tf.float32, [4, 8, 8, 3], name="images")
        training = v1.placeholder(tf.bool, [], name="is_training")
        x = v1.layers.conv2d(images, 4, 3, padding="same", use_bias=False)
        x = tf.nn.relu(v1.layers.batch_normalization(x, training=training))
        x = tf.reduce_mean(x, axis=[1, 2])
        clipped = v1.numpy_function(lambda v: np.clip(v, -5, 5).astype(np.float32), [x], tf.float32)
        clipped.set_shape(x.shape)
        x = x + tf.stop_gradient(clipped - x)
        loss = tf.reduce_mean(tf.square(v1.layers.dense(x, 2) - 1.0), name="loss")
        with tf.control_dependencies(v1.get_collection(v1.GraphKeys.UPDATE_OPS)):
            train = v1.train.GradientDescentOptimizer(0.1).minimize(loss, name="train")
        init = v1.global_variables_initializer()
    return graph, images, training, loss, train, init


def _train(config, phase):
    graph, images, training, loss, train, init = _bn_cnn_with_host_op()
    data = np.random.default_rng(1).random((4, 8, 8, 3), dtype=np.float32)
    with v1.Session(graph=graph, config=config) as sess:
        sess.run(init)
        return [sess.run([loss, train], {images: data, training: phase})[0] for _ in range(3)]


@pytest.mark.parametrize("remapping", [False, True])
def test_batch_norm_conds_cut_by_a_host_op_cross_live_and_train_the_same(npu_config, remapping):
    def config(passes):
        made = npu_config(mix_compile_mode=True, sim_passes=passes)
        if not remapping:
            made.graph_options.rewrite_options.remapping = RewriterConfig.OFF
        return made

    for phase in (True, False):
        npu_sim_bridge.clear_reports()
        assert _train(config("placement,partition"), phase) == _train(config("none"), phase)
    report = max((r for r in npu_sim_bridge.recent_reports() if r.item_id == "tf_graph"),
                 key=lambda r: r.nodes_before)
    partition = next(p for p in report.passes if p.name == "partition")
    assert partition.stats["geops"] == 2 and partition.stats["cond_bridges"] > 0
    heavy = [d for d in report.nodes.values() if d.op in ("Conv2D", "FusedBatchNormV3", "FusedBatchNormGradV3")]
    assert heavy and all(d.placement == "device" for d in heavy)


# ---------------------------------------------------------------- variant tensors
def test_optional_from_a_functional_cond_crosses_to_its_gradient_in_another_geop():
    # Control flow v2: the forward If hands its intermediates to the gradient If as Optionals. A
    # py_func between them puts the two Ifs in different GeOps; the variant passes as a function argument.
    was_v2 = v1.control_flow_v2_enabled()
    v1.enable_control_flow_v2()
    try:
        graph = tf.Graph()
        with graph.as_default():
            x = v1.placeholder(tf.float32, [4, 3], name="x")
            flag = v1.placeholder(tf.bool, [], name="flag")
            w = v1.get_variable("w", [3, 3], initializer=v1.constant_initializer(0.5), use_resource=True)
            h = tf.cond(flag, lambda: tf.tanh(tf.matmul(x, w)), lambda: tf.sin(tf.matmul(x, w)))
            doubled = v1.numpy_function(lambda v: (v * 2).astype(np.float32), [h], tf.float32)
            doubled.set_shape(h.shape)
            loss = tf.reduce_sum(tf.square(h + tf.stop_gradient(doubled - h)), name="loss")
            tf.identity(tf.gradients(loss, w)[0], name="grad")
    finally:
        if not was_v2:
            v1.disable_control_flow_v2()
    fetches = ["grad", "loss", w.initializer.name]
    graph_def, report = npu_sim_bridge.rewrite(graph, {"mix_compile_mode": True, "sim_passes": "placement,partition"},
                                               fetches=fetches)
    ifs = [d for d in report.nodes.values() if d.op in ("If", "StatelessIf")]
    assert len(ifs) == 2 and all(d.placement == "device" for d in ifs), [(d.name, d.reason) for d in ifs]
    assert len({d.geop for d in ifs}) == 2
    rewritten = tf.Graph()
    with rewritten.as_default():
        tf.graph_util.import_graph_def(graph_def, name="")
    for value in (True, False):
        feed = {"x:0": np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3), "flag:0": value}
        results = []
        for run_graph in (graph, rewritten):
            with v1.Session(graph=run_graph) as sess:
                sess.run(w.initializer.name)
                results.append(sess.run(["grad:0", "loss:0"], feed))
        np.testing.assert_array_equal(results[0][0], results[1][0])
        assert results[0][1] == results[1][1]


# ---------------------------------------------------------------- reasons
def test_host_reasons_are_values_in_the_json_report(npu_config):
    with zoo.tf1_graph_mode():
        graph = tf.Graph()
        with graph.as_default():
            x = v1.placeholder(tf.float32, [4], name="x")
            flag = v1.placeholder(tf.bool, [], name="flag")
            host = lambda: v1.numpy_function(lambda v: (v + 1).astype(np.float32), [tf.sin(x)], tf.float32)  # noqa: E731
            y = tf.identity(tf.cond(flag, host, lambda: tf.cos(x)) * 2.0, name="y")
    config = npu_config(mix_compile_mode=True, sim_passes="placement,partition")
    with v1.Session(graph=graph, config=config) as sess:
        sess.run(y, {x: np.ones(4, np.float32), flag: True})
    report = max((r for r in npu_sim_bridge.recent_reports() if r.item_id == "tf_graph"),
                 key=lambda r: r.nodes_before)
    merge = report.nodes["cond/Merge"]
    reason = merge.host_reason()
    assert reason.code == "host.cond_region" and reason.get("predicate") == "flag"
    assert reason.get("cause").code == "host.py_func"
    node = next(n for n in report.to_dict()["nodes"] if n["name"] == "cond/Merge")
    assert node["reasons"][0]["code"] == "host.cond_region"
    assert node["reasons"][0]["cause"] == {"code": "host.py_func", "op": reason.get("cause").get("op")}
    assert node["reason"].startswith("host: v1 cond region of predicate flag holds host op ")


# ---------------------------------------------------------------- the user's route: a TF1 script under npu-sim run
TF1_SCRIPT = '''
import os
import subprocess
import sys

import numpy as np
import tensorflow as tf
from npu_bridge.npu_init import *
import npu_sim_bridge

tf.set_random_seed(0)
images = tf.placeholder(tf.float32, [8, 16, 16, 3])
labels = tf.placeholder(tf.int32, [8])
is_training = tf.placeholder(tf.bool, [])
x = images
for width in (8, 16):
    x = tf.layers.conv2d(x, width, 3, padding="same", use_bias=False)
    x = tf.nn.relu(tf.layers.batch_normalization(x, training=is_training))
    x = tf.layers.max_pooling2d(x, 2, 2)
x = tf.layers.dense(tf.layers.flatten(x), 32, activation=tf.nn.relu)
x = tf.cond(is_training, lambda: tf.nn.dropout(x, keep_prob=0.75), lambda: x)
loss = tf.losses.sparse_softmax_cross_entropy(labels, tf.layers.dense(x, 10))
with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
    train_op = tf.train.MomentumOptimizer(0.01, 0.9).minimize(loss)
config = npu_config_proto()
custom_op = config.graph_options.rewrite_options.custom_optimizers[0]
custom_op.parameter_map["precision_mode"].s = b"allow_mix_precision"
rng = np.random.default_rng(0)
with tf.Session(config=config) as sess:
    sess.run(tf.global_variables_initializer())
    for _ in range(3):
        sess.run(train_op, {images: rng.random((8, 16, 16, 3)), labels: rng.integers(0, 10, 8), is_training: True})
report = max((r for r in npu_sim_bridge.recent_reports() if r.item_id == "tf_graph" and not r.rerun),
             key=lambda r: r.nodes_before)
heavy = [d for d in report.nodes.values() if d.op in ("Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter",
                                                      "MatMul", "FusedBatchNormV3", "FusedBatchNormGradV3")]
placed = [d for d in heavy if d.placement]  # the MatMuls the fusion pass fused count as their fused node
print("SWEEP heavy", sum(d.placement == "device" for d in placed), len(placed), len(heavy),
      "geops", len(report.summary["geops"]), "fp16", sum(d.dtype_after == "float16" for d in placed))
'''


def test_tf1_batch_norm_script_sinks_whole_under_npu_sim_run(tmp_path):
    script = tmp_path / "bn_cnn.py"
    script.write_text(TF1_SCRIPT)
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
               PYTHONPATH=os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")])))
    result = subprocess.run([sys.executable, "-m", "npu_sim_bridge", "run", str(script)], capture_output=True,
                            text=True, env=env, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-4000:]
    line = next(line for line in result.stdout.splitlines() if line.startswith("SWEEP"))
    _, _, on_device, placed, total, _, geops, _, fp16 = line.split()
    # 2 convolutions, 2 dense layers, 4 batch norms (training and inference branch) and their gradients
    assert int(total) >= 16 and int(placed) >= int(total) - 2
    assert on_device == placed and geops == "1" and int(fp16) > 0
