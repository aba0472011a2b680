"""`loss_scale:0` and the overflow status, fetched by name as migrated hooks do, are a float and a bool."""

import numpy as np
import pytest
import tensorflow as tf

from npu_sim_bridge import npu_init

v1 = tf.compat.v1

MANAGERS = {
    "fixed": lambda: npu_init.FixedLossScaleManager(2 ** 10),
    "exponential": lambda: npu_init.ExponentialUpdateLossScaleManager(2 ** 10, incr_every_n_steps=100,
                                                                      decr_every_n_nan_or_inf=1, decr_ratio=0.5),
}
STATUS = "apply_grads/overflow_status_reduce_all:0"  # BERT-style scripts apply inside name_scope("apply_grads")


class FetchByNameHook(v1.train.SessionRunHook):
    """What the migrated scripts' _LogSessionRunHook does: fetch the status and the scale by name, print them."""

    def __init__(self, status_name):
        self.status_name = status_name
        self.seen = []

    def before_run(self, run_context):
        return v1.train.SessionRunArgs(fetches=[self.status_name, "loss_scale:0"])

    def after_run(self, run_context, run_values):
        finite, scale = run_values.results
        self.seen.append((finite, scale, "loss scale value=%d" % scale, float(scale)))


def _check_seen(seen, finite_steps):
    assert [bool(finite) for finite, *_ in seen] == finite_steps
    for finite, scale, _, as_float in seen:
        assert isinstance(finite, (bool, np.bool_)) and isinstance(scale, np.float32) and as_float == scale


def _train_graph(manager_kind, is_distributed=False, scope="apply_grads"):
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [None, 2], name="x")
        w = v1.get_variable("w", [2, 1], initializer=v1.ones_initializer())
        loss = tf.reduce_sum(tf.matmul(x, w))
        optimizer = npu_init.NPULossScaleOptimizer(v1.train.GradientDescentOptimizer(0.1), MANAGERS[manager_kind](),
                                                   is_distributed=is_distributed)
        global_step = v1.train.get_or_create_global_step()
        if scope:
            grads = optimizer.compute_gradients(loss)
            with tf.name_scope(scope):
                train_op = optimizer.apply_gradients(grads, global_step=global_step)
        else:
            train_op = optimizer.minimize(loss, global_step=global_step)
        init = v1.global_variables_initializer()
    return graph, x, train_op, init


@pytest.mark.parametrize("manager_kind", sorted(MANAGERS))
def test_session_run_and_a_hook_fetch_the_scale_and_status_by_name(manager_kind):
    graph, x, train_op, init = _train_graph(manager_kind)
    scale_tensor = graph.get_tensor_by_name("loss_scale:0")
    assert scale_tensor.dtype.base_dtype == tf.float32 and scale_tensor.shape.rank == 0
    assert graph.get_tensor_by_name(STATUS).dtype == tf.bool
    finite_feed, overflow_feed = {x: [[1.0, 2.0]]}, {x: [[np.inf, 2.0]]}
    with v1.Session(graph=graph, config=npu_init.npu_config_proto()) as sess:
        sess.run(init)
        _, finite, scale = sess.run([train_op, STATUS, "loss_scale:0"], finite_feed)
        assert finite is np.True_ and float(scale) == 2 ** 10
        _, finite = sess.run([train_op, STATUS], overflow_feed)
        assert finite is np.False_
        expected = 2 ** 9 if manager_kind == "exponential" else 2 ** 10  # halved after one overflow step
        assert float(sess.run("loss_scale:0")) == expected
    hook = FetchByNameHook(STATUS)
    with graph.as_default(), v1.train.MonitoredSession(
            session_creator=v1.train.ChiefSessionCreator(config=npu_init.npu_config_proto()), hooks=[hook]) as sess:
        for feed in (finite_feed, overflow_feed, finite_feed):
            sess.run(train_op, feed)
    _check_seen(hook.seen, [True, False, True])


def test_minimize_puts_the_status_at_the_callers_scope_and_distributed_keeps_the_name():
    graph, *_ = _train_graph("exponential", scope=None)  # minimize(): `overflow_status_reduce_all:0`
    assert graph.get_tensor_by_name("overflow_status_reduce_all:0").dtype == tf.bool
    graph, x, train_op, init = _train_graph("fixed", is_distributed=True)  # one rank: the all-reduce is itself
    with v1.Session(graph=graph) as sess:
        sess.run(init)
        assert sess.run([train_op, STATUS], {x: [[np.nan, 1.0]]})[1] is np.False_


@pytest.mark.parametrize("manager_kind", sorted(MANAGERS))
def test_estimator_hook_fetches_the_scale_and_status_by_name(manager_kind, tmp_path):
    rng = np.random.RandomState(0)
    x = rng.rand(12, 3).astype(np.float32)
    x[4] = 1e19  # the second batch's loss, squared and scaled, overflows float32 whatever the weights

    def model_fn(features, labels, mode):
        loss = v1.losses.mean_squared_error(labels, v1.layers.dense(
            features, 1, kernel_initializer=v1.zeros_initializer(), name="dense"))
        optimizer = npu_init.NPULossScaleOptimizer(v1.train.GradientDescentOptimizer(0.01), MANAGERS[manager_kind]())
        grads = optimizer.compute_gradients(loss)
        with tf.name_scope("apply_grads"):
            train_op = optimizer.apply_gradients(grads, global_step=v1.train.get_or_create_global_step())
        return npu_init.NPUEstimatorSpec(mode, loss=loss, train_op=train_op)

    hook = FetchByNameHook(STATUS)
    estimator = npu_init.NPUEstimator(model_fn, config=npu_init.NPURunConfig(model_dir=str(tmp_path),
                                                                             precision_mode="force_fp32"))
    estimator.train(lambda: v1.data.Dataset.from_tensor_slices((x, x.sum(axis=1, keepdims=True))).batch(4),
                    hooks=[hook])
    _check_seen(hook.seen, [True, False, True])
    scales = [float(scale) for _, scale, *_ in hook.seen]
    # A reference variable fetched in the step that assigns it may read either side of the assignment (as on
    # TensorFlow 1.15), so only the steps around the overflow step are pinned: before it and after it.
    assert scales[0] == 2.0 ** 10
    assert scales[-1] == (2.0 ** 10 if manager_kind == "fixed" else 2.0 ** 9)  # halved by the overflow step
