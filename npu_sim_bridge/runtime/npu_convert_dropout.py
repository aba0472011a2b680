"""npu_bridge.estimator.npu.npu_convert_dropout: importing it makes Keras Dropout layers use npu_ops.dropout.

As in the adapter, the import replaces `Dropout.call`, so every Keras Dropout layer (tf.keras's,
TensorFlow's legacy `tensorflow.python.keras` copy, and `tf.layers.Dropout` / `tf.layers.dropout`,
which subclass it) drops with npu_ops.dropout(keep_prob=1 - rate) while training and is the identity
otherwise. A layer with a noise_shape keeps TensorFlow's tf.nn.dropout, as the adapter does.
tf.nn.dropout itself is not changed (the adapter does not change it either).
restore_keras_dropout() puts the original `call` methods back.
"""

import numbers

import tensorflow as tf
from keras.src import backend as keras_backend
from keras.src.layers.regularization.dropout import Dropout as _KerasDropout
from keras.src.utils import control_flow_util
from tensorflow.python.keras.layers import core as _legacy_core

from npu_sim_bridge.runtime import npu_ops

_ORIGINAL_CALLS = {_KerasDropout: _KerasDropout.call, _legacy_core.Dropout: _legacy_core.Dropout.call}


def dropout_call(self, inputs, training=None):
    """Dropout.call as the adapter patches it: npu_ops.dropout while training, identity otherwise."""
    if isinstance(self.rate, numbers.Real) and self.rate == 0:
        return tf.identity(inputs)
    if training is None:
        training = keras_backend.learning_phase()
    noise_shape = self._get_noise_shape(inputs)  # pylint: disable=protected-access

    if noise_shape is not None:
        def dropped_inputs():
            return tf.nn.dropout(inputs, noise_shape=noise_shape, seed=self.seed, rate=self.rate)
    else:
        def dropped_inputs():
            return npu_ops.dropout(inputs, keep_prob=1 - self.rate, seed=self.seed)

    return control_flow_util.smart_cond(training, dropped_inputs, lambda: tf.identity(inputs))


def convert_keras_dropout():
    """Make every Keras Dropout layer use npu_ops.dropout (what importing this module does)."""
    for layer_class in _ORIGINAL_CALLS:
        layer_class.call = dropout_call


def restore_keras_dropout():
    """Undo convert_keras_dropout(): Keras Dropout layers use Keras's own dropout again."""
    for layer_class, call in _ORIGINAL_CALLS.items():
        layer_class.call = call


convert_keras_dropout()
