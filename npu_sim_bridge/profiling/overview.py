"""What `npu-sim profile TRACE` prints with --summary, --csv FILE, --skip N and --merge OUT.

--summary prints which steps each role sums, then the op_summary-style CSV (op_summary.py); with --csv FILE
the CSV goes to FILE instead. --merge OUT writes every step's trace into one file (merge.py). --json prints
one object with the same content: {"summary": {...}, "csv": FILE, "merged": {...}}.
"""

from __future__ import annotations

import json


def profile_report(trace: str, summary: bool, csv_path: str | None, skip: int, merge: str | None,
                   as_json: bool) -> str:
    from npu_sim_bridge.fileio import check_output_path, write_atomic
    from npu_sim_bridge.profiling import op_summary as ops
    from npu_sim_bridge.profiling.merge import write_merged
    from npu_sim_bridge.profiling.summary import load_traces

    for path, what in ((csv_path, "--csv"), (merge, "--merge")):
        if path:
            check_output_path(path, what)  # before reading every trace
    result: dict = {}
    lines: list[str] = []
    if summary:
        table = ops.op_summary(trace, skip)
        text = ops.to_csv(table)
        result["summary"] = ops.to_dict(table, skip)
        lines.append(ops.describe_steps(table, skip))
        if csv_path:
            write_atomic(csv_path, text, "op summary CSV")
            result["csv"] = csv_path
            lines.append(f"op summary ({len(table.rows)} rows): {csv_path}\n")
        else:
            lines.append(text)
    if merge:
        loaded = load_traces(trace)
        write_merged(loaded, merge)
        result["merged"] = {"path": merge, "steps": len(loaded)}
        lines.append(f"merged {len(loaded)} step trace(s) into {merge} (open it in chrome://tracing or Perfetto)\n")
    return json.dumps(result, indent=2) + "\n" if as_json else "".join(lines)
