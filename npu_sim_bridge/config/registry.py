"""The NpuOptimizer parameter_map keys: AttrValue field, default, allowed values, whether the simulation acts."""

import re
from dataclasses import dataclass
from typing import Any, Callable, Optional, Tuple

from npu_sim_bridge.errors import ConfigError

# Where the key list comes from (public sources, read for facts only):
#   tf_adapter/util/npu_attrs.cc, NpuAttrs::SetNpuOptimizerAttr (Ascend/tensorflow, hicann/tensorflow):
#     every params.count("...") / params.at("...").s()/.b()/.i() read of the custom optimizer's parameter_map,
#     and the checks done there (checkDumpStep, checkDumpMode, CheckPath, CheckValueAllowed, ...);
#   tf_adapter/python/npu_bridge/estimator/npu/npu_config.py (NPURunConfig, DumpConfig, MemoryConfig,
#     ExperimentalConfig) and npu_estimator.py (which key each argument is written to, with which field);
#   older releases (Huawei-Ascend/tensorflow) for keys since renamed: mstune_mode, fp_point, bp_point;
#   precision_tool's tf_config.py (use_off_line, debug_dir, op_debug_level, dump and fusion keys).

KINDS = {"s": "a string", "b": "a bool", "i": "an int"}

NO_EFFECT_NOTE = "accepted, no effect in simulation"
ACTS_NOTE = "used by the simulation"

ENV_PREFIX = "NPU_SIM_"
SIM_PREFIX = "sim_"

# precision_mode values, in the order error messages list them.
PRECISION_MODES = (
    "force_fp32",
    "force_fp16",
    "allow_fp32_to_fp16",
    "must_keep_origin_dtype",
    "allow_mix_precision",
    "allow_mix_precision_fp16",
    "allow_mix_precision_bf16",
    "allow_fp32_to_bf16",
    "cube_fp16in_fp32out",
)
DEFAULT_PRECISION_MODE = "allow_fp32_to_fp16"

# precision_mode_v2 values the simulated Ascend 910 supports, and the precision_mode each one equals.
PRECISION_MODE_V2_TO_V1 = {
    "fp16": "force_fp16",
    "origin": "must_keep_origin_dtype",
    "mixed_float16": "allow_mix_precision_fp16",
    "mixed_bfloat16": "allow_mix_precision_bf16",
    "cube_fp16in_fp32out": "cube_fp16in_fp32out",
}
PRECISION_MODES_V2 = tuple(PRECISION_MODE_V2_TO_V1)
# The real adapter also accepts these HiFloat8 modes; they need hardware newer than the Ascend 910.
HIF8_MODES_V2 = ("cube_hif8", "mixed_hif8")

MIX_PRECISION_MODES = ("allow_mix_precision", "allow_mix_precision_fp16", "allow_mix_precision_bf16")
MIX_PRECISION_MODES_V2 = ("mixed_float16", "mixed_bfloat16")

DUMP_MODES = ("input", "output", "all")
DUMP_DEBUG_MODES = ("aicore_overflow", "atomic_overflow", "all")
MAX_DUMP_STEP_ITEMS = 100
# Largest input_fusion_size the real adapter keeps (32 MiB); larger values are clamped with a warning.
MAX_INPUT_FUSION_SIZE = 32 * 1024 * 1024


@dataclass(frozen=True)
class Key:
    """One parameter_map key.

    kind: the AttrValue field the real adapter reads ('s', 'b' or 'i').
    default: the value in effect when the key is absent (None: not set, the adapter uses no value).
    allowed: the values accepted, for enumerations.
    acts: True when the simulation changes what it does for this key.
    validate: value -> None when valid, else the reason it is not ("it should be >= 1").
    """

    name: str
    kind: str
    default: Any
    allowed: Optional[Tuple[Any, ...]] = None
    acts: bool = False
    doc: str = ""
    validate: Optional[Callable[[Any], Optional[str]]] = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"key {self.name}: kind must be one of {sorted(KINDS)}, got {self.kind!r}")

    @property
    def field_description(self):
        """'.s (a string)', as error messages name the expected field."""
        return f".{self.kind} ({KINDS[self.kind]})"

    @property
    def note(self):
        return ACTS_NOTE if self.acts else NO_EFFECT_NOTE

    @property
    def env_var(self):
        """The environment variable that may set this key (sim_ keys only), else None."""
        return env_var_name(self.name) if self.name.startswith(SIM_PREFIX) else None


