"""Estimator route: NPURunConfig, NPUEstimator, NPUEstimatorSpec and npu_run_config_init.

NPURunConfig takes npu_bridge's constructor arguments. Each argument that is an NpuOptimizer
option is written, when not None, to the parameter_map key of the same name with the field the
registry gives it (`.s`, `.b`, `.i`); DumpConfig, ProfilingConfig, MemoryConfig, DynamicInputConfig
and ExperimentalConfig add their keys; `sim_*` keyword arguments add the simulator's own. The
whole ConfigProto (the given session_config plus those keys) is validated by npu_sim_bridge.config
when the NPURunConfig is built, so a bad value fails there with the message a Session would give.
Differences from the real adapter, on purpose: a wrong argument type is a TypeError naming the
argument; `compress_weight_conf` alone does not also write enable_compress_weight=False (which
makes the real adapter abort the process); NPUEstimator reuses an NpuOptimizer entry already in
session_config instead of adding a second one (NPURunConfig's keys override the same keys there).
Only the arguments the caller gives override keys session_config's NpuOptimizer entry already
sets; an argument left at its default never does (so a config's mix_compile_mode=True stays, and
is checked against iterations_per_loop). An int argument beyond 64 bits is a ValueError naming it.
The simulation runs one training step per Session.run, whatever iterations_per_loop says.
"""

import functools
import inspect
import time  # noqa: F401  (npu_bridge's npu_estimator leaks `time` to scripts that star-import it)
import warnings

import tensorflow as tf
from tensorflow.core.protobuf import config_pb2
from tensorflow.python.util import function_utils

from npu_sim_bridge.config import KEYS, from_config_proto
from npu_sim_bridge.config.options import NPU_OPTIMIZER_NAME, _suggestion
from npu_sim_bridge.config.registry import SIM_PREFIX
from npu_sim_bridge.runtime.config_parts import (DynamicInputConfig, ExperimentalConfig, MemoryConfig,
                                                 ProfilingConfig)
from npu_sim_bridge.runtime.dump_config import DumpConfig
from npu_sim_bridge.runtime.session import find_npu_optimizer, npu_config_proto

_RunConfig = tf.estimator.RunConfig
_ModeKeys = tf.estimator.ModeKeys

# NPURunConfig arguments npu_bridge writes with str(value) into a string key.
_STRINGIFIED = ("graph_memory_max_size", "variable_memory_max_size")

# NPURunConfig arguments of older npu_bridge releases, accepted with a warning: argument -> its replacement.
# Each is still an NpuOptimizer key, so its value is written to parameter_map as the older adapter did.
OLDER_ARGUMENTS = {
    "auto_tune_mode": "aoe_mode (AOE tuning replaced TBE auto tuning; e.g. aoe_mode='2' for operator tuning)",
    "mstune_mode": "aoe_mode (mstune was renamed AOE)",
}


class OlderArgumentWarning(UserWarning):
    """An NPURunConfig argument of an older npu_bridge release was accepted; the message names its replacement."""


# NPURunConfig arguments that are config objects: (argument, required type).
_CONFIG_OBJECTS = (
    ("dump_config", DumpConfig),
    ("profiling_config", ProfilingConfig),
    ("memory_config", MemoryConfig),
    ("dynamic_input_config", DynamicInputConfig),
    ("experimental_config", ExperimentalConfig),
)


def _check_kind(name, value):
    kind = KEYS[name].kind
    if name in _STRINGIFIED:
        ok = isinstance(value, (str, int)) and not isinstance(value, bool)
    elif kind == "s":
        ok = isinstance(value, (str, bytes))
    elif kind == "b":
        ok = isinstance(value, bool)
    else:
        ok = isinstance(value, int) and not isinstance(value, bool)
    if not ok:
        wanted = {"s": "a string", "b": "True or False", "i": "an int"}[kind]
        raise TypeError(f"NPURunConfig argument {name} must be {wanted}, got {type(value).__name__} {value!r}")
    if kind == "i" and not -(1 << 63) <= value < 1 << 63:
        raise ValueError(f"NPURunConfig argument {name}={value} does not fit the parameter_map's 64-bit integer "
                         f"(at most {(1 << 63) - 1}); give a smaller value")


def _records_explicit_arguments(init):
    """Remember which arguments the caller gave, so that defaults never override session_config's keys."""
    signature = inspect.signature(init)

    @functools.wraps(init)
    def wrapper(self, *args, **kwargs):
        given = signature.bind(self, *args, **kwargs).arguments
        self.__dict__["_explicit_arguments"] = frozenset(given) - {"self", "sim_options"} | frozenset(
            given.get("sim_options", {}))
        return init(self, *args, **kwargs)

    return wrapper


