"""The CPU layout under Estimator, Keras with a TF1 session, a config asking Grappler's conversion, no oneDNN."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf.rewriter_config_pb2 import RewriterConfig

import npu_sim_bridge
from npu_sim_bridge.testing import channels_first

from conftest import npu_config

_v1 = tf.compat.v1
STEPS = 3
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _laid_out_ops():
    """Op types of the nodes the CPU layout laid out, over this process's recent training-graph reports."""
    return {d.op for r in npu_sim_bridge.recent_reports() if not r.rerun
            for d in r.nodes.values() if any(reason.code.startswith("layout.cpu") for reason in d.reasons)}


def _batches(data_format, steps=STEPS):
    return [channels_first.batch(np.random.default_rng(step), data_format) for step in range(steps)]


# --------------------------------------------------------------------------------------------- Estimator


def _estimator_run(data_format, mix, model_dir):
    initial = channels_first.initial_values()

    def model_fn(features, labels, mode):
        logits = channels_first.logits(features["images"], features["volumes"], data_format, initial)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
        with tf.control_dependencies(_v1.get_collection(_v1.GraphKeys.UPDATE_OPS)):
            train_op = _v1.train.GradientDescentOptimizer(0.05).minimize(
                loss, global_step=_v1.train.get_or_create_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    batches = _batches(data_format)

    def input_fn():
        images, volumes, labels = (np.stack(part) for part in zip(*batches))
        dataset = tf.data.Dataset.from_tensor_slices(({"images": images, "volumes": volumes}, labels))
        return dataset

    config = tf.estimator.RunConfig(model_dir=str(model_dir), session_config=npu_config(
        precision_mode="force_fp32", mix_compile_mode=mix), save_summary_steps=None, log_step_count_steps=None)
    estimator = tf.estimator.Estimator(model_fn, config=config)
    estimator.train(input_fn, steps=STEPS)
    return {name: estimator.get_variable_value(name) for name in estimator.get_variable_names()
            if not name.startswith("global_step")}


@pytest.mark.parametrize("mix", [False, True], ids=["full_sink", "mix_compile_mode"])
def test_estimator_trains_channels_first_as_channels_last(tmp_path, mix):
    last = _estimator_run("channels_last", mix, tmp_path / "last")
    npu_sim_bridge.clear_reports()
    first = _estimator_run("channels_first", mix, tmp_path / "first")
    assert {"Conv3DBackpropInputV2", "MaxPoolGradV2", "DepthwiseConv2dNativeBackpropFilter"} <= _laid_out_ops()
    assert first.keys() == last.keys() and "bn2d/moving_mean" in first
    for name, value in first.items():
        assert np.allclose(value, last[name], rtol=0, atol=1e-5), name
    initial = channels_first.initial_values()
    assert not np.allclose(first["conv3d1/kernel"], initial["conv3d1/kernel"])  # it trained


# ------------------------------------------------------------------------------------------------ Keras


def _keras_run(data_format, mix):
    graph = tf.Graph()
    config = npu_config(precision_mode="force_fp32", mix_compile_mode=mix)
    config.graph_options.rewrite_options.remapping = RewriterConfig.OFF
    session = _v1.Session(graph=graph, config=config)
    try:
        with graph.as_default():
            _v1.keras.backend.set_session(session)
            model = channels_first.keras_model(data_format)
            model.compile(optimizer=_v1.train.GradientDescentOptimizer(0.05),
                          loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
            losses = [float(model.train_on_batch([images, volumes], labels))
                      for images, volumes, labels in _batches(data_format, STEPS + 1)]
            return losses, model.get_weights()
    finally:
        _v1.keras.backend.clear_session()  # outside the graph's block: it resets the default graph
        session.close()


@pytest.mark.parametrize("mix", [False, True], ids=["full_sink", "mix_compile_mode"])
def test_keras_channels_first_trains_as_channels_last(mix):
    last_losses, last_weights = _keras_run("channels_last", mix)
    npu_sim_bridge.clear_reports()
    first_losses, first_weights = _keras_run("channels_first", mix)
    # Keras transposes channels_first depthwise convolutions and 3D pools to channels-last itself when
    # no GPU is visible; its Conv2D/Conv3D, 2D pools and their gradients run NCHW/NCDHW.
    assert {"Conv3D", "Conv3DBackpropInputV2", "Conv3DBackpropFilterV2", "Conv2DBackpropInput", "MaxPoolGrad",
            "AvgPoolGrad"} <= _laid_out_ops()
    assert np.allclose(first_losses, last_losses, rtol=0, atol=1e-5), (first_losses, last_losses)
    assert len(first_weights) == len(last_weights)
    for first, last in zip(first_weights, last_weights):
        assert np.allclose(first, last, rtol=0, atol=1e-5)
    assert first_losses[-1] != first_losses[0]


# ------------------------------------------------------------------------------- the rest of the config


def test_grappler_cpu_layout_conversion_in_the_config_changes_no_decision():
    """A config asking Grappler's NCHW_TO_NHWC: NpuOptimizer still decides on the graph as built."""
    def report_of(convert):
        npu_sim_bridge.clear_reports()
        model = channels_first.cnn("channels_first")
        config = npu_config(precision_mode="allow_mix_precision")
        if convert:
            config.graph_options.rewrite_options.cpu_layout_conversion = RewriterConfig.NCHW_TO_NHWC
        with _v1.Session(graph=model.graph, config=config) as sess:
            sess.run(model.init_op)
            sess.run(model.train_op, model.feed(np.random.default_rng(0)))
        assert config.graph_options.rewrite_options.cpu_layout_conversion == (
            RewriterConfig.NCHW_TO_NHWC if convert else RewriterConfig.NO_CONVERSION_ON_CPU)  # the user's proto
        report = max((r for r in npu_sim_bridge.recent_reports() if r.item_id == "tf_graph"),
                     key=lambda r: r.nodes_before)
        return {name: (d.op, d.placement, d.dtype_after) for name, d in report.nodes.items()}

    assert report_of(convert=True) == report_of(convert=False)


_NO_ONEDNN_SCRIPT = textwrap.dedent("""
    import json, numpy as np, tensorflow as tf
    import npu_sim_bridge
    from npu_sim_bridge.testing import channels_first
    tf.compat.v1.disable_eager_execution()
    out = {}
    for name in ("plain", "npu"):
        graph = tf.Graph()
        with graph.as_default():
            config = tf.compat.v1.ConfigProto()
            if name == "npu":
                config.graph_options.rewrite_options.custom_optimizers.add().name = "NpuOptimizer"
            tf.compat.v1.keras.backend.set_session(tf.compat.v1.Session(graph=graph, config=config))
            model = channels_first.keras_model("channels_first")
            model.compile(optimizer="sgd", loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
            images, volumes, labels = channels_first.batch(np.random.default_rng(0), "channels_first")
            try:
                out[name] = float(model.train_on_batch([images, volumes], labels))
            except tf.errors.OpError as err:
                out[name] = err.message.splitlines()[0]
        tf.compat.v1.keras.backend.clear_session()
    print("RESULT " + json.dumps(out))
""")


def test_keras_channels_first_trains_without_onednn():
    """Without oneDNN (CPUs without AVX-512 VNNI, or TF_ENABLE_ONEDNN_OPTS=0) plain TensorFlow has no
    NCHW kernel for the convolutions and pools at all: the plain step fails, the NpuOptimizer one runs."""
    env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS="0", TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run([sys.executable, "-c", _NO_ONEDNN_SCRIPT], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    result = json.loads(lines[-1][len("RESULT "):])
    assert isinstance(result["plain"], str) and "only supports" in result["plain"], result
    assert isinstance(result["npu"], float) and np.isfinite(result["npu"]), result
