"""Loss scaling: overflow steps are skipped, the managers follow npu_bridge's rules, in Session, Estimator and Keras."""

import numpy as np
import pytest
import tensorflow as tf

import npu_sim_bridge
from npu_sim_bridge import npu_init

v1 = tf.compat.v1


def _reference_schedule(finite_steps, scale, incr_every, decr_every, incr_ratio, decr_ratio):
    """npu_bridge's ExponentialUpdateLossScaleManager rules, step by step in plain Python."""
    good = bad = 0
    states = []
    for finite in finite_steps:
        if finite:
            if good + 1 >= incr_every:
                scale = scale * incr_ratio if np.isfinite(np.float32(scale * incr_ratio)) else scale
                good = bad = 0
            else:
                good += 1
        elif bad + 1 >= decr_every:
            scale = max(1.0, scale * decr_ratio)
            good = bad = 0
        else:
            bad += 1
            good = 0
        states.append((scale, good, bad))
    return states


def _linear_training(optimizer_fn):
    """A graph with x -> w (2x1), loss sum(x @ w) and a train op from optimizer_fn(); returns its pieces."""
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [None, 2], name="x")
        w = v1.get_variable("w", [2, 1], initializer=v1.ones_initializer())
        loss = tf.reduce_sum(tf.matmul(x, w), name="loss")
        global_step = v1.train.get_or_create_global_step()
        optimizer = optimizer_fn()
        train_op = optimizer.minimize(loss, global_step=global_step)
        init = v1.global_variables_initializer()
    return graph, x, w, global_step, optimizer, train_op, init


def test_overflow_steps_change_nothing_and_the_scale_follows_the_schedule():
    manager = npu_init.ExponentialUpdateLossScaleManager(8.0, incr_every_n_steps=3, decr_every_n_nan_or_inf=2,
                                                         incr_ratio=2, decr_ratio=0.5)
    graph, x, w, global_step, optimizer, train_op, init = _linear_training(
        lambda: npu_init.NPULossScaleOptimizer(v1.train.MomentumOptimizer(0.1, 0.9), manager))
    with graph.as_default():
        momentum = optimizer.get_slot(w, "momentum")
        scale_var, good_var, bad_var = manager.variables
    assert all(not v.trainable for v in (scale_var, good_var, bad_var))
    assert {v.name for v in (scale_var, good_var, bad_var)} <= {v.name for v in graph.get_collection("variables")}

    finite_steps = [True, False, True, False, False, True, True, True, True, False]
    expected = _reference_schedule(finite_steps, 8.0, 3, 2, 2, 0.5)
    assert {state[0] for state in expected} == {4.0, 8.0}  # the schedule both lowers and raises the scale
    with v1.Session(graph=graph, config=npu_init.npu_config_proto()) as sess:
        sess.run(init)
        applied = 0
        for finite, (scale, good, bad) in zip(finite_steps, expected):
            before = sess.run([w, momentum])
            sess.run(train_op, {x: [[1.0, 2.0]] if finite else [[np.inf, 2.0]]})
            after = sess.run([w, momentum])
            applied += finite
            if finite:
                assert not np.array_equal(before[0], after[0])
            else:
                np.testing.assert_array_equal(before[0], after[0])  # variables unchanged
                np.testing.assert_array_equal(before[1], after[1])  # optimizer slots unchanged
            assert sess.run(global_step) == applied
            assert sess.run([scale_var, good_var, bad_var]) == [scale, good, bad]
    assert npu_sim_bridge.recent_reports()  # the training graph went through the NpuOptimizer


def test_scale_never_drops_below_one():
    manager = npu_init.ExponentialUpdateLossScaleManager(1.5, incr_every_n_steps=100, decr_every_n_nan_or_inf=1,
                                                         decr_ratio=0.5)
    graph, x, _, _, _, train_op, init = _linear_training(
        lambda: npu_init.NPULossScaleOptimizer(v1.train.GradientDescentOptimizer(0.1), manager))
    with v1.Session(graph=graph) as sess:
        sess.run(init)
        for _ in range(2):
            sess.run(train_op, {x: [[np.nan, 1.0]]})
        with graph.as_default():
            assert sess.run(manager.get_loss_scale()) == 1.0


