"""npu_bridge layers and optimizers ModelZoo scripts use: DynamicRNN/GRUV2/AUGRU, npu_convert_dropout,
NPUOptimizer, NPUStrategy, and older-adapter NPURunConfig arguments and parameter_map keys."""

import importlib
import sys
import warnings

import numpy as np
import pytest
import tensorflow as tf

from npu_sim_bridge.config import from_dict
from npu_sim_bridge.runtime import npu_ops
from npu_sim_bridge.runtime.distributed import NPUDistributedOptimizer
from npu_sim_bridge.runtime.estimator import NPURunConfig, OlderArgumentWarning
from npu_sim_bridge.runtime.loss_scale import FixedLossScaleManager, NPULossScaleOptimizer
from npu_sim_bridge.runtime.npu_dynamic_rnn import DynamicAUGRU, DynamicGRUV2, DynamicRNN
from npu_sim_bridge.runtime.npu_optimizer import NPUOptimizer
from npu_sim_bridge.runtime.npu_strategy import NPUStrategy

V1 = tf.compat.v1
T, B, I, H = 5, 3, 4, 6


def _inputs(seed=0):
    return np.random.RandomState(seed).randn(T, B, I).astype(np.float32)


@pytest.mark.parametrize("time_major", [True, False])
def test_dynamic_rnn_matches_basic_lstm_cell_with_the_same_weights(time_major):
    rng = np.random.RandomState(1)
    xv = _inputs()
    lengths = np.array([5, 3, 1], np.int32)
    with tf.Graph().as_default():
        x = tf.constant(xv if time_major else xv.transpose(1, 0, 2))
        lstm = DynamicRNN(H, tf.float32, forget_bias=1.0, time_major=time_major)
        h0, c0 = rng.randn(1, B, H).astype(np.float32), rng.randn(1, B, H).astype(np.float32)
        y, out_h, out_c, *gates = lstm(x, seq_length=tf.constant(lengths), init_h=h0, init_c=c0)
        assert [v.name for v in lstm.variables] == ["dynamic_rnn/dynamicrnn/w:0", "dynamic_rnn/dynamicrnn/b:0"]
        assert len(gates) == 5
        cell = V1.nn.rnn_cell.BasicLSTMCell(H, forget_bias=1.0)
        ref_y, ref_state = V1.nn.dynamic_rnn(cell, tf.constant(xv), sequence_length=lengths, time_major=True,
                                             initial_state=V1.nn.rnn_cell.LSTMStateTuple(c0[0], h0[0]))
        (grad_w,) = tf.gradients(tf.reduce_sum(y), lstm.variables[0])
        with V1.Session() as sess:
            sess.run(V1.global_variables_initializer())
            sess.run(lstm.variables[1].assign(rng.randn(4 * H).astype(np.float32) * 0.2))
            sess.run([cell.variables[0].assign(lstm.variables[0]), cell.variables[1].assign(lstm.variables[1])])
            got_y, got_h, got_c, want_y, want_state, grad = sess.run([y, out_h, out_c, ref_y, ref_state, grad_w])
    if not time_major:
        got_y, got_h, got_c = (a.transpose(1, 0, 2) for a in (got_y, got_h, got_c))
    np.testing.assert_allclose(got_y, want_y, rtol=1e-5, atol=1e-6)
    last = lengths - 1
    np.testing.assert_allclose(got_h[-1], want_state.h, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_c[-1], want_state.c, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_h[last, range(B)], want_state.h, rtol=1e-5, atol=1e-6)
    assert np.abs(grad).sum() > 0


def _gru_reference(xv, kernel, recurrent, bias, reset_after):
    with tf.Graph().as_default():
        cell = tf.keras.layers.GRUCell(H, reset_after=reset_after)
        x = tf.constant(xv)
        state = tf.zeros([B, H])
        cell.build(tf.TensorShape([B, I]))
        outputs = []
        for step in range(T):
            out, (state,) = cell(x[step], [state])
            outputs.append(out)
        with V1.Session() as sess:
            sess.run([cell.kernel.assign(kernel), cell.recurrent_kernel.assign(recurrent), cell.bias.assign(bias)])
            return sess.run(tf.stack(outputs))


