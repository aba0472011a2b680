"""npu_bridge names of single ModelZoo families: npu_aicore_ops (FastGelu), tbe vector/cube ops, SetIterationsVarHook,
keras_to_npu."""

import warnings

import numpy as np
import pytest
import tensorflow as tf

import npu_sim_bridge
from npu_sim_bridge.runtime import iteration_hooks, npu_aicore_ops, tbe_cube_ops, tbe_vector_ops
from npu_sim_bridge.runtime.estimator import NPURunConfig
from npu_sim_bridge.runtime.iteration_hooks import SetIterationsVarHook
from npu_sim_bridge.runtime.keras_to_npu import model_to_npu_estimator

V1 = tf.compat.v1


def test_fast_gelu_is_one_fast_gelu_node_computing_the_ascend_formula():
    with tf.Graph().as_default():
        x = tf.constant(np.linspace(-5, 5, 21), tf.float32)
        y = npu_aicore_ops.npu_aicore_ops.fast_gelu(x)
        (grad,) = tf.gradients(y, x)
        (second,) = tf.gradients(grad, x)
        absx = tf.abs(x)
        reference = x / (1 + tf.exp(-1.702 * absx)) * tf.exp(0.851 * (x - absx))
        (ref_grad,) = tf.gradients(reference, x)
        (ref_second,) = tf.gradients(ref_grad, x)
        assert (y.op.type, grad.op.type) == ("FastGelu", "FastGeluGrad")
        with V1.Session() as sess:
            got, want = sess.run([[y, grad, second], [reference, ref_grad, ref_second]])
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_lamb_assign_ops_follow_bert_lamb_and_update_the_variables():
    rng = np.random.RandomState(0)
    g, m0, p0 = (rng.randn(5).astype(np.float32) for _ in range(3))
    v0 = np.abs(rng.randn(5)).astype(np.float32)
    b1, b2, eps, steps, decay, lr = 0.9, 0.999, 1e-6, 3.0, 0.01, 0.05
    with tf.Graph().as_default():
        v, m, p = (V1.Variable(value) for value in (v0, m0, p0))
        update, next_v, next_m = tbe_vector_ops.lamb_apply_optimizer_assign(
            tf.constant(g), v, m, p, b1, 1 - b1, b2, 1 - b2, eps, steps, 1.0, decay)
        with tf.control_dependencies([update, next_v, next_m]):
            w_norm, u_norm = tf.norm(p), tf.norm(update)
        new_p = tbe_vector_ops.lamb_apply_weight_assign(w_norm, u_norm, lr, update, p)
        with V1.Session() as sess:
            sess.run(V1.global_variables_initializer())
            got_p = sess.run(new_p)
            got_m, got_v = sess.run([m, v])
    want_m, want_v = b1 * m0 + (1 - b1) * g, b2 * v0 + (1 - b2) * g * g
    want_update = (want_m / (1 - b1 ** steps)) / (np.sqrt(want_v / (1 - b2 ** steps)) + eps) + decay * p0
    ratio = np.linalg.norm(p0) / np.linalg.norm(want_update)
    np.testing.assert_allclose([got_m, got_v], [want_m, want_v], rtol=1e-5)
    np.testing.assert_allclose(got_p, p0 - ratio * lr * want_update, rtol=1e-5, atol=1e-6)


def _deformable(offsets, **kwargs):
    rng = np.random.RandomState(1)
    x = tf.constant(rng.randn(2, 7, 8, 4).astype(np.float32))
    filt = tf.constant(rng.randn(3, 3, 4, 5).astype(np.float32))
    out = tbe_cube_ops.deformable_conv2d(x, filt, tf.constant(offsets), pads=[1, 1, 1, 1], deformable_groups=2,
                                         **kwargs)
    padded = tf.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]])
    return out, padded, filt


def _offsets(x_shift=0.0, mask=1.0, size=(7, 8)):
    taps = 2 * 9
    offsets = np.zeros([2, *size, 3 * taps], np.float32)
    offsets[..., :taps], offsets[..., 2 * taps:] = x_shift, mask
    return offsets


def test_deformable_conv2d_with_no_offset_is_a_convolution_and_offsets_move_the_taps():
    with tf.Graph().as_default():
        plain, padded, filt = _deformable(_offsets(), strides=[1, 1, 1, 1])
        want_plain = tf.nn.conv2d(padded, filt, [1, 1, 1, 1], "VALID")
        shifted, _, _ = _deformable(_offsets(x_shift=1.0), strides=[1, 1, 1, 1])
        moved = tf.pad(padded[:, :, 1:, :], [[0, 0], [0, 0], [0, 1], [0, 0]])  # one column right; zeros outside
        want_shifted = tf.nn.conv2d(moved, filt, [1, 1, 1, 1], "VALID")
        halfway, _, _ = _deformable(_offsets(x_shift=0.5, mask=0.5), strides=[1, 1, 1, 1])
        strided, _, _ = _deformable(_offsets(size=(4, 4)), strides=[1, 2, 2, 1])
        want_strided = tf.nn.conv2d(padded, filt, [1, 2, 2, 1], "VALID")
        with V1.Session() as sess:
            got = sess.run([plain, shifted, halfway, strided])
            want = sess.run([want_plain, want_shifted, 0.25 * (want_plain + want_shifted), want_strided])
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="only modulated=True"):
        tbe_cube_ops.deformable_conv2d(None, None, None, [1, 1, 1, 1], [0, 0, 0, 0], modulated=False)


def test_set_iterations_var_hook_checks_the_count_and_says_once_it_runs_one_step_per_run(monkeypatch):
    monkeypatch.setattr(iteration_hooks, "_warned", [])
    with pytest.raises(ValueError, match="iterations_per_loop"):
        SetIterationsVarHook(0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        SetIterationsVarHook(1).after_create_session(None, None)
        for _ in range(2):
            SetIterationsVarHook(10).after_create_session(None, None)
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1 and "iterations_per_loop=10" in messages[0] and "one training step" in messages[0]


def test_model_to_npu_estimator_trains_a_keras_model_through_the_npu_optimizer(tmp_path):
    inputs = tf.keras.Input([4], name="feat")
    model = tf.keras.Model(inputs, tf.keras.layers.Dense(1)(inputs))
    model.compile(V1.train.GradientDescentOptimizer(0.1), "mse")
    estimator = model_to_npu_estimator(keras_model=model, config=NPURunConfig(model_dir=str(tmp_path),
                                                                                 save_checkpoints_steps=50))
    rng = np.random.RandomState(0)
    features = rng.randn(64, 4).astype(np.float32)
    labels = features @ np.array([[1.0], [2.0], [-1.0], [0.5]], np.float32)

    def input_fn():
        return tf.data.Dataset.from_tensor_slices(({"feat": features}, labels)).repeat().batch(16)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        estimator.train(input_fn, steps=40)
        result = estimator.evaluate(input_fn, steps=2)
    assert result["global_step"] == 40 and result["loss"] < 0.01
    assert npu_sim_bridge.recent_reports()  # the Estimator's graphs went through the NpuOptimizer
    with pytest.raises(ValueError, match="needs config=NPURunConfig"):
        model_to_npu_estimator(keras_model=model, config=tf.estimator.RunConfig())
