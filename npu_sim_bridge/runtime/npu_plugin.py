"""npu_bridge.estimator.npu.npu_plugin: process-level NPU settings; each says once what the simulation does with it.

set_device_sat_mode(1) (IEEE inf/nan on float16 overflow) is what the emulated float16 already does;
mode 0 (saturation to +-65504, the Atlas training series' only mode) is recorded and warned about
once, because the emulation keeps inf/nan. npu_resource_init/shutdown and npu_close accept their
arguments and do nothing (the options go through npu_config_proto / NPURunConfig here). The RDMA
host-memory helpers have no host memory pool to act on and raise NotImplementedError naming the call.
"""

import warnings

from npu_sim_bridge.runtime import util

SATURATION, INF_NAN = 0, 1
_state = {"sat_mode": INF_NAN}
_warned = set()


class NpuPluginWarning(UserWarning):
    """An npu_plugin call was accepted but has no effect in the simulation."""


def _once(name, text):
    if name not in _warned:
        _warned.add(name)
        warnings.warn(f"npu_plugin.{name}: {text}", NpuPluginWarning, stacklevel=3)


def set_device_sat_mode(mode):
    """Set the float overflow mode: 0 saturation, 1 inf/nan (IEEE 754). The simulation computes mode 1."""
    if mode not in (SATURATION, INF_NAN) or isinstance(mode, bool):
        raise ValueError(f"npu_plugin.set_device_sat_mode: mode must be 0 (saturation) or 1 (inf/nan), got {mode!r}")
    _state["sat_mode"] = mode
    if mode == SATURATION:
        _once("set_device_sat_mode", "mode 0 (saturation) is recorded but not simulated: emulated float16 overflow "
                                     "still gives inf/nan, as mode 1 does; loss scaling sees those steps as overflow")


def get_device_sat_mode():
    """The mode last set with set_device_sat_mode (1, inf/nan, by default)."""
    return _state["sat_mode"]


def npu_resource_init(graph_run_mode=1, op_debug_level=0, enable_profiling=False, profiling_options=None,
                      auto_tune_mode=None, precision_mode=None, enable_scope_fusion_passes=None,
                      enable_exception_dump=0, mstune_mode=None, work_path=None, op_compiler_cache_mode=None,
                      op_compiler_cache_dir=None, debug_dir=None, hcom_multi_mode=False):
    """Checks its arguments as the adapter does and does nothing else (set options with npu_config_proto)."""
    del auto_tune_mode, precision_mode, enable_scope_fusion_passes, mstune_mode, work_path
    del op_compiler_cache_mode, op_compiler_cache_dir, debug_dir
    util.check_nonnegative_integer(graph_run_mode, "graph_run_mode")
    if graph_run_mode > 1:
        raise ValueError(f"npu_resource_init: graph_run_mode must be 0 or 1, got {graph_run_mode}")
    util.check_nonnegative_integer(op_debug_level, "op_debug_level")
    util.check_nonnegative_integer(enable_exception_dump, "enable_exception_dump")
    util.check_bool_type(enable_profiling, "enable_profiling")
    util.check_bool_type(hcom_multi_mode, "hcom_multi_mode")
    if enable_profiling and profiling_options is None:
        raise ValueError("npu_resource_init: profiling_options must be set when enable_profiling is True")
    _once("npu_resource_init", "accepted, no effect: the simulation has no global NPU options; give them to "
                               "npu_config_proto / NPURunConfig / the Session's parameter_map")


def npu_resource_shutdown():
    """Accepted, no effect (there is no NPU system to shut down)."""
    _once("npu_resource_shutdown", "accepted, no effect")


def npu_close():
    """Accepted, no effect (there is no NPU device to close)."""
    _once("npu_close", "accepted, no effect")


def _not_simulated(function):
    function.not_simulated = True  # benchmarks/npu_bridge_census.py counts these as missing
    return function


def _no_host_memory(name):
    raise NotImplementedError(
        f"npu_plugin.{name}: RDMA host-memory embedding (shared host memory registered for the NPU) is not "
        "simulated; keep the embedding table in a regular variable and look it up with tf.nn.embedding_lookup")


@_not_simulated
def init_rdma_pool(mem_size):
    """Not simulated: raises NotImplementedError naming the call."""
    _no_host_memory("init_rdma_pool")


@_not_simulated
def rdma_remote_register(remote_var_list):
    """Not simulated: raises NotImplementedError naming the call."""
    _no_host_memory("rdma_remote_register")


@_not_simulated
def rdma_remote_init(remote_var_list, mem_size):
    """Not simulated: raises NotImplementedError naming the call."""
    _no_host_memory("rdma_remote_init")


@_not_simulated
def get_var_addr_and_size(var_name):
    """Not simulated: raises NotImplementedError naming the call."""
    _no_host_memory("get_var_addr_and_size")


@_not_simulated
def malloc_shared_memory(var_name, shape, data_type):
    """Not simulated: raises NotImplementedError naming the call."""
    _no_host_memory("malloc_shared_memory")


@_not_simulated
def get_rdma_cache(data_type, shape, name="rdma_w"):
    """Not simulated: raises NotImplementedError naming the call."""
    _no_host_memory("get_rdma_cache")
