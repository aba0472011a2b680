"""The model builders: each graph builds in its own tf.Graph, trains, exports and feeds valid batches."""

import dataclasses
from collections import Counter

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.grappler import tf_optimizer

from npu_sim_bridge.testing import models

TINY_BERT = dict(num_layers=1, hidden=64, heads=2, seq_len=16, vocab=100, intermediate=128)
V1_FRAME_OPS = {"Enter", "Exit", "Merge", "Switch", "NextIteration"}
V2_LOOP_OPS = {"While", "StatelessWhile"}


def _op_counts(model):
    return Counter(node.op for node in model.graph_def().node)


def _fast_config():
    """Grappler off: only to keep the first ResNet step cheap; the graph is what is under test here."""
    config = tf.compat.v1.ConfigProto()
    config.graph_options.rewrite_options.disable_meta_optimizer = True
    return config


def _train(model, steps, config=None, seed=1):
    """Losses of ``steps`` training steps on one fixed batch."""
    feed = model.feed(np.random.default_rng(seed))
    with tf.compat.v1.Session(graph=model.graph, config=config) as session:
        session.run(model.init_op)
        return [float(session.run([model.loss, model.train_op], feed)[0]) for _ in range(steps)]


@pytest.fixture(scope="module", name="small_resnet")
def small_resnet_fixture():
    return models.resnet50(image_size=32, num_classes=10, with_saver=False)


@pytest.mark.parametrize(
    "builder, kwargs",
    [
        (models.mlp, {}),
        (models.small_cnn, dict(batch_size=16, filters=(8, 16), hidden=32)),
        (models.lstm, dict(kind="dynamic_rnn", control_flow="v1")),
        (models.lstm, dict(kind="dynamic_rnn", control_flow="v2")),
        (models.lstm, dict(kind="keras")),
        (models.bert, dict(TINY_BERT, learning_rate=1e-3, dropout=0.0)),
    ],
    ids=["mlp", "small_cnn", "lstm_v1", "lstm_v2", "lstm_keras", "bert"],
)
def test_small_models_train(builder, kwargs):
    model = builder(**kwargs)
    losses = _train(model, 6)
    assert all(np.isfinite(losses)), losses
    assert losses[-1] < losses[0], losses


def test_bert_default_hyperparameters_train_a_little():
    losses = _train(models.bert(**TINY_BERT), 8)
    assert all(np.isfinite(losses)), losses
    assert min(losses[1:]) < losses[0], losses


def test_resnet50_small_images_train(small_resnet):
    losses = _train(small_resnet, 5, config=_fast_config())
    assert all(np.isfinite(losses)), losses
    assert losses[-1] < losses[0], losses
    assert set(small_resnet.inputs) == {"images", "labels", "learning_phase"}


def test_resnet50_full_graph_node_count():
    model = models.resnet50()
    count = model.num_nodes()
    assert 8000 <= count <= 12000, count
    ops = _op_counts(model)
    assert ops["Conv2D"] == 53
    assert ops["Conv2DBackpropFilter"] == 53
    trainable = model.graph.get_collection(tf.compat.v1.GraphKeys.TRAINABLE_VARIABLES)
    assert len(trainable) == 214
    assert ops["ResourceApplyMomentum"] + ops["ApplyMomentum"] == len(trainable)
    assert model.inputs["images"].shape.as_list() == [2, 224, 224, 3]
    assert model.outputs["logits"].shape.as_list() == [2, 1000]


def test_bert_nodes_grow_linearly_with_layers():
    counts = [models.bert(**dict(TINY_BERT, num_layers=layers)).num_nodes() for layers in (1, 2, 4)]
    per_layer = counts[1] - counts[0]
    assert per_layer > 100
    assert counts[2] - counts[1] == 2 * per_layer, counts


def test_bert_rejects_heads_not_dividing_hidden():
    with pytest.raises(ValueError, match="multiple of heads"):
        models.bert(**dict(TINY_BERT, heads=3))


def test_lstm_control_flow_versions_and_toggle_restored():
    was_v2 = tf.compat.v1.control_flow_v2_enabled()
    v1_ops = set(_op_counts(models.lstm(control_flow="v1")))
    assert tf.compat.v1.control_flow_v2_enabled() == was_v2
    v2_ops = set(_op_counts(models.lstm(control_flow="v2")))
    assert tf.compat.v1.control_flow_v2_enabled() == was_v2
    assert V1_FRAME_OPS <= v1_ops and not (V2_LOOP_OPS & v1_ops)
    assert V2_LOOP_OPS & v2_ops and not (V1_FRAME_OPS & v2_ops)


def test_control_flow_toggle_restores_a_disabled_setting():
    was_v2 = tf.compat.v1.control_flow_v2_enabled()
    tf.compat.v1.disable_control_flow_v2()
    try:
        v2_ops = set(_op_counts(models.lstm(control_flow="v2")))
        assert not tf.compat.v1.control_flow_v2_enabled()
        assert V2_LOOP_OPS & v2_ops
        assert V1_FRAME_OPS <= set(_op_counts(models.lstm(control_flow="v1")))
        assert not tf.compat.v1.control_flow_v2_enabled()
    finally:
        if was_v2:
            tf.compat.v1.enable_control_flow_v2()


