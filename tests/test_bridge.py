"""The NpuOptimizer bridge seen from the routes users take: Session, Estimator and Keras."""

import numpy as np
import pytest
import tensorflow as tf

import npu_sim_bridge
from npu_sim_bridge.passes.pipeline import SEEN_ATTR


def _small_model():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 3], name="x")
        w = tf.compat.v1.get_variable("w", [3, 2], initializer=tf.compat.v1.ones_initializer())
        y = tf.identity(tf.nn.relu(tf.matmul(x, w) + 1.0), name="y")
        init = tf.compat.v1.global_variables_initializer()
    return graph, x, y, init


def _executed_nodes(sess, fetch, feed):
    metadata = tf.compat.v1.RunMetadata()
    options = tf.compat.v1.RunOptions(output_partition_graphs=True)
    value = sess.run(fetch, feed, options=options, run_metadata=metadata)
    nodes = [node for graph in metadata.partition_graphs for node in graph.node]
    return value, nodes


def test_session_naming_npu_optimizer_runs_the_pipeline(npu_config):
    graph, x, y, init = _small_model()
    with tf.compat.v1.Session(graph=graph, config=npu_config()) as sess:
        sess.run(init)
        value, nodes = _executed_nodes(sess, y, {x: [[1.0, 2.0, 3.0]]})
    np.testing.assert_allclose(value, [[7.0, 7.0]])
    stamped = {node.name for node in nodes if SEEN_ATTR in node.attr}
    assert "y" in stamped  # the fetched node keeps its name and went through the pipeline
    reports = [r for r in npu_sim_bridge.recent_reports() if r.item_id == "tf_graph"]
    assert any({"MatMul", "Relu", "y"} <= set(report.nodes) for report in reports)


def test_session_without_npu_optimizer_is_untouched():
    graph, x, y, init = _small_model()
    with tf.compat.v1.Session(graph=graph) as sess:
        sess.run(init)
        value, nodes = _executed_nodes(sess, y, {x: [[1.0, 2.0, 3.0]]})
    np.testing.assert_allclose(value, [[7.0, 7.0]])
    assert not any(SEEN_ATTR in node.attr for node in nodes)
    assert npu_sim_bridge.recent_reports() == []


def test_invalid_precision_mode_fails_sess_run_with_the_allowed_values(npu_config):
    graph, x, y, init = _small_model()
    with tf.compat.v1.Session(graph=graph, config=npu_config(precision_mode="fp17")) as sess:
        with pytest.raises(tf.errors.InvalidArgumentError) as caught:
            sess.run(init)
        with pytest.raises(tf.errors.InvalidArgumentError):
            sess.run(y, {x: [[1.0, 2.0, 3.0]]})
    message = str(caught.value)
    assert "option precision_mode value fp17 is invalid" in message
    assert "allow_mix_precision" in message and "force_fp32" in message


def test_wrong_field_type_fails_sess_run(npu_config):
    graph, x, y, init = _small_model()
    config = npu_config()
    config.graph_options.rewrite_options.custom_optimizers[0].parameter_map["precision_mode"].b = True
    with tf.compat.v1.Session(graph=graph, config=config) as sess:
        with pytest.raises(tf.errors.InvalidArgumentError, match="precision_mode"):
            sess.run(init)


def test_report_dir_receives_json_and_text(npu_config, tmp_path):
    graph, x, y, init = _small_model()
    with tf.compat.v1.Session(graph=graph, config=npu_config(sim_report_dir=str(tmp_path))) as sess:
        sess.run(init)
        sess.run(y, {x: [[1.0, 2.0, 3.0]]})
    names = sorted(p.name for p in tmp_path.iterdir())
    assert any(n.endswith(".json") for n in names) and any(n.endswith(".txt") for n in names)


def _estimator_model_fn(features, labels, mode):
    logits = tf.compat.v1.layers.dense(features["x"], 2, name="dense")
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, global_step=tf.compat.v1.train.get_or_create_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def _estimator_input():
    x = np.random.RandomState(0).rand(16, 4).astype(np.float32)
    y = (x[:, 0] > 0.5).astype(np.int32)
    return tf.compat.v1.data.Dataset.from_tensor_slices(({"x": x}, y)).batch(4)


def test_estimator_run_config_session_config_reaches_the_pipeline(npu_config, tmp_path):
    config = tf.estimator.RunConfig(model_dir=str(tmp_path), session_config=npu_config())
    estimator = tf.estimator.Estimator(_estimator_model_fn, config=config)
    estimator.train(_estimator_input, steps=3)
    reports = npu_sim_bridge.recent_reports()
    # Grappler's own optimizers run first and may fuse dense/MatMul; the update ops stay.
    assert any("GradientDescent/update_dense/kernel/ResourceApplyGradientDescent" in r.nodes
               for r in reports)
    assert estimator.get_variable_value("global_step") == 3