def env_var_name(name):
    """NPU_SIM_FP16_EXECUTION for sim_fp16_execution."""
    return ENV_PREFIX + name[len(SIM_PREFIX):].upper()


def one_of_text(allowed):
    """The tail of an enumeration error: 'it should be one of: a, b, c'."""
    return "it should be one of: " + ", ".join(str(value) for value in allowed)


# ---------------------------------------------------------------------------------------------------
# Validators: value -> None when valid, else the reason it is not.


def _at_least(minimum):
    def check(value):
        return None if value >= minimum else f"it should be >= {minimum}"
    return check


def _between(low, high):
    def check(value):
        return None if low <= value <= high else f"it should be between {low} and {high}"
    return check


_DEVICE_LIST = re.compile(r"(\d+,)+")
_INPUT_SHAPE_ITEM = re.compile(r"[\s\S]+:((\d+|-\d+),)+")
_DYNAMIC_DIMS_ITEM = re.compile(r"(\d+,)+")
_PASS_NAME = re.compile(r"[a-z_]+")


def _device_list(value):
    if _DEVICE_LIST.fullmatch(value + ","):
        return None
    return "it should be device ids joined by commas, e.g. '0,1,2'"


def _split_items(value):
    # As the real adapter splits: a trailing ';' adds no empty item.
    items = value.split(";")
    if len(items) > 1 and items[-1] == "":
        items.pop()
    return items


def _input_shape(value):
    items = _split_items(value)
    for position, item in enumerate(items, 1):
        if not _INPUT_SHAPE_ITEM.fullmatch(item + ","):
            return (f"item {position} ({item!r}) is not NAME:DIM,DIM,... with integer dims (-1 for a dynamic dim), "
                    f"e.g. 'data:1,-1,-1,3;label:1'")
    return None


def _dynamic_dims(value):
    items = _split_items(value)
    for position, item in enumerate(items, 1):
        if not _DYNAMIC_DIMS_ITEM.fullmatch(item + ","):
            return f"item {position} ({item!r}) is not integers joined by commas, e.g. '224,224;448,448'"
    return None


def _aoe_mode(value):
    # An empty aoe_mode is accepted (the real adapter only logs it); otherwise it is a tuning job type.
    return None if value in ("", "1", "2", "4") else one_of_text(("1", "2", "4"))


def _precision_mode_v2(value):
    if value in HIF8_MODES_V2:
        return ("it is a HiFloat8 mode, which needs a newer chip than the simulated Ascend 910; "
                "use one of: " + ", ".join(PRECISION_MODES_V2))
    return None


def dump_step_problem(text):
    """Why a dump_step string is malformed, or None. Items are N or N-M (N < M) joined by '|'."""
    if text == "":
        return None
    items = text.split("|")
    if len(items) > MAX_DUMP_STEP_ITEMS:
        return f"it has {len(items)} items; at most {MAX_DUMP_STEP_ITEMS} are allowed"
    for position, item in enumerate(items, 1):
        bounds = item.split("-")
        if len(bounds) > 2 or not all(bound.isdigit() and bound.isascii() for bound in bounds):
            return (f"item {position} ({item!r}) is not N or N-M with integers >= 0 "
                    f"(example: '0|5|10-20')")
        if any(int(bound) >= 1 << 63 for bound in bounds):
            return (f"item {position} ({item!r}) is beyond the largest step number, {(1 << 63) - 1} "
                    f"(example: '0|5|10-20')")
        if len(bounds) == 2 and int(bounds[0]) >= int(bounds[1]):
            return (f"item {position} ({item!r}) is a range whose first step is not below its last step "
                    f"(example: '0|5|10-20')")
    return None


def parse_dump_steps(text):
    """'0|5|10-20' -> [(0, 0), (5, 5), (10, 20)] (inclusive ranges); '' (every step) -> []."""
    problem = dump_step_problem(text)
    if problem is not None:
        raise ConfigError(f"option dump_step value {text!r} is invalid, {problem}")
    if text == "":
        return []
    steps = []
    for item in text.split("|"):
        bounds = [int(bound) for bound in item.split("-")]
        steps.append((bounds[0], bounds[-1]))
    return steps


def _pass_list_problem(text):
    items = [item.strip() for item in text.split(",")]
    for position, item in enumerate(items, 1):
        if not _PASS_NAME.fullmatch(item):
            return (f"item {position} ({item!r}) is not a pass name (lower-case letters and '_'); "
                    f"give 'all', 'none' or pass names joined by commas")
    if len(items) > 1 and ("all" in items or "none" in items):
        return "'all' and 'none' cannot be combined with pass names"
    return None


