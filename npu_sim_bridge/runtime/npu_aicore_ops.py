"""npu_bridge.estimator.npu_aicore_ops: FastGelu as the adapter's op, dropout_v3, centralization, prelu, nonzero.

fast_gelu(x) builds one `FastGelu` node (gradient: one `FastGeluGrad(dy, x)`), registered by the
same C++ op library as Gelu (native/npu_ops.cc): x * sigmoid(1.702 x), which is the Ascend op's
x / (1 + exp(-1.702|x|)) * exp(0.851 (x - |x|)). The operator library classifies it (FastGelu).
dropout_v3 drops as npu_ops.dropout does; the others are small TensorFlow compositions.
"""

import types

import tensorflow as tf
from tensorflow.python.framework import ops

from npu_sim_bridge.native.loader import load_npu_ops
from npu_sim_bridge.runtime import npu_ops


def fast_gelu(x, name=None):
    """x * sigmoid(1.702 x) as one `FastGelu` node."""
    return load_npu_ops().fast_gelu(x, name=name)


def fast_gelu_grad(dy, x, name=None):
    """dy * d fast_gelu(x) / dx as one `FastGeluGrad` node."""
    return load_npu_ops().fast_gelu_grad(dy, x, name=name)


@ops.RegisterGradient("FastGelu")
def _fast_gelu_gradient(op, grad):
    return [fast_gelu_grad(grad, op.inputs[0])]


@ops.RegisterGradient("FastGeluGrad")
def _fast_gelu_grad_gradient(op, grad):
    """Second derivative, from the closed form: s = sigmoid(kx), f' = s + kx s(1-s), f'' = k s(1-s)(2 + kx(1-2s))."""
    dy, x = op.inputs
    k = tf.constant(1.702, x.dtype)
    s = tf.sigmoid(k * x)
    first = s + k * x * s * (1.0 - s)
    second = k * s * (1.0 - s) * (2.0 + k * x * (1.0 - 2.0 * s))
    return [grad * first, grad * dy * second]


def dropout_v3(x, keep_prob, noise_shape=None, seed=None, name=None):
    """The NPU's DropOutGenMaskV3/DoMaskV3 dropout: the same distribution as npu_ops.dropout."""
    return npu_ops.dropout(x, keep_prob, noise_shape=noise_shape, seed=seed, name=name)


def centralization(x, axes, name=None):
    """x - reduce_mean(x, axes, keepdims=True)."""
    with tf.name_scope(name or "Centralization"):
        x = tf.convert_to_tensor(x, name="x")
        return x - tf.reduce_mean(x, axis=axes, keepdims=True)


def prelu(x, weight):
    """max(x, 0) + weight * min(x, 0)."""
    return tf.nn.relu(x) - weight * tf.nn.relu(-x)


def nonzero(x, transpose=False, output_type=tf.int64, name=None):
    """Indices of the non-zero elements, [count, rank] in row-major order ([rank, count] with transpose)."""
    with tf.name_scope(name or "NonZero"):
        indices = tf.cast(tf.where(tf.not_equal(x, tf.zeros_like(x))), output_type)
        return tf.transpose(indices) if transpose else indices


# The adapter's generated-op namespace, under the module's own name (`npu_aicore_ops.fast_gelu(x)`).
npu_aicore_ops = types.SimpleNamespace(fast_gelu=fast_gelu, fast_gelu_grad=fast_gelu_grad, dropout_v3=dropout_v3,
                                       centralization=centralization, prelu=prelu, nonzero=nonzero)
