"""The adapter's distributed optimizers (npu_bridge.estimator.npu.npu_optimizer): gradients averaged over the ranks.

NPUDistributedOptimizer wraps a tf.compat.v1.train.Optimizer: compute_gradients all-reduces every
gradient (sum) and divides by the rank count; an IndexedSlices gradient is all-gathered (values
and indices) instead, as the adapter does. npu_distributed_optimizer_wrapper (also what
npu_keras_optimizer and KerasDistributeOptimizer give) does the same to the optimizer it is given
by replacing its compute_gradients / get_gradients / _compute_gradients, so Keras's graph-mode
training loop averages too; it returns that optimizer. With one rank (RANK_SIZE 1) the gradients
pass unchanged and no collective op is built.
"""

import tensorflow as tf

from npu_sim_bridge.graph.attr_names import DISTRIBUTED_MARK
from npu_sim_bridge.runtime.hccl import collectives, groups
from npu_sim_bridge.runtime.hccl.groups import WORLD_GROUP


def allreduce(tensor, average=True):
    """All-reduce a Tensor (sum) or IndexedSlices (all-gather) over the world; divided by the rank count if average."""
    size = groups.get_rank_size()
    if size == 1:
        return tensor
    if isinstance(tensor, tf.IndexedSlices):
        values = collectives.allgather(tensor.values, size)
        indices = collectives.allgather(tensor.indices, size)
        if average:
            values = tf.math.divide(values, tf.cast(size, values.dtype))
        return tf.IndexedSlices(values, indices, dense_shape=tensor.dense_shape)
    summed = collectives.allreduce(tensor, "sum")
    return tf.math.divide(summed, tf.cast(size, summed.dtype)) if average else summed


def reduce(tensor, root_rank, average=True, fusion=0, fusion_id=-1):
    """npu_optimizer.reduce: the sum (or mean) of the ranks' tensors; every rank gets it."""
    groups.check_group_rank(WORLD_GROUP, root_rank, "root_rank")
    return allreduce(tensor, average)


def average_gradients(grads_and_vars, scope):
    """[(grad, var)] with every gradient averaged over the ranks (unchanged with one rank)."""
    grads_and_vars = list(grads_and_vars)
    if groups.get_rank_size() == 1:
        return grads_and_vars
    with tf.name_scope(scope):
        return [(allreduce(grad) if grad is not None else None, var) for grad, var in grads_and_vars]


class NPUDistributedOptimizer(tf.compat.v1.train.Optimizer):
    """Averages the gradients over the ranks, then lets the wrapped optimizer apply them."""

    def __init__(self, optimizer, is_weight_update_sharding=False, name=None):
        if not isinstance(optimizer, tf.compat.v1.train.Optimizer):
            raise TypeError(f"NPUDistributedOptimizer wraps a tf.compat.v1.train.Optimizer, got "
                            f"{type(optimizer).__name__}; for a Keras optimizer use npu_keras_optimizer")
        super().__init__(name=name or f"Distributed{type(optimizer).__name__}", use_locking=False)
        self._optimizer = optimizer
        self._is_weight_update_sharding = is_weight_update_sharding

    def compute_gradients(self, *args, **kwargs):
        """The wrapped optimizer's gradients, each averaged over the ranks."""
        gradients = self._optimizer.compute_gradients(*args, **kwargs)
        return average_gradients(gradients, self._name + "_Allreduce")

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        return self._optimizer.apply_gradients(grads_and_vars, global_step, name)

    def get_slot(self, *args, **kwargs):
        return self._optimizer.get_slot(*args, **kwargs)

    def get_slot_names(self, *args, **kwargs):
        return self._optimizer.get_slot_names(*args, **kwargs)

    def variables(self):
        return self._optimizer.variables()


def npu_distributed_optimizer_wrapper(optimizer):
    """The optimizer (a Keras name is resolved first) with its gradient methods averaging over the ranks."""
    if isinstance(optimizer, str):
        optimizer = tf.keras.optimizers.get(optimizer)
    if getattr(optimizer, DISTRIBUTED_MARK, False):
        return optimizer
    if hasattr(optimizer, "compute_gradients"):
        compute_gradients = optimizer.compute_gradients

        def npu_compute_gradients(*args, **kwargs):
            return average_gradients(compute_gradients(*args, **kwargs), "Npu_Distributed_optimizer_Allreduce")

        optimizer.compute_gradients = npu_compute_gradients
    if hasattr(optimizer, "get_gradients"):
        get_gradients = optimizer.get_gradients

        def npu_get_gradients(loss, params):
            grads = get_gradients(loss, params)
            averaged = average_gradients(zip(grads, params), "Npu_Distributed_optimizer_get_grads_Allreduce")
            return [grad for grad, _ in averaged]

        optimizer.get_gradients = npu_get_gradients
    if hasattr(optimizer, "_compute_gradients"):
        private_compute_gradients = optimizer._compute_gradients  # pylint: disable=protected-access

        def npu_private_compute_gradients(loss, var_list, grad_loss=None, tape=None):
            kwargs = {"grad_loss": grad_loss} if tape is None else {"grad_loss": grad_loss, "tape": tape}
            gradients = private_compute_gradients(loss, var_list, **kwargs)
            return average_gradients(gradients, "Npu_Distributed_optimizer_compute_grads_Allreduce")

        optimizer._compute_gradients = npu_private_compute_gradients  # pylint: disable=protected-access
    setattr(optimizer, DISTRIBUTED_MARK, True)
    return optimizer


def npu_tf_optimizer(opt):
    """NPUDistributedOptimizer(opt)."""
    return NPUDistributedOptimizer(opt)


def npu_keras_optimizer(opt):
    """The Keras optimizer with its gradients averaged over the ranks (npu_distributed_optimizer_wrapper)."""
    return npu_distributed_optimizer_wrapper(opt)


def KerasDistributeOptimizer(optimizer, name="NpuKerasOptimizer", **kwargs):  # noqa: N802 - npu_bridge's name
    """npu_bridge's Keras all-reduce wrapper: the optimizer with its gradients averaged over the ranks."""
    return npu_distributed_optimizer_wrapper(optimizer)


def npu_allreduce(values, reduction="mean", fusion=1, fusion_id=-1, group=WORLD_GROUP):
    """All-reduce a value or list of values over the group: mean, sum, prod, max or min (IndexedSlices: gathered)."""
    collectives.check_reduction(reduction, ("mean",) + tuple(collectives.REDUCTIONS))
    size = groups.get_rank_size(group)
    items = list(values) if isinstance(values, (list, tuple)) else [values]
    if size == 1:
        reduced = [tf.identity(value, name="npu_allreduce") for value in items]
    else:
        reduced = [_npu_allreduce_one(value, reduction, size, fusion, fusion_id, group) for value in items]
    return reduced if isinstance(values, (list, tuple)) else reduced[0]


def _npu_allreduce_one(value, reduction, size, fusion, fusion_id, group):
    mean = reduction == "mean"
    if isinstance(value, tf.IndexedSlices):
        values = collectives.allgather(value.values, size, group)
        indices = collectives.allgather(value.indices, size, group)
        if mean:
            values = tf.math.divide(values, tf.cast(size, values.dtype))
        return tf.IndexedSlices(values, indices, dense_shape=value.dense_shape)
    summed = collectives.allreduce(value, "sum" if mean else reduction, fusion, fusion_id, group)
    return tf.math.divide(summed, tf.cast(size, summed.dtype)) if mean else summed
