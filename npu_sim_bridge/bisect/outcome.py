"""What one run of the model gives (values, per-node decisions), a candidate fix, a trial, and the error measure."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from npu_sim_bridge.errors import NpuSimError


class BisectError(NpuSimError):
    """The model cannot be bisected as given: it does not run, float32 is broken, no metric, no fix."""


@dataclasses.dataclass(frozen=True)
class NodeInfo:
    """One node's decision in a run's report."""

    name: str
    op: str
    list: str | None
    dtype_before: str | None
    dtype_after: str | None
    placement: str | None
    fused_with: tuple[str, ...] = ()   # the other nodes of the fused op it belongs to


@dataclasses.dataclass
class Outcome:
    """The numbers a run gives (fetched tensors, or the metric per step) and its nodes' decisions."""

    values: list
    nodes: dict[str, NodeInfo] = dataclasses.field(default_factory=dict)
    failure: str | None = None      # why the run gave no (or fewer) numbers: an exception, an exit status


@dataclasses.dataclass(frozen=True)
class Fix:
    """Op types to black-list and single nodes to keep in float32."""

    types: tuple[str, ...] = ()
    nodes: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        parts = [f"type {t}" for t in self.types] + [f"node {n}" for n in self.nodes]
        return ", ".join(parts) if parts else "nothing (mixed precision as configured)"


@dataclasses.dataclass
class Trial:
    """One run of the mixed model with a candidate fix."""

    stage: str          # reference | mixed | probe | types | nodes | final
    fix: Fix
    error: float
    good: bool
    note: str = ""

    def to_dict(self) -> dict:
        return {"stage": self.stage, "types": list(self.fix.types), "nodes": list(self.fix.nodes),
                "error": _json_float(self.error), "good": self.good, "note": self.note}


def _json_float(value: float):
    return value if math.isfinite(value) else str(value)


def relative_error(reference: list, values: list) -> tuple[float, str]:
    """max |b - a| / max |a| over every fetched value (inf when b is not finite where a is); and a note."""
    if len(values) != len(reference):
        return math.inf, f"gave {len(values)} value(s) where float32 gave {len(reference)}"
    worst, note = 0.0, ""
    for index, (a, b) in enumerate(zip(reference, values)):
        a = np.asarray(a, dtype=np.float64)
        b = np.asarray(b, dtype=np.float64)
        if a.shape != b.shape:
            return math.inf, f"value {index} has shape {b.shape}, float32 gave {a.shape}"
        bad = ~np.isfinite(b) & np.isfinite(a)
        if bad.any():
            return math.inf, f"{int(bad.sum())} non-finite value(s) (nan/inf) in value {index}"
        scale = float(np.max(np.abs(a))) if a.size else 0.0
        diff = float(np.max(np.abs(b - a))) if a.size else 0.0
        error = diff / scale if scale > 0 else (0.0 if diff == 0 else math.inf)
        if error > worst:
            worst = error
    return worst, note