def test_the_loss_is_scaled_before_differentiation():
    # 1e35 * 1e4 overflows float32: the scaled step is skipped where a plain optimizer would apply.
    manager = npu_init.FixedLossScaleManager(1e4)
    graph, x, w, global_step, _, train_op, init = _linear_training(
        lambda: npu_init.NPULossScaleOptimizer(v1.train.GradientDescentOptimizer(1e-36), manager))
    with v1.Session(graph=graph) as sess:
        sess.run(init)
        sess.run(train_op, {x: [[1e35, 1e35]]})
        assert sess.run(global_step) == 0
        sess.run(train_op, {x: [[1.0, 2.0]]})
        assert sess.run(global_step) == 1
    plain = _linear_training(lambda: v1.train.GradientDescentOptimizer(0.1))
    scaled = _linear_training(lambda: npu_init.NPULossScaleOptimizer(v1.train.GradientDescentOptimizer(0.1),
                                                                     npu_init.FixedLossScaleManager(1024)))
    results = []
    for graph, x, w, _, _, train_op, init in (plain, scaled):
        with v1.Session(graph=graph) as sess:
            sess.run(init)
            sess.run(train_op, {x: [[0.5, -3.0]]})
            results.append(sess.run(w))
    np.testing.assert_allclose(results[0], results[1], rtol=1e-6)  # gradients are unscaled before applying


def test_fixed_manager_without_overflow_check_always_applies():
    for check, expected_step in ((False, 1), (True, 0)):
        manager = npu_init.FixedLossScaleManager(4, enable_overflow_check=check)
        graph, x, w, global_step, _, train_op, init = _linear_training(
            lambda: npu_init.NPULossScaleOptimizer(v1.train.GradientDescentOptimizer(0.1), manager))
        with v1.Session(graph=graph, config=npu_init.npu_config_proto()) as sess:
            sess.run(init)
            sess.run(train_op, {x: [[np.inf, 1.0]]})
            assert sess.run(global_step) == expected_step
            assert np.isfinite(sess.run(w)).all() == check
    with pytest.raises(ValueError, match="loss scale must be at least 1, got loss_scale=0.5"):
        npu_init.FixedLossScaleManager(0.5)
    with pytest.raises(ValueError, match="decr_ratio must be a number in"):
        npu_init.ExponentialUpdateLossScaleManager(2, 10, decr_ratio=1.5)
    with pytest.raises(TypeError, match="NPULossScaleOptimizer wraps a tf.compat.v1.train.Optimizer"):
        npu_init.NPULossScaleOptimizer(tf.keras.optimizers.legacy.SGD(), npu_init.FixedLossScaleManager(2))


def test_checkpoint_saved_under_the_simulator_restores_into_a_plain_graph(npu_config, tmp_path):
    def build(loss_scaling):
        graph = tf.Graph()
        with graph.as_default():
            x = v1.placeholder(tf.float32, [None, 3], name="x")
            hidden = v1.layers.dense(x, 4, activation=tf.nn.relu, name="hidden")
            loss = tf.reduce_mean(tf.square(v1.layers.dense(hidden, 1, name="out")))
            optimizer = v1.train.GradientDescentOptimizer(0.05)
            if loss_scaling:
                manager = npu_init.ExponentialUpdateLossScaleManager(2 ** 10, 2)
                optimizer = npu_init.NPULossScaleOptimizer(optimizer, manager)
            train_op = optimizer.minimize(loss, global_step=v1.train.get_or_create_global_step())
        return graph, x, train_op

    graph, x, train_op = build(loss_scaling=True)
    data = np.random.RandomState(3).rand(8, 3).astype(np.float32)
    with graph.as_default(), v1.Session(config=npu_config(precision_mode="allow_mix_precision")) as sess:
        sess.run(v1.global_variables_initializer())
        for _ in range(3):
            sess.run(train_op, {x: data})
        trained = {v.op.name: sess.run(v) for v in v1.global_variables()}
        path = v1.train.Saver().save(sess, str(tmp_path / "model.ckpt"))
    assert trained["loss_scale"] == 2 ** 11 and trained["good_steps"] == 1  # raised after 2 finite steps
    saved = dict(tf.train.list_variables(path))
    assert {"loss_scale", "good_steps", "bad_steps", "hidden/kernel", "global_step"} <= set(saved)

    plain_graph, _, _ = build(loss_scaling=False)
    with plain_graph.as_default(), v1.Session() as sess:  # plain TensorFlow: no NpuOptimizer, no loss scaling
        v1.train.Saver().restore(sess, path)
        for variable in v1.global_variables():
            np.testing.assert_array_equal(sess.run(variable), trained[variable.op.name])


def _estimator_input(poison_batch=None):
    x = np.random.RandomState(0).rand(16, 3).astype(np.float32)
    if poison_batch is not None:
        x[poison_batch * 4] = 1e18  # a finite loss (~1e35) whose scaled gradients overflow float32
    return lambda: v1.data.Dataset.from_tensor_slices((x, x.sum(axis=1, keepdims=True))).batch(4)