def _gru_weights(layer, sess):
    return sess.run([layer._weight_input, layer._weight_hidden, layer._bias_input, layer._bias_hidden])


@pytest.mark.parametrize("reset_after", [True, False])
def test_dynamic_gru_v2_matches_keras_gru_cell_with_the_same_weights(reset_after):
    xv = _inputs(2)
    with tf.Graph().as_default():
        gru = DynamicGRUV2(H, tf.float32, reset_after=reset_after)
        y, out_h, update, reset, new, hidden_new = gru(tf.constant(xv))
        assert gru.variables[0].name == "dynamic_gru_v2/dynamicgruv2/weight_input:0"
        with V1.Session() as sess:
            sess.run(V1.global_variables_initializer())
            w_i, w_h, b_i, b_h = _gru_weights(gru, sess)
            got, got_h, z = sess.run([y, out_h, update])
    bias = np.stack([b_i, b_h]) if reset_after else b_i + b_h
    np.testing.assert_allclose(got, _gru_reference(xv, w_i, w_h, bias, reset_after), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_h, got, rtol=0, atol=0)
    assert ((z > 0) & (z < 1)).all()


def test_gate_order_rzh_reads_the_reset_gate_first():
    xv = _inputs(3)
    with tf.Graph().as_default():
        zrh, rzh = DynamicGRUV2(H, tf.float32), DynamicGRUV2(H, tf.float32, gate_order="rzh")
        y_zrh, y_rzh = zrh(tf.constant(xv))[0], rzh(tf.constant(xv))[0]
        swap = lambda t: tf.concat([t[..., H:2 * H], t[..., :H], t[..., 2 * H:]], axis=-1)  # noqa: E731
        copies = [dst.assign(swap(src)) for src, dst in zip(zrh.variables, rzh.variables)]
        with V1.Session() as sess:
            sess.run(V1.global_variables_initializer())
            sess.run(copies)
            a, b = sess.run([y_zrh, y_rzh])
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_dynamic_augru_scales_the_update_gate_by_the_attention_score():
    xv = _inputs(4)
    att = np.random.RandomState(5).rand(T, B).astype(np.float32)
    with tf.Graph().as_default():
        augru = DynamicAUGRU(H, tf.float32)
        y, _, update, update_att, _, _, _ = augru(tf.constant(xv), tf.constant(att))
        y_zero = augru(tf.constant(xv), tf.zeros([T, B]))[0]
        with V1.Session() as sess:
            sess.run(V1.global_variables_initializer())
            w_i, w_h, b_i, b_h = _gru_weights(augru, sess)
            got, z, z_att, got_zero = sess.run([y, update, update_att, y_zero])
    np.testing.assert_allclose(z_att, (1 - att[..., None]) * z, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_zero, _gru_reference(xv, w_i, w_h, np.stack([b_i, b_h]), True), rtol=1e-5,
                               atol=1e-6)
    sigmoid = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    h = np.zeros([B, H], np.float32)
    for step in range(T):
        xz, xr, xn = np.split(xv[step] @ w_i + b_i, 3, axis=1)
        hz, hr, hn = np.split(h @ w_h + b_h, 3, axis=1)
        zt = (1 - att[step][:, None]) * sigmoid(xz + hz)
        h = zt * h + (1 - zt) * np.tanh(xn + sigmoid(xr + hr) * hn)
        np.testing.assert_allclose(got[step], h, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kwargs, message", [
    ({"direction": "BIDIRECTIONAL"}, "direction='BIDIRECTIONAL' is not supported"),
    ({"num_proj": 4}, "num_proj=4 is not supported"),
    ({"direction": "SIDEWAYS"}, "invalid direction 'SIDEWAYS'"),
    ({"activation": "gelu"}, "activation 'gelu' is not one of"),
])
def test_unsupported_layer_options_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DynamicRNN(H, tf.float32, **kwargs)