def parse_pass_list(text):
    """sim_passes -> None for 'all', () for 'none', else the pass names in the order given."""
    problem = _pass_list_problem(text)
    if problem is not None:
        raise ConfigError(f"option sim_passes value {text!r} is invalid, {problem}")
    names = tuple(item.strip() for item in text.split(","))
    if names == ("all",):
        return None
    if names == ("none",):
        return ()
    return names


# ---------------------------------------------------------------------------------------------------
# The table. Order: what the simulation acts on, then the simulator's own keys, then everything the real
# adapter accepts for real hardware only.

_TABLE = (
    # --- precision ---
    Key("precision_mode", "s", DEFAULT_PRECISION_MODE, allowed=PRECISION_MODES, acts=True,
        doc="which dtype each float op runs in on the device (default allow_fp32_to_fp16)"),
    Key("precision_mode_v2", "s", "", allowed=PRECISION_MODES_V2, acts=True, validate=_precision_mode_v2,
        doc="newer spelling of precision_mode (fp16, origin, mixed_float16, ...); not together with it"),
    Key("modify_mixlist", "s", "", acts=True,
        doc="JSON file that adds/removes ops to/from the mix-precision black and white lists"),
    # --- mixed compute ---
    Key("mix_compile_mode", "b", False, acts=True,
        doc="run what the device cannot on the host instead of sinking only the largest device cluster"),
    Key("iterations_per_loop", "i", 1, acts=True, validate=_at_least(1),
        doc="training steps per Session.run on the device; must be 1 with mix_compile_mode"),
    # --- precision debugging ---
    Key("fusion_switch_file", "s", "", acts=True,
        doc="JSON file switching graph and UB fusion passes on or off"),
    Key("enable_dump", "b", False, acts=True,
        doc="dump the tensors of device ops to dump_path"),
    Key("dump_path", "s", "", acts=True,
        doc="existing, writable directory that receives dumps"),
    Key("dump_step", "s", "", acts=True, validate=dump_step_problem,
        doc="steps to dump, e.g. '0|5|10-20' (empty: every step)"),
    Key("dump_mode", "s", "output", allowed=DUMP_MODES, acts=True,
        doc="dump op inputs, outputs or both"),
    Key("enable_dump_debug", "b", False, acts=True,
        doc="detect float16 overflow and record which op overflowed first"),
    Key("dump_debug_mode", "s", "all", allowed=DUMP_DEBUG_MODES, acts=True,
        doc="which overflows enable_dump_debug detects"),
    # --- simulator only (each may also come from the environment variable NPU_SIM_<NAME>) ---
    Key("sim_fp16_execution", "s", "emulate", allowed=("emulate", "native"), acts=True,
        doc="emulate: float32 kernels with float16 rounding; native: real float16 kernels (for GPUs)"),
    Key("sim_fp16_rounding", "s", "auto", allowed=("auto", "kernel", "cast"), acts=True,
        doc="emulated float16 rounding: kernel (one NpuSimRoundToFloat16 op), cast (two Casts), auto: "
            "kernel in a Session, cast in offline rewrites"),
    Key("sim_geop_call", "s", "auto", allowed=("auto", "kernel", "partitioned_call"), acts=True,
        doc="how a GeOp runs its body: kernel (NpuSimGeOp: one function on the call's device), "
            "partitioned_call (TensorFlow's multi-device PartitionedCall), auto: kernel in a Session on "
            "CPUs for a body with no If, While or plain call to lower (jit-compiled calls go to XLA)"),
    Key("sim_report_dir", "s", "", acts=True,
        doc="directory for the rewrite report (empty: no report)"),
    Key("sim_ops_info_path", "s", "", acts=True,
        doc="operator library folder to load (empty: the built-in ops_info/)"),
    Key("sim_passes", "s", "all", acts=True, validate=_pass_list_problem,
        doc="passes to run: 'all', 'none' or pass names joined by commas"),
    # --- accepted for real hardware only: session and graph engine ---
    Key("use_off_line", "b", True, doc="run on the Ascend device (the only mode the adapter supports)"),
    Key("enable_data_pre_proc", "b", False, doc="sink the dataset pipeline to the device (deprecated)"),
    Key("lower_functional_ops", "b", False, doc="lower functional control flow before partitioning"),
    Key("graph_run_mode", "i", 1, allowed=(0, 1), doc="1: training, 0: online inference"),
    Key("graph_max_parallel_model_num", "i", 1, validate=_at_least(1),
        doc="models the graph engine may run in parallel"),
    Key("job", "s", "localhost", doc="task type in parameter-server mode"),
    Key("task_index", "i", 0, doc="task index in parameter-server mode"),
    Key("variable_format_optimize", "b", True, doc="let the graph engine reformat variables (deprecated)"),
    Key("hcom_parallel", "b", True, doc="run gradient all-reduce in parallel with the backward pass"),
    Key("hcom_multi_mode", "b", False, doc="several collective communication modes in one job"),
    Key("is_tailing_optimization", "b", False, doc="overlap the last all-reduce with the optimizer"),
    Key("graph_memory_max_size", "s", "", doc="graph memory pool size in bytes"),
    Key("variable_memory_max_size", "s", "", doc="variable memory pool size in bytes"),
    Key("stream_max_parallel_num", "s", "", doc="AI CPU / AI Core engine parallelism, e.g. 'DNN_VM_AICPU:10'"),
    Key("ac_parallel_enable", "s", "", doc="let AI CPU ops run in parallel with other engines (dynamic shapes)"),
    Key("quant_dumpable", "s", "", doc="keep quantization node inputs and outputs dumpable"),
    Key("soc_config", "s", "", doc="target SoC version"),
    Key("device_type", "s", "default_device_type", doc="device type for the graph engine"),
    Key("session_device_id", "i", None, validate=_at_least(0), doc="device id for this session"),
    Key("local_rank_id", "i", None, validate=_between(0, 7), doc="rank of this device inside its server"),
    Key("local_device_list", "s", "", validate=_device_list, doc="devices this process may use, e.g. '0,1'"),
    Key("in_out_pair_flag", "b", True, doc="whether in_out_pair lists the ops to sink or to keep out"),
    Key("in_out_pair", "s", "", doc="op pairs bounding the sub-graph to sink"),
    Key("enable_exception_dump", "i", 2, allowed=(0, 1, 2),
        doc="dump the inputs of a failing op: 0 off, 1 full, 2 lite"),
    Key("op_debug_level", "i", None, doc="operator compile debug level (deprecated, use op_debug_config)"),
    Key("op_debug_config", "s", "", doc="operator debug configuration file"),
    Key("debug_dir", "s", "", doc="directory for operator debug files"),
    Key("dump_data", "s", "tensor", allowed=("tensor", "stats"), doc="dump whole tensors or statistics only"),
    Key("dump_layer", "s", "", doc="names of the ops to dump, separated by spaces"),
    # --- profiling: a chrome://tracing / Perfetto trace of the steps (npu_sim_bridge.profiling) ---
    Key("profiling_mode", "b", False, acts=True, doc="collect profiling data"),
    Key("profiling_options", "s", "", acts=True, doc="profiling options (JSON)"),
    # --- accepted for real hardware only: tuning ---
    Key("fp_point", "s", "", doc="first forward op for training-trace profiling (older releases)"),
    Key("bp_point", "s", "", doc="last backward op for training-trace profiling (older releases)"),
    Key("auto_tune_mode", "s", "", doc="TBE auto tuning mode (deprecated)"),
    Key("aoe_mode", "s", "", validate=_aoe_mode, doc="AOE tuning job type: 1 subgraph, 2 operator, 4 gradient split"),
    Key("mstune_mode", "s", "", doc="older name of aoe_mode"),
    Key("work_path", "s", "./", doc="AOE working directory; must be an existing, writable directory"),
    Key("distribute_config", "s", "", doc="AOE distributed tuning configuration"),
    Key("aoe_config_file", "s", "", doc="AOE configuration file"),
    # --- accepted for real hardware only: operator selection and compilation ---
    Key("op_select_implmode", "s", "",
        allowed=("high_precision", "high_performance", "high_precision_for_all", "high_performance_for_all"),
        doc="operator implementation preference (deprecated, use op_precision_mode)"),
    Key("optypelist_for_implmode", "s", "", doc="ops op_select_implmode applies to (needs op_select_implmode)"),
    Key("op_precision_mode", "s", "", doc="per-operator precision mode file (.ini)"),
    Key("enable_reduce_precision", "b", False, doc="written by NPUEstimator; the adapter does not read it"),
    Key("min_group_size", "b", True, doc="written by NPUEstimator; the adapter does not read it"),
    Key("enable_scope_fusion_passes", "s", "", doc="scope fusion passes to enable, joined by commas"),
    Key("buffer_optimize", "s", "l2_optimize", allowed=("l2_optimize", "off_optimize"),
        doc="L2 buffer optimization"),
    Key("enable_small_channel", "i", 0, doc="small-channel optimization for the first conv layers"),
    Key("deterministic", "i", 0, doc="deterministic computation (1) or not (0)"),
    Key("enable_compress_weight", "b", False, doc="compress all weights (not with compress_weight_conf)"),
    Key("compress_weight_conf", "s", "", doc="file listing the nodes whose weights to compress"),
    Key("op_compiler_cache_mode", "s", "", doc="operator compile cache: enable, disable or force"),
    Key("op_compiler_cache_dir", "s", "", doc="operator compile cache directory"),
    Key("graph_compiler_cache_dir", "s", "", doc="graph compile cache directory"),
    Key("customize_dtypes", "s", "", acts=True,
        doc="file listing ops (Opname::... or OpType::Type:...) that keep float32 (other dtypes: an error)"),
    Key("jit_compile", "s", "auto", allowed=("true", "false", "auto"),
        doc="compile operators online (true), use binaries (false) or decide per op (auto)"),
    Key("shape_generalization_mode", "s", "STRICT", allowed=("STRICT", "FULL", "ADAPTIVE"),
        doc="shape generalization under jit_compile"),
    Key("topo_sorting_mode", "i", None, doc="topological order the graph engine executes in"),
    Key("insert_op_file", "s", "", doc="AIPP configuration file for inference"),
    Key("external_weight", "b", False, doc="store constants as files instead of inside the model"),
    Key("frozen_variable", "b", False, doc="fold variables that never change into constants"),
    Key("variable_placement", "s", "Device", allowed=("Device", "Host"), doc="keep variables on device or host"),
    Key("input_fusion_size", "i", 131072, doc="inputs smaller than this (bytes) are copied together; 0 to 32 MiB"),
    Key("input_batch_cpy", "b", False, doc="copy inputs to the device in one batch"),
    Key("export_compile_stat", "i", 1, allowed=(0, 1, 2),
        doc="write graph compile statistics: 0 never, 1 at exit, 2 after each compile"),
    Key("aicore_num", "s", "", doc="AI Core count to compile for"),
    Key("oo_constant_folding", "b", True, doc="graph engine constant folding"),
    Key("oo_level", "s", "O3", doc="graph engine optimization level"),
    Key("optimization_switch", "s", "", doc="graph engine optimization switches"),
    Key("all_tensor_not_empty", "b", False, doc="promise that no tensor is empty"),
    Key("auto_multistream_parallel_mode", "s", "", doc="automatic multi-stream parallelism ('cv': cube/vector)"),
    Key("graph_slice", "s", "", allowed=("auto", "manual"), doc="graph slicing for memory"),
    # --- accepted for real hardware only: dynamic shapes ---
    Key("dynamic_input", "b", False, doc="inputs have dynamic shapes (deprecated)"),
    Key("dynamic_graph_execute_mode", "s", "dynamic_execute", allowed=("lazy_recompile", "dynamic_execute"),
        doc="how dynamic_input graphs execute (deprecated)"),
    Key("dynamic_inputs_shape_range", "s", "", doc="shape ranges of dynamic inputs (deprecated)"),
    Key("compile_dynamic_mode", "b", False, doc="compile the graph with dynamic shapes"),
    Key("input_shape", "s", "", validate=_input_shape,
        doc="input shapes for dynamic batch/size, e.g. 'data:1,-1;label:1' (with dynamic_dims, dynamic_node_type)"),
    Key("dynamic_dims", "s", "", validate=_dynamic_dims,
        doc="values of the -1 dims of input_shape, e.g. '224,224;448,448'"),
    Key("dynamic_node_type", "i", None, allowed=(0, 1), doc="dynamic input comes from 0: dataset, 1: placeholder"),
    Key("compile_hybrid_mode", "i", 0, doc="hybrid compilation of dynamic dims: 0 or 1 (needs dynamic_node_type 1)"),
    # --- accepted for real hardware only: memory ---
    Key("atomic_clean_policy", "i", 0, doc="how atomic outputs are zeroed"),
    Key("static_memory_policy", "i", 0, doc="static or dynamic graph memory allocation"),
    Key("memory_optimization_policy", "s", "", doc="memory optimization policy"),
    Key("variable_use_1g_huge_page", "i", 0, allowed=(0, 1, 2), doc="put variables in 1 GiB huge pages"),
    # --- accepted for real hardware only: collective communication and timeouts ---
    Key("hccl_timeout", "i", None, doc="collective communication timeout in seconds"),
    Key("HCCL_algorithm", "s", "", doc="collective communication algorithm"),
    Key("op_wait_timeout", "i", None, doc="operator wait timeout"),
    Key("op_execute_timeout", "i", None, doc="operator execution timeout"),
    Key("graph_exec_timeout", "i", 600000, doc="graph execution timeout in milliseconds"),
    Key("stream_sync_timeout", "i", -1, doc="stream synchronization timeout (-1: none)"),
    Key("event_sync_timeout", "i", -1, doc="event synchronization timeout (-1: none)"),
    # --- accepted for real hardware only: experimental deployment ---
    Key("experimental_logical_device_cluster_deploy_mode", "s", "LB", doc="helper model deployment mode"),
    Key("experimental_logical_device_id", "s", "", doc="logical devices for SINGLE deployment"),
    Key("experimental_model_deploy_mode", "s", "", doc="model deployment mode"),
    Key("experimental_model_deploy_devicelist", "s", "", doc="devices for model deployment"),
    Key("experimental_accelerate_train_mode", "s", "", doc="accelerated training mode"),
    Key("resource_config_path", "s", "", doc="resource configuration file"),
    Key("graph_parallel_option_path", "s", "", doc="graph parallelism options file"),
    Key("enable_graph_parallel", "b", False, doc="automatic graph parallelism"),
)