def write_parameter(parameter_map, name, value):
    """Write a Python value to parameter_map[name] with the field the registry gives the key."""
    kind = KEYS[name].kind
    if kind == "s":
        parameter_map[name].s = value if isinstance(value, bytes) else str(value).encode("utf-8")
    elif kind == "b":
        parameter_map[name].b = bool(value)
    else:
        parameter_map[name].i = int(value)


class NPURunConfig(_RunConfig):
    """tf.estimator.RunConfig with the NpuOptimizer options of npu_bridge's NPURunConfig."""

    @_records_explicit_arguments
    def __init__(self,  # pylint: disable=too-many-arguments,too-many-locals,unused-argument
                 iterations_per_loop=1,
                 profiling_config=None,
                 model_dir=None,
                 tf_random_seed=None,
                 save_summary_steps=0,
                 save_checkpoints_steps=None,
                 save_checkpoints_secs=None,
                 session_config=None,
                 keep_checkpoint_max=5,
                 keep_checkpoint_every_n_hours=10000,
                 log_step_count_steps=100,
                 distribute=None,
                 enable_data_pre_proc=True,
                 precision_mode=None,
                 enable_reduce_precision=False,
                 variable_format_optimize=None,
                 mix_compile_mode=False,
                 hcom_parallel=True,
                 graph_memory_max_size=None,
                 variable_memory_max_size=None,
                 dump_config=None,
                 stream_max_parallel_num=None,
                 is_tailing_optimization=False,
                 horovod_mode=False,
                 graph_run_mode=1,
                 op_debug_level=None,
                 enable_scope_fusion_passes=None,
                 enable_exception_dump=2,
                 op_select_implmode=None,
                 optypelist_for_implmode=None,
                 dynamic_input_config=None,
                 aoe_mode=None,
                 work_path=None,
                 buffer_optimize="l2_optimize",
                 enable_small_channel=0,
                 fusion_switch_file=None,
                 enable_compress_weight=False,
                 compress_weight_conf=None,
                 op_compiler_cache_mode=None,
                 op_compiler_cache_dir=None,
                 debug_dir=None,
                 hcom_multi_mode=False,
                 dynamic_input=None,
                 dynamic_graph_execute_mode="dynamic_execute",
                 dynamic_inputs_shape_range=None,
                 train_distribute=None,
                 eval_distribute=None,
                 local_rank_id=None,
                 local_device_list=None,
                 session_device_id=None,
                 distribute_config=None,
                 modify_mixlist=None,
                 op_precision_mode=None,
                 device_type="default_device_type",
                 soc_config=None,
                 hccl_timeout=None,
                 op_wait_timeout=None,
                 op_execute_timeout=None,
                 HCCL_algorithm=None,  # noqa: N803 - npu_bridge's name
                 customize_dtypes=None,
                 op_debug_config=None,
                 memory_config=None,
                 experimental_config=None,
                 topo_sorting_mode=None,
                 aoe_config_file=None,
                 insert_op_file=None,
                 stream_sync_timeout=-1,
                 event_sync_timeout=-1,
                 external_weight=False,
                 deterministic=0,
                 frozen_variable=False,
                 variable_placement="Device",
                 jit_compile="auto",
                 precision_mode_v2=None,
                 ac_parallel_enable=None,
                 quant_dumpable=None,
                 input_fusion_size=131072,
                 compile_dynamic_mode=None,
                 graph_max_parallel_model_num=1,
                 export_compile_stat=1,
                 aicore_num=None,
                 oo_constant_folding=True,
                 input_batch_cpy=False,
                 shape_generalization_mode="STRICT",
                 all_tensor_not_empty=False,
                 auto_multistream_parallel_mode=None,
                 oo_level="O3",
                 optimization_switch=None,
                 **sim_options):
        arguments = dict(locals())
        for name in ("self", "sim_options", "__class__"):
            arguments.pop(name, None)

        for name, required in _CONFIG_OBJECTS:
            value = arguments[name]
            if value is not None and not isinstance(value, required):
                raise ValueError(f"`{name}` must be provided with type `{required.__name__}`, got "
                                 f"{type(value).__name__}; build it with {required.__name__}(...)")
        if not isinstance(horovod_mode, bool):
            raise TypeError(f"NPURunConfig argument horovod_mode must be True or False, got {horovod_mode!r}")
        older = {name: sim_options.pop(name) for name in list(sim_options) if name in OLDER_ARGUMENTS}
        for name, value in older.items():
            warnings.warn(f"NPURunConfig argument {name}={value!r} is from an older npu_bridge; the newest adapter has "
                          f"no such argument, use {OLDER_ARGUMENTS[name]}. Accepted: written to parameter_map"
                          f"[{name!r}], which the simulation does not act on", OlderArgumentWarning, stacklevel=2)
        for name in sim_options:
            if not name.startswith(SIM_PREFIX) or name not in KEYS:
                raise TypeError(f"NPURunConfig got an unexpected keyword argument {name!r}{_suggestion(name)}")

        parameters = {}
        for name, value in arguments.items():
            if name in KEYS and value is not None:
                _check_kind(name, value)
                parameters[name] = str(value) if name in _STRINGIFIED else value
        if compress_weight_conf is not None and not enable_compress_weight:
            parameters.pop("enable_compress_weight")
        parameters["use_off_line"] = True
        parameters.update(dump_config.parameters() if dump_config is not None
                          else {"enable_dump": False, "enable_dump_debug": False})
        for name, _ in _CONFIG_OBJECTS[1:]:
            if arguments[name] is not None:
                parameters.update(arguments[name].parameters())
        if experimental_config is None:
            parameters["experimental_logical_device_cluster_deploy_mode"] = "LB"
        for name, value in (*older.items(), *sim_options.items()):
            if value is not None:
                _check_kind(name, value)
                parameters[name] = value
        # session_config's NpuOptimizer keys stand unless an argument the caller gave says otherwise.
        explicit = set(self._explicit_arguments)
        for name, _ in _CONFIG_OBJECTS:
            if arguments[name] is not None:
                explicit.update(arguments[name].parameters())
        configured = find_npu_optimizer(session_config) if session_config is not None else None
        for name in set(configured.parameter_map) - explicit if configured is not None else ():
            parameters.pop(name, None)

        # Attributes under the names npu_bridge gives them (scripts and hooks read some of them).
        self.iterations_per_loop = iterations_per_loop
        self.mix_compile_mode = mix_compile_mode
        self.enable_data_pre_proc = enable_data_pre_proc
        self.is_tailing_optimization = is_tailing_optimization
        self.horovod_mode = horovod_mode
        self.graph_run_mode = graph_run_mode
        self.op_debug_level = op_debug_level
        self.enable_scope_fusion_passes = enable_scope_fusion_passes
        self.enable_exception_dump = enable_exception_dump
        self._precision_mode = precision_mode
        self._precision_mode_v2 = precision_mode_v2
        self._modify_mixlist = modify_mixlist
        self._fusion_switch_file = fusion_switch_file
        self._dump_config = dump_config
        self._profiling_config = profiling_config
        self._memory_config = memory_config
        self._dynamic_input_config = dynamic_input_config
        self._experimental_config = experimental_config
        self._npu_parameters = parameters

        if save_checkpoints_secs is None and save_checkpoints_steps is None:
            save_checkpoints_steps = 100  # npu_bridge's default
        super().__init__(
            model_dir=model_dir,
            tf_random_seed=tf_random_seed,
            save_summary_steps=save_summary_steps,
            save_checkpoints_steps=save_checkpoints_steps,
            save_checkpoints_secs=save_checkpoints_secs,
            session_config=session_config,
            keep_checkpoint_max=keep_checkpoint_max,
            keep_checkpoint_every_n_hours=keep_checkpoint_every_n_hours,
            log_step_count_steps=log_step_count_steps,
            train_distribute=train_distribute,
            eval_distribute=eval_distribute)
        # Validate what a Session built from this config would get, with the Session route's messages.
        options = from_config_proto(self.npu_session_config())
        self.iterations_per_loop = options["iterations_per_loop"]
        self.mix_compile_mode = options["mix_compile_mode"]

    @property
    def npu_parameters(self):
        """The NpuOptimizer parameter_map this config writes, as key -> Python value."""
        return dict(self._npu_parameters)

    def npu_session_config(self):
        """A copy of session_config with the NpuOptimizer and this config's options, as NPUEstimator uses it."""
        config = config_pb2.ConfigProto()
        if self.session_config is not None:
            config.CopyFrom(self.session_config)
        npu_optimizer = find_npu_optimizer(config)
        if npu_optimizer is None:
            npu_optimizer = config.graph_options.rewrite_options.custom_optimizers.add()
            npu_optimizer.name = NPU_OPTIMIZER_NAME
        for name, value in self._npu_parameters.items():
            write_parameter(npu_optimizer.parameter_map, name, value)
        return npu_config_proto(config)


