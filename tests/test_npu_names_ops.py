"""npu_bridge ops that ModelZoo scripts use: Gelu/GeluGrad, LARS, fused Adam, the LSTM cell, AI CPU ops, npu_plugin."""

import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
import tensorflow as tf

import npu_sim_bridge
from npu_sim_bridge import npu_init
from npu_sim_bridge.runtime import npu_cpu_ops, npu_ops, npu_plugin
from npu_sim_bridge.runtime.npu_unary_ops import npu_unary_ops

V1 = tf.compat.v1
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(fetches, feed=None, config=None, init=False):
    with V1.Session(config=config) as sess:
        if init:
            sess.run(V1.global_variables_initializer())
        return sess.run(fetches, feed)


def test_gelu_is_one_gelu_node_with_the_tanh_form_and_a_gelu_grad_gradient():
    with tf.Graph().as_default():
        x = tf.constant(np.linspace(-6, 6, 25), tf.float32)
        y = npu_unary_ops.gelu(x)
        (grad,) = tf.gradients(y, x)
        (second,) = tf.gradients(grad, x)
        reference = tf.nn.gelu(x, approximate=True)
        (ref_grad,) = tf.gradients(reference, x)
        (ref_second,) = tf.gradients(ref_grad, x)
        assert y.op.type == "Gelu" and grad.op.type == "GeluGrad"
        assert [t.name for t in grad.op.inputs[1:]] == [x.name, y.name]  # GeluGrad(dy, x, y) as on the NPU
        got = _run([y, grad, second])
        want = _run([reference, ref_grad, ref_second])
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [tf.float16, tf.bfloat16, tf.float64])
def test_gelu_kernels_for_every_dtype_the_op_accepts(dtype):
    with tf.Graph().as_default():
        x = tf.constant([-3.0, -0.5, 0.0, 0.5, 3.0], dtype)
        got = _run(tf.cast(npu_unary_ops.gelu(x), tf.float32))
        want = _run(tf.nn.gelu(tf.cast(x, tf.float32), approximate=True))
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("execution", ["emulate", "native"])
def test_gelu_in_a_session_is_classified_by_the_operator_library_and_named_in_the_report(npu_config, execution):
    with tf.Graph().as_default():
        x = V1.placeholder(tf.float32, [4, 8], name="x")
        w = tf.Variable(np.random.RandomState(0).randn(8, 8).astype(np.float32) * 0.3)
        h = npu_unary_ops.gelu(tf.matmul(x, w), name="act")
        y = tf.identity(tf.matmul(h, w), name="y")
        xv = np.random.RandomState(1).randn(4, 8).astype(np.float32)
        mixed = _run(y, {x: xv}, npu_config(precision_mode="allow_mix_precision", sim_fp16_execution=execution),
                     init=True)
        decision = next(r for r in npu_sim_bridge.recent_reports() if "act" in r.nodes).node("act")
        plain = _run(y, {x: xv}, init=True)
    assert (decision.op, decision.list, decision.placement) == ("Gelu", "gray", "device")
    assert decision.dtype_after == "float16" and "follows MatMul" in decision.reason
    np.testing.assert_allclose(mixed, plain, rtol=2e-2, atol=2e-2)


def test_importing_npu_init_registers_the_npu_ops_so_saved_graphs_with_gelu_import(tmp_path):
    with tf.Graph().as_default():
        npu_unary_ops.gelu(V1.placeholder(tf.float32, [2], name="x"), name="act")
        V1.train.export_meta_graph(str(tmp_path / "gelu.meta"))
    code = ("import sys, tensorflow as tf; import npu_sim_bridge.npu_init; "
            "tf.compat.v1.train.import_meta_graph(sys.argv[1]); "
            "print(tf.compat.v1.get_default_graph().get_operation_by_name('act').type)")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [REPO_ROOT, os.environ.get("PYTHONPATH")])))
    result = subprocess.run([sys.executable, "-c", code, str(tmp_path / "gelu.meta")], capture_output=True,
                            text=True, env=env, timeout=120, check=False)
    assert result.stdout.strip() == "Gelu", result.stderr[-3000:]