@pytest.fixture(name="converted")
def converted_fixture():
    module = importlib.import_module("npu_sim_bridge.runtime.npu_convert_dropout")
    module.convert_keras_dropout()
    yield module
    module.restore_keras_dropout()


def _dropout_values(build, seed):
    with tf.Graph().as_default():
        V1.set_random_seed(seed)
        out = build(tf.ones([64, 64]))
        return V1.Session().run(out)


def test_npu_convert_dropout_makes_keras_dropout_run_npu_ops_dropout(converted, monkeypatch):
    calls = []
    original = npu_ops.dropout

    def spy(x, keep_prob, **kwargs):
        calls.append(keep_prob)
        return original(x, keep_prob, **kwargs)

    monkeypatch.setattr(npu_ops, "dropout", spy)
    layer_out = _dropout_values(lambda x: tf.keras.layers.Dropout(0.25, seed=3)(x, training=True), 11)
    legacy_out = _dropout_values(lambda x: V1.layers.dropout(x, 0.25, seed=3, training=True), 11)
    assert calls == [0.75, 0.75]  # tf.keras's Dropout and tf.layers.dropout (a subclass) both went through it
    npu_out = _dropout_values(lambda x: original(x, keep_prob=0.75, seed=3), 11)
    np.testing.assert_array_equal(layer_out, npu_out)
    np.testing.assert_array_equal(legacy_out, npu_out)
    assert set(np.unique(layer_out)) <= {0.0, np.float32(1 / 0.75)}
    np.testing.assert_array_equal(_dropout_values(lambda x: tf.keras.layers.Dropout(0.25)(x, training=False), 1),
                                  np.ones([64, 64]))
    noise = _dropout_values(lambda x: tf.keras.layers.Dropout(0.5, noise_shape=[64, 1])(x, training=True), 2)
    assert all(len(set(row)) == 1 for row in noise)  # a noise_shape keeps tf.nn.dropout, as in the adapter
    assert len(calls) == 2  # training=False builds no dropout; a noise_shape layer builds tf.nn.dropout
    converted.restore_keras_dropout()
    _dropout_values(lambda x: tf.keras.layers.Dropout(0.25, seed=3)(x, training=True), 11)
    assert len(calls) == 2


def _train(optimizer_factory, loss_fn, steps=1):
    with tf.Graph().as_default():
        w = V1.Variable([1.0, -2.0])
        step = V1.train.get_or_create_global_step()
        optimizer = optimizer_factory()
        train = optimizer.minimize(loss_fn(w), global_step=step)
        with V1.Session() as sess:
            sess.run(V1.global_variables_initializer())
            for _ in range(steps):
                sess.run(train)
            return sess.run([w, step]), optimizer


def test_npu_optimizer_with_loss_scale_updates_like_the_plain_optimizer_and_skips_overflow_steps():
    loss = lambda w: tf.reduce_sum(w * w)  # noqa: E731
    (plain, _), _ = _train(lambda: V1.train.GradientDescentOptimizer(0.1), loss, 2)
    (scaled, step), optimizer = _train(lambda: NPUOptimizer(V1.train.GradientDescentOptimizer(0.1),
                                                            FixedLossScaleManager(1024), is_loss_scale=True), loss, 2)
    np.testing.assert_allclose(scaled, plain, rtol=1e-6)
    assert step == 2 and isinstance(optimizer._inner, NPULossScaleOptimizer)
    overflow = lambda w: tf.reduce_sum(w * w) * np.float32(1e36)  # noqa: E731  (x 1024: inf gradients)
    (kept, step), _ = _train(lambda: NPUOptimizer(V1.train.GradientDescentOptimizer(0.1),
                                                  FixedLossScaleManager(1024), is_loss_scale=True), overflow)
    np.testing.assert_array_equal(kept, [1.0, -2.0])
    assert step == 0