def npu_run_config_init(run_config=None):
    """Add the NpuOptimizer to a RunConfig's session_config (a new RunConfig when None); returns the RunConfig.

    The RunConfig is changed in place, as npu_bridge does. For an NPURunConfig its options are
    written too, so tf.estimator.Estimator(config=npu_run_config_init(NPURunConfig(...))) works.
    """
    if run_config is None:
        run_config = _RunConfig()
    elif not isinstance(run_config, _RunConfig):
        raise TypeError(f"npu_run_config_init expects a tf.estimator.RunConfig or None, got "
                        f"{type(run_config).__name__}")
    if isinstance(run_config, NPURunConfig):
        session_config = run_config.npu_session_config()
    else:
        session_config = npu_config_proto(run_config.session_config)
    run_config.__dict__["_session_config"] = session_config
    return run_config


class NPUEstimatorSpec(tf.estimator.EstimatorSpec):
    """EstimatorSpec plus npu_bridge's `host_call`: (fn, tensors) run on the host every step."""

    def __new__(cls, mode, predictions=None, loss=None, train_op=None, eval_metric_ops=None, export_outputs=None,
                training_chief_hooks=None, training_hooks=None, scaffold=None, evaluation_hooks=None,
                prediction_hooks=None, host_call=None):
        if host_call is not None:
            _check_host_call(host_call)
        spec = super().__new__(cls, mode=mode, predictions=predictions, loss=loss, train_op=train_op,
                               eval_metric_ops=eval_metric_ops, export_outputs=export_outputs,
                               training_chief_hooks=training_chief_hooks, training_hooks=training_hooks,
                               scaffold=scaffold, evaluation_hooks=evaluation_hooks,
                               prediction_hooks=prediction_hooks)
        spec._host_call = host_call  # pylint: disable=protected-access
        return spec


