"""Training graphs the way migrated scripts build them: Keras applications, TF1 batch norm behind a
training placeholder, Keras Dropout, user tf.cond / tf.while_loop (the model sweep's families).

Every builder returns a `models.ModelGraph` whose feed turns training on (the TF1 `training`
placeholder, or Keras's learning phase), so the batch-norm and dropout conds take their training
branches. `tf1=True` builds as TensorFlow 1.15 did: control flow v1 (Switch/Merge, while frames) and,
for `tf.compat.v1.layers`, reference variables; the global settings are restored afterwards.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Callable, Dict

import numpy as np
import tensorflow as tf

from npu_sim_bridge.testing import channels_first, models
from npu_sim_bridge.testing.models import ModelGraph

_v1 = tf.compat.v1


@contextlib.contextmanager
def tf1_graph_mode(ref_variables: bool = True):
    """Control flow v1 and (with `ref_variables`) TF1 reference variables while building."""
    resource_was_on = tf.compat.v1.resource_variables_enabled()
    with models._control_flow("v1"):
        if ref_variables:
            _v1.disable_resource_variables()
        try:
            yield
        finally:
            if ref_variables and resource_was_on:
                _v1.enable_resource_variables()


def _finish(graph, name, loss, update_ops, inputs, train_feed, optimizer="momentum", learning_rate=0.01):
    train_op = models._minimize(models._make_optimizer(optimizer, learning_rate), loss, update_ops)
    return models._finish(graph, name, loss, train_op, inputs, {}, train_feed, with_saver=False)


def _image_feed(images, labels, num_classes, extra=None):
    shape = images.shape.as_list()

    def feed(rng):
        values = {images: rng.random(shape, dtype=np.float32),
                  labels: rng.integers(0, num_classes, size=shape[0]).astype(np.int32)}
        values.update(extra or {})
        return values

    return feed


def _xent(logits, labels, num_classes):
    return models._classification_head(logits, labels, num_classes)[0]


# --------------------------------------------------------------------------- Keras applications
def keras_application(name: str, image_size: int = 32, batch_size: int = 8, num_classes: int = 10,
                      seed: int = 0, learning_rate: float = 0.01, **kwargs) -> ModelGraph:
    """`tf.keras.applications.<name>(weights=None)` as a TF1 training graph, the learning phase fed True."""
    with tf1_graph_mode(ref_variables=False), models._building(seed) as graph:
        builder = getattr(tf.keras.applications, name)
        model = builder(weights=None, input_shape=(image_size, image_size, 3), classes=num_classes, **kwargs)
        images = model.inputs[0]
        labels = _v1.placeholder(tf.int32, [None], name="labels")
        probabilities = model.outputs[0]
        loss = tf.identity(tf.reduce_mean(
            tf.keras.losses.sparse_categorical_crossentropy(labels, probabilities)), name="loss")
        phase = tf.keras.backend.learning_phase()
        updates = list(model.updates)
        shape = [batch_size, image_size, image_size, 3]

        def train_feed(rng):
            return {images: rng.random(shape, dtype=np.float32),
                    labels: rng.integers(0, num_classes, size=batch_size).astype(np.int32), phase: True}

        return _finish(graph, f"keras_{name}", loss, updates, {"images": images, "labels": labels},
                       train_feed, learning_rate=learning_rate)


# --------------------------------------------------------------------------- TF1 and Keras CNNs
def tf1_batchnorm_cnn(batch_size: int = 8, image_size: int = 16, num_classes: int = 10, seed: int = 0) -> ModelGraph:
    """`tf.compat.v1.layers` conv + `batch_normalization(training=is_training)` and a tf.cond dropout,
    UPDATE_OPS before the train op: the shape of ModelZoo's Session scripts (reference variables)."""
    with tf1_graph_mode(), models._building(seed) as graph:
        images = _v1.placeholder(tf.float32, [batch_size, image_size, image_size, 3], name="images")
        labels = _v1.placeholder(tf.int32, [batch_size], name="labels")
        training = _v1.placeholder(tf.bool, [], name="is_training")
        x = images
        for width in (8, 16):
            x = _v1.layers.conv2d(x, width, 3, padding="same", use_bias=False)
            x = _v1.layers.batch_normalization(x, training=training)
            x = tf.nn.relu(x)
            x = _v1.layers.max_pooling2d(x, 2, 2)
        x = _v1.layers.flatten(x)
        x = _v1.layers.dense(x, 32, activation=tf.nn.relu)
        x = tf.cond(training, lambda: tf.nn.dropout(x, rate=0.25, seed=seed + 1), lambda: x)
        logits = _v1.layers.dense(x, num_classes)
        loss = _xent(logits, labels, num_classes)
        updates = _v1.get_collection(_v1.GraphKeys.UPDATE_OPS)
        return _finish(graph, "tf1_batchnorm_cnn", loss, updates, {"images": images, "labels": labels},
                       _image_feed(images, labels, num_classes, {training: True}))