def test_npu_init_exports_the_newer_adapter_names():
    assert npu_init.npu_unary_ops.gelu is npu_unary_ops.gelu
    assert npu_init.npu_plugin is npu_plugin
    assert npu_init.NPUOptimizer.__name__ == "NPUOptimizer"
    assert npu_init.npu_strategy.NPUStrategy.__name__ == "NPUStrategy"
    assert callable(npu_init.npu_close)


def _np_lars(w, g, decay, hyper, eps):
    coeff = hyper * np.linalg.norm(w) / (np.linalg.norm(g) + decay * np.linalg.norm(w) + eps)
    return coeff * (g + decay * w)


def test_lars_scales_each_gradient_by_its_trust_ratio():
    rng = np.random.RandomState(2)
    weights = [rng.randn(3, 4).astype(np.float32), rng.randn(5).astype(np.float32)]
    grads = [rng.randn(3, 4).astype(np.float32) * 0.1, rng.randn(5).astype(np.float32)]
    with tf.Graph().as_default():
        out = npu_ops.LARS([tf.constant(w) for w in weights], [tf.constant(g) for g in grads], weight_decay=1e-4)
        v2 = npu_ops.LARSV2(tf.constant(weights[0]), tf.constant(grads[0]), 1e-4, learning_rate=1e-5,
                            hyperpara=0.01, use_clip=True)
        got, got_v2 = _run([out, v2])
    for value, w, g in zip(got, weights, grads):
        np.testing.assert_allclose(value, _np_lars(w, g, 1e-4, 0.001, 1e-5), rtol=1e-5)
    coeff = min(0.01 * np.linalg.norm(weights[0]) / (np.linalg.norm(grads[0]) + 1e-4 * np.linalg.norm(weights[0])
                                                     + 1e-5) / 1e-5, 1.0)
    np.testing.assert_allclose(got_v2, coeff * (grads[0] + 1e-4 * weights[0]), rtol=1e-5)
    with tf.Graph().as_default(), pytest.raises(ValueError, match="inputs_w has 2 tensors but inputs_g has 1"):
        npu_ops.LARS([tf.ones([2]), tf.ones([2])], [tf.ones([2])], 0.1)


@pytest.mark.parametrize("decay", [None, 0.01])
def test_adam_apply_one_assign_updates_var_m_and_v_in_place(decay):
    rng = np.random.RandomState(3)
    g, v0, m0, p0 = (rng.randn(6).astype(np.float32) for _ in range(4))
    v0 = np.abs(v0)
    lr, b1, b2, eps = 0.1, 0.9, 0.999, 1e-6
    with tf.Graph().as_default():
        v, m, p = (V1.Variable(value) for value in (v0, m0, p0))
        if decay is None:
            out = npu_ops.adam_apply_one_assign(tf.constant(g), v, m, p, lr, b1, 1 - b1, b2, 1 - b2, eps)
        else:
            out = npu_ops.adam_apply_one_with_decay_assign(tf.constant(g), v, m, p, lr, b1, 1 - b1, b2, 1 - b2,
                                                           decay, eps)
        with V1.Session() as sess:
            sess.run(V1.global_variables_initializer())
            sess.run(tf.group(*out))
            got_v, got_m, got_p = sess.run([v, m, p])
    next_m, next_v = b1 * m0 + (1 - b1) * g, b2 * v0 + (1 - b2) * g * g
    update = next_m / (np.sqrt(next_v) + eps) + (decay * p0 if decay else 0)
    np.testing.assert_allclose(got_m, next_m, rtol=1e-5)
    np.testing.assert_allclose(got_v, next_v, rtol=1e-5)
    np.testing.assert_allclose(got_p, p0 - lr * update, rtol=1e-5)


