"""Training under mixed precision in a real Session: checkpoints round-trip, and a small CNN learns."""

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import rewriter_config_pb2

import npu_sim_bridge
from npu_sim_bridge.testing import models


def sim_config(npu_config, **params):
    """As npu_config_proto builds it: NpuOptimizer, and Grappler's remapper off."""
    config = npu_config(**params)
    config.graph_options.rewrite_options.remapping = rewriter_config_pb2.RewriterConfig.OFF
    return config


def variable_values(model, sess):
    variables = model.graph.get_collection(tf.compat.v1.GraphKeys.GLOBAL_VARIABLES)
    return {v.op.name: value for v, value in zip(variables, sess.run(variables))}


def train_and_save(model, config, path, steps=3):
    rng = np.random.default_rng(0)
    with tf.compat.v1.Session(graph=model.graph, config=config) as sess:
        sess.run(model.init_op)
        for _ in range(steps):
            sess.run(model.train_op, model.feed(rng))
        model.saver.save(sess, path)
        return variable_values(model, sess)


def restore(model, config, path):
    with tf.compat.v1.Session(graph=model.graph, config=config) as sess:
        model.saver.restore(sess, path)
        return variable_values(model, sess)


@pytest.mark.parametrize("execution", ["emulate", "native"])
def test_checkpoint_round_trip_between_mixed_and_plain_graphs(npu_config, tmp_path, execution):
    config = sim_config(npu_config, precision_mode="allow_mix_precision", sim_fp16_execution=execution)
    saved = train_and_save(models.mlp(seed=1), config, str(tmp_path / "mixed" / "ckpt"))
    assert any(r.passes and r.passes[-1].name for r in npu_sim_bridge.recent_reports())
    dtypes = tf.compat.v1.train.NewCheckpointReader(str(tmp_path / "mixed" / "ckpt")).get_variable_to_dtype_map()
    assert {dtypes[name] for name in saved} == {tf.float32} | ({tf.int64} if "global_step" in saved else set())
    restored = restore(models.mlp(seed=2), None, str(tmp_path / "mixed" / "ckpt"))
    assert restored.keys() == saved.keys()
    for name in saved:
        np.testing.assert_array_equal(restored[name], saved[name])

    plain = train_and_save(models.mlp(seed=3), None, str(tmp_path / "plain" / "ckpt"))
    back = restore(models.mlp(seed=4), config, str(tmp_path / "plain" / "ckpt"))
    for name in plain:
        np.testing.assert_array_equal(back[name], plain[name])


def accuracy_after_training(config, x, y, steps, batch=32):
    """(held-out accuracy, first-step loss, names of the nodes the first training step executed)."""
    model = models.small_cnn(batch_size=batch, filters=(16, 32), hidden=64)
    images, labels = model.inputs["images"], model.inputs["labels"]
    train_count = len(x) - 4 * batch
    with tf.compat.v1.Session(graph=model.graph, config=config) as sess:
        sess.run(model.init_op)
        metadata = tf.compat.v1.RunMetadata()
        trace = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
        first_loss, _ = sess.run([model.loss, model.train_op], {images: x[:batch], labels: y[:batch]},
                                 options=trace, run_metadata=metadata)
        for step in range(1, steps):
            start = (step * batch) % (train_count - batch)
            sess.run(model.train_op, {images: x[start:start + batch], labels: y[start:start + batch]})
        held_out = [sess.run(model.outputs["accuracy"], {images: x[i:i + batch], labels: y[i:i + batch]})
                    for i in range(train_count, len(x), batch)]
    executed = {s.node_name for d in metadata.step_stats.dev_stats for s in d.node_stats}
    return float(np.mean(held_out)), first_loss, executed


def test_small_cnn_trains_under_allow_mix_precision_to_float32_accuracy(npu_config):
    x, y = models.small_cnn_dataset(1024, seed=0)
    reference, reference_loss, _ = accuracy_after_training(None, x, y, steps=100)
    mixed, mixed_loss, executed = accuracy_after_training(
        sim_config(npu_config, precision_mode="allow_mix_precision"), x, y, steps=100)
    report = next(r for r in npu_sim_bridge.recent_reports()
                  if any(p.name == "precision" and p.stats.get("nodes_dropped") for p in r.passes))
    # The forward convolution (fused with its BiasAdd and Relu by the fusion pass, or not) and its
    # gradients run in float16.
    forward = [d for d in report.nodes.values() if d.name.startswith(("conv1/", "conv2/")) and d.list == "white"]
    assert forward and all(d.dtype_after == "float16" for d in forward)
    assert report.nodes["gradients/conv1/Conv2D_grad/Conv2DBackpropFilter"].dtype_after == "float16"
    # The training step really ran the rewritten graph: its float16 round trips executed (in a Session
    # each is one NpuSimRoundToFloat16 kernel, named as the second Cast of the pair was).
    first_conv = next(d.name for d in forward if d.name.startswith("conv1/")
                      and "fusion.fused_into" not in [r.code for r in d.reasons])
    assert f"{first_conv}/NpuSimRound_0_float16" in executed
    assert mixed_loss != reference_loss and mixed_loss == pytest.approx(reference_loss, rel=1e-2)
    assert reference > 0.8
    assert mixed >= reference - 0.05, (mixed, reference)
