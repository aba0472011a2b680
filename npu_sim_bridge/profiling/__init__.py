"""Profiling: `profiling_mode` / `profiling_options` give a chrome://tracing / Perfetto trace of the selected steps.

options.py        profiling_options JSON (output, training_trace, task_trace, sim_steps) -> ProfilingOptions
session_hook.py   the Session.run wrapper that asks TensorFlow for step stats when a Session profiles
trace.py          RunMetadata step stats -> TensorFlow's timeline -> GeOp spans with their ops, host ops apart
summary.py        a trace file or folder -> top ops by time, host vs device, per step (`npu-sim profile`)
"""

from npu_sim_bridge.profiling.options import ProfilingOptions, parse_profiling_options

__all__ = ["ProfilingOptions", "parse_profiling_options"]