def _index(table):
    keys = {}
    for key in table:
        if key.name in keys:
            raise ValueError(f"key {key.name} is registered twice")
        keys[key.name] = key
    return keys


KEYS = _index(_TABLE)

# Keys the real adapter checks only while another (bool) key is true; otherwise a bad value is ignored.
VALIDATED_ONLY_WHEN = {
    "dump_step": "enable_dump",
    "dump_mode": "enable_dump",
    "dump_debug_mode": "enable_dump_debug",
    "dynamic_graph_execute_mode": "dynamic_input",
}

# parameter_map keys that migrated scripts set but no NpuOptimizer release reads under that name (older
# adapters' switches, common misspellings): key -> what replaced it. An unknown-key warning names it.
REPLACED_KEYS = {
    "enable_auto_mix_precision": "precision_mode='allow_mix_precision' (the older adapter's switch for mixed "
                                 "precision; False: leave precision_mode unset)",
    "allow_mix_compile": "mix_compile_mode",
    "autotune_tune_mode": "auto_tune_mode (a misspelling), itself replaced by aoe_mode",
    "sump_mode": "dump_mode (a misspelling)",
}

ACTING_KEYS = tuple(name for name, key in KEYS.items() if key.acts)
SIM_KEYS = tuple(name for name in KEYS if name.startswith(SIM_PREFIX))