def test_basic_lstm_cell_is_one_step_of_tensorflows_basic_lstm_cell():
    rng = np.random.RandomState(4)
    batch, size, hidden = 3, 5, 4
    xv, hv, cv = rng.randn(batch, size), rng.randn(batch, hidden), rng.randn(batch, hidden)
    wv, bv = rng.randn(size + hidden, 4 * hidden) * 0.3, rng.randn(4 * hidden) * 0.1
    with tf.Graph().as_default():
        x, h, c = (tf.constant(v, tf.float32) for v in (xv, hv, cv))
        ct, ht, *_ = npu_ops.basic_lstm_cell(x, h, c, tf.constant(wv, tf.float32), tf.constant(bv, tf.float32),
                                            keep_prob=1.0, forget_bias=1.0, state_is_tuple=True, activation="tanh")
        cell = V1.nn.rnn_cell.BasicLSTMCell(hidden, forget_bias=1.0)
        _, state = cell(x, V1.nn.rnn_cell.LSTMStateTuple(c, h))
        with V1.Session() as sess:
            sess.run([cell.variables[0].assign(wv), cell.variables[1].assign(bv)])
            got_c, got_h, want = sess.run([ct, ht, state])
    np.testing.assert_allclose(got_c, want.c, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_h, want.h, rtol=1e-5, atol=1e-6)


def test_randomchoicewithmask_picks_distinct_true_positions_and_masks_the_padding():
    grid = np.zeros([4, 5], bool)
    grid[[0, 1, 3, 3], [1, 4, 0, 2]] = True
    with tf.Graph().as_default():
        few = npu_cpu_ops.randomchoicewithmask(tf.constant(grid), count=6, seed=7)
        two = npu_cpu_ops.randomchoicewithmask(tf.constant(grid), count=2, seed=7)
        (y, mask), (y2, mask2) = _run([few, two])
    assert y.shape == (6, 2) and mask.tolist() == [True] * 4 + [False] * 2
    assert sorted(map(tuple, y[:4])) == [(0, 1), (1, 4), (3, 0), (3, 2)]
    assert (y[4:] == 0).all() and mask2.all() and len(set(map(tuple, y2))) == 2 and grid[tuple(y2.T)].all()
    with pytest.raises(TypeError, match="x must be a bool tensor"):
        npu_cpu_ops.randomchoicewithmask(tf.zeros([3]), count=1)


def test_set_device_sat_mode_records_the_mode_and_says_once_that_saturation_is_not_simulated(monkeypatch):
    monkeypatch.setattr(npu_plugin, "_warned", set())
    monkeypatch.setitem(npu_plugin._state, "sat_mode", 1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        npu_plugin.set_device_sat_mode(1)
        npu_plugin.set_device_sat_mode(0)
        npu_plugin.set_device_sat_mode(0)
    assert npu_plugin.get_device_sat_mode() == 0
    messages = [str(w.message) for w in caught if issubclass(w.category, npu_plugin.NpuPluginWarning)]
    assert len(messages) == 1 and "saturation" in messages[0] and "inf/nan" in messages[0]
    with pytest.raises(ValueError, match="mode must be 0 .saturation. or 1"):
        npu_plugin.set_device_sat_mode(2)


def test_npu_plugin_host_memory_calls_name_themselves_and_resource_init_checks_arguments():
    with pytest.raises(NotImplementedError, match="npu_plugin.malloc_shared_memory: RDMA host-memory"):
        npu_plugin.malloc_shared_memory("table", [10, 4], 0)
    with pytest.raises(ValueError, match="graph_run_mode must be 0 or 1"):
        npu_plugin.npu_resource_init(graph_run_mode=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", npu_plugin.NpuPluginWarning)
        npu_plugin.npu_resource_init(graph_run_mode=1, precision_mode="allow_mix_precision")
