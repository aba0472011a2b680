"""A small 2D + 3D CNN built channels-first (NCHW/NCDHW, as NPU scripts build it) or channels-last, same weights.

Both layouts compute the same function of the same data: the images and volumes of the channels-first
model are the channels-last batch transposed, every variable has the same shape and the same initial
value in both (drawn from `seed` by numpy, not by the graph's op seeds), and the head reads a mean over
the spatial axes, which no layout orders. The 2D branch covers Conv2D (and, for the second one, its
input gradient), BiasAdd, a fused batch norm on the channel axis, MaxPool, DepthwiseConv2dNative,
AvgPool and MaxPoolV2; the 3D branch Conv3D, a fused 5D batch norm, MaxPool3D and AvgPool3D; training
adds their gradients. Built three ways: a TF1 graph (`cnn`, a ModelGraph for Sessions and the sweep),
the same layers for an Estimator's model_fn (`logits`), and Keras layers under
`backend.set_image_data_format` (`keras_model`).
"""

from __future__ import annotations

import contextlib

import numpy as np
import tensorflow as tf
from tensorflow.python.ops import gen_nn_ops

from npu_sim_bridge.testing import models

_v1 = tf.compat.v1
FORMATS = ("channels_first", "channels_last")
WIDTH_2D, WIDTH_3D, MULTIPLIER = 8, 4, 2


def _check(data_format: str) -> bool:
    """True for channels_first; a ValueError naming the allowed values otherwise."""
    if data_format not in FORMATS:
        raise ValueError(f"data_format must be 'channels_first' or 'channels_last', got {data_format!r}")
    return data_format == "channels_first"


def variable_shapes(channels: int = 3, num_classes: int = 5) -> dict[str, tuple[int, ...]]:
    """Every trainable variable's shape (the same in both layouts), by name."""
    width = WIDTH_2D * MULTIPLIER
    return {
        "conv1/kernel": (3, 3, channels, WIDTH_2D), "conv1/bias": (WIDTH_2D,),
        "conv2/kernel": (3, 3, WIDTH_2D, WIDTH_2D),
        "depthwise/kernel": (3, 3, WIDTH_2D, MULTIPLIER),
        "conv3d1/kernel": (3, 3, 3, channels, WIDTH_3D),
        "conv3d2/kernel": (3, 3, 3, WIDTH_3D, WIDTH_3D),
        "head/kernel": (width + WIDTH_3D, num_classes), "head/bias": (num_classes,),
    }


def initial_values(channels: int = 3, num_classes: int = 5, seed: int = 0) -> dict[str, np.ndarray]:
    """The initial value of every variable of `variable_shapes`, drawn from `seed` (scaled normal)."""
    rng = np.random.default_rng(seed)
    values = {}
    for name, shape in variable_shapes(channels, num_classes).items():
        fan_in = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
        scale = 0.0 if name.endswith("bias") else 1.0 / np.sqrt(fan_in)
        values[name] = (rng.standard_normal(shape) * scale).astype(np.float32)
    return values


def batch(rng: np.random.Generator, data_format: str, batch_size: int = 4, image_size: int = 8,
          depth: int = 4, channels: int = 3, num_classes: int = 5):
    """(images, volumes, labels) drawn channels-last from `rng`, transposed for channels_first."""
    first = _check(data_format)
    images = rng.random((batch_size, image_size, image_size, channels), dtype=np.float32)
    volumes = rng.random((batch_size, depth, image_size, image_size, channels), dtype=np.float32)
    labels = rng.integers(0, num_classes, size=batch_size, dtype=np.int32)
    if first:
        images, volumes = images.transpose(0, 3, 1, 2).copy(), volumes.transpose(0, 4, 1, 2, 3).copy()
    return images, volumes, labels


def logits(images, volumes, data_format: str, initial: dict[str, np.ndarray], training: bool = True):
    """The model's logits from images and volumes in `data_format`, with TF1 layers and tf.nn ops."""
    first = _check(data_format)
    fmt2, fmt3, axis = ("NCHW", "NCDHW", 1) if first else ("NHWC", "NDHWC", -1)
    spatial2, spatial3 = ([2, 3], [2, 3, 4]) if first else ([1, 2], [1, 2, 3])

    def var(name):
        return _v1.get_variable(name, initializer=tf.constant(initial[name]))

    def window(size):
        return [1, 1, size, size] if first else [1, size, size, 1]

    x = tf.nn.conv2d(images, var("conv1/kernel"), 1, "SAME", data_format=fmt2, name="conv1")
    x = tf.nn.bias_add(x, var("conv1/bias"), data_format=fmt2)
    x = _v1.layers.batch_normalization(x, axis=axis, fused=True, training=training, name="bn2d")
    x = tf.nn.max_pool2d(tf.nn.relu(x), 2, 2, "SAME", data_format=fmt2, name="maxpool")
    x = tf.nn.conv2d(x, var("conv2/kernel"), 1, "SAME", data_format=fmt2, name="conv2")
    x = tf.nn.depthwise_conv2d(x, var("depthwise/kernel"), [1, 1, 1, 1], "SAME", data_format=fmt2,
                               name="depthwise")
    x = tf.nn.avg_pool2d(tf.nn.relu(x), 2, 1, "SAME", data_format=fmt2, name="avgpool")
    x = gen_nn_ops.max_pool_v2(x, tf.constant(window(2)), tf.constant(window(1)), "SAME",
                               data_format=fmt2, name="maxpool_v2")
    flat2 = tf.reduce_mean(x, axis=spatial2)
    v = tf.nn.conv3d(volumes, var("conv3d1/kernel"), [1] * 5, "SAME", data_format=fmt3, name="conv3d1")
    v = _v1.layers.batch_normalization(v, axis=axis, fused=True, training=training, name="bn3d")
    pool3 = [1, 1, 2, 2, 2] if first else [1, 2, 2, 2, 1]
    v = tf.nn.max_pool3d(tf.nn.relu(v), pool3, pool3, "SAME", data_format=fmt3, name="maxpool3d")
    v = tf.nn.conv3d(v, var("conv3d2/kernel"), [1] * 5, "SAME", data_format=fmt3, name="conv3d2")
    v = tf.nn.avg_pool3d(v, [1] * 5, [1] * 5, "SAME", data_format=fmt3, name="avgpool3d")
    flat3 = tf.reduce_mean(v, axis=spatial3)
    features = tf.concat([flat2, flat3], axis=1)
    return tf.nn.bias_add(tf.matmul(features, var("head/kernel")), var("head/bias"), name="logits")


