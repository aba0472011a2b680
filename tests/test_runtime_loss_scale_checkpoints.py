"""Checkpoints of every wrapped optimizer restore into the plain optimizer in plain TensorFlow, and back, bit-equal.

A model trained a few steps with NPULossScaleOptimizer(AdamOptimizer), NPUDistributedOptimizer or
npu_distributed_optimizer_wrapper is saved; the same model with plain Adam restores it with a default
Saver (every key found, the loss scale's variables are extra keys), saves it again, and the wrapped
model restores that: every variable bit-equal along the way, and a further step of each agrees.
"""

import numpy as np
import pytest
import tensorflow as tf

from npu_sim_bridge.runtime import loss_scale
from npu_sim_bridge.runtime.hccl import optimizers
from npu_sim_bridge.testing.models import _control_flow

_v1 = tf.compat.v1
FEED = np.random.default_rng(3).normal(size=(8, 4)).astype(np.float32)


def _wrap(kind, adam):
    if kind == "plain":
        return adam
    if kind == "loss_scale_exponential":
        manager = loss_scale.ExponentialUpdateLossScaleManager(2.0 ** 10, 2, decr_every_n_nan_or_inf=1)
        return loss_scale.NPULossScaleOptimizer(adam, manager)
    if kind == "loss_scale_fixed":
        return loss_scale.NPULossScaleOptimizer(adam, loss_scale.FixedLossScaleManager(128.0))
    if kind == "distributed":
        return optimizers.NPUDistributedOptimizer(adam)
    if kind == "distributed_wrapper":
        return optimizers.npu_distributed_optimizer_wrapper(adam)
    raise AssertionError(kind)


def _model(kind, control_flow):
    graph = tf.Graph()
    with graph.as_default(), _control_flow(control_flow):
        _v1.set_random_seed(0)
        x = _v1.placeholder(tf.float32, [None, 4], name="x")
        hidden = _v1.layers.dense(x, 8, activation=tf.nn.relu, name="hidden")
        loss = tf.reduce_mean(tf.square(_v1.layers.dense(hidden, 1, name="out")), name="loss")
        step = _v1.train.get_or_create_global_step()
        train = _wrap(kind, _v1.train.AdamOptimizer(0.01)).minimize(loss, global_step=step)
        init = _v1.global_variables_initializer()
    return graph, x, train, init


def _values(sess):
    return {v.op.name: sess.run(v) for v in sess.graph.get_collection(_v1.GraphKeys.GLOBAL_VARIABLES)}


def _same(a, b, names):
    for name in names:
        assert np.array_equal(a[name], b[name]), f"{name}: {a[name]} != {b[name]}"


@pytest.mark.parametrize("control_flow", ["v1", "v2"])  # v1: as TF1 scripts under npu-sim run build the cond
@pytest.mark.parametrize("kind", ["loss_scale_exponential", "loss_scale_fixed", "distributed", "distributed_wrapper"])
def test_a_wrapped_optimizers_checkpoint_restores_into_plain_adam_and_back(kind, control_flow, tmp_path):
    graph, x, train, init = _model(kind, control_flow)
    with _v1.Session(graph=graph) as sess:
        sess.run(init)
        for _ in range(3):
            sess.run(train, {x: FEED})
        wrapped = _values(sess)
        wrapped_path = _v1.train.Saver().save(sess, str(tmp_path / "wrapped" / "ckpt"))

    plain_graph, plain_x, plain_train, _ = _model("plain", control_flow)
    with _v1.Session(graph=plain_graph) as sess:
        _v1.train.Saver().restore(sess, wrapped_path)  # a key it lacks would raise NotFoundError
        plain = _values(sess)
        assert {"beta1_power", "beta2_power"} <= set(plain)
        extra = set(wrapped) - set(plain)
        assert extra <= {"loss_scale", "good_steps", "bad_steps"}, f"keys the plain model lacks: {extra}"
        _same(plain, wrapped, plain)
        plain_path = _v1.train.Saver().save(sess, str(tmp_path / "plain" / "ckpt"))
        sess.run(plain_train, {plain_x: FEED})
        plain_next = _values(sess)

    graph, x, train, init = _model(kind, control_flow)
    with _v1.Session(graph=graph) as sess:
        sess.run(init)  # the loss scale's variables start afresh: the plain checkpoint has none
        keys = {name for name, _ in _v1.train.list_variables(plain_path)}
        restored = [v for v in graph.get_collection(_v1.GraphKeys.GLOBAL_VARIABLES) if v.op.name in keys]
        _v1.train.Saver(restored).restore(sess, plain_path)
        back = _values(sess)
        _same(back, plain, plain)
        sess.run(train, {x: FEED})  # the scales are powers of two: scaling is exact, the step the same
        _same(_values(sess), plain_next, plain_next)
