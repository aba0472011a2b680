"""The report contract: options, warnings, summary and one decision record per node.

JSON form (the contract later passes fill in):
  {"options": {...}, "warnings": [...], "summary": {...},
   "nodes": [{"name", "op", "list", "dtype_before", "dtype_after", "placement", "geop", "reason",
              "reasons": [{"code", ...details}]}]}
"reason" is the text people read, rendered from the structured "reasons" (see reasons.py).
A report `npu-sim estimate --report` writes adds "npu_unit" (cube, vector, aicpu, host; None for a node the
step does not run or one without a kernel) and "npu_us" (estimated microseconds per step) to every node, and
"estimate" ({"step_ms", "samples_per_s", "by_unit", ...}) to the summary (npu_sim_bridge/estimate/annotate.py).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections import Counter
from typing import Any

from tensorflow.core.framework import node_def_pb2, types_pb2
from tensorflow.python.framework import dtypes

from npu_sim_bridge.graph.table import NodeTable, main_dtype
from npu_sim_bridge.report.counts import count_lines
from npu_sim_bridge.report.decisions import Decisions, NodeDecision

__all__ = ["Decisions", "NodeDecision", "PassRecord", "Report", "node_dtype"]


def node_dtype(node: node_def_pb2.NodeDef) -> str | None:
    """The main dtype of a node as a name ('float32'), or None when it has none (see graph.table)."""
    found = main_dtype(node)
    return _dtype_name(found) if found else None


@functools.lru_cache(maxsize=None)
def _dtype_name(enum_value: int) -> str:
    """'float32' for DT_FLOAT, 'float16' for DT_HALF: the names users know from tf.dtypes."""
    try:
        return dtypes.as_dtype(enum_value).name
    except TypeError:  # a DataType this TensorFlow has no Python name for
        return types_pb2.DataType.Name(enum_value)


@dataclasses.dataclass
class PassRecord:
    """What one pass did: whether it changed the graph, its counters and its run time."""

    name: str
    changed: bool
    seconds: float
    stats: dict[str, Any]


class Report:
    """Decisions for one rewritten graph (one Grappler item or one offline rewrite)."""

    def __init__(self, graph_id: str, options: dict[str, Any] | None = None, item_id: str = ""):
        self.graph_id = graph_id
        self.item_id = item_id  # Grappler's item id: "tf_graph" for a Session's graph, else a function
        self.options: dict[str, Any] = dict(options or {})
        self.option_notes: list[dict[str, Any]] = []
        self.warnings: list[str] = []
        self.nodes = Decisions()  # name -> NodeDecision, in the order recorded
        self.passes: list[PassRecord] = []
        self.nodes_before = 0
        self.nodes_after = 0
        self.seconds = 0.0
        self.skipped: str | None = None
        self.rerun = False  # the graph had been through NpuOptimizer already (a later iteration)
        self.role = None     # report/roles.py: what the graph is for (train, eval, init, ...), from its fetches
        self.counts: dict[str, int] | None = None  # report/counts.py: the node counts, each named
        self.published = None  # report/publish.py: where the files of this rewrite went
        # Set only by npu_sim_bridge.estimate.annotate (a Session run never pays for it): {"summary": the
        # step's estimate, "nodes": {name: (npu_unit, npu_us)}}; the JSON then gives every node the two keys.
        self.estimate: dict[str, Any] | None = None

    def record_graph(self, table: NodeTable, extra=()) -> None:
        """Create one decision record per node of the input graph (`table`'s), then one per NodeDef
        in `extra` (nodes the view added as it was built)."""
        records = self.nodes
        records.extend(table.names, table.ops, (_dtype_name(dtype) if dtype else None for dtype in table.dtypes))
        for node in extra:
            dtype = node_dtype(node)
            records.add(node.name, node.op, None, dtype, dtype)
        self.nodes_before = len(records)

    def node(self, name: str) -> NodeDecision:
        return self.nodes[name]

    def warn(self, text: str) -> None:
        if text not in self.warnings:
            self.warnings.append(text)

    @property
    def summary(self) -> dict[str, Any]:
        column = self.nodes.column
        return {
            "graph": self.graph_id,
            "item": self.item_id,
            "role": self.role.name if self.role else None,
            "role_reason": self.role.why if self.role else None,
            "nodes_before": self.nodes_before,
            "nodes_after": self.nodes_after,
            "counts": self.counts,
            "lists": dict(sorted(Counter(value for value in column("list") if value).items())),
            "placements": dict(sorted(Counter(value for value in column("placement") if value).items())),
            "dtype_changes": self.nodes.count_differing("dtype_before", "dtype_after"),
            "geops": sorted({value for value in column("geop") if value}),
            "passes": [dataclasses.asdict(p) for p in self.passes],
            "seconds": round(self.seconds, 6),
            "skipped": self.skipped,
            "rerun": self.rerun,
            **({"estimate": self.estimate["summary"]} if self.estimate else {}),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "options": self.options,
            "option_notes": self.option_notes,
            "warnings": list(self.warnings),
            "summary": self.summary,
            "nodes": [d.to_dict() for d in self.nodes.values()] if not self.estimate else
                     [_with_estimate(d.to_dict(), self.estimate["nodes"]) for d in self.nodes.values()],
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False)

    def to_text(self, max_nodes: int = 50) -> str:
        """A summary a person reads: options, warnings, totals, per-pass changes, changed nodes."""
        summary = self.summary
        lines = [f"NpuOptimizer report for graph {self.graph_id}"]
        if self.skipped:
            lines.append(f"  skipped: {self.skipped}")
        if self.role:
            lines.append(f"  role: {self.role.name} ({self.role.why})")
        lines.extend(count_lines(summary))
        for note in self.option_notes:
            effect = "" if note.get("acts") else f"  ({note.get('note')})"
            lines.append(f"  option {note['name']} = {note['value']!r}{effect}")
        if summary["geops"]:
            lines.append(f"  GeOps: {', '.join(summary['geops'])}")
        lines.append(f"  dtype changes: {summary['dtype_changes']}")
        if self.estimate:
            est = self.estimate["summary"]
            lines.append(f"  estimated NPU step (an estimate, not a measurement): {est['step_ms']} ms, "
                         f"{est['samples_per_s']} samples/s; by unit (ms): "
                         + ", ".join(f"{k} {v}" for k, v in est["by_unit"].items()))
        if self.passes:
            lines.append("  passes (their counters count the graph as each pass saw it):")
        for record in self.passes:
            stats = ", ".join(f"{k}={v}" for k, v in record.stats.items())
            state = "changed" if record.changed else "no change"
            lines.append(f"  pass {record.name}: {state} in {record.seconds * 1000:.1f} ms"
                         + (f" ({stats})" if stats else ""))
        for text in self.warnings:
            lines.append(f"  WARNING: {text}")
        # Dtype changes first, then what stays on the host, then the remaining list decisions.
        changed = sorted(
            (d for d in self.nodes.values()
             if d.dtype_before != d.dtype_after or d.placement == "host" or d.list),
            key=lambda d: (d.dtype_before == d.dtype_after, d.placement != "host"))
        if changed:
            lines.append("  decisions:")
            for decision in changed[:max_nodes]:
                dtype = (decision.dtype_before if decision.dtype_before == decision.dtype_after
                         else f"{decision.dtype_before}->{decision.dtype_after}")
                where = decision.geop or decision.placement or "-"
                lines.append(f"    {decision.name} [{decision.op}] {decision.list or '-'} {dtype} "
                             f"@{where} | {decision.reason or '-'}")
            if len(changed) > max_nodes:
                lines.append(f"    ... {len(changed) - max_nodes} more in the JSON report")
        return "\n".join(lines) + "\n"


def _with_estimate(row: dict[str, Any], estimates: dict) -> dict[str, Any]:
    """A node row with its estimated unit and microseconds per step (both None for nodes the step does not run)."""
    row["npu_unit"], row["npu_us"] = estimates.get(row["name"], (None, None))
    return row
