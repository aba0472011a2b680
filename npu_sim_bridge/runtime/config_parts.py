"""The smaller config objects NPURunConfig takes (profiling, memory, dynamic input, experimental) as NpuOptimizer keys.

Each has `parameters()`: the parameter_map keys and values NPUEstimator writes for it. The
simulation accepts all of them; only ProfilingConfig changes what it does (a trace of the steps,
npu_sim_bridge.profiling; see npu_sim_bridge.config.KEYS).
"""


def _present(values):
    return {key: value for key, value in values.items() if value is not None}


class ProfilingConfig:
    """Profiling switch and options (profiling_mode, profiling_options)."""

    def __init__(self, enable_profiling=False, profiling_options=None):
        self._enable_profiling = enable_profiling
        self._profiling_options = profiling_options

    def parameters(self):
        values = {"profiling_mode": self._enable_profiling}
        if self._enable_profiling:
            values["profiling_options"] = self._profiling_options or ""
        return values


class MemoryConfig:
    """Graph engine memory policies."""

    def __init__(self, atomic_clean_policy=0, static_memory_policy=0, memory_optimization_policy=None,
                 variable_use_1g_huge_page=0):
        self._atomic_clean_policy = atomic_clean_policy
        self._static_memory_policy = static_memory_policy
        self._memory_optimization_policy = memory_optimization_policy
        self._variable_use_1g_huge_page = variable_use_1g_huge_page

    def parameters(self):
        return _present({
            "atomic_clean_policy": self._atomic_clean_policy,
            "static_memory_policy": self._static_memory_policy,
            "memory_optimization_policy": self._memory_optimization_policy,
            "variable_use_1g_huge_page": self._variable_use_1g_huge_page,
        })


class DynamicInputConfig:
    """Dynamic batch/size inputs: input_shape, dynamic_dims, dynamic_node_type, compile_hybrid_mode."""

    def __init__(self, input_shape, dynamic_dims, dynamic_node_type, compile_hybrid_mode=0):
        self._input_shape = input_shape
        self._dynamic_dims = dynamic_dims
        self._dynamic_node_type = dynamic_node_type
        self._compile_hybrid_mode = compile_hybrid_mode

    def parameters(self):
        values = {
            "input_shape": self._input_shape,
            "dynamic_dims": self._dynamic_dims,
            "dynamic_node_type": self._dynamic_node_type,
            "compile_hybrid_mode": self._compile_hybrid_mode,
        }
        # As npu_bridge: written only when all four are given.
        return values if all(value is not None for value in values.values()) else {}


class GraphMemoryOptimizeConfig:
    """Recompute and graph slicing modes ('auto' or 'manual')."""

    def __init__(self, recompute=None, graph_slice=None):
        for name, value in (("recompute", recompute), ("graph_slice", graph_slice)):
            if value is not None and value not in ("auto", "manual"):
                raise ValueError(f"{name} {value!r} is invalid, it should be 'auto' or 'manual'")
        self._recompute = recompute
        self._graph_slice = graph_slice


class ExperimentalConfig:
    """Experimental deployment and graph options."""

    def __init__(self, logical_device_cluster_deploy_mode="LB", logical_device_id=None, model_deploy_mode=None,
                 model_deploy_devicelist=None, graph_memory_optimize_config=None, enable_graph_parallel=None,
                 graph_parallel_option_path=None, graph_compiler_cache_dir=None, resource_config_path=None,
                 accelerate_train_mode=None):
        if graph_memory_optimize_config is not None and not isinstance(graph_memory_optimize_config,
                                                                       GraphMemoryOptimizeConfig):
            raise ValueError("graph_memory_optimize_config must be a GraphMemoryOptimizeConfig, got "
                             f"{type(graph_memory_optimize_config).__name__}")
        self._logical_device_cluster_deploy_mode = logical_device_cluster_deploy_mode
        self._logical_device_id = logical_device_id
        self._model_deploy_mode = model_deploy_mode
        self._model_deploy_devicelist = model_deploy_devicelist
        self._graph_memory_optimize_config = graph_memory_optimize_config
        self._enable_graph_parallel = enable_graph_parallel
        self._graph_parallel_option_path = graph_parallel_option_path
        self._graph_compiler_cache_dir = graph_compiler_cache_dir
        self._resource_config_path = resource_config_path
        self._accelerate_train_mode = accelerate_train_mode

    def parameters(self):
        memory = self._graph_memory_optimize_config
        return _present({
            "experimental_logical_device_cluster_deploy_mode": self._logical_device_cluster_deploy_mode,
            "experimental_logical_device_id": self._logical_device_id,
            "experimental_model_deploy_mode": self._model_deploy_mode,
            "experimental_model_deploy_devicelist": self._model_deploy_devicelist,
            "resource_config_path": self._resource_config_path,
            "graph_compiler_cache_dir": self._graph_compiler_cache_dir,
            "graph_parallel_option_path": self._graph_parallel_option_path,
            "enable_graph_parallel": self._enable_graph_parallel,
            "experimental_accelerate_train_mode": self._accelerate_train_mode,
            "graph_slice": memory._graph_slice if memory is not None else None,  # pylint: disable=protected-access
        })