def is_mix_precision(mode):
    """True for the mix-precision modes: allow_mix_precision(_fp16/_bf16), or mixed_float16/mixed_bfloat16."""
    return mode in MIX_PRECISION_MODES or mode in MIX_PRECISION_MODES_V2


def _normalize_mode(mode):
    return "allow_mix_precision" if mode == "allow_mix_precision_fp16" else mode


def effective_precision_mode(options):
    """The precision_mode in effect, with precision_mode_v2 mapped onto it.

    options: an Options or a plain mapping of key -> value. allow_mix_precision and
    allow_mix_precision_fp16 are one mode, returned as 'allow_mix_precision'.
    """
    mode_v2 = options.get("precision_mode_v2")
    if mode_v2:
        if mode_v2 not in PRECISION_MODE_V2_TO_V1:
            raise ConfigError(f"option precision_mode_v2 value {mode_v2!r} is invalid, "
                              + one_of_text(PRECISION_MODES_V2))
        return _normalize_mode(PRECISION_MODE_V2_TO_V1[mode_v2])
    mode = options.get("precision_mode") or DEFAULT_PRECISION_MODE
    if mode not in PRECISION_MODES:
        raise ConfigError(f"option precision_mode value {mode!r} is invalid, " + one_of_text(PRECISION_MODES))
    return _normalize_mode(mode)
