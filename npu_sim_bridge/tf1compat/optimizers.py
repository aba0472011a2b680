"""tf.contrib.opt's LARSOptimizer and LazyAdamOptimizer as tf.compat.v1.train optimizers."""

import tensorflow as tf

_V1 = tf.compat.v1


class LARSOptimizer(_V1.train.MomentumOptimizer):
    """Layer-wise Adaptive Rate Scaling (You et al. 2017), as tf.contrib.opt.LARSOptimizer.

    Each variable's step is momentum SGD on lr * trust * (g + weight_decay * w), where
    trust = eeta * |w| / (|g| + weight_decay * |w| + epsilon) when both norms are positive, else 1.
    Variables whose name contains an entry of skip_list take lr * g (no trust ratio, no decay).
    """

    def __init__(self, learning_rate, momentum=0.9, weight_decay=0.0001, eeta=0.001, epsilon=0.0,
                 name="LARSOptimizer", skip_list=None, use_nesterov=False):
        if momentum < 0.0:
            raise ValueError(f"LARSOptimizer: momentum should be non-negative, got {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"LARSOptimizer: weight_decay should be non-negative, got {weight_decay}")
        super().__init__(1.0, momentum, use_locking=False, name=name, use_nesterov=use_nesterov)
        self._lars_learning_rate = learning_rate
        self._weight_decay = weight_decay
        self._eeta = eeta
        self._epsilon = epsilon
        self._skip_list = skip_list

    def _scaled_gradient(self, grad, var):
        learning_rate = tf.cast(self._call_if_callable(self._lars_learning_rate), grad.dtype)
        if self._skip_list is not None and any(name in var.op.name for name in self._skip_list):
            return learning_rate * grad
        w_norm = tf.norm(var, ord=2)
        g_norm = tf.norm(grad, ord=2)
        trust = tf.where(tf.greater(w_norm, 0),
                         tf.where(tf.greater(g_norm, 0),
                                  self._eeta * w_norm / (g_norm + self._weight_decay * w_norm + self._epsilon),
                                  1.0),
                         1.0)
        return learning_rate * trust * (grad + self._weight_decay * var)

    def _apply_dense(self, grad, var):
        return super()._apply_dense(self._scaled_gradient(grad, var), var)

    def _resource_apply_dense(self, grad, handle):
        return super()._resource_apply_dense(self._scaled_gradient(grad, handle), handle)

    def _apply_sparse(self, grad, var):
        return self._apply_dense(tf.convert_to_tensor(grad), var)

    def _resource_apply_sparse(self, grad, handle, indices):
        dense = tf.math.unsorted_segment_sum(grad, indices, tf.shape(handle)[0])
        return self._resource_apply_dense(dense, handle)


class LazyAdamOptimizer(_V1.train.AdamOptimizer):
    """Adam that, for sparse gradients (embeddings), updates the moments and variables only at the rows used.

    Dense gradients update as AdamOptimizer. For IndexedSlices, m and v of the gathered rows decay
    and take the gradient; other rows keep their moments and values (tf.contrib.opt.LazyAdamOptimizer).
    """

    def _lazy_update(self, grad, indices, var, scatter_update, scatter_sub):
        beta1_power, beta2_power = self._get_beta_accumulators()
        dtype = var.dtype.base_dtype
        beta1_power = tf.cast(beta1_power, dtype)
        beta2_power = tf.cast(beta2_power, dtype)
        lr = tf.cast(self._lr_t, dtype) * tf.sqrt(1 - beta2_power) / (1 - beta1_power)
        beta1, beta2 = tf.cast(self._beta1_t, dtype), tf.cast(self._beta2_t, dtype)
        epsilon = tf.cast(self._epsilon_t, dtype)
        m, v = self.get_slot(var, "m"), self.get_slot(var, "v")
        m_rows = beta1 * tf.gather(m, indices) + (1 - beta1) * grad
        v_rows = beta2 * tf.gather(v, indices) + (1 - beta2) * tf.square(grad)
        m_update = scatter_update(m, indices, m_rows)
        v_update = scatter_update(v, indices, v_rows)
        with tf.control_dependencies([m_update, v_update]):
            var_update = scatter_sub(var, indices, lr * m_rows / (tf.sqrt(v_rows) + epsilon))
        return tf.group(var_update, m_update, v_update)

    def _apply_sparse(self, grad, var):
        values, indices = grad.values, grad.indices
        unique, position = tf.unique(indices)
        summed = tf.math.unsorted_segment_sum(values, position, tf.shape(unique)[0])
        return self._lazy_update(summed, unique, var,
                                 lambda ref, i, x: _V1.scatter_update(ref, i, x, use_locking=self._use_locking),
                                 lambda ref, i, x: _V1.scatter_sub(ref, i, x, use_locking=self._use_locking))

    def _resource_apply_sparse(self, grad, handle, indices):
        unique, position = tf.unique(indices)
        summed = tf.math.unsorted_segment_sum(grad, position, tf.shape(unique)[0])
        return self._lazy_update(summed, unique, handle,
                                 lambda ref, i, x: ref.scatter_update(tf.IndexedSlices(x, i)),
                                 lambda ref, i, x: ref.scatter_sub(tf.IndexedSlices(x, i)))
