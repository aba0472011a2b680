"""npu_bridge.tbe.npu_vector_ops: BERT's fused LAMB steps (lamb_apply_optimizer_assign, lamb_apply_weight_assign).

Built from TensorFlow ops that compute what the NPU ops document, with the variables assigned in
place as on the NPU; the LAMB trust ratio's norms come from the script (as in ModelZoo's BERT).
"""

import tensorflow as tf


def lamb_apply_optimizer_assign(input0, input1, input2, input3, mul0_x, mul1_x, mul2_x, mul3_x, add2_y, steps,
                                do_use_weight, weight_decay_rate, name=None):
    """The LAMB update direction; assigns m and v. Returns (update, next_v, next_m).

    input0 = grad, input1 = v, input2 = m (variables), input3 = var, mul0_x = beta1, mul1_x = 1 - beta1,
    mul2_x = beta2, mul3_x = 1 - beta2, add2_y = epsilon, steps = the step count (float, from 1):
    m' = beta1 m + (1-beta1) g; v' = beta2 v + (1-beta2) g^2;
    update = (m' / (1 - beta1^steps)) / (sqrt(v' / (1 - beta2^steps)) + epsilon) + do_use_weight * decay * var.
    """
    with tf.name_scope(name or "LambApplyOptimizerAssign"):
        grad, v, m, var = input0, input1, input2, input3
        next_m = mul0_x * m + mul1_x * grad
        next_v = mul2_x * v + mul3_x * tf.square(grad)
        steps = tf.cast(steps, next_m.dtype)
        m_hat = next_m / (1.0 - tf.pow(tf.cast(mul0_x, next_m.dtype), steps))
        v_hat = next_v / (1.0 - tf.pow(tf.cast(mul2_x, next_v.dtype), steps))
        update = m_hat / (tf.sqrt(v_hat) + add2_y)
        update += tf.cast(do_use_weight, update.dtype) * tf.cast(weight_decay_rate, update.dtype) * var
        assigned_v = tf.compat.v1.assign(v, next_v)
        assigned_m = tf.compat.v1.assign(m, next_m)
        with tf.control_dependencies([assigned_v, assigned_m]):
            return tf.identity(update), tf.identity(assigned_v), tf.identity(assigned_m)


def lamb_apply_weight_assign(input0, input1, input2, input3, input4, name=None):
    """var -= ratio * lr * update, ratio = |w| / |update| when both are > 0, else 1; returns the assigned var.

    input0 = |w|, input1 = |update| (norms), input2 = learning rate, input3 = update, input4 = var.
    """
    with tf.name_scope(name or "LambApplyWeightAssign"):
        w_norm, g_norm, lr, update, var = input0, input1, input2, input3, input4
        ratio = tf.where(w_norm > 0, tf.where(g_norm > 0, w_norm / g_norm, tf.ones_like(w_norm)), tf.ones_like(w_norm))
        return tf.compat.v1.assign_sub(var, tf.cast(ratio * lr, update.dtype) * update)