def test_lstm_rejects_unknown_options():
    with pytest.raises(ValueError, match="kind"):
        models.lstm(kind="gru")
    with pytest.raises(ValueError, match="control_flow"):
        models.lstm(control_flow="v3")
    with pytest.raises(ValueError, match="control_flow='v2'"):
        models.lstm(kind="keras", control_flow="v1")


def test_lstm_default_control_flow_per_kind():
    assert V1_FRAME_OPS <= set(_op_counts(models.lstm()))
    assert V2_LOOP_OPS & set(_op_counts(models.lstm(kind="keras")))


def test_meta_graph_def_round_trips_and_grappler_runs():
    model = models.mlp()
    meta = model.meta_graph_def()
    assert list(meta.collection_def["train_op"].node_list.value) == model.fetch_names() == ["loss", "train_op"]
    assert meta.saver_def.restore_op_name
    imported = tf.Graph()
    with imported.as_default():
        saver = tf.compat.v1.train.import_meta_graph(meta)
    assert saver is not None
    assert len(imported.as_graph_def().node) == model.num_nodes()
    assert [op.name for op in imported.get_collection("train_op")] == model.fetch_names()
    feed = {tensor.name: value for tensor, value in model.feed(np.random.default_rng(2)).items()}
    with tf.compat.v1.Session(graph=imported) as session:
        session.run(model.init_op.name)
        losses = [session.run(["loss:0", "train_op"], feed)[0] for _ in range(4)]
    assert losses[-1] < losses[0]
    optimized = tf_optimizer.OptimizeGraph(tf.compat.v1.ConfigProto(), meta)
    names = {node.name for node in optimized.node}
    assert {"loss", "train_op"} <= names


def test_lstm_v1_meta_graph_keeps_while_frame():
    meta = models.lstm(control_flow="v1").meta_graph_def()
    ops = {node.op for node in meta.graph_def.node}
    assert V1_FRAME_OPS <= ops


def test_feeds_are_valid():
    bert = models.bert(**TINY_BERT)
    feed = bert.feed(np.random.default_rng(5))
    assert set(feed) == set(bert.inputs.values())
    ids, mask, segments = (feed[bert.inputs[key]] for key in ("input_ids", "input_mask", "segment_ids"))
    assert ids.dtype == np.int32 and ids.shape == (2, 16)
    assert ids.min() >= 0 and ids.max() < 100
    assert set(np.unique(mask)) <= {0, 1} and mask[:, 0].all()
    assert set(np.unique(segments)) <= {0, 1} and not (segments & (1 - mask)).any()
    assert feed[bert.inputs["labels"]].max() < 2

    cnn = models.small_cnn(batch_size=8, filters=(4, 8), hidden=16)
    feed = cnn.feed(np.random.default_rng(5))
    images = feed[cnn.inputs["images"]]
    assert images.dtype == np.float32 and images.shape == (8, 28, 28, 1)
    assert images.min() >= 0.0 and images.max() <= 1.0
    labels = feed[cnn.inputs["labels"]]
    assert labels.dtype == np.int32 and labels.min() >= 0 and labels.max() < 10
    assert "accuracy" in cnn.outputs

    for model in (models.mlp(), models.lstm()):
        feed = model.feed(np.random.default_rng(5))
        assert set(feed) == set(model.inputs.values())
        for placeholder, value in feed.items():
            assert list(value.shape) == placeholder.shape.as_list()
            assert value.dtype == placeholder.dtype.as_numpy_dtype


def test_builds_are_new_graphs_and_deterministic():
    default_ops = len(tf.compat.v1.get_default_graph().get_operations())
    first, second = models.mlp(), models.mlp()
    assert first.graph is not second.graph
    assert first.graph is not tf.compat.v1.get_default_graph()
    assert len(tf.compat.v1.get_default_graph().get_operations()) == default_ops
    assert _train(first, 2) == _train(second, 2)
    assert _train(models.mlp(seed=3), 1) != _train(first, 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.name = "other"


def test_small_cnn_dataset_is_learnable():
    x, y = models.small_cnn_dataset(n=1024, seed=0)
    x_test, y_test = models.small_cnn_dataset(n=256, seed=1)
    assert x.shape == (1024, 28, 28, 1) and x.dtype == np.float32 and y.dtype == np.int32
    assert x.min() >= 0.0 and x.max() <= 1.0 and set(np.unique(y)) == set(range(10))
    model = models.small_cnn(batch_size=32, filters=(8, 16), hidden=32)
    images, labels = model.inputs["images"], model.inputs["labels"]
    rng = np.random.default_rng(0)
    with tf.compat.v1.Session(graph=model.graph) as session:
        session.run(model.init_op)
        for _ in range(250):
            index = rng.integers(0, len(x), 32)
            session.run(model.train_op, {images: x[index], labels: y[index]})
        accuracy = np.mean([
            session.run(model.outputs["accuracy"], {images: x_test[i:i + 32], labels: y_test[i:i + 32]})
            for i in range(0, 256, 32)
        ])
    assert accuracy > 0.8, accuracy


def test_registries():
    assert set(models.all_builders()) == {"resnet50", "bert", "lstm", "small_cnn", "mlp"}
    assert set(models.small_builders()) == set(models.all_builders())
