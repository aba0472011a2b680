"""NPUOptimizer: the newer adapter's one optimizer for loss scaling and gradient all-reduce.

NPUOptimizer(opt, loss_scale_manager, is_distributed, is_loss_scale) is built from the simulator's
own pieces, so each behaves as it does alone: with is_distributed the wrapped optimizer is an
NPUDistributedOptimizer (runtime/distributed.py: what it does with several ranks is what this does),
and with is_loss_scale that is wrapped in NPULossScaleOptimizer(..., is_distributed) (scaled loss,
unscaled gradients, the step skipped when a gradient overflows). is_tailing_optimization only
changes the order of communication on the NPU; it is accepted and warned about once.
"""

import warnings

import tensorflow as tf

from npu_sim_bridge.runtime.distributed import NPUDistributedOptimizer
from npu_sim_bridge.runtime.loss_scale import LossScaleManager, NPULossScaleOptimizer

_warned = []


class NPUOptimizer(tf.compat.v1.train.Optimizer):
    """Loss scaling (is_loss_scale) and gradient averaging over ranks (is_distributed) around `opt`."""

    def __init__(self, opt, loss_scale_manager=None, is_distributed=False, is_loss_scale=False,
                 is_tailing_optimization=False, name=None):
        if not isinstance(opt, tf.compat.v1.train.Optimizer):
            raise TypeError(f"NPUOptimizer wraps a tf.compat.v1.train.Optimizer, got {type(opt).__name__}")
        if is_loss_scale and not isinstance(loss_scale_manager, LossScaleManager):
            got = "None" if loss_scale_manager is None else type(loss_scale_manager).__name__
            raise ValueError(f"NPUOptimizer(is_loss_scale=True) needs loss_scale_manager=FixedLossScaleManager(...) "
                             f"or ExponentialUpdateLossScaleManager(...), got {got}")
        if is_tailing_optimization and not _warned:
            _warned.append(True)
            warnings.warn("NPUOptimizer: is_tailing_optimization only reorders the NPU's all-reduce; accepted, "
                          "no effect in the simulation", UserWarning, stacklevel=2)
        super().__init__(use_locking=False, name=name or "NPUOptimizer")
        inner = NPUDistributedOptimizer(opt) if is_distributed else opt
        self._opt = opt
        self._inner = NPULossScaleOptimizer(inner, loss_scale_manager, is_distributed=is_distributed) \
            if is_loss_scale else inner
        self._loss_scale_manager = loss_scale_manager if is_loss_scale else None
        self._is_distributed = is_distributed
        self._is_loss_scale = is_loss_scale
        self._is_tailing_optimization = is_tailing_optimization

    @property
    def is_overall_finite(self):
        """The last step's all-gradients-finite bool tensor (None without loss scaling)."""
        return getattr(self._inner, "is_overall_finite", None) if self._is_loss_scale else None

    def compute_gradients(self, *args, **kwargs):
        return self._inner.compute_gradients(*args, **kwargs)

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        return self._inner.apply_gradients(grads_and_vars, global_step, name)

    def get_slot(self, *args, **kwargs):
        return self._opt.get_slot(*args, **kwargs)

    def get_slot_names(self, *args, **kwargs):
        return self._opt.get_slot_names(*args, **kwargs)

    def variables(self):
        return self._inner.variables()