def _check_host_call(host_call):
    if not isinstance(host_call, (tuple, list)) or len(host_call) != 2:
        raise ValueError("host_call must be a tuple or list of two elements: (function, tensors)")
    if not callable(host_call[0]):
        raise TypeError(f"host_call[0] must be callable, got {type(host_call[0]).__name__}")
    if not isinstance(host_call[1], (tuple, list, dict)):
        raise ValueError(f"host_call[1] must be a tuple, list or dict of tensors, got {type(host_call[1]).__name__}")


class _HostCallHook(tf.compat.v1.train.SessionRunHook):
    """Runs the host_call's outputs with every step (the NPU sends its tensors to the host through outfeed)."""

    def __init__(self, fetches):
        self._fetches = fetches

    def before_run(self, run_context):
        return tf.compat.v1.train.SessionRunArgs(self._fetches)


def _host_call_hook(host_call):
    function, tensors = host_call
    outputs = function(**tensors) if isinstance(tensors, dict) else function(*tensors)
    fetches = [item for item in tf.nest.flatten(outputs) if isinstance(item, (tf.Tensor, tf.Operation))]
    return _HostCallHook(fetches)


class NPUEstimator(tf.estimator.Estimator):
    """tf.estimator.Estimator that requires an NPURunConfig and runs every graph through the NpuOptimizer."""

    def __init__(self, model_fn=None, model_dir=None, config=None, params=None, job_start_file="",
                 warm_start_from=None):
        if not isinstance(config, NPURunConfig):
            got = "nothing" if config is None else f"a {type(config).__name__}"
            raise ValueError(
                f"NPUEstimator needs config=NPURunConfig(...), got {got}; build it with e.g. "
                "NPURunConfig(model_dir=..., precision_mode='allow_mix_precision'), or keep a plain RunConfig with "
                "tf.estimator.Estimator(config=npu_run_config_init(run_config))")
        if model_fn is None or not callable(model_fn):
            raise ValueError(f"NPUEstimator needs a callable model_fn, got {model_fn!r}")
        if model_dir is not None and config.model_dir is not None and model_dir != config.model_dir:
            raise ValueError(f"model_dir is set both in NPUEstimator ({model_dir!r}) and in NPURunConfig "
                             f"({config.model_dir!r}) with different values; set it in one place")
        config = config.replace(session_config=config.npu_session_config())
        super().__init__(model_fn=_wrap_model_fn(model_fn, config), model_dir=model_dir, config=config,
                         params=params or {}, warm_start_from=warm_start_from)


def _wrap_model_fn(model_fn, config):
    accepted = function_utils.fn_args(model_fn)

    def npu_model_fn(features, labels, mode, params):
        kwargs = {}
        if "labels" in accepted:
            kwargs["labels"] = labels
        elif labels is not None:
            raise ValueError("model_fn does not take labels, but input_fn returns labels; add a labels argument "
                             "to model_fn or return only features from input_fn")
        for name, value in (("mode", mode), ("params", params), ("config", config)):
            if name in accepted:
                kwargs[name] = value
        spec = model_fn(features=features, **kwargs)
        if not isinstance(spec, tf.estimator.EstimatorSpec):
            raise TypeError(f"model_fn must return an NPUEstimatorSpec or EstimatorSpec, got {type(spec).__name__}")
        host_call = getattr(spec, "_host_call", None)
        if host_call is not None and mode == _ModeKeys.TRAIN:
            spec = spec._replace(training_hooks=(_host_call_hook(host_call),) + tuple(spec.training_hooks or ()))
        elif host_call is not None and mode == _ModeKeys.EVAL:
            spec = spec._replace(evaluation_hooks=(_host_call_hook(host_call),)
                                 + tuple(spec.evaluation_hooks or ()))
        return spec

    return npu_model_fn
