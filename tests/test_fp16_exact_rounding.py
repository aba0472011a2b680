"""The float16 emulation rounds each tensor once, and never a tensor that holds float16 values already
(a constant of them: passes/precision/exact.py), on a small depthwise model's training graph; leaving
those round trips out changes no bit of the training."""

import numpy as np
import pytest
import tensorflow as tf

import npu_sim_bridge
from npu_sim_bridge.passes.precision import exact
from npu_sim_bridge.passes.precision.marks import ROUND_OP

_v1 = tf.compat.v1
BATCH, SIZE, CLASSES = 4, 8, 5


def _depthwise_model(seed: int = 0):
    """(graph, loss, train op, feed): conv, depthwise conv, a training batch norm whose statistics
    nothing reads (their gradients are zeros Fills), ReLU6, a dense head; Momentum."""
    graph = tf.Graph()
    with graph.as_default():
        _v1.set_random_seed(seed)
        images = _v1.placeholder(tf.float32, [BATCH, SIZE, SIZE, 3], name="images")
        labels = _v1.placeholder(tf.int32, [BATCH], name="labels")
        init = _v1.glorot_uniform_initializer(seed=seed)
        conv = _v1.get_variable("conv", [3, 3, 3, 8], initializer=init)
        depthwise = _v1.get_variable("depthwise", [3, 3, 8, 1], initializer=init)
        scale = _v1.get_variable("scale", [8], initializer=_v1.ones_initializer())
        offset = _v1.get_variable("offset", [8], initializer=_v1.zeros_initializer())
        dense = _v1.get_variable("dense", [8, CLASSES], initializer=init)
        x = tf.nn.conv2d(images, conv, [1, 1, 1, 1], "SAME")
        x = tf.nn.depthwise_conv2d(x, depthwise, [1, 1, 1, 1], "SAME")
        x, _, _ = _v1.nn.fused_batch_norm(x, scale, offset, is_training=True)
        x = tf.reduce_mean(tf.nn.relu6(x), axis=[1, 2])
        logits = tf.matmul(x, dense)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
        train = _v1.train.MomentumOptimizer(0.1, 0.9).minimize(loss)
        init_op = _v1.global_variables_initializer()
    rng = np.random.default_rng(seed)
    feed = {images: rng.random([BATCH, SIZE, SIZE, 3], dtype=np.float32),
            labels: rng.integers(0, CLASSES, BATCH).astype(np.int32)}
    return graph, loss, train, init_op, feed


def _float16_exact(values: np.ndarray) -> bool:
    values = values.astype(np.float32)
    return not np.isnan(values).any() and np.array_equal(
        values.astype(np.float16).astype(np.float32).view(np.uint32), values.view(np.uint32))


def _holds_float16(nodes: dict, text: str) -> bool:
    """Whether the tensor `text` (a graph's "node:port" or a body's "node:output:index") is another
    rounding's output or only moves a constant that float16 holds exactly."""
    node = nodes.get(text.lstrip("^").split(":")[0])
    if node is None:
        return False
    if node.op in (ROUND_OP, "ZerosLike", "OnesLike"):
        return True
    if node.op == "Const":
        return _float16_exact(tf.make_ndarray(node.attr["value"].tensor))
    moved = {"Identity": 0, "Reshape": 0, "ExpandDims": 0, "BroadcastTo": 0, "Tile": 0, "Fill": 1}.get(node.op)
    return moved is not None and _holds_float16(nodes, node.input[moved])


def _rewrite():
    graph, loss, train, _, _ = _depthwise_model()
    graph_def, report = npu_sim_bridge.rewrite(
        graph, {"precision_mode": "allow_mix_precision", "sim_fp16_rounding": "kernel"},
        fetches=[loss.name, train.name])
    return graph_def, next(p.stats for p in report.passes if p.name == "precision")


def test_each_tensor_is_rounded_once_and_never_when_it_holds_float16_values():
    graph_def, stats = _rewrite()
    bodies = [list(f.node_def) for f in graph_def.library.function]
    assert bodies, "the training step's device part is a GeOp body"
    rounds = 0
    for nodes in [list(graph_def.node)] + bodies:
        by_name = {node.name: node for node in nodes}
        sources = [node.input[0] for node in nodes if node.op == ROUND_OP]
        assert len(sources) == len(set(sources)), "a tensor rounded twice"
        assert not [s for s in sources if _holds_float16(by_name, s)], "a round trip that changes no bit"
        rounds += len(sources)
    assert rounds == stats["round_trips"] and rounds > 0
    # The batch norm statistics' gradients are zeros: their round trips are the ones left out.
    assert stats["round_trips_left_out"] > 0


def _train(npu_config, steps: int = 3):
    graph, loss, train, init_op, feed = _depthwise_model()
    config = npu_config(precision_mode="allow_mix_precision", sim_fp16_rounding="kernel")
    with _v1.Session(graph=graph, config=config) as sess:
        sess.run(init_op)
        losses = [sess.run([loss, train], feed)[0] for _ in range(steps)]
        with graph.as_default():
            variables = sess.run(_v1.trainable_variables())
    report = next(r for r in npu_sim_bridge.recent_reports()
                  if any(p.name == "precision" and p.stats.get("round_trips") for p in r.passes))
    npu_sim_bridge.clear_reports()
    return losses, variables, next(p.stats for p in report.passes if p.name == "precision")


def test_leaving_those_round_trips_out_changes_no_bit_of_training(npu_config, monkeypatch):
    npu_sim_bridge.clear_reports()
    losses, variables, stats = _train(npu_config)
    assert stats["round_trips_left_out"] > 0
    # The expectation: the same Session with every round trip kept (nothing counts as float16 already).
    with monkeypatch.context() as patch:
        patch.setattr(exact, "holds_float16_values", lambda *args, **kwargs: False)
        kept_losses, kept_variables, kept_stats = _train(npu_config)
    assert kept_stats["round_trips_left_out"] == 0
    assert kept_stats["round_trips"] == stats["round_trips"] + stats["round_trips_left_out"]
    assert [float(v).hex() for v in losses] == [float(v).hex() for v in kept_losses]
    for mine, kept in zip(variables, kept_variables):
        np.testing.assert_array_equal(mine.view(np.uint32), kept.view(np.uint32))


@pytest.mark.parametrize("size", [1, 7, 100, 4099])
def test_small_tensors_round_as_the_cast_round_trip(size):
    """Tensors below the kernel's sharding size round on the calling thread: the same bits."""
    from npu_sim_bridge.native.loader import load_npu_ops

    rng = np.random.default_rng(size)
    values = (rng.standard_normal(size) * np.float32(7e4)).astype(np.float32)
    values[: min(size, 3)] = np.array([np.nan, 65520.0, 2.0 ** -25], np.float32)[: min(size, 3)]
    graph = tf.Graph()
    with graph.as_default():
        x = _v1.placeholder(tf.float32, [size])
        kernel = tf.bitcast(load_npu_ops().npu_sim_round_to_float16(x * 1.0), tf.uint32)
        cast = tf.bitcast(tf.cast(tf.cast(x, tf.float16), tf.float32), tf.uint32)
    with _v1.Session(graph=graph) as sess:
        got, want = sess.run([kernel, cast], {x: values})
    np.testing.assert_array_equal(got, want)
