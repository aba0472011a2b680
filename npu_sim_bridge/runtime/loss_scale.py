"""Loss scaling with overflow skipping: NPULossScaleOptimizer and its loss scale managers.

NPULossScaleOptimizer(opt, manager) is a tf.compat.v1.train.Optimizer. compute_gradients
multiplies the loss by the manager's scale and the gradients by its reciprocal. apply_gradients
checks that every gradient is finite; only then does it apply them (inside tf.cond, so on an
overflow step neither the variables, the slots nor global_step change) and it always updates the
manager. The NPU reads its float status register for that check; the simulation tests the
gradients, in which an emulated float16 overflow (> 65504) shows up as inf.

Update rules of ExponentialUpdateLossScaleManager (those of npu_bridge, from TF 1.x contrib):
- finite step: good_steps + 1; when that reaches incr_every_n_steps the scale is multiplied by
  incr_ratio (kept when the product would overflow float32) and both counters reset to 0;
- overflow step: bad_steps + 1 and good_steps = 0; when bad_steps reaches decr_every_n_nan_or_inf
  the scale becomes max(1, scale * decr_ratio) and both counters reset to 0. Overflow steps need
  not be consecutive, finite steps do.
The state is three non-trainable global variables, `loss_scale` (float32), `good_steps` and
`bad_steps` (int32), created at the top level of the graph on first use (one set per graph), so
checkpoints carry them and restore them.

Names and types scripts fetch, as npu_bridge on TensorFlow 1.15 gives them: `loss_scale:0` is a float32
tensor (FixedLossScaleManager: a constant by that name; ExponentialUpdateLossScaleManager: a reference
variable in graph mode, as TF 1.15 created it, so the name is its float value, not a resource handle),
and `overflow_status_reduce_all:0` is the bool "all gradients finite" of the step, in the name scope
apply_gradients is called in (`apply_grads/overflow_status_reduce_all:0` under
`tf.name_scope("apply_grads")`, as BERT-style scripts write it); with is_distributed it is the status
after the all-reduce over the ranks.
"""

import numbers
import weakref

import numpy as np
import tensorflow as tf

from npu_sim_bridge.runtime.hccl import collectives, groups

_FLOAT32_MAX = float(np.finfo(np.float32).max)
LOSS_SCALE_NAME = "loss_scale"
OVERFLOW_STATUS_NAME = "overflow_status_reduce_all"


class LossScaleManager:
    """What NPULossScaleOptimizer needs from a manager: the scale tensor and the op updating it."""

    def get_loss_scale(self):
        """The loss scale of the default graph (a float32 scalar tensor or variable)."""
        raise NotImplementedError

    def update_loss_scale(self, finite_grads):
        """An op updating the scale given a bool scalar tensor: were all gradients finite this step."""
        raise NotImplementedError

    def state_variables(self):
        """The manager's variables in the default graph, created so far (none for a fixed scale)."""
        return []


