"""Batch norm under allow_mix_precision: x and y drop to float16, the statistics stay float32.

FusedBatchNormV3's U outputs (batch mean and variance, reserve spaces) and FusedBatchNormGradV3's
scale and offset gradients are float32 on the NPU whatever the op's T is. Their consumers (the
moving-average updates, the gradient's reserve-space inputs) must follow that float32, not the op's
float16 decision.
"""

import numpy as np
import tensorflow as tf

import npu_sim_bridge

_v1 = tf.compat.v1
MIXED = {"precision_mode": "allow_mix_precision", "sim_passes": "precision", "sim_fp16_rounding": "cast"}


def batchnorm_training_graph():
    """conv -> FusedBatchNormV3 (training) with moving-average updates -> loss, and its gradient."""
    graph = tf.Graph()
    with graph.as_default():
        _v1.set_random_seed(0)
        images = _v1.placeholder(tf.float32, [4, 8, 8, 3], name="images")
        x = _v1.layers.conv2d(images, 8, 3, padding="same", use_bias=False, name="conv")
        x = _v1.layers.batch_normalization(x, training=True, fused=True, name="bn")
        loss = tf.identity(tf.reduce_mean(tf.nn.relu(x)), name="loss")
        updates = _v1.get_collection(_v1.GraphKeys.UPDATE_OPS)
        with tf.control_dependencies(updates):
            train = _v1.train.GradientDescentOptimizer(0.1).minimize(loss, name="train")
        init = _v1.global_variables_initializer()
    return graph, images, train, init


def _node(graph_def, op):
    return next(n for n in graph_def.node if n.op == op)


def test_batch_norm_statistics_and_their_consumers_stay_float32():
    graph, _, train, _ = batchnorm_training_graph()
    graph_def, report = npu_sim_bridge.rewrite(graph, MIXED, fetches=["loss", train.name])
    forward, backward = _node(graph_def, "FusedBatchNormV3"), _node(graph_def, "FusedBatchNormGradV3")
    assert report.nodes[forward.name].dtype_after == "float16"
    assert report.nodes[backward.name].dtype_after == "float16", report.nodes[backward.name].reason
    inserted = [n for n in graph_def.node if "_npu_sim_inserted" in n.attr]
    for node in inserted:  # only y (and the gradient's x_backprop) are rounded, never a U output
        source = node.input[0]
        if source.split(":")[0] in (forward.name, backward.name):
            assert ":" not in source or source.endswith(":0"), f"{node.name} rounds {source}"
    moving = [d for d in report.nodes.values() if "AssignMovingAvg" in d.name and d.op in ("Sub", "Mul")]
    assert moving and all(d.dtype_after == "float32" for d in moving), [(d.name, d.reason) for d in moving]


def test_moving_averages_are_updated_in_float32_in_a_session(npu_config):
    graph, images, train, init = batchnorm_training_graph()
    config = npu_config(precision_mode="allow_mix_precision")
    feed = {images: np.random.default_rng(0).random([4, 8, 8, 3], dtype=np.float32)}
    with _v1.Session(graph=graph, config=config) as sess:
        sess.run(init)
        sess.run(train, feed)
        with graph.as_default():
            names = ("bn/moving_mean", "bn/moving_variance")
            variables = [v for v in _v1.global_variables() if v.op.name in names]
        values = sess.run(variables)
    assert len(values) == 2
    for variable, value in zip(variables, values):
        # momentum 0.99 from 0 and 1: a float32 update gives values float16 cannot hold; a float16
        # moving-average arithmetic gives only float16 values
        assert np.any(value.astype(np.float16).astype(np.float32) != value), variable.op.name
