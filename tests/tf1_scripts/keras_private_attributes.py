"""TF 1.15 Keras internals as migrated scripts use them: a TCN that walks `_layers`, Conv subclasses on `_convolution_op`.

Run with `npu-sim run`. Trains the same model twice: in a TF1 Session and with model.fit.
"""
import functools

import numpy as np
import tensorflow as tf
from tensorflow.python.keras.layers import Activation, Conv1D, Conv2D, Dense, Flatten, Layer


class ResidualBlock(Layer):
    """keras-tcn 3.x style: assigns `self._layers = []` in build and runs its layers from that list."""

    def __init__(self, filters, dilation, **kwargs):
        super(ResidualBlock, self).__init__(**kwargs)
        self.filters, self.dilation = filters, dilation

    def build(self, input_shape):
        self._layers = []
        shape = input_shape
        for layer in (CausalConv1D(self.filters, 2, dilation_rate=self.dilation), Activation("relu")):
            self._layers.append(layer)
            layer.build(shape)
            shape = layer.compute_output_shape(shape)
        self.shape_match = Conv1D(self.filters, 1)
        super(ResidualBlock, self).build(input_shape)

    def call(self, inputs, training=None):
        x = inputs
        for layer in self._layers:
            x = layer(x)
        return x + self.shape_match(inputs)


class TCN(Layer):
    """keras-tcn 2.x style: blocks set as attributes "to force keras to add the layers to self._layers", then walked."""

    def __init__(self, filters, dilations, **kwargs):
        super(TCN, self).__init__(**kwargs)
        self.filters, self.dilations = filters, dilations

    def build(self, input_shape):
        for dilation in self.dilations:
            block = ResidualBlock(self.filters, dilation, name="residual_block_%d" % dilation)
            self.__setattr__(block.name, block)
        super(TCN, self).build(input_shape)

    def call(self, inputs, training=None):
        x = inputs
        for layer in self._layers:
            if isinstance(layer, ResidualBlock):
                x = layer(x, training=training)
        return x[:, -1, :]


class CausalConv1D(Conv1D):
    """A TF 1.15-era copy of Conv1D's causal padding: `self._compute_causal_padding()` takes no inputs."""

    def call(self, inputs):
        padded = tf.pad(inputs, self._compute_causal_padding())
        return tf.nn.bias_add(self._convolution_op(padded, self.kernel), self.bias)

    def compute_output_shape(self, input_shape):
        return tf.TensorShape(input_shape)[:-1].concatenate([self.filters])


class ScaledConv2D(Conv2D):
    """Equalized learning rate, as StyleGAN ports write it on TF 1.15: the kernel scaled at run time."""

    def build(self, input_shape):
        super(ScaledConv2D, self).build(input_shape)
        self.runtime_coef = 1.0 / np.sqrt(np.prod(self.kernel_size) * int(input_shape[-1]))

    def call(self, inputs):
        outputs = self._convolution_op(inputs, self.kernel * self.runtime_coef)
        return self.activation(tf.nn.bias_add(outputs, self.bias))


def build_model():
    sequence = tf.keras.Input(shape=(12, 3), name="sequence")
    image = tf.keras.Input(shape=(6, 6, 2), name="image")
    tcn = TCN(4, [1, 2], name="tcn")
    features = tf.keras.layers.concatenate([tcn(sequence), Flatten()(ScaledConv2D(3, 3, activation="relu")(image))])
    return tf.keras.Model([sequence, image], Dense(1)(features)), tcn


rng = np.random.RandomState(0)
data = [rng.rand(32, 12, 3).astype(np.float32), rng.rand(32, 6, 6, 2).astype(np.float32)]
target = (data[0].sum(axis=(1, 2)) / 10 + data[1].mean(axis=(1, 2, 3)))[:, None].astype(np.float32)

with tf.Graph().as_default():
    tf.set_random_seed(0)
    model, tcn = build_model()
    # As in TF 1.15, _layers also holds the tracked lists (`self.dilations`): keras-tcn skips what is iterable.
    block_layers = [layer for layer in tcn._layers if not hasattr(layer, "__iter__")]
    blocks = [layer.name for layer in block_layers]
    block_sublayers = [type(layer).__name__ for layer in block_layers[0]._layers]
    loss = tf.reduce_mean(tf.square(model.outputs[0] - target))
    train_op = tf.train.AdamOptimizer(0.01).minimize(loss)
    trainable = len(tf.trainable_variables())
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        feed = dict(zip(model.inputs, data))
        losses = [sess.run([train_op, loss], feed)[1] for _ in range(30)]
print("KERAS blocks", " ".join(blocks), "sublayers", " ".join(block_sublayers), "variables", trainable)
print("KERAS session loss_first", round(float(losses[0]), 4), "loss_last", round(float(losses[-1]), 4))

with tf.Graph().as_default():
    tf.set_random_seed(0)
    model, tcn = build_model()
    model.compile(optimizer=tf.train.AdamOptimizer(0.01), loss="mse")
    history = model.fit(data, target, epochs=15, batch_size=16, verbose=0)
    depths = sorted(model._layers_by_depth)
print("KERAS fit loss_first", round(history.history["loss"][0], 4), "loss_last", round(history.history["loss"][-1], 4),
      "depths", len(depths), "model_layers", len(model._layers))

with tf.Graph().as_default():
    tf.set_random_seed(0)
    conv = Conv2D(2, 3, bias_initializer="ones")
    conv.build((None, 5, 5, 1))
    plain = conv._convolution_op  # the layer's own op, kept before it is replaced

    def masked_op(inputs, kernel, mask):
        return plain(inputs, kernel * mask)

    conv._convolution_op = functools.partial(masked_op, mask=tf.zeros_like(conv.kernel))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        masked = sess.run(conv(tf.ones([1, 5, 5, 1])))
print("KERAS masked_only_bias", bool(np.all(masked == 1.0)), "call_fn_args", TCN(1, [1])._call_fn_args)

try:
    tf.keras.Sequential()._layers_by_depth  # pylint: disable=pointless-statement
except AttributeError as error:
    print("KERAS unbuilt_depths", error)
