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


class NadamOptimizer(_V1.train.AdamOptimizer):
    """Adam with Nesterov momentum (Dozat 2016), as tf.contrib.opt.NadamOptimizer: TensorFlow's ApplyAdam with
    use_nesterov. Sparse gradients are summed into a dense one first."""

    def _apply_dense(self, grad, var):
        beta1_power, beta2_power = self._get_beta_accumulators()
        dtype = var.dtype.base_dtype
        return tf.raw_ops.ApplyAdam(
            var=var, m=self.get_slot(var, "m"), v=self.get_slot(var, "v"),
            beta1_power=tf.cast(beta1_power, dtype), beta2_power=tf.cast(beta2_power, dtype),
            lr=tf.cast(self._lr_t, dtype), beta1=tf.cast(self._beta1_t, dtype), beta2=tf.cast(self._beta2_t, dtype),
            epsilon=tf.cast(self._epsilon_t, dtype), grad=grad, use_locking=self._use_locking, use_nesterov=True)

    def _resource_apply_dense(self, grad, var):
        beta1_power, beta2_power = self._get_beta_accumulators()
        dtype = var.dtype.base_dtype
        return tf.raw_ops.ResourceApplyAdam(
            var=var.handle, m=self.get_slot(var, "m").handle, v=self.get_slot(var, "v").handle,
            beta1_power=tf.cast(beta1_power, dtype), beta2_power=tf.cast(beta2_power, dtype),
            lr=tf.cast(self._lr_t, dtype), beta1=tf.cast(self._beta1_t, dtype), beta2=tf.cast(self._beta2_t, dtype),
            epsilon=tf.cast(self._epsilon_t, dtype), grad=grad, use_locking=self._use_locking, use_nesterov=True)

    def _apply_sparse(self, grad, var):
        return self._apply_dense(tf.convert_to_tensor(grad), var)

    def _resource_apply_sparse(self, grad, handle, indices):
        return self._resource_apply_dense(tf.math.unsorted_segment_sum(grad, indices, tf.shape(handle)[0]), handle)


class _DecoupledWeightDecay:
    """Decoupled weight decay (Loshchilov & Hutter): each step first does var -= weight_decay * var.

    minimize/apply_gradients take decay_var_list: only those variables decay (default: all updated).
    """

    def __init__(self, weight_decay, *args, **kwargs):
        self._weight_decay = weight_decay
        self._decay_var_list = None
        super().__init__(*args, **kwargs)

    def minimize(self, loss, global_step=None, var_list=None, gate_gradients=_V1.train.Optimizer.GATE_OP,
                 aggregation_method=None, colocate_gradients_with_ops=False, name=None, grad_loss=None,
                 decay_var_list=None):
        self._decay_var_list = {var.ref() for var in decay_var_list} if decay_var_list else None
        return super().minimize(loss, global_step=global_step, var_list=var_list, gate_gradients=gate_gradients,
                                aggregation_method=aggregation_method,
                                colocate_gradients_with_ops=colocate_gradients_with_ops, name=name,
                                grad_loss=grad_loss)

    def apply_gradients(self, grads_and_vars, global_step=None, name=None, decay_var_list=None):
        if decay_var_list:
            self._decay_var_list = {var.ref() for var in decay_var_list}
        return super().apply_gradients(grads_and_vars, global_step=global_step, name=name)

    def _decays(self, var):
        return self._decay_var_list is None or var.ref() in self._decay_var_list

    def _decay(self, var):
        weight_decay = tf.cast(self._call_if_callable(self._weight_decay), var.dtype.base_dtype)
        return _V1.assign_sub(var, weight_decay * var, use_locking=self._use_locking)

    def _apply_dense(self, grad, var):
        if not self._decays(var):
            return super()._apply_dense(grad, var)
        with tf.control_dependencies([self._decay(var)]):
            return super()._apply_dense(grad, var)

    def _resource_apply_dense(self, grad, var):
        if not self._decays(var):
            return super()._resource_apply_dense(grad, var)
        with tf.control_dependencies([self._decay(var)]):
            return super()._resource_apply_dense(grad, var)

    def _apply_sparse(self, grad, var):
        if not self._decays(var):
            return super()._apply_sparse(grad, var)
        weight_decay = tf.cast(self._call_if_callable(self._weight_decay), var.dtype.base_dtype)
        decay = _V1.scatter_sub(var, grad.indices, weight_decay * tf.gather(var, grad.indices))
        with tf.control_dependencies([decay]):
            return super()._apply_sparse(grad, var)

    def _resource_apply_sparse(self, grad, var, indices):
        if not self._decays(var):
            return super()._resource_apply_sparse(grad, var, indices)
        weight_decay = tf.cast(self._call_if_callable(self._weight_decay), var.dtype.base_dtype)
        decay = var.scatter_sub(tf.IndexedSlices(weight_decay * tf.gather(var, indices), indices))
        with tf.control_dependencies([decay]):
            return super()._resource_apply_sparse(grad, var, indices)


