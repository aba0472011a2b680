"""npu_bridge.estimator.npu_ops simulated: NPU system init/shutdown as no-ops, dropout on TensorFlow's kernels."""

import numbers

import tensorflow as tf


def _graph_only(name):
    if tf.executing_eagerly():
        raise RuntimeError(f"npu_ops.{name}() builds a graph op for a TF1 Session and is not compatible with "
                           "eager execution; call tf.compat.v1.disable_eager_execution() first "
                           "(importing npu_sim_bridge.npu_init does)")


def NPUInit(name=None):  # noqa: N802 - npu_bridge's name
    """The op that opens the NPU system; a no-op in the simulation."""
    _graph_only("NPUInit")
    return tf.no_op(name=name or "NPUInit")


def NPUShutdown(name=None):  # noqa: N802 - npu_bridge's name
    """The op that shuts the NPU system down; a no-op in the simulation."""
    _graph_only("NPUShutdown")
    return tf.no_op(name=name or "NPUShutdown")


def initialize_system(name=None):
    """Same as NPUInit."""
    return NPUInit(name)


def shutdown_system(name=None):
    """Same as NPUShutdown."""
    return NPUShutdown(name)


def dropout(x, keep_prob, noise_shape=None, seed=None, name=None):
    """npu_ops.dropout: keeps each element with probability keep_prob and scales it by 1/keep_prob.

    The NPU's DropOutGenMask/DropOutDoMask pair is simulated with tf.nn.dropout (same distribution,
    different random stream).
    """
    _graph_only("dropout")
    x = tf.convert_to_tensor(x, name="x")
    if not x.dtype.is_floating:
        raise ValueError(f"npu_ops.dropout: x must be a floating point tensor, got a {x.dtype.name} tensor")
    if isinstance(keep_prob, numbers.Real) and not 0 < keep_prob <= 1.0:
        raise ValueError(f"npu_ops.dropout: keep_prob must be in (0, 1], got {keep_prob}")
    if isinstance(keep_prob, float) and keep_prob == 1.0:
        return x
    return tf.nn.dropout(x, rate=1 - keep_prob, noise_shape=noise_shape, seed=seed, name=name)