def test_npu_optimizer_distributed_and_its_argument_checks():
    _, optimizer = _train(lambda: NPUOptimizer(V1.train.GradientDescentOptimizer(0.1), is_distributed=True),
                          lambda w: tf.reduce_sum(w))
    assert isinstance(optimizer._inner, NPUDistributedOptimizer)
    with pytest.raises(ValueError, match="is_loss_scale=True. needs loss_scale_manager"):
        NPUOptimizer(V1.train.GradientDescentOptimizer(0.1), is_loss_scale=True)
    with pytest.raises(TypeError, match="wraps a tf.compat.v1.train.Optimizer"):
        NPUOptimizer(tf.keras.optimizers.SGD())


def test_npu_strategy_is_one_replica_per_rank_and_shards_datasets_by_rank():
    with tf.Graph().as_default():
        strategy = NPUStrategy()
        assert strategy.num_replicas_in_sync == 1
        with strategy.scope():
            variable = V1.get_variable("v", initializer=3.0)
        dataset = strategy.extended._experimental_distribute_dataset(tf.data.Dataset.range(4))
        values = V1.data.make_one_shot_iterator(dataset).get_next()
        with V1.Session() as sess:
            sess.run(variable.initializer)
            assert [sess.run(values) for _ in range(4)] == [0, 1, 2, 3]


def test_older_npu_run_config_argument_is_accepted_with_a_warning_naming_its_replacement():
    with pytest.warns(OlderArgumentWarning, match="auto_tune_mode='RL,GA' is from an older npu_bridge.*use aoe_mode"):
        config = NPURunConfig(auto_tune_mode="RL,GA", save_checkpoints_steps=10)
    assert config.npu_parameters["auto_tune_mode"] == "RL,GA"
    with pytest.raises(TypeError, match="unexpected keyword argument 'auto_tune_mod'"):
        NPURunConfig(auto_tune_mod="RL,GA")


def test_older_parameter_map_keys_are_warned_about_with_their_replacement():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        options = from_dict({"enable_auto_mix_precision": True, "allow_mix_compile": True})
    assert any("enable_auto_mix_precision" in text and "precision_mode='allow_mix_precision'" in text
               for text in options.warnings)
    assert any("allow_mix_compile" in text and "use mix_compile_mode" in text for text in options.warnings)


def test_the_alias_imports_the_new_modules_by_their_npu_bridge_names(request):
    from npu_sim_bridge.runtime.alias import install_alias, uninstall_alias

    install_alias()
    request.addfinalizer(uninstall_alias)
    from npu_bridge.estimator.npu.npu_dynamic_rnn import DynamicRNN as Aliased  # noqa: N811
    from npu_bridge.estimator.npu.npu_optimizer import NPUDistributedOptimizer as Distributed, NPUOptimizer as Opt
    from npu_bridge.estimator.npu_unary_ops import npu_unary_ops
    from npu_bridge.npu_cpu import npu_cpu_ops

    assert Aliased is DynamicRNN and Opt is NPUOptimizer and Distributed is NPUDistributedOptimizer
    assert callable(npu_unary_ops.gelu) and callable(npu_cpu_ops.randomchoicewithmask)
    assert importlib.import_module("npu_bridge.estimator.npu.npu_plugin").set_device_sat_mode
    assert importlib.import_module("npu_bridge.estimator.npu.npu_strategy").NPUStrategy is NPUStrategy
    star = {}
    exec("from npu_bridge.estimator.npu.npu_estimator import *", star)  # noqa: S102  (as scripts write it)
    assert star["time"] is sys.modules["time"]  # the real module leaks `time`; two ModelZoo scripts use it