class AdamWOptimizer(_DecoupledWeightDecay, _V1.train.AdamOptimizer):
    """tf.contrib.opt.AdamWOptimizer(weight_decay, learning_rate, beta1, beta2, epsilon): Adam, decoupled decay."""

    def __init__(self, weight_decay, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8, use_locking=False,
                 name="AdamW"):
        super().__init__(weight_decay, learning_rate=learning_rate, beta1=beta1, beta2=beta2, epsilon=epsilon,
                         use_locking=use_locking, name=name)


class MomentumWOptimizer(_DecoupledWeightDecay, _V1.train.MomentumOptimizer):
    """tf.contrib.opt.MomentumWOptimizer(weight_decay, learning_rate, momentum): momentum, decoupled decay."""

    def __init__(self, weight_decay, learning_rate, momentum, use_locking=False, name="MomentumW",
                 use_nesterov=False):
        super().__init__(weight_decay, learning_rate=learning_rate, momentum=momentum, use_locking=use_locking,
                         name=name, use_nesterov=use_nesterov)


class MovingAverageOptimizer(_V1.train.Optimizer):
    """Wraps an optimizer: after each update, exponential moving averages of the variables are updated too.

    swapping_saver() saves (and restores) the averages under the variables' own names, so an evaluation
    graph restoring that checkpoint gets the averaged weights (tf.contrib.opt.MovingAverageOptimizer).
    """

    def __init__(self, opt, average_decay=0.9999, num_updates=None, sequential_update=True):
        super().__init__(opt._use_locking, "MovingAverage")  # pylint: disable=protected-access
        self._optimizer = opt
        self._ema = _V1.train.ExponentialMovingAverage(average_decay, num_updates=num_updates, zero_debias=False)
        self._sequential_update = sequential_update
        self._averaged = []

    def compute_gradients(self, *args, **kwargs):
        return self._optimizer.compute_gradients(*args, **kwargs)

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        grads_and_vars = list(grads_and_vars)
        variables = [var for grad, var in grads_and_vars if grad is not None]
        known = {var.ref() for var in self._averaged}
        self._averaged.extend(var for var in variables if var.ref() not in known)
        train_op = self._optimizer.apply_gradients(grads_and_vars, global_step=global_step, name=name)
        dependencies = [train_op] if self._sequential_update else []
        with tf.control_dependencies(dependencies):
            average_op = self._ema.apply(variables)
        return tf.group(train_op, average_op, name="train_with_avg")

    def swapping_saver(self, var_list=None, name="swapping_saver", **kwargs):
        """A Saver that writes/reads each averaged variable's average under the variable's name."""
        if not self._averaged:
            raise RuntimeError("MovingAverageOptimizer.swapping_saver: call apply_gradients or minimize first")
        if var_list is None:
            var_list = _V1.global_variables()
        averaged = {var.ref() for var in self._averaged}
        averages = {self._ema.average(var).ref() for var in self._averaged}
        names = {}
        for var in var_list:
            if var.ref() in averages:
                continue  # an average: saved under its variable's name below
            names[var.op.name] = self._ema.average(var) if var.ref() in averaged else var
        return _V1.train.Saver(names, name=name, **kwargs)
