"""npu_bridge.estimator.npu_ops simulated: NPU system init/shutdown as no-ops, dropout, LARS, fused Adam, LSTM cell.

The fused NPU ops (LARS, LARSV2, adam_apply_one*_assign, basic_lstm_cell) are built from TensorFlow
ops that compute what the NPU op documents; dropout runs on tf.nn.dropout.
"""

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


def _norm(tensor):
    return tf.sqrt(tf.reduce_sum(tf.square(tf.cast(tensor, tf.float32))))


def _lars_coefficient(weight, grad, weight_decay, hyperpara, epsilon):
    w_norm, g_norm = _norm(weight), _norm(grad)
    return hyperpara * w_norm / (g_norm + weight_decay * w_norm + epsilon)


def LARS(inputs_w, inputs_g, weight_decay, hyperpara=0.001, epsilon=0.00001, name=None):  # noqa: N802
    """Layer-wise adaptive rate scaling of gradients: a list of coeff * (g + weight_decay * w), one per pair.

    coeff = hyperpara * ||w|| / (||g|| + weight_decay * ||w|| + epsilon), per weight tensor (NPU op LARS).
    """
    _graph_only("LARS")
    if len(inputs_w) != len(inputs_g):
        raise ValueError(f"npu_ops.LARS: inputs_w has {len(inputs_w)} tensors but inputs_g has {len(inputs_g)}; "
                         "pass one gradient per weight")
    with tf.name_scope(name or "LARS"):
        outputs = []
        for weight, grad in zip(inputs_w, inputs_g):
            weight = tf.convert_to_tensor(weight)
            grad = tf.convert_to_tensor(grad)
            coeff = _lars_coefficient(weight, grad, weight_decay, hyperpara, epsilon)
            outputs.append(tf.cast(coeff, grad.dtype) * (grad + tf.cast(weight_decay, grad.dtype) * weight))
        return outputs


def LARSV2(input_weight, input_grad, weight_decay, learning_rate, hyperpara=0.001, epsilon=0.00001,  # noqa: N802
           use_clip=False, name=None):
    """LARS for one tensor (NPU op LarsV2): coeff * (g + weight_decay * w); use_clip: coeff = min(coeff / lr, 1)."""
    _graph_only("LARSV2")
    with tf.name_scope(name or "LARSV2"):
        weight = tf.convert_to_tensor(input_weight)
        grad = tf.convert_to_tensor(input_grad)
        weight_decay = tf.cast(weight_decay, tf.float32)
        coeff = _lars_coefficient(weight, grad, weight_decay, hyperpara, epsilon)
        if use_clip:
            coeff = tf.minimum(coeff / tf.cast(learning_rate, tf.float32), 1.0)
        return tf.cast(coeff, grad.dtype) * (grad + tf.cast(weight_decay, grad.dtype) * weight)


def _adam_apply_one(grad, v, m, var, lr, beta1, one_minus_beta1, beta2, one_minus_beta2, epsilon, decay, name):
    with tf.name_scope(name):
        next_m = beta1 * m + one_minus_beta1 * grad
        next_v = beta2 * v + one_minus_beta2 * tf.square(grad)
        update = next_m / (tf.sqrt(next_v) + epsilon)
        if decay is not None:
            update += decay * var
        next_var = var - lr * update
        assigned = [tf.compat.v1.assign(v, next_v), tf.compat.v1.assign(m, next_m), tf.compat.v1.assign(var, next_var)]
        return tuple(assigned)


def adam_apply_one_assign(input0, input1, input2, input3, input4, mul0_x, mul1_x, mul2_x, mul3_x, add2_y,
                          name=None):
    """The NPU's fused Adam step without bias correction, assigned in place (BERT's AdamWeightDecayOptimizer).

    input0 = grad, input1 = v, input2 = m, input3 = var (variables), input4 = learning rate,
    mul0_x = beta1, mul1_x = 1 - beta1, mul2_x = beta2, mul3_x = 1 - beta2, add2_y = epsilon:
    m' = mul0_x m + mul1_x g; v' = mul2_x v + mul3_x g^2; var' = var - lr m' / (sqrt(v') + add2_y).
    Returns the assigned (v', m', var').
    """
    _graph_only("adam_apply_one_assign")
    return _adam_apply_one(input0, input1, input2, input3, input4, mul0_x, mul1_x, mul2_x, mul3_x, add2_y, None,
                           name or "AdamApplyOneAssign")


def adam_apply_one_with_decay_assign(input0, input1, input2, input3, input4, mul0_x, mul1_x, mul2_x, mul3_x,
                                     mul4_x, add2_y, name=None):
    """adam_apply_one_assign plus decoupled weight decay: the update adds mul4_x * var before the learning rate."""
    _graph_only("adam_apply_one_with_decay_assign")
    return _adam_apply_one(input0, input1, input2, input3, input4, mul0_x, mul1_x, mul2_x, mul3_x, add2_y, mul4_x,
                           name or "AdamApplyOneWithDecayAssign")


def basic_lstm_cell(x, h, c, w, b, keep_prob, forget_bias, state_is_tuple, activation, name=None):
    """One LSTM step (NPU op BasicLSTMCell), as tf.nn.rnn_cell.BasicLSTMCell with kernel w and bias b.

    Returns (ct, ht, it, jt, ft, ot, tanhct): new cell and hidden state and the activated gates.
    """
    _graph_only("basic_lstm_cell")
    if keep_prob != 1.0:
        raise ValueError(f"npu_ops.basic_lstm_cell: keep_prob={keep_prob} is not simulated; pass 1.0 and apply "
                         "npu_ops.dropout to the input instead")
    if activation != "tanh":
        raise ValueError(f"npu_ops.basic_lstm_cell: activation {activation!r} is not supported; the NPU op uses 'tanh'")
    del state_is_tuple  # the op's outputs are separate tensors either way
    with tf.name_scope(name or "BasicLSTMCell"):
        gates = tf.matmul(tf.concat([x, h], axis=1), w) + b
        i, j, f, o = tf.split(gates, 4, axis=1)
        it, jt, ft, ot = tf.sigmoid(i), tf.tanh(j), tf.sigmoid(f + forget_bias), tf.sigmoid(o)
        ct = ft * c + it * jt
        tanhct = tf.tanh(ct)
        return ct, ot * tanhct, it, jt, ft, ot, tanhct
