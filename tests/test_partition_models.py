"""Training graphs give bit-identical losses and variables with and without the GeOp partitioning."""

import os

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf.rewriter_config_pb2 import RewriterConfig

import npu_sim_bridge
from npu_sim_bridge.testing import models

v1 = tf.compat.v1
STEPS = 3


def _config(npu_config, passes):
    config = npu_config(mix_compile_mode=True, sim_passes=passes)
    config.graph_options.rewrite_options.remapping = RewriterConfig.OFF
    config.graph_options.rewrite_options.memory_optimization = RewriterConfig.OFF
    return config


def _train(model, config, extra_fetches=()):
    """Losses (and extra fetches) of STEPS steps, then every global variable."""
    rng = np.random.default_rng(7)
    with v1.Session(graph=model.graph, config=config) as sess:
        sess.run(model.init_op)
        history = [sess.run([model.loss, model.train_op, *extra_fetches], model.feed(rng))
                   for _ in range(STEPS)]
        variables = sess.run(model.graph.get_collection(v1.GraphKeys.GLOBAL_VARIABLES))
    fetched = [[value for value in step if value is not None] for step in history]
    return fetched, variables


def _assert_identical(first, second):
    (fetched_a, variables_a), (fetched_b, variables_b) = first, second
    assert len(variables_a) == len(variables_b)
    for step_a, step_b in zip(fetched_a, fetched_b):
        for a, b in zip(step_a, step_b):
            np.testing.assert_array_equal(a, b)
    for a, b in zip(variables_a, variables_b):
        np.testing.assert_array_equal(a, b)


def _training_report(name):
    for report in npu_sim_bridge.recent_reports():
        if name in report.nodes and report.summary["geops"] and report.nodes[name].placement:
            return report
    raise AssertionError(f"no partitioned training graph holds {name}")


def _compare(npu_config, build, extra=lambda model: ()):
    plain = build()
    baseline = _train(plain, _config(npu_config, "none"), extra(plain))
    npu_sim_bridge.clear_reports()
    partitioned = build()
    result = _train(partitioned, _config(npu_config, "placement,partition"), extra(partitioned))
    _assert_identical(baseline, result)
    return partitioned


@pytest.mark.parametrize("name, build", [
    ("small_cnn", lambda: models.small_cnn(batch_size=4, image_size=12, filters=(4, 8), hidden=16)),
    ("lstm_v1", lambda: models.lstm(batch_size=4, time_steps=5, input_dim=6, units=8, control_flow="v1")),
])
def test_model_trains_bit_identically_in_geops(npu_config, name, build):
    model = _compare(npu_config, build)
    report = _training_report(model.train_op.name)
    assert report.nodes[model.loss.op.name].geop
    host = [d for d in report.nodes.values() if d.placement == "host"]
    assert all(d.op in ("Placeholder", "VarHandleOp") for d in host), [(d.name, d.reason) for d in host]


def _host_ops_model(dataset):
    """A small MLP fed by a tf.data pipeline whose map is a py_func, with a py_func mid-model."""
    def build():
        with tf.Graph().as_default() as graph:
            v1.set_random_seed(5)
            data = np.random.default_rng(3).standard_normal((64, 8)).astype(np.float32)
            labels = (data[:, 0] > 0).astype(np.int32)
            if dataset:
                pipeline = tf.data.Dataset.from_tensor_slices((data, labels)).map(
                    lambda x, y: (tf.reshape(v1.numpy_function(lambda v: v * 0.5, [x], tf.float32), [8]), y))
                features, target = v1.data.make_one_shot_iterator(pipeline.batch(8)).get_next()
                features.set_shape([8, 8])
                target.set_shape([8])
            else:
                features = v1.placeholder(tf.float32, [8, 8], name="features")
                target = v1.placeholder(tf.int32, [8], name="labels")
            hidden = v1.layers.dense(features, 16, activation=tf.nn.relu, name="hidden",
                                     kernel_initializer=v1.glorot_uniform_initializer(seed=1))
            squashed = v1.numpy_function(lambda v: np.tanh(v).astype(np.float32), [hidden], tf.float32,
                                         name="host_tanh")
            squashed.set_shape(hidden.shape)
            logits = v1.layers.dense(squashed, 2, name="logits",
                                     kernel_initializer=v1.glorot_uniform_initializer(seed=2))
            loss = tf.identity(v1.losses.sparse_softmax_cross_entropy(target, logits), name="loss")
            step = v1.train.AdamOptimizer(0.01).minimize(loss, global_step=v1.train.get_or_create_global_step())
            summary = v1.summary.merge([v1.summary.scalar("loss", loss), v1.summary.histogram("hidden", hidden)])
            init = v1.global_variables_initializer()
            saver = v1.train.Saver()

        def feed(rng):
            if dataset:
                return {}
            batch = rng.standard_normal((8, 8)).astype(np.float32)
            return {features: batch, target: (batch[:, 0] > 0).astype(np.int32)}

        model = models.ModelGraph(graph=graph, train_op=step, loss=loss, inputs={}, outputs={},
                                  init_op=init, saver=saver, name="mlp_host_ops", feed_fn=feed)
        return model, summary
    return build


def test_dataset_pipeline_with_py_func_trains_bit_identically(npu_config):
    build = _host_ops_model(dataset=True)
    model = _compare(npu_config, lambda: build()[0])
    report = _training_report(model.train_op.name)
    host_tanh = next(d for d in report.nodes.values() if d.name.startswith("host_tanh"))
    assert host_tanh.reason == "host: PyFunc runs on the host"
    get_next = next(d for d in report.nodes.values() if d.op == "IteratorGetNext")
    assert get_next.reason.startswith("host: dataset/iterator op IteratorGetNext")
    assert len(report.summary["geops"]) == 2   # before and after the py_func


def test_summary_and_saver_model_trains_and_checkpoints_identically(npu_config, tmp_path):
    build = _host_ops_model(dataset=False)
    summaries = {}

    def model_only():
        model, summary = build()
        summaries[model] = summary
        return model

    plain = model_only()
    baseline = _train(plain, _config(npu_config, "none"), [summaries[plain]])
    npu_sim_bridge.clear_reports()
    model = model_only()
    config = _config(npu_config, "placement,partition")
    rng = np.random.default_rng(7)
    with v1.Session(graph=model.graph, config=config) as sess:
        sess.run(model.init_op)
        history = [sess.run([model.loss, model.train_op, summaries[model]], model.feed(rng))
                   for _ in range(STEPS)]
        variables = sess.run(model.graph.get_collection(v1.GraphKeys.GLOBAL_VARIABLES))
        path = model.saver.save(sess, os.path.join(tmp_path, "model"))
    _assert_identical(baseline, ([[v for v in step if v is not None] for step in history], variables))
    summary_report = _training_report(model.train_op.name)
    merged = next(d for d in summary_report.nodes.values() if d.op == "MergeSummary")
    assert merged.reason.startswith("host: summary op MergeSummary")
    save = next(d for r in npu_sim_bridge.recent_reports() for d in r.nodes.values() if d.op == "SaveV2")
    assert save.reason == "host: checkpoint op SaveV2 runs on the host"
    restored = model_only()
    with v1.Session(graph=restored.graph) as sess:
        restored.saver.restore(sess, path)
        for a, b in zip(variables, sess.run(restored.graph.get_collection(v1.GraphKeys.GLOBAL_VARIABLES))):
            np.testing.assert_array_equal(a, b)
