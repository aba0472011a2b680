"""tf.contrib.tfprof and tf.contrib.estimator's extenders on TensorFlow 2.15 (one simulated device)."""

import importlib
import types
import warnings

import tensorflow as tf

from npu_sim_bridge.tf1compat.errors import TF1CompatWarning

_V1 = tf.compat.v1
_warned = set()


def print_model_analysis(graph, run_meta=None, op_log=None, tfprof_cmd="scope", tfprof_options=None):
    """tf.contrib.tfprof.model_analyzer.print_model_analysis: tf.compat.v1.profiler.profile with these options."""
    del op_log
    options = tfprof_options or _V1.profiler.ProfileOptionBuilder.trainable_variables_parameter()
    return _V1.profiler.profile(graph, run_meta=run_meta, cmd=tfprof_cmd, options=options)


def tfprof_names():
    builder = _V1.profiler.ProfileOptionBuilder
    analyzer = types.ModuleType("tensorflow.contrib.tfprof.model_analyzer", "tf.contrib.tfprof.model_analyzer")
    analyzer.print_model_analysis = print_model_analysis
    analyzer.TRAINABLE_VARS_PARAMS_STAT_OPTIONS = builder.trainable_variables_parameter()
    analyzer.FLOAT_OPS_OPTIONS = builder.float_operation()
    analyzer.PRINT_ALL_TIMING_MEMORY = builder.time_and_memory()
    analyzer.Profiler = _V1.profiler.Profiler
    analyzer.profile = _V1.profiler.profile
    return {"model_analyzer": analyzer, "ProfileContext": ProfileContext,
            "tfprof_logger": importlib.import_module("tensorflow.python.profiler.tfprof_logger")}


class ProfileContext:
    """tf.contrib.tfprof.ProfileContext, accepted without effect: TensorFlow 2.15 has no per-session auto-profiler."""

    __npu_sim_no_effect__ = ("no profile is written (TensorFlow 2.15 has no ProfileContext; use "
                             "tf.compat.v1.profiler.Profiler with RunMetadata)")

    def __init__(self, profile_dir, trace_steps=None, dump_steps=None, enabled=True, debug=False):
        del trace_steps, dump_steps, debug
        self.profile_dir = profile_dir
        if enabled and "ProfileContext" not in _warned:
            _warned.add("ProfileContext")
            warnings.warn(f"tf.contrib.tfprof.ProfileContext is accepted without effect: {self.__npu_sim_no_effect__}",
                          TF1CompatWarning, stacklevel=2)

    def add_auto_profiling(self, cmd, options, profile_steps):
        """Accepted; nothing is profiled."""

    @property
    def profiler(self):
        return _V1.profiler.Profiler(_V1.get_default_graph())

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        return False


class TowerOptimizer(_V1.train.Optimizer):
    """tf.contrib.estimator.TowerOptimizer on one device: the wrapped optimizer, unchanged."""

    __npu_sim_no_effect__ = "one simulated device: the wrapped optimizer runs as it is"

    def __init__(self, optimizer_or_optimizer_fn):
        super().__init__(False, "TowerOptimizer")
        self._optimizer = optimizer_or_optimizer_fn

    def compute_gradients(self, *args, **kwargs):
        return self._optimizer.compute_gradients(*args, **kwargs)

    def apply_gradients(self, *args, **kwargs):
        return self._optimizer.apply_gradients(*args, **kwargs)


def replicate_model_fn(model_fn, loss_reduction=None, devices=None):  # pylint: disable=unused-argument
    """tf.contrib.estimator.replicate_model_fn on one device: `model_fn` itself."""
    return model_fn


replicate_model_fn.__npu_sim_no_effect__ = "one simulated device: the model_fn is returned unchanged"


def clip_gradients_by_norm(optimizer, clip_norm):
    """tf.contrib.estimator.clip_gradients_by_norm: `optimizer` whose gradients are clipped to clip_norm each."""
    base = type(optimizer)

    class _Clipped(base):  # pylint: disable=too-few-public-methods
        def compute_gradients(self, *args, **kwargs):
            return [(None if grad is None else tf.clip_by_norm(grad, clip_norm), var)
                    for grad, var in base.compute_gradients(self, *args, **kwargs)]

    clipped = object.__new__(_Clipped)
    clipped.__dict__.update(optimizer.__dict__)
    return clipped


def export_all_saved_models(estimator, export_dir_base, input_receiver_fn_map, assets_extra=None, as_text=False,
                            checkpoint_path=None, strip_default_attrs=False):
    """tf.contrib.estimator.export_all_saved_models: one SavedModel with a graph per mode of
    input_receiver_fn_map (Estimator.experimental_export_all_saved_models); returns its directory."""
    del strip_default_attrs  # TensorFlow 2.15 always strips default attributes
    return estimator.experimental_export_all_saved_models(export_dir_base, input_receiver_fn_map,
                                                          assets_extra=assets_extra, as_text=as_text,
                                                          checkpoint_path=checkpoint_path)


def estimator_names():
    from tensorflow_estimator.python.estimator.canned import saved_model_estimator
    from tensorflow_estimator.python.estimator.export import export

    return {"TowerOptimizer": TowerOptimizer, "replicate_model_fn": replicate_model_fn,
            "clip_gradients_by_norm": clip_gradients_by_norm, "export_all_saved_models": export_all_saved_models,
            "SavedModelEstimator": saved_model_estimator.SavedModelEstimator,
            "build_supervised_input_receiver_fn_from_input_fn": export.build_supervised_input_receiver_fn_from_input_fn,
            "build_raw_supervised_input_receiver_fn": export.build_raw_supervised_input_receiver_fn}