def test_estimator_training_with_loss_scaling_skips_overflow_steps(tmp_path):
    def model_fn(features, labels, mode):
        predictions = v1.layers.dense(features, 1, name="dense")
        loss = v1.losses.mean_squared_error(labels, predictions)
        manager = npu_init.ExponentialUpdateLossScaleManager(2 ** 12, 1000, decr_every_n_nan_or_inf=1, decr_ratio=0.5)
        optimizer = npu_init.NPULossScaleOptimizer(v1.train.GradientDescentOptimizer(0.05), manager)
        train_op = optimizer.minimize(loss, global_step=v1.train.get_or_create_global_step())
        return npu_init.NPUEstimatorSpec(mode, loss=loss, train_op=train_op)

    # force_fp32 keeps the overflow independent of which ops the precision rewrite drops to float16.
    config = npu_init.NPURunConfig(model_dir=str(tmp_path), precision_mode="force_fp32")
    estimator = npu_init.NPUEstimator(model_fn, config=config)
    estimator.train(_estimator_input(poison_batch=1))  # 4 batches, the second one overflows
    assert estimator.get_variable_value("global_step") == 3
    assert estimator.get_variable_value("loss_scale") == 2 ** 11
    assert np.isfinite(estimator.get_variable_value("dense/kernel")).all()
    assert any(r.options["precision_mode"] == "force_fp32" for r in npu_sim_bridge.recent_reports())


def _keras_data():
    rng = np.random.RandomState(5)
    x = rng.rand(64, 4).astype(np.float32)
    return x, (x @ np.array([[1.0], [-2.0], [0.5], [1.5]], np.float32))


def _keras_fit(optimizer_fn, epochs=3):
    x, y = _keras_data()
    with tf.Graph().as_default():
        optimizer = optimizer_fn()  # before the session: enable_mixed_precision reaches sessions built after it
        sess = npu_init.set_keras_session_npu_config()
        model = tf.keras.Sequential([tf.keras.layers.Dense(1, input_shape=(4,), name="out")])
        model.compile(optimizer=optimizer, loss="mse")
        history = model.fit(x, y, epochs=epochs, batch_size=16, verbose=0, shuffle=False)
        return sess, optimizer, history.history["loss"]


def test_keras_training_with_npu_loss_scale_optimizer():
    manager = npu_init.ExponentialUpdateLossScaleManager(16.0, incr_every_n_steps=4)
    sess, _, losses = _keras_fit(
        lambda: npu_init.NPULossScaleOptimizer(v1.train.GradientDescentOptimizer(0.1), manager))
    try:
        with sess.graph.as_default():
            assert sess.run(manager.get_loss_scale()) == 16.0 * 2 ** 3  # 12 finite steps, raised every 4
        assert losses[-1] < losses[0]
        assert any("out/MatMul" in r.nodes for r in npu_sim_bridge.recent_reports())
    finally:
        sess.close()
        v1.keras.backend.clear_session()


def test_keras_training_with_enable_mixed_precision():
    try:
        sess, optimizer, losses = _keras_fit(
            lambda: npu_init.enable_mixed_precision(tf.keras.optimizers.legacy.SGD(0.1)))
        assert isinstance(optimizer, tf.keras.mixed_precision.LossScaleOptimizer)
        assert losses[-1] < losses[0]
        reports = [r for r in npu_sim_bridge.recent_reports() if "out/MatMul" in r.nodes]
        assert reports and reports[-1].options["precision_mode"] == "allow_mix_precision"
        sess.close()
    finally:
        npu_init.disable_mixed_precision()
        v1.keras.backend.clear_session()


def _classification_accuracy(config, mixed_precision):
    rng = np.random.RandomState(0)
    x_data = rng.normal(size=(512, 8)).astype(np.float32)
    y_data = np.argmax(x_data @ rng.normal(size=(8, 3)), axis=1).astype(np.int64)
    graph = tf.Graph()
    with graph.as_default():
        v1.set_random_seed(7)
        x = v1.placeholder(tf.float32, [None, 8])
        y = v1.placeholder(tf.int64, [None])
        logits = v1.layers.dense(v1.layers.dense(x, 32, activation=tf.nn.relu), 3)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        optimizer = v1.train.MomentumOptimizer(0.05, 0.9)
        if mixed_precision:
            optimizer = npu_init.enable_mixed_precision(optimizer)
        train_op = optimizer.minimize(loss, global_step=v1.train.get_or_create_global_step())
        accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), y), tf.float32))
        with v1.Session(config=npu_init.npu_config_proto(config)) as sess:
            sess.run(v1.global_variables_initializer())
            for step in range(120):
                batch = slice((step * 64) % 512, (step * 64) % 512 + 64)
                sess.run(train_op, {x: x_data[batch], y: y_data[batch]})
            return sess.run(accuracy, {x: x_data, y: y_data})


def test_mixed_precision_with_dynamic_loss_scaling_reaches_float32_accuracy(npu_config):
    float32 = _classification_accuracy(npu_config(precision_mode="force_fp32"), mixed_precision=False)
    try:
        mixed = _classification_accuracy(None, mixed_precision=True)
        assert npu_sim_bridge.last_report().options["precision_mode"] == "allow_mix_precision"
    finally:
        npu_init.disable_mixed_precision()
    assert float32 > 0.8
    assert mixed >= float32 - 0.02
