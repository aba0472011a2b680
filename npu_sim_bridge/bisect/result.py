"""The result of a bisect: the fix, every trial with the error it left, the number of runs; as text and JSON."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np

from npu_sim_bridge.bisect.outcome import Fix, Trial


@dataclasses.dataclass
class BisectResult:
    target: str
    rtol: float
    mixed: dict
    runs: int = 0
    trials: list[Trial] = dataclasses.field(default_factory=list)
    error_before: float = math.nan
    error_after: float = math.nan
    message: str = ""
    candidate_nodes: list[str] = dataclasses.field(default_factory=list)
    candidate_types: list[str] = dataclasses.field(default_factory=list)
    float16_only: list[str] = dataclasses.field(default_factory=list)
    guidance: object = None
    fix: Fix = dataclasses.field(default_factory=Fix)
    expanded_nodes: list[str] = dataclasses.field(default_factory=list)
    stayed_float16: list[str] = dataclasses.field(default_factory=list)
    mixed_params: dict = dataclasses.field(default_factory=dict)
    node_types: dict = dataclasses.field(default_factory=dict)
    workdir: str = ""       # the candidate files and dumps of the runs
    reference_values: list = dataclasses.field(default_factory=list)   # what the float32 run gave
    fixed_values: list = dataclasses.field(default_factory=list)       # what the run with the fix gave

    @property
    def found(self) -> bool:
        return bool(self.fix.types or self.fix.nodes)

    @property
    def search_runs(self) -> int:
        """Runs with a candidate fix (the type and node searches and the final check)."""
        return sum(1 for trial in self.trials if trial.stage in ("types", "nodes", "final"))

    def _why(self, names) -> str:
        guidance = self.guidance
        if guidance is None:
            return ""
        overflowed = [n for n in names if n in guidance.overflow]
        if overflowed:
            return f"float16 overflowed in {', '.join(overflowed[:3])}"
        divergent = [n for n in names if n in guidance.divergent]
        if divergent:
            first = guidance.divergent[0] if guidance.divergent else ""
            lead = "first divergent op " if first in divergent else "diverged beyond rtol in "
            return lead + ", ".join(([first] if first in divergent else divergent)[:3])
        return ""

    def comments(self) -> dict[str, str]:
        """A line per entry saying what it fixed."""
        done = f"error {self.error_before:.3g} -> {self.error_after:.3g} with every entry (rtol {self.rtol:g})"
        notes = {}
        for op_type in self.fix.types:
            members = [n for n in self.candidate_nodes if self.node_types.get(n) == op_type]
            why = self._why(members)
            notes[op_type] = (f"{op_type}: all {len(members)} node(s) of the type must stay float32"
                              + (f"; {why}" if why else "") + f"; {done}")
        for name in self.fix.nodes:
            why = self._why([name])
            notes[name] = (f"{name} ({self.node_types.get(name, '?')}): must stay float32, the other nodes of its type may run float16"
                           + (f"; {why}" if why else "") + f"; {done}")
        return notes

    def to_dict(self) -> dict:
        def number(value):
            return value if math.isfinite(value) else str(value)

        return {"target": self.target, "rtol": self.rtol, "mixed": self.mixed, "runs": self.runs,
                "search_runs": self.search_runs, "candidate_types": self.candidate_types,
                "candidate_nodes": self.candidate_nodes, "float16_only": self.float16_only,
                "guidance": self.guidance.to_dict() if self.guidance is not None else None,
                "error_before": number(self.error_before), "error_after": number(self.error_after),
                "fix": {"types": list(self.fix.types), "nodes": list(self.fix.nodes),
                        "customize_dtypes_nodes": self.expanded_nodes},
                "stayed_float16": self.stayed_float16, "message": self.message, "workdir": self.workdir,
                "reference_values": [np.asarray(v).tolist() for v in self.reference_values],
                "fixed_values": [np.asarray(v).tolist() for v in self.fixed_values],
                "trials": [trial.to_dict() for trial in self.trials]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def to_text(self) -> str:
        lines = [f"bisect of {self.target} ({', '.join(f'{k}={v}' for k, v in self.mixed.items())}, "
                 f"rtol {self.rtol:g})"]
        if self.message:
            lines.append(f"  {self.message}")
        lines.append(f"  candidates: {len(self.candidate_types)} op type(s), {len(self.candidate_nodes)} node(s) "
                     "running float16 that could run float32")
        if self.float16_only:
            lines.append(f"  float16-only ops (no float32 kernel on the NPU, not candidates): "
                         f"{', '.join(self.float16_only[:8])}")
        if self.guidance is not None:
            if self.guidance.overflow:
                lines.append(f"  float16 overflow in: {', '.join(self.guidance.overflow[:8])}")
            if self.guidance.divergent:
                lines.append(f"  first divergent op: {self.guidance.divergent[0]}")
            if self.guidance.note:
                lines.append(f"  {self.guidance.note}")
        lines.append("  trials:")
        for index, trial in enumerate(self.trials, start=1):
            lines.append(f"    {index:3d} {trial.stage:6s} {trial.fix.label}: error {trial.error:.3g}"
                         f"{'  good' if trial.good else ''}{'  (' + trial.note + ')' if trial.note else ''}")
        if self.workdir:
            lines.append(f"  the runs' mixlists and dumps: {self.workdir}")
        lines.append(f"  runs: {self.runs} in all ({self.search_runs} with a candidate fix, for "
                     f"{len(self.candidate_types)} candidate type(s) and {len(self.candidate_nodes)} node(s))")
        if self.found:
            lines.append(f"  keep float32: {self.fix.label}; error {self.error_before:.3g} -> {self.error_after:.3g}")
            if self.stayed_float16:
                lines.append(f"  still float16: {', '.join(self.stayed_float16[:12])}"
                             f"{' ...' if len(self.stayed_float16) > 12 else ''}")
        return "\n".join(lines) + "\n"
