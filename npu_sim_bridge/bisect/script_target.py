"""Runs a training script as `npu-sim run` does, in a child process, and reads the number it prints each step.

Each run forces options on every NpuOptimizer of the child (NPU_SIM_FORCE_OPTIONS: the precision mode,
the candidate mixlist, dumps), gives every Session the NpuOptimizer (NPU_SIM_ALL_SESSIONS=1, so a
script that configures none is simulated too) and has the reports written to a folder, from which
the nodes' decisions are read. `--metric` is a regular expression; its first group (or the whole
match) is the number. With `steps`, the child is stopped once it printed that many numbers.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

import numpy as np

from npu_sim_bridge.bisect.outcome import BisectError, NodeInfo, Outcome
from npu_sim_bridge.childproc import Child, Deadline
from npu_sim_bridge.graph.op_categories import PASS_FUSED_BASE_OPS

FORCE_ENV = "NPU_SIM_FORCE_OPTIONS"
_PRECISION_KEYS = ("precision_mode", "precision_mode_v2")


class ScriptTarget:
    def __init__(self, script, args=(), metric=None, steps=None, params=None, timeout=None):
        if not script or not os.path.isfile(script):
            raise BisectError(f"--script {script!r} does not exist or is not a file")
        if not metric:
            raise BisectError("name the number to compare with --metric REGEX, e.g. --metric 'loss = ([0-9.e+-]+)'")
        try:
            self.metric = re.compile(metric)
        except re.error as err:
            raise BisectError(f"--metric {metric!r} is not a valid regular expression ({err})") from None
        if steps is not None and steps < 1:
            raise BisectError(f"--steps {steps}: give at least 1")
        self.script, self.args, self.steps = os.path.abspath(script), list(args), steps
        self.params = dict(params or {})
        self.timeout = timeout
        self._told_pipe_held = False

    def describe(self) -> str:
        return f"script {shlex.join([os.path.basename(self.script)] + self.args)} metric /{self.metric.pattern}/"

    def _forced(self, overrides: dict, report_dir: str) -> dict:
        forced = dict(self.params)
        if any(key in overrides for key in _PRECISION_KEYS):
            for key in _PRECISION_KEYS:
                forced.pop(key, None)
            for key in _PRECISION_KEYS:
                forced.setdefault(key, "")  # unset the spelling the script may use
        forced.update(overrides)
        forced["sim_report_dir"] = report_dir
        return forced

    def run(self, overrides: dict) -> Outcome:
        # The child's reports are read for its nodes' dtypes, then dropped with their folder.
        with tempfile.TemporaryDirectory(prefix="npu_sim_bisect_reports_") as report_dir:
            return self._run(overrides, report_dir)

    def _run(self, overrides: dict, report_dir: str) -> Outcome:
        env = dict(os.environ)
        env[FORCE_ENV] = json.dumps(self._forced(overrides, report_dir))
        env["NPU_SIM_ALL_SESSIONS"] = "1"
        # The child imports this very npu_sim_bridge (the script's folder comes first on its path otherwise).
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
        command = [sys.executable, "-m", "npu_sim_bridge", "run", self.script, *self.args]
        values, lines, stopped = [], [], False
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        with tempfile.TemporaryFile(mode="w+b") as errors, \
                Child(command, stdout=subprocess.PIPE, stderr=errors, env=env, cwd=os.path.dirname(self.script)) as child:
            try:
                for raw in child.lines(child.stdout, deadline):
                    line = raw.decode("utf-8", errors="replace")
                    lines.append(line.rstrip("\n"))
                    match = self.metric.search(line)
                    if match is None:
                        continue
                    text = match.group(1) if self.metric.groups else match.group(0)
                    try:
                        values.append(float(text))
                    except ValueError:
                        raise BisectError(f"--metric {self.metric.pattern!r} captured {text!r} in the line "
                                          f"{line.strip()!r}, which is not a number; put the number in group 1") from None
                    if self.steps and len(values) >= self.steps:
                        stopped = True
                        break
                if child.pipe_held and not self._told_pipe_held:
                    self._told_pipe_held = True
                    print(f"npu-sim bisect: note: the script exited, but a process it started that left its process "
                          f"group (setsid, a daemon) still holds its output; that process was left running, as "
                          f"`python {os.path.basename(self.script)}` would leave it", file=sys.stderr, flush=True)
                if stopped:
                    status = child.stop(grace=5.0)
                else:
                    status = child.wait(None if deadline is None else max(deadline - time.monotonic(), 0.0))
            except (Deadline, subprocess.TimeoutExpired):
                child.close()
                return Outcome([np.array(values)], _nodes(report_dir),
                               failure=f"the script ran longer than {self.timeout:g} s (--timeout)")
            errors.seek(0)
            tail = errors.read().decode("utf-8", errors="replace").strip().splitlines()[-6:]
        nodes = _nodes(report_dir)
        failure = None
        if status != 0 and not stopped:
            failure = f"the script exited with status {status}: " + " | ".join(tail or lines[-3:])
        elif not values:
            failure = (f"the script printed no line that --metric {self.metric.pattern!r} matches; its last lines: "
                       + " | ".join(lines[-3:] or ["(no output)"]))
        elif self.steps and len(values) < self.steps:
            failure = f"the script printed the metric {len(values)} time(s), fewer than --steps {self.steps}"
        return Outcome([np.array(values)] if values else [], nodes, failure=failure)


def _nodes(report_dir: str) -> dict[str, NodeInfo]:
    """The node decisions of every report the child wrote (graphs rewritten by its Sessions)."""
    nodes = {}
    for path in sorted(glob.glob(os.path.join(report_dir, "*.json"))):
        with open(path, encoding="utf-8") as handle:
            report = json.load(handle)
        for node in report.get("nodes", []):
            op = PASS_FUSED_BASE_OPS.get(node["op"], node["op"])
            nodes[node["name"]] = NodeInfo(node["name"], op, node.get("list"), node.get("dtype_before"),
                                           node.get("dtype_after"), node.get("placement"))
    return nodes