def cnn(data_format: str = "channels_first", batch_size: int = 4, image_size: int = 8, depth: int = 4,
        channels: int = 3, num_classes: int = 5, learning_rate: float = 0.05, seed: int = 0) -> models.ModelGraph:
    """The model as a TF1 training graph (SGD on softmax cross-entropy, batch norm updates first).

    ``feed(rng)`` draws the batch channels-last and transposes it for channels_first, so two models of
    either layout fed from equal generators see the same data.
    """
    first = _check(data_format)
    image_shape = [batch_size, channels, image_size, image_size] if first else \
        [batch_size, image_size, image_size, channels]
    volume_shape = [batch_size, channels, depth, image_size, image_size] if first else \
        [batch_size, depth, image_size, image_size, channels]
    graph = tf.Graph()
    with graph.as_default():
        images = _v1.placeholder(tf.float32, image_shape, name="images")
        volumes = _v1.placeholder(tf.float32, volume_shape, name="volumes")
        labels = _v1.placeholder(tf.int32, [batch_size], name="labels")
        out = logits(images, volumes, data_format, initial_values(channels, num_classes, seed))
        loss, outputs = models._classification_head(out, labels, num_classes)  # pylint: disable=protected-access
        updates = _v1.get_collection(_v1.GraphKeys.UPDATE_OPS)
        train_op = models._minimize(_v1.train.GradientDescentOptimizer(learning_rate), loss, updates)  # noqa

        def feed_fn(rng):
            data = batch(rng, data_format, batch_size, image_size, depth, channels, num_classes)
            return dict(zip((images, volumes, labels), data))

        return models._finish(graph, f"cnn_{data_format}", loss, train_op,  # pylint: disable=protected-access
                              {"images": images, "volumes": volumes, "labels": labels}, outputs, feed_fn, False)


@contextlib.contextmanager
def image_data_format(data_format: str):
    """Keras' image data format set to `data_format` inside the block, restored after it."""
    _check(data_format)
    was = tf.keras.backend.image_data_format()
    tf.keras.backend.set_image_data_format(data_format)
    try:
        yield
    finally:
        tf.keras.backend.set_image_data_format(was)


def keras_model(data_format: str = "channels_first", image_size: int = 8, depth: int = 4, channels: int = 3,
                num_classes: int = 5, seed: int = 0) -> tf.keras.Model:
    """The model's layers as a Keras functional model (inputs: images, volumes), built under
    `backend.set_image_data_format(data_format)`: no layer names its data_format."""
    first = _check(data_format)
    initial = initial_values(channels, num_classes, seed)
    layers = tf.keras.layers

    def init(name):
        return tf.keras.initializers.Constant(initial[name])

    with image_data_format(data_format):
        axis = 1 if first else -1
        images = layers.Input([channels, image_size, image_size] if first else [image_size, image_size, channels])
        volumes = layers.Input([channels, depth, image_size, image_size] if first else
                               [depth, image_size, image_size, channels])
        x = layers.Conv2D(WIDTH_2D, 3, padding="same", kernel_initializer=init("conv1/kernel"),
                          bias_initializer=init("conv1/bias"))(images)
        x = layers.BatchNormalization(axis=axis)(x)
        x = layers.MaxPooling2D(2, padding="same")(layers.ReLU()(x))
        x = layers.Conv2D(WIDTH_2D, 3, padding="same", use_bias=False, kernel_initializer=init("conv2/kernel"))(x)
        x = layers.DepthwiseConv2D(3, padding="same", depth_multiplier=MULTIPLIER, use_bias=False,
                                   depthwise_initializer=init("depthwise/kernel"))(x)
        x = layers.AveragePooling2D(2, strides=1, padding="same")(layers.ReLU()(x))
        flat2 = layers.GlobalAveragePooling2D()(x)
        v = layers.Conv3D(WIDTH_3D, 3, padding="same", use_bias=False,
                          kernel_initializer=init("conv3d1/kernel"))(volumes)
        v = layers.BatchNormalization(axis=axis)(v)
        v = layers.MaxPooling3D(2, padding="same")(layers.ReLU()(v))
        v = layers.Conv3D(WIDTH_3D, 3, padding="same", use_bias=False, kernel_initializer=init("conv3d2/kernel"))(v)
        v = layers.AveragePooling3D(1, padding="same")(v)
        flat3 = layers.GlobalAveragePooling3D()(v)
        out = layers.Dense(num_classes, kernel_initializer=init("head/kernel"),
                           bias_initializer=init("head/bias"))(layers.Concatenate()([flat2, flat3]))
        return tf.keras.Model([images, volumes], out)