def keras_cnn(batch_size: int = 8, image_size: int = 16, num_classes: int = 10, seed: int = 0,
              control_flow: str = "v1") -> ModelGraph:
    """A small Keras Sequential CNN with BatchNormalization and Dropout (the learning-phase conds).
    With `control_flow` "v2" the conds are If ops: their branches and gradients are library
    functions, alike but for names and shapes."""
    layers = tf.keras.layers
    with models._control_flow(control_flow), models._building(seed) as graph:
        model = tf.keras.Sequential([
            layers.Conv2D(8, 3, padding="same", input_shape=(image_size, image_size, 3)),
            layers.BatchNormalization(), layers.ReLU(), layers.MaxPooling2D(),
            layers.Conv2D(16, 3, padding="same"), layers.BatchNormalization(), layers.ReLU(),
            layers.Flatten(), layers.Dense(32, activation="relu"), layers.Dropout(0.25, seed=seed + 1),
            layers.Dense(num_classes),
        ])
        images = model.inputs[0]
        labels = _v1.placeholder(tf.int32, [None], name="labels")
        loss = _xent(model.outputs[0], labels, num_classes)
        phase = tf.keras.backend.learning_phase()
        shape = [batch_size, image_size, image_size, 3]

        def train_feed(rng):
            return {images: rng.random(shape, dtype=np.float32),
                    labels: rng.integers(0, num_classes, size=batch_size).astype(np.int32), phase: True}

        return _finish(graph, "keras_cnn", loss, list(model.updates), {"images": images, "labels": labels},
                       train_feed)


# --------------------------------------------------------------------------- user control flow
def user_cond_mlp(batch_size: int = 16, features: int = 32, num_classes: int = 4, seed: int = 0) -> ModelGraph:
    """An MLP whose hidden layer is chosen by a user `tf.cond` on a boolean placeholder (both branches train)."""
    with tf1_graph_mode(), models._building(seed) as graph:
        x = _v1.placeholder(tf.float32, [batch_size, features], name="features")
        labels = _v1.placeholder(tf.int32, [batch_size], name="labels")
        wide = _v1.placeholder(tf.bool, [], name="use_wide")
        init = _v1.glorot_uniform_initializer(seed=seed)
        h = tf.cond(wide,
                    lambda: _v1.layers.dense(x, 64, activation=tf.nn.relu, kernel_initializer=init, name="wide"),
                    lambda: tf.pad(_v1.layers.dense(x, 32, activation=tf.nn.tanh, kernel_initializer=init,
                                                    name="narrow"), [[0, 0], [0, 32]]))
        logits = _v1.layers.dense(h, num_classes, kernel_initializer=init, name="head")
        loss = _xent(logits, labels, num_classes)

        def feed(rng):
            return {x: rng.standard_normal((batch_size, features)).astype(np.float32),
                    labels: rng.integers(0, num_classes, size=batch_size).astype(np.int32), wide: True}

        return _finish(graph, "user_cond_mlp", loss, [], {"features": x, "labels": labels}, feed)


def user_while_mlp(batch_size: int = 16, features: int = 32, num_classes: int = 4, repeats: int = 3,
                   seed: int = 0) -> ModelGraph:
    """A residual block applied `repeats` times by a user `tf.while_loop` (a v1 while frame), trained."""
    with tf1_graph_mode(), models._building(seed) as graph:
        x = _v1.placeholder(tf.float32, [batch_size, features], name="features")
        labels = _v1.placeholder(tf.int32, [batch_size], name="labels")
        kernel = _v1.get_variable("block/kernel", [features, features],
                                  initializer=_v1.glorot_uniform_initializer(seed=seed))

        def body(i, h):
            return i + 1, h + 0.5 * tf.nn.tanh(tf.matmul(h, kernel))

        _, h = tf.while_loop(lambda i, h: i < repeats, body, [tf.constant(0), x])
        logits = _v1.layers.dense(h, num_classes, kernel_initializer=_v1.glorot_uniform_initializer(seed=seed),
                                  name="head")
        loss = _xent(logits, labels, num_classes)

        def feed(rng):
            return {x: rng.standard_normal((batch_size, features)).astype(np.float32),
                    labels: rng.integers(0, num_classes, size=batch_size).astype(np.int32)}

        return _finish(graph, "user_while_mlp", loss, [], {"features": x, "labels": labels}, feed)


# --------------------------------------------------------------------------- the sweep's list
KERAS_APPLICATIONS: Dict[str, dict] = {
    "MobileNetV2": dict(image_size=32, alpha=0.35),
    "ResNet50": dict(image_size=32),
    "ResNet50V2": dict(image_size=32),
    "DenseNet121": dict(image_size=32),
    "EfficientNetB0": dict(image_size=32),
    "VGG16": dict(image_size=32),
    "InceptionV3": dict(image_size=75),
    "InceptionResNetV2": dict(image_size=75),
    "Xception": dict(image_size=71),
    "NASNetMobile": dict(image_size=32),
    "MobileNetV3Small": dict(image_size=32),
    "EfficientNetV2B0": dict(image_size=32),
    "ConvNeXtTiny": dict(image_size=32),
    "RegNetX002": dict(image_size=32),
}


def sweep_builders(applications=None, application_learning_rate: float = 0.01) -> Dict[str, Callable[[], ModelGraph]]:
    """The model sweep: Keras applications (all, or the names given), TF1 and Keras CNNs, user control
    flow, an LSTM with a v1 loop, a small BERT and a channels-first (NCHW/NCDHW) 2D+3D CNN."""
    builders: Dict[str, Callable[[], ModelGraph]] = {}
    for name, kwargs in KERAS_APPLICATIONS.items():
        if applications is None or name in applications:
            builders[name] = functools.partial(keras_application, name, learning_rate=application_learning_rate,
                                               **kwargs)
    builders["tf1_batchnorm_cnn"] = tf1_batchnorm_cnn
    builders["keras_cnn"] = keras_cnn
    builders["user_cond_mlp"] = user_cond_mlp
    builders["user_while_mlp"] = user_while_mlp
    builders["lstm_v1"] = functools.partial(models.lstm, control_flow="v1", with_saver=False)
    builders["bert_small"] = functools.partial(models.bert, with_saver=False, **models.SMALL_KWARGS["bert"])
    builders["cnn_channels_first"] = functools.partial(channels_first.cnn, "channels_first")
    return builders
