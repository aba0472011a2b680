"""The CPU layout: channels-first ops placed on the CPU run channels-last between Transposes."""

from npu_sim_bridge.passes.layout.pass_ import CpuLayoutPass, on_cpu

__all__ = ["CpuLayoutPass", "on_cpu"]
