"""The node counts of one rewrite, each named for what it counts, so text, JSON and picture agree.

A rewrite has several honest node counts, and each report form used to give a different one:
  input_nodes       nodes of the graph NpuOptimizer got (the control hubs it adds not included)
  decision_records  rows of the JSON report: one per input node, plus one per node the passes added
                    (hubs, casts, ...); a node fused away or replaced keeps its row
  added_by_passes   decision_records - input_nodes
  output_nodes      top-level nodes of the rewritten graph: each GeOp is one node
  geops             GeOps (device segments) in the rewritten graph
  inside_geops      nodes inside the GeOps' bodies (dump instrumentation left out): what the NPU runs
  outside_geops     top-level nodes that are no GeOp: what TensorFlow runs on the host
  drawn             nodes the HTML picture draws: inside_geops + outside_geops
The JSON summary holds them under "counts", the picture's data under "counts" too (its "totals" count
what it draws: totals.nodes == drawn), and the text report prints them with these words.
"""

from __future__ import annotations

from typing import Any

__all__ = ["graph_counts", "count_lines"]


def graph_counts(report, graph_def, calls=None) -> dict[str, int]:
    """The counts of `report`'s rewrite, whose rewritten graph is `graph_def` (`calls`: see drawn_counts)."""
    from npu_sim_bridge.report.views import drawn_counts

    geops, inside, outside = drawn_counts(graph_def, calls)
    records = len(report.nodes)
    return {
        "input_nodes": report.nodes_before,
        "decision_records": records,
        "added_by_passes": records - report.nodes_before,
        "output_nodes": len(graph_def.node),
        "geops": geops,
        "inside_geops": inside,
        "outside_geops": outside,
        "drawn": inside + outside,
    }


def count_lines(summary: dict[str, Any]) -> list[str]:
    """The text report's lines for the counts (`summary`: Report.summary)."""
    counts = summary.get("counts")
    if not counts:  # a GeOp body only stamped: nothing decided
        return [f"  nodes: {summary['nodes_before']} in the input graph, {summary['nodes_after']} in the "
                "rewritten graph"]
    lines = [
        f"  nodes: {counts['input_nodes']} in the input graph; {counts['output_nodes']} in the rewritten graph "
        f"({counts['geops']} GeOps + {counts['outside_geops']} host ops outside them), "
        f"{counts['inside_geops']} inside the GeOps; {counts['drawn']} drawn in the picture",
        f"  decision records: {counts['decision_records']} ({counts['input_nodes']} input nodes + "
        f"{counts['added_by_passes']} the passes added; fused-away nodes keep theirs)",
    ]
    for key, words in (("placements", "by placement"), ("lists", "by list")):
        if summary[key]:
            lines.append(f"  records {words}: " + ", ".join(f"{k} {v}" for k, v in summary[key].items()))
    unplaced = counts["decision_records"] - sum(summary["placements"].values())
    if summary["placements"] and unplaced:
        lines[-2 if summary["lists"] else -1] += f" ({unplaced} records without one: nodes the passes added)"
    return lines
