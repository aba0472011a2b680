"""Profiling: `profiling_mode` / `profiling_options` give a chrome://tracing / Perfetto trace of the selected steps.

options.py        profiling_options JSON (output, training_trace, task_trace, sim_steps, sim_estimate) -> options
session_hook.py   the Session.run / close wrapper: traces each selected step, merges the steps when the Session closes
trace.py          RunMetadata step stats -> TensorFlow's timeline -> GeOp spans with their ops, host ops apart
roles.py          what a run is for (train, eval, init, checkpoint, other), read from the ops its fetches reach
estimated.py      the "estimated NPU" track: npu_sim_bridge.estimate's ops of the step, once per graph and fetch set
merge.py          every step's trace in one file on one time line, with a span per step named by its role
summary.py        reading trace files back; top ops by time, host vs device, per step (`npu-sim profile`)
op_summary.py     the op_summary-style CSV over steps by role and op type, warm-up steps skipped (`--summary`)
overview.py       what `npu-sim profile --summary/--csv/--skip/--merge` prints
"""

from npu_sim_bridge.profiling.options import ProfilingOptions, parse_profiling_options

__all__ = ["ProfilingOptions", "parse_profiling_options"]
