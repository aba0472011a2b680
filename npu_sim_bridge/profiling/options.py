"""profiling_options: the JSON object the real adapter takes, read into a ProfilingOptions.

Keys that act here: "output" (the folder; default ./profiling), "training_trace" and "task_trace"
("on"/"off"; task_trace is on unless only training_trace is set). task_trace on: each GeOp with its
ops inside, and the host ops. training_trace alone: the GeOps and host ops of each step, without the
ops inside. "sim_steps" (a simulator extension, dump_step syntax: "0|5|10-20") selects the steps; default every
step. "sim_estimate" (a simulator extension, "on"/"off", default on) adds the estimated NPU track
(profiling/estimated.py). Every other real key (aicpu, aic_metrics, fp_point, bp_point, hccl, l2, msproftx, ...) is
accepted without effect.
"""

from __future__ import annotations

import dataclasses
import json
import os

from npu_sim_bridge.errors import ConfigError

KNOWN_KEYS = frozenset({
    "output", "storage_limit", "training_trace", "task_trace", "aicpu", "fp_point", "bp_point", "aic_metrics",
    "l2", "hccl", "msproftx", "runtime_api", "sys_hardware_mem_freq", "llc_profiling", "sys_io_sampling_freq",
    "sys_interconnection_freq", "dvpp_freq", "instr_profiling_freq", "host_sys", "host_sys_usage",
    "host_sys_usage_freq", "ge_api", "task_time", "task_memory", "sim_steps",
    "sim_estimate",
})
DEFAULT_OUTPUT = "profiling"


@dataclasses.dataclass(frozen=True)
class ProfilingOptions:
    output: str
    training_trace: bool
    task_trace: bool
    steps: tuple[tuple[int, int], ...]  # inclusive ranges; empty: every step
    estimate: bool = True               # the estimated NPU track beside the measured one

    def selects(self, step: int) -> bool:
        return not self.steps or any(low <= step <= high for low, high in self.steps)


def _switch(data: dict, key: str, default: str) -> bool:
    value = data.get(key, default)
    if value not in ("on", "off"):
        raise ConfigError(f"option profiling_options: {key!r} is {value!r}; it should be \"on\" or \"off\"")
    return value == "on"


def parse_profiling_options(text: str | bytes | None) -> ProfilingOptions:
    """Read profiling_options; raises ConfigError naming the key and what to write."""
    from npu_sim_bridge.config.registry import dump_step_problem, parse_dump_steps

    if isinstance(text, bytes):
        text = text.decode("utf-8")
    text = (text or "").strip()
    data: dict = {}
    if text:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise ConfigError(f"option profiling_options is not valid JSON ({err.msg} at line {err.lineno} column "
                              f"{err.colno}); write e.g. "
                              "'{\"output\":\"/tmp/profiling\",\"task_trace\":\"on\"}'") from None
        if not isinstance(data, dict):
            raise ConfigError("option profiling_options must be a JSON object, e.g. "
                              "'{\"output\":\"/tmp/profiling\",\"task_trace\":\"on\"}'")
    unknown = sorted(set(data) - KNOWN_KEYS)
    if unknown:
        raise ConfigError(f"option profiling_options has unknown keys {', '.join(map(repr, unknown))}; known keys: "
                          + ", ".join(sorted(KNOWN_KEYS)))
    training = _switch(data, "training_trace", "off")
    task = _switch(data, "task_trace", "off" if training else "on")
    if not (training or task):
        raise ConfigError("option profiling_options turns both training_trace and task_trace off, so there is "
                          "nothing to trace; set \"task_trace\":\"on\"")
    steps_text = str(data.get("sim_steps", ""))
    problem = dump_step_problem(steps_text)
    if problem:
        raise ConfigError(f"option profiling_options: sim_steps {steps_text!r} is invalid, {problem}")
    output = data.get("output") or DEFAULT_OUTPUT
    if not isinstance(output, str):
        raise ConfigError(f"option profiling_options: output must be a folder path (a string), got {output!r}")
    return ProfilingOptions(output=os.path.abspath(output), training_trace=training, task_trace=task,
                            steps=tuple(parse_dump_steps(steps_text)), estimate=_switch(data, "sim_estimate", "on"))
