"""The comparison for people (an aligned table and a summary) and for programs (CSV or JSON); a progress bar."""

from __future__ import annotations

import csv
import io
import json
import math
import sys
import time

from npu_sim_bridge.dumps.compare import SHAPE, CompareResult, Row, diverges

COLUMNS = ("step", "order", "op", "type", "io", "slot", "turn", "shape", "dtype", "cosine", "max_abs_err",
           "max_rel_err", "status", "type_b", "fusion", "note")


def _number(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return f"{value:.6g}"


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else "..." + text[-(width - 3):]


def summary(result: CompareResult) -> list[str]:
    lines = []
    for pair in result.pairs:
        diverged = sum(1 for row in pair.rows if diverges(row))
        lines.append(f"A: {pair.a}")
        lines.append(f"B: {pair.b}")
        lines.append(f"   {len(pair.rows)} tensors compared at steps {', '.join(map(str, pair.steps))}: "
                     f"{diverged} diverged (atol={result.atol:g}, rtol={result.rtol:g})")
    lines.extend(f"warning: {text}" for text in result.warnings)
    skipped = result.skipped
    if skipped:
        ops = sorted({row.op for row in skipped})
        lines.append(f"skipped as first divergent op ({len(ops)} ops, {len(skipped)} tensors): {skipped[0].note}"
                     + (f"; also {', '.join(ops[1:4])}" + (" ..." if len(ops) > 4 else "") if len(ops) > 1 else ""))
    first = result.first_divergent
    if first is None:
        lines.append("no divergent op: every tensor both dumps hold matches" if not skipped else
                     "no divergent op besides the skipped ones")
    else:
        pair, row = first
        fused = f", {row.fusion}" if row.fusion else ""
        turn = f" (loop turn {row.turn})" if row.turn else ""
        where = (f"first divergent op: {row.op} ({row.type_b or row.type}{fused}) {row.io} {row.slot} at step "
                 f"{row.step}{turn}, graph order {row.order}: ")
        if row.status == SHAPE:
            lines.append(where + f"shape differs ({row.shape})")
        else:
            lines.append(where + f"cosine {_number(row.cosine)}, max abs error {_number(row.max_abs_err)}, "
                         f"max relative error {_number(row.max_rel_err)}")
        if row.fusion:
            lines.append("   to check a fusion rule: switch it off in a fusion_switch_file "
                         '({"Switch":{"GraphFusion":{"<rule>":"off"}}}), dump again and compare')
    lines.extend(f"note: {note}" for note in result.notes)
    return lines


def table(rows: list[Row], max_rows: int | None = 100) -> str:
    header = ("step", "order", "op", "type", "io:slot", "shape", "cosine", "max_abs_err", "max_rel_err", "status",
              "note")
    shown = rows if max_rows is None else rows[:max_rows]
    cells = [header] + [(str(r.step), "-" if r.order is None else str(r.order), _short(r.op, 48),
                         _short(r.type if not r.type_b or r.type_b == r.type else f"{r.type}/{r.type_b}", 28),
                         f"{r.io}:{r.slot}" + (f"@{r.turn}" if r.turn else ""), r.shape or "-", _number(r.cosine),
                         _number(r.max_abs_err), _number(r.max_rel_err), r.status, r.note if len(r.note) <= 60 else r.note[:57] + "...") for r in shown]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in cells]
    if len(shown) < len(rows):
        lines.append(f"... {len(rows) - len(shown)} more rows (--max-rows, or --out FILE.csv for all)")
    return "\n".join(lines) + "\n"


def to_csv(result: CompareResult) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(("graph_a", "graph_b") + COLUMNS)
    for pair in result.pairs:
        for row in pair.rows:
            values = row.to_dict()
            writer.writerow([pair.a.folder, pair.b.folder] + ["" if values[c] is None else values[c] for c in COLUMNS])
    return out.getvalue()


def to_json(result: CompareResult) -> str:
    first = result.first_divergent
    data = {
        "atol": result.atol, "rtol": result.rtol, "notes": result.notes, "warnings": result.warnings,
        "diverged": sum(1 for row in result.rows if diverges(row)),
        "skipped": [_clean(row.to_dict()) for row in result.skipped],
        "first_divergent": None if first is None else dict(_clean(first[1].to_dict()), graph_a=first[0].a.folder,
                                                           graph_b=first[0].b.folder),
        "pairs": [{"graph_a": pair.a.folder, "graph_b": pair.b.folder, "steps": pair.steps,
                   "rows": [_clean(row.to_dict()) for row in pair.rows]} for pair in result.pairs],
    }
    return json.dumps(data, indent=1)


def _clean(values: dict) -> dict:
    """Strict JSON has no NaN or Infinity: a NaN metric becomes null, an infinite error (NaN or inf against a
    finite value) the string "inf"."""
    def clean(value):
        if not isinstance(value, float) or math.isfinite(value):
            return value
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return {key: clean(value) for key, value in values.items()}


class ProgressBar:
    """A one-line progress bar on a stream (stderr), redrawn at most ten times a second."""

    def __init__(self, total: int, label: str = "comparing", stream=None, width: int = 30):
        self.total = max(total, 1)
        self.label = label
        self.stream = stream or sys.stderr
        self.width = width
        self.done = 0
        self._drawn = 0.0

    def advance(self, count: int = 1) -> None:
        self.done += count
        now = time.monotonic()
        if now - self._drawn >= 0.1 or self.done >= self.total:
            self._draw()
            self._drawn = now

    def _draw(self) -> None:
        filled = int(self.width * min(self.done, self.total) / self.total)
        self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (self.width - filled)}] {self.done}/{self.total} "
                          "tensors")
        self.stream.flush()

    def close(self) -> None:
        self._draw()
        self.stream.write("\n")
        self.stream.flush()