def _check_scale(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number >= 1, got {type(value).__name__} {value!r}")
    if not value >= 1:  # also rejects nan
        raise ValueError(f"loss scale must be at least 1, got {name}={value}")


class FixedLossScaleManager(LossScaleManager):
    """A constant loss scale. With enable_overflow_check=False every step applies, finite or not."""

    def __init__(self, loss_scale, enable_overflow_check=True):
        _check_scale("loss_scale", loss_scale)
        self._loss_scale_value = float(loss_scale)
        self._enable_overflow_check = bool(enable_overflow_check)
        self._scales = weakref.WeakKeyDictionary()  # graph -> its `loss_scale` constant

    def get_enable_overflow_check(self):
        """Whether NPULossScaleOptimizer skips steps with non-finite gradients."""
        return self._enable_overflow_check

    def get_loss_scale(self):
        """The float32 constant `loss_scale` at the top level of the default graph (one per graph)."""
        graph = tf.compat.v1.get_default_graph()
        scale = self._scales.get(graph)
        if scale is None:
            with tf.init_scope(), graph.name_scope(None):
                scale = tf.constant(self._loss_scale_value, dtype=tf.float32, name=LOSS_SCALE_NAME)
            self._scales[graph] = scale
        return scale

    def update_loss_scale(self, finite_grads):
        del finite_grads
        return tf.no_op(name="update_loss_scale")


class ExponentialUpdateLossScaleManager(LossScaleManager):
    """A loss scale that grows after a run of finite steps and shrinks after overflow steps (see module doc)."""

    def __init__(self, init_loss_scale, incr_every_n_steps, decr_every_n_nan_or_inf=2, incr_ratio=2,
                 decr_ratio=0.8):
        _check_scale("init_loss_scale", init_loss_scale)
        for name, value in (("incr_every_n_steps", incr_every_n_steps),
                            ("decr_every_n_nan_or_inf", decr_every_n_nan_or_inf)):
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        if isinstance(incr_ratio, bool) or not isinstance(incr_ratio, numbers.Real) or not incr_ratio >= 1:
            raise ValueError(f"incr_ratio must be a number >= 1, got {incr_ratio!r}")
        if isinstance(decr_ratio, bool) or not isinstance(decr_ratio, numbers.Real) or not 0 < decr_ratio <= 1:
            raise ValueError(f"decr_ratio must be a number in (0, 1], got {decr_ratio!r}")
        self._init_loss_scale = float(init_loss_scale)
        self._incr_every_n_steps = int(incr_every_n_steps)
        self._decr_every_n_nan_or_inf = int(decr_every_n_nan_or_inf)
        self._incr_ratio = float(incr_ratio)
        self._decr_ratio = float(decr_ratio)
        self._state = {}  # graph -> (loss_scale, good_steps, bad_steps)

    def _variables(self):
        graph = tf.compat.v1.get_default_graph()
        state = self._state.get(graph)
        if state is None:
            with tf.init_scope(), graph.name_scope(None):
                # Reference variables in graph mode, as TensorFlow 1.15 made them: `loss_scale:0` is then
                # the float32 value scripts fetch by name. (Eager execution has resource variables only.)
                resource = tf.executing_eagerly()
                state = (
                    tf.compat.v1.Variable(self._init_loss_scale, name=LOSS_SCALE_NAME, dtype=tf.float32,
                                          trainable=False, use_resource=resource),
                    tf.compat.v1.Variable(0, name="good_steps", dtype=tf.int32, trainable=False,
                                          use_resource=resource),
                    tf.compat.v1.Variable(0, name="bad_steps", dtype=tf.int32, trainable=False,
                                          use_resource=resource),
                )
            self._state[graph] = state
        return state

    def get_loss_scale(self):
        return self._variables()[0]

    @property
    def variables(self):
        """(loss_scale, good_steps, bad_steps) of the default graph."""
        return self._variables()

    def state_variables(self):
        return list(self._state.get(tf.compat.v1.get_default_graph(), ()))

    def update_loss_scale(self, finite_grads):
        scale_var, good_var, bad_var = self._variables()
        with tf.name_scope("update_loss_scale"):
            finite = tf.convert_to_tensor(finite_grads, dtype=tf.bool)
            scale = scale_var.read_value()
            good = good_var.read_value()
            bad = bad_var.read_value()
            grow = tf.logical_and(finite, good + 1 >= self._incr_every_n_steps)
            shrink = tf.logical_and(tf.logical_not(finite), bad + 1 >= self._decr_every_n_nan_or_inf)
            grown = tf.where(scale < _FLOAT32_MAX / self._incr_ratio, scale * self._incr_ratio, scale)
            shrunk = tf.maximum(1.0, scale * self._decr_ratio)
            new_scale = tf.where(grow, grown, tf.where(shrink, shrunk, scale))
            zero = tf.zeros_like(good)
            new_good = tf.where(finite, tf.where(grow, zero, good + 1), zero)
            new_bad = tf.where(tf.logical_or(grow, shrink), zero, tf.where(finite, bad, bad + 1))
            with tf.control_dependencies([scale, good, bad]):
                return tf.group(scale_var.assign(new_scale), good_var.assign(new_good), bad_var.assign(new_bad))


def all_finite(gradients, name=OVERFLOW_STATUS_NAME):
    """A bool scalar: every element of every gradient (Tensor or IndexedSlices, None skipped) is finite."""
    checks = []
    for gradient in gradients:
        if gradient is None:
            continue
        values = gradient.values if isinstance(gradient, tf.IndexedSlices) else gradient
        checks.append(tf.reduce_all(tf.math.is_finite(values)))
    if not checks:
        return tf.constant(True, name=name)
    return tf.reduce_all(tf.stack(checks), name=name)


def finite_on_every_rank(finite):
    """A bool scalar: `finite` holds on every rank (one all-reduce of the overflow flag; itself with one rank)."""
    if groups.get_rank_size() == 1:
        return finite
    with tf.name_scope("overflow_status_allreduce"):
        overflow = tf.cast(tf.logical_not(finite), tf.float32)
        return tf.equal(collectives.allreduce(overflow, "max"), 0.0)


class NPULossScaleOptimizer(tf.compat.v1.train.Optimizer):
    """Loss scaling around a tf.compat.v1.train.Optimizer; skips steps whose gradients overflow.

    With is_distributed=True and more than one rank, the overflow status is all-reduced (max)
    over the ranks before the decision, so an overflow on any rank makes every rank skip that
    step and update its loss scale the same way. After apply_gradients, `is_overall_finite` is the
    bool tensor of the last step built (fetch it to log skipped steps).
    """

    def __init__(self, opt, loss_scale_manager, is_distributed=False):
        if not isinstance(opt, tf.compat.v1.train.Optimizer):
            raise TypeError(
                f"NPULossScaleOptimizer wraps a tf.compat.v1.train.Optimizer, got {type(opt).__name__}; for a Keras "
                "optimizer use enable_mixed_precision(opt) or tf.keras.mixed_precision.LossScaleOptimizer")
        if not isinstance(loss_scale_manager, LossScaleManager):
            raise TypeError(f"loss_scale_manager must be a FixedLossScaleManager or ExponentialUpdateLossScaleManager, "
                            f"got {type(loss_scale_manager).__name__}")
        super().__init__(use_locking=False, name="NPULossScaleOptimizer")
        self._opt = opt
        self._loss_scale_manager = loss_scale_manager
        self._is_distributed = is_distributed
        self.is_overall_finite = None

    @property
    def loss_scale_manager(self):
        return self._loss_scale_manager

    def compute_gradients(self, loss, var_list=None, gate_gradients=tf.compat.v1.train.Optimizer.GATE_OP,
                          aggregation_method=None, colocate_gradients_with_ops=False, grad_loss=None):
        """The wrapped optimizer's gradients of loss * scale, multiplied by 1 / scale."""
        loss_value = loss() if callable(loss) else loss
        loss_scale = self._loss_scale_manager.get_loss_scale()
        scaled_loss = loss_value * tf.cast(loss_scale, loss_value.dtype.base_dtype)
        grads_and_vars = self._opt.compute_gradients(
            scaled_loss, var_list=var_list, gate_gradients=gate_gradients, aggregation_method=aggregation_method,
            colocate_gradients_with_ops=colocate_gradients_with_ops, grad_loss=grad_loss)
        reciprocal = tf.math.reciprocal(tf.cast(loss_scale, tf.float32))
        unscaled = []
        for gradient, variable in grads_and_vars:
            if gradient is not None:
                gradient = gradient * tf.cast(reciprocal, gradient.dtype.base_dtype)
            unscaled.append((gradient, variable))
        return unscaled

    def _overflow_check_enabled(self):
        if isinstance(self._loss_scale_manager, FixedLossScaleManager):
            return self._loss_scale_manager.get_enable_overflow_check()
        return True

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        """Apply the gradients when all are finite, and update the loss scale manager."""
        grads_and_vars = tuple(grads_and_vars)
        gradients = [gradient for gradient, _ in grads_and_vars]
        if self._overflow_check_enabled() and self._is_distributed:
            local = all_finite(gradients, name="local_overflow_status")
            finite = tf.reduce_all(finite_on_every_rank(local), name=OVERFLOW_STATUS_NAME)
        elif self._overflow_check_enabled():
            finite = all_finite(gradients)
        else:
            finite = tf.constant(True)
        self.is_overall_finite = finite
        self._create_wrapped_variables(grads_and_vars)

        def apply():
            with tf.control_dependencies([self._opt.apply_gradients(grads_and_vars, global_step, name)]):
                return tf.constant(True)

        def skip():
            return tf.constant(False)

        applied = tf.cond(finite, apply, skip, name="apply_if_finite")
        return tf.group(applied, self._loss_scale_manager.update_loss_scale(finite), name=name)

    def _create_wrapped_variables(self, grads_and_vars):
        """The wrapped optimizer's slots and non-slot variables (Adam's beta1_power, beta2_power), made
        where its own apply_gradients would make them, not inside the apply_if_finite cond: their
        checkpoint keys are then the plain optimizer's, so a checkpoint moves between this and the
        plain optimizer (the loss scale's variables are extra keys). Its apply_gradients in the cond
        finds them made."""
        var_list = [variable for gradient, variable in grads_and_vars if gradient is not None]
        if var_list:
            with tf.init_scope():
                self._opt._create_slots(var_list)  # noqa: SLF001 - what Optimizer.apply_gradients calls first

    def get_slot(self, *args, **kwargs):
        return self._opt.get_slot(*args, **kwargs)

    def get_slot_names(self, *args, **kwargs):
        return self._opt.get_slot_names(*args, **kwargs)

    def variables(self):
        """The wrapped optimizer's variables and the loss scale manager's (Keras initializes these)."""
        return list(self._opt.variables()) + self._loss_scale_manager.state_variables()

    def __getattr__(self, attr):
        # Reached only for names this class lacks: npu_bridge forwards them to the wrapped optimizer.
        if attr.startswith("__") or attr in ("_opt", "_loss_scale_manager"):
            raise AttributeError(attr)
        return getattr(self._opt, attr)


def register_tf1_contrib():
    """A TF1 script's tf.contrib.mixed_precision is this loss scaling (same constructors as TensorFlow 1.15's)."""
    from npu_sim_bridge.tf1compat import contrib

    contrib.register_module("mixed_precision", {
        "LossScaleOptimizer": NPULossScaleOptimizer, "FixedLossScaleManager": FixedLossScaleManager,
        "ExponentialUpdateLossScaleManager": ExponentialUpdateLossScaleManager, "LossScaleManager": LossScaleManager,
    }, doc="tf.contrib.mixed_precision: npu_sim_bridge's loss scaling")
