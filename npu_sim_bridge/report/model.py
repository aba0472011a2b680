"""The report contract: options, warnings, summary and one decision record per node.

JSON form (the contract later passes fill in):
  {"options": {...}, "warnings": [...], "summary": {...},
   "nodes": [{"name", "op", "list", "dtype_before", "dtype_after", "placement", "geop", "reason",
              "reasons": [{"code", ...details}]}]}
"reason" is the text people read, rendered from the structured "reasons" (see reasons.py).
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
from npu_sim_bridge.report.reasons import Reason, as_reason

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


_NO_REASONS = ()


class NodeDecision:
    """What the pipeline decided for one node of the input graph, and why.

    Passes add reasons as values; `reason`, the text people read, is rendered from them only when
    it is read (a report nobody reads or writes formats no sentence).
    """

    __slots__ = ("name", "op", "list", "dtype_before", "dtype_after", "placement", "geop", "_reasons",
                 "_text", "_rendered")
    _FIELDS = ("name", "op", "list", "dtype_before", "dtype_after", "placement", "geop", "reason", "reasons")

    def __init__(self, name: str, op: str, list: str | None = None, dtype_before: str | None = None,  # noqa: A002
                 dtype_after: str | None = None, placement: str | None = None, geop: str | None = None,
                 reason: str = "", reasons: "list[Reason] | None" = None):
        self.name = name
        self.op = op
        self.list = list                  # white | black | gray | None (not a float compute op)
        self.dtype_before = dtype_before
        self.dtype_after = dtype_after
        self.placement = placement        # device | host
        self.geop = geop                  # the GeOp call node that runs it
        # As passes gave them: none (the empty tuple), the one reason, or a list of two or more. Most
        # nodes of a large graph get one reason or none, and a list per node was a tenth of the
        # pipeline's peak memory.
        self._reasons: Reason | str | list | tuple = _NO_REASONS
        if reasons:
            self._reasons = reasons[0] if len(reasons) == 1 else [*reasons]
        self._text = reason               # the text of the first _rendered reasons (or text set directly)
        self._rendered = self._count() if reason else 0

    def _count(self) -> int:
        held = self._reasons
        return len(held) if isinstance(held, (list, tuple)) else 1

    def _list(self) -> "list[Reason | str]":
        """The reasons as a list (the one the record then holds)."""
        held = self._reasons
        if isinstance(held, list):
            return held
        self._reasons = held = [] if held is _NO_REASONS else [held]
        return held

    def add_reason(self, reason: "Reason | str") -> None:
        """Record why: a Reason, or text from passes that give text (kept as given until read)."""
        held = self._reasons
        if held is _NO_REASONS:
            self._reasons = reason
        elif isinstance(held, list):
            held.append(reason)
        else:
            self._reasons = [held, reason]

    @property
    def reason(self) -> str:
        """The text of the reasons, for people ("; " between them)."""
        if self._rendered < self._count():
            reasons = self._list()
            text = self._text
            for index in range(self._rendered, len(reasons)):
                value = reasons[index]
                if not isinstance(value, Reason):
                    value = reasons[index] = as_reason(value)
                part = value.text()
                text = f"{text}; {part}" if text else part
            self._text, self._rendered = text, len(reasons)
        return self._text

    @reason.setter
    def reason(self, text: str) -> None:
        self._text, self._rendered = text, self._count()

    @property
    def reasons(self) -> "list[Reason]":
        """The Reason values, in the order passes gave them (text a pass gave is a "text" Reason)."""
        if self._reasons is _NO_REASONS:
            return []
        reasons = self._list()
        for index, value in enumerate(reasons):
            if not isinstance(value, Reason):
                reasons[index] = as_reason(value)
        return reasons

    def host_reason(self) -> "Reason | None":
        """The first placement reason, if the node was kept on the host."""
        return next((r for r in self.reasons if r.is_host), None)

    def to_dict(self) -> dict[str, Any]:
        fields = {key: getattr(self, key) for key in self._FIELDS if key != "reasons"}
        fields["reasons"] = [r.to_dict() for r in self.reasons]
        return fields

    def __eq__(self, other) -> bool:
        if not isinstance(other, NodeDecision):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    __hash__ = None  # mutable, like the dataclass it replaces

    def __repr__(self) -> str:
        return "NodeDecision(" + ", ".join(f"{key}={getattr(self, key)!r}" for key in self._FIELDS) + ")"


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
        self.nodes: dict[str, NodeDecision] = {}
        self.passes: list[PassRecord] = []
        self.nodes_before = 0
        self.nodes_after = 0
        self.seconds = 0.0
        self.skipped: str | None = None
        self.rerun = False  # the graph had been through NpuOptimizer already (a later iteration)

    def record_graph(self, table: NodeTable, extra=()) -> None:
        """Create one decision record per node of the input graph (`table`'s), then one per NodeDef
        in `extra` (nodes the view added as it was built)."""
        records = self.nodes
        for name, op, dtype in zip(table.names, table.ops, table.dtypes):
            text = _dtype_name(dtype) if dtype else None
            records[name] = NodeDecision(name, op, None, text, text)
        for node in extra:
            dtype = node_dtype(node)
            records[node.name] = NodeDecision(node.name, node.op, None, dtype, dtype)
        self.nodes_before = len(records)

    def node(self, name: str) -> NodeDecision:
        return self.nodes[name]

    def warn(self, text: str) -> None:
        if text not in self.warnings:
            self.warnings.append(text)

    @property
    def summary(self) -> dict[str, Any]:
        decisions = list(self.nodes.values())
        return {
            "graph": self.graph_id,
            "item": self.item_id,
            "nodes_before": self.nodes_before,
            "nodes_after": self.nodes_after,
            "lists": dict(sorted(Counter(d.list for d in decisions if d.list).items())),
            "placements": dict(sorted(Counter(d.placement for d in decisions if d.placement).items())),
            "dtype_changes": sum(1 for d in decisions if d.dtype_before != d.dtype_after),
            "geops": sorted({d.geop for d in decisions if d.geop}),
            "passes": [dataclasses.asdict(p) for p in self.passes],
            "seconds": round(self.seconds, 6),
            "skipped": self.skipped,
            "rerun": self.rerun,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "options": self.options,
            "option_notes": self.option_notes,
            "warnings": list(self.warnings),
            "summary": self.summary,
            "nodes": [d.to_dict() for d in self.nodes.values()],
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False)

    def to_text(self, max_nodes: int = 50) -> str:
        """A summary a person reads: options, warnings, totals, per-pass changes, changed nodes."""
        summary = self.summary
        lines = [f"NpuOptimizer report for graph {self.graph_id}"]
        if self.skipped:
            lines.append(f"  skipped: {self.skipped}")
        lines.append(f"  nodes: {summary['nodes_before']} in, {summary['nodes_after']} out")
        for note in self.option_notes:
            effect = "" if note.get("acts") else f"  ({note.get('note')})"
            lines.append(f"  option {note['name']} = {note['value']!r}{effect}")
        for key in ("lists", "placements"):
            if summary[key]:
                parts = ", ".join(f"{k} {v}" for k, v in summary[key].items())
                lines.append(f"  {key}: {parts}")
        if summary["geops"]:
            lines.append(f"  GeOps: {', '.join(summary['geops'])}")
        lines.append(f"  dtype changes: {summary['dtype_changes']}")
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
