"""The native NpuOptimizer shim: its C++ source, its build into a per-user cache, and its Python entry."""

from npu_sim_bridge.native.build import shim_path
from npu_sim_bridge.native.loader import load_native

__all__ = ["load_native", "shim_path"]