def test_estimator_with_invalid_option_fails_training(npu_config, tmp_path):
    config = tf.estimator.RunConfig(model_dir=str(tmp_path),
                                    session_config=npu_config(precision_mode="fp17"))
    estimator = tf.estimator.Estimator(_estimator_model_fn, config=config)
    with pytest.raises(tf.errors.InvalidArgumentError, match="precision_mode"):
        estimator.train(_estimator_input, steps=1)


def test_keras_set_session_reaches_the_pipeline(npu_config):
    graph = tf.Graph()
    with graph.as_default():
        sess = tf.compat.v1.Session(graph=graph, config=npu_config())
        tf.compat.v1.keras.backend.set_session(sess)
        model = tf.keras.Sequential([
            tf.keras.layers.Dense(4, activation="relu", input_shape=(3,), name="hidden"),
            tf.keras.layers.Dense(1, name="out"),
        ])
        model.compile(optimizer="sgd", loss="mse")
        data = np.random.RandomState(1).rand(8, 3).astype(np.float32)
        model.fit(data, data[:, :1], epochs=1, batch_size=4, verbose=0)
    sess.close()
    tf.compat.v1.keras.backend.clear_session()
    reports = npu_sim_bridge.recent_reports()
    # The training graph (it reads the feature placeholder) went through the pipeline.
    assert any("hidden_input" in report.nodes and "hidden/Relu" in report.nodes
               for report in reports)


def test_grappler_hands_each_graph_over_on_every_meta_optimizer_iteration(npu_config, monkeypatch):
    from npu_sim_bridge.passes import pipeline

    seen = []
    original = pipeline.nothing_new
    monkeypatch.setattr(pipeline, "nothing_new",
                        lambda graph_def, item, *table: seen.append((item.id, original(graph_def, item, *table)))
                        or seen[-1][1])
    graph, x, y, init = _small_model()
    with tf.compat.v1.Session(graph=graph, config=npu_config()) as sess:
        sess.run(init)
        npu_sim_bridge.clear_reports()
        seen.clear()
        sess.run(y, {x: [[1.0, 2.0, 3.0]]})
    # Function bodies (GeOp segments) are items of their own; count the Session's graph. The second
    # meta-optimizer iteration finds nothing new (no other optimizer ran in between) and hands the
    # graph back as the first left it, without a pass or a second report.
    assert [new for item_id, new in seen if item_id == "tf_graph"] == [False, True]
    reports = [r for r in npu_sim_bridge.recent_reports() if r.item_id == "tf_graph"]
    assert len(reports) == 1 and not reports[0].rerun
    assert any(record.changed for record in reports[0].passes)


def test_graphs_under_grapplers_minimum_are_rewritten_too(npu_config):
    graph = tf.Graph()
    with graph.as_default():
        a = tf.compat.v1.placeholder(tf.float32, [], name="a")
        b = tf.identity(tf.square(a), name="b")
    config = npu_config(precision_mode="force_fp16")
    with tf.compat.v1.Session(graph=graph, config=config) as sess:
        # 3 nodes: Grappler's default minimum of 4 would skip it; the real adapter rewrites every graph.
        # Square runs in float16; the fetched b keeps float32.
        assert sess.run(b, {a: 1.0001}) == np.float32(np.float16(np.float16(1.0001) ** 2)) != np.float32(1.0001) ** 2
    assert [r.item_id for r in npu_sim_bridge.recent_reports()][:1] == ["tf_graph"]
    assert config.graph_options.rewrite_options.min_graph_nodes == 0  # the user's proto is untouched
    with tf.compat.v1.Session(graph=graph, config=npu_config(precision_mode="fp17")) as sess:
        with pytest.raises(tf.errors.InvalidArgumentError, match="fp17"):
            sess.run(b, {a: 1.0})


def test_a_minimum_the_user_set_fails_smaller_graphs_instead_of_running_them_unrewritten(npu_config):
    graph = tf.Graph()
    with graph.as_default():
        a = tf.constant(1.0, name="a")
        b = tf.identity(a, name="b")
    config = npu_config(precision_mode="force_fp16")
    config.graph_options.rewrite_options.min_graph_nodes = 10
    with tf.compat.v1.Session(graph=graph, config=config) as sess:
        with pytest.raises(tf.errors.FailedPreconditionError, match="min_graph_nodes = -1"):
            sess.run(b)
    config.graph_options.rewrite_options.min_graph_nodes = -1
    with tf.compat.v1.Session(graph=graph, config=config) as sess:
        assert sess.run(b) == 1.0