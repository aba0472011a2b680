"""enable_mixed_precision: the npu_bridge way of tf.compat.v1.mixed_precision.enable_mixed_precision_graph_rewrite.

`enable_mixed_precision(opt, loss_scale='dynamic')` does two things, as TensorFlow's graph
rewrite helper does for GPUs:
- every Session the npu_init helpers build from then on (npu_config_proto, init_resource,
  set_keras_session_npu_config, npu_clear_session, npu_run_config_init, NPUEstimator, and all
  Sessions after enable_npu_for_all_sessions) gets precision_mode=allow_mix_precision, unless its
  NpuOptimizer entry already sets a precision mode. A ConfigProto the script builds and hands to
  tf.Session itself is not changed: set precision_mode there.
- it returns `opt` wrapped with loss scaling: a tf.compat.v1.train.Optimizer becomes an
  NPULossScaleOptimizer; a Keras optimizer becomes tf.keras.mixed_precision.LossScaleOptimizer
  (TensorFlow's own; it counts skipped steps in `iterations`, as TensorFlow does).
loss_scale 'dynamic' starts at 2**15, halves on every overflow step and doubles after 2000 finite
steps (TensorFlow's dynamic loss scale); a number gives a fixed scale that still skips overflow
steps. disable_mixed_precision() stops the first effect. A Keras Session that
set_keras_session_npu_config built before the call cannot change: enable_mixed_precision warns then.
"""

import numbers
import warnings

import tensorflow as tf

from npu_sim_bridge.config.options import NpuSimConfigWarning

from npu_sim_bridge.runtime import session
from npu_sim_bridge.runtime.keras import keras_session_without_precision_mode
from npu_sim_bridge.runtime.loss_scale import (ExponentialUpdateLossScaleManager, FixedLossScaleManager,
                                               LossScaleManager, NPULossScaleOptimizer)

MIX_PRECISION_MODE = "allow_mix_precision"
DYNAMIC_INITIAL_SCALE = 2.0 ** 15
DYNAMIC_GROWTH_STEPS = 2000

_KerasLossScaleOptimizer = tf.keras.mixed_precision.LossScaleOptimizer
_KerasLegacyOptimizer = tf.keras.optimizers.legacy.Optimizer
_KerasOptimizer = tf.keras.optimizers.Optimizer


def _check_loss_scale(loss_scale):
    if isinstance(loss_scale, str):
        if loss_scale != "dynamic":
            raise ValueError(f"loss_scale {loss_scale!r} is invalid, it should be 'dynamic' or a number >= 1")
        return
    if isinstance(loss_scale, LossScaleManager):
        return
    if isinstance(loss_scale, bool) or not isinstance(loss_scale, numbers.Real):
        raise TypeError(f"loss_scale must be 'dynamic', a number >= 1 or a loss scale manager, got "
                        f"{type(loss_scale).__name__} {loss_scale!r}")
    if not loss_scale >= 1:
        raise ValueError(f"loss_scale must be at least 1, got {loss_scale}")


def dynamic_loss_scale_manager():
    """The manager 'dynamic' means: 2**15, halved on each overflow step, doubled after 2000 finite steps."""
    return ExponentialUpdateLossScaleManager(DYNAMIC_INITIAL_SCALE, DYNAMIC_GROWTH_STEPS,
                                             decr_every_n_nan_or_inf=1, incr_ratio=2, decr_ratio=0.5)


def _wrap_v1(opt, loss_scale):
    if isinstance(opt, NPULossScaleOptimizer):
        raise ValueError("the optimizer is already an NPULossScaleOptimizer; pass the optimizer it wraps")
    if isinstance(loss_scale, LossScaleManager):
        manager = loss_scale
    elif loss_scale == "dynamic":
        manager = dynamic_loss_scale_manager()
    else:
        manager = FixedLossScaleManager(loss_scale)
    return NPULossScaleOptimizer(opt, manager)


def _wrap_keras(opt, loss_scale):
    if isinstance(opt, _KerasLossScaleOptimizer):
        raise ValueError("the optimizer is already a LossScaleOptimizer; pass the optimizer it wraps")
    if isinstance(loss_scale, LossScaleManager):
        raise TypeError("a loss scale manager works with tf.compat.v1.train optimizers; for a Keras optimizer "
                        "pass loss_scale='dynamic' or a number")
    if isinstance(opt, _KerasOptimizer) and not isinstance(opt, _KerasLegacyOptimizer) and not tf.executing_eagerly():
        name = type(opt).__name__
        raise TypeError(
            f"{type(opt).__module__}.{name} is a TensorFlow 2 Keras optimizer, which cannot train in TF1 graph mode "
            f"(Keras fails with \"'{name}' object has no attribute 'get_updates'\"); use "
            f"tf.keras.optimizers.legacy.{name} (tf.compat.v1.keras.optimizers.{name}, which is what the `tf` of "
            "npu_init gives)")
    if loss_scale == "dynamic":
        return _KerasLossScaleOptimizer(opt, dynamic=True, initial_scale=DYNAMIC_INITIAL_SCALE,
                                        dynamic_growth_steps=DYNAMIC_GROWTH_STEPS)
    return _KerasLossScaleOptimizer(opt, dynamic=False, initial_scale=float(loss_scale))


def enable_mixed_precision(opt, loss_scale="dynamic"):
    """Turn allow_mix_precision on for the helpers' Sessions and return `opt` with loss scaling (see module doc)."""
    _check_loss_scale(loss_scale)
    if isinstance(opt, tf.compat.v1.train.Optimizer):
        wrapped = _wrap_v1(opt, loss_scale)
    elif isinstance(opt, (_KerasLegacyOptimizer, _KerasOptimizer)):
        wrapped = _wrap_keras(opt, loss_scale)
    else:
        raise TypeError(f"enable_mixed_precision expects a tf.compat.v1.train.Optimizer or a Keras optimizer, got "
                        f"{type(opt).__name__}")
    if session.default_precision_mode() != MIX_PRECISION_MODE and keras_session_without_precision_mode():
        warnings.warn(
            "enable_mixed_precision: the Keras Session set_keras_session_npu_config built before this call keeps the "
            "default precision mode; call enable_mixed_precision before set_keras_session_npu_config, or call "
            "npu_clear_session() to give Keras a new Session with allow_mix_precision",
            NpuSimConfigWarning, stacklevel=2)
    session.set_default_precision_mode(MIX_PRECISION_MODE)
    return wrapped


def disable_mixed_precision():
    """Stop writing allow_mix_precision into the helpers' Sessions (optimizers already wrapped stay wrapped)."""
    session.set_default_precision_mode(None)
