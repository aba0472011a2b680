"""Compares two dumps tensor by tensor: cosine similarity, max absolute and relative error, first divergent op.

DUMP_A is the reference (for example fusion off), DUMP_B the dump under test. Tensors are matched by
op name, input/output and slot at each step both dumps hold; rows follow A's graph order, then the
tensors only B has. A tensor diverges when a non-finite value (inf/nan) differs in place or
max|b - a| > atol + rtol * max|a|; the first divergent op is the earliest such row (by step, then
A's graph order), skipping tensors whose runs differ for a reason that is not precision (an unseeded
random op, a read of a variable such an op initialized: explain.py says why). A tensor in a while
frame is compared turn by turn. Tensors the manifests list without a file are reported with the
reason (a cond branch not taken, a step dump_step did not ask for). Dumps of different graphs (the
graph NpuOptimizer received differs) are refused with what differs.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from npu_sim_bridge.dumps import explain
from npu_sim_bridge.dumps.reader import GraphDump, find_dumps
from npu_sim_bridge.errors import NpuSimError

OK, DIVERGED, SHAPE, ONLY_A, ONLY_B, MISSING, NOT_RUN = (
    "match", "DIVERGED", "shape differs", "only in A", "only in B", "file missing", "not run")


def diverges(row) -> bool:
    """Whether a row counts against a match: its values differ, or its shape does. A shape that differs on an op
    a fusion replaced (another type in B) is not counted: the replacing op's inputs are other tensors."""
    return row.status == DIVERGED or (row.status == SHAPE and (not row.type_b or row.type_b == row.type))


class DumpMismatchError(NpuSimError):
    """The two dumps come from different graphs (or hold no common step)."""


@dataclasses.dataclass
class Row:
    step: int
    order: int | None
    op: str
    type: str
    io: str
    slot: int
    status: str
    shape: str = ""
    dtype: str = ""
    cosine: float | None = None
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    type_b: str = ""
    fusion: str = ""
    turn: str = ""          # the loop turn of a tensor in a while frame ("2", nested "1_2")
    note: str = ""          # why a file is missing, or why a divergence is not a first divergent op

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class PairResult:
    a: GraphDump
    b: GraphDump
    steps: list[int]
    rows: list[Row]
    warnings: list[str] = dataclasses.field(default_factory=list)

    @property
    def skipped(self) -> list[Row]:
        """Diverged tensors that are not candidates for the first divergent op, with the reason in `note`."""
        return [row for row in self.rows if diverges(row) and row.note]

    @property
    def first_divergent(self) -> Row | None:
        diverged = [row for row in self.rows if diverges(row) and not row.note]
        return min(diverged, key=lambda row: (row.step, row.order if row.order is not None else 1 << 60),
                   default=None)


@dataclasses.dataclass
class CompareResult:
    pairs: list[PairResult]
    notes: list[str]
    atol: float
    rtol: float
    empty: list[str] = dataclasses.field(default_factory=list)   # warnings about graph dumps with no step

    @property
    def rows(self) -> list[Row]:
        return [row for pair in self.pairs for row in pair.rows]

    @property
    def warnings(self) -> list[str]:
        return self.empty + [line for pair in self.pairs for line in pair.warnings]

    @property
    def skipped(self) -> list[Row]:
        return [row for pair in self.pairs for row in pair.skipped]

    @property
    def first_divergent(self) -> tuple[PairResult, Row] | None:
        found = [(pair, pair.first_divergent) for pair in self.pairs if pair.first_divergent is not None]
        return found[0] if found else None


def metrics(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float, bool]:
    """(cosine similarity, max |b-a|, max |b-a|/|a|, non-finite values differ).

    Cosine is over the positions finite in both; the errors are inf where a NaN or inf stands against a
    different value (NaN against NaN, or the same inf on both sides, is equal)."""
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    nonfinite_differs = not (np.array_equal(np.isnan(a), np.isnan(b)) and
                             np.array_equal(np.where(np.isinf(a), a, 0), np.where(np.isinf(b), b, 0)))
    finite = np.isfinite(a) & np.isfinite(b)
    fa, fb = a[finite], b[finite]
    worst = float("inf") if nonfinite_differs else 0.0
    if fa.size == 0:
        return (1.0 if not nonfinite_differs else float("nan")), worst, worst, nonfinite_differs
    diff = np.abs(fb - fa)
    norm_a, norm_b = float(np.linalg.norm(fa)), float(np.linalg.norm(fb))
    if norm_a == 0.0 and norm_b == 0.0:
        cosine = 1.0
    elif norm_a == 0.0 or norm_b == 0.0:
        cosine = 0.0
    else:
        cosine = float(np.clip(np.dot(fa, fb) / (norm_a * norm_b), -1.0, 1.0))
    tiny = np.finfo(np.float64).tiny
    relative = diff / np.maximum(np.abs(fa), tiny)
    return (cosine, max(float(diff.max()), worst), max(float(relative.max()), worst), nonfinite_differs)


def _key(entry) -> tuple:
    return entry["op"], entry["io"], entry["slot"]


def _fusion_text(entry) -> str:
    if not entry.get("fusion"):
        return ""
    return f"fused by {' then '.join(entry['fusion'])} from {' + '.join(entry.get('fused_from', []))}"


def compare_pair(a: GraphDump, b: GraphDump, atol: float = 0.0, rtol: float = 0.0, steps=None,
                 progress=None, unseeded=None) -> PairResult:
    common = sorted(set(a.steps()) & set(b.steps()))
    if steps is not None:
        common = [step for step in common if step in set(steps)]
    if not common:
        raise DumpMismatchError(f"no step is dumped in both {a.folder} (steps {a.steps() or 'none'}) and "
                                f"{b.folder} (steps {b.steps() or 'none'}); dump the same dump_step in both runs")
    unseeded = explain.unseeded_variables([a, b]) if unseeded is None else unseeded
    a_entries = {_key(entry): entry for entry in a.tensors}
    b_entries = {_key(entry): entry for entry in b.tensors}
    keys = [key for key in a_entries] + [key for key in b_entries if key not in a_entries]
    rows = []
    for step in common:
        for key in keys:
            if progress is not None:
                progress.advance()
            ea, eb = a_entries.get(key), b_entries.get(key)
            base = ea or eb
            row = Row(step=step, order=ea["order"] if ea else None, op=key[0], type=base["type"], io=key[1],
                      slot=key[2], status=OK, dtype=base["dtype"], type_b=eb["type"] if eb else "",
                      fusion=_fusion_text(eb) if eb and eb.get("fusion") else _fusion_text(ea) if ea else "")
            if ea is None or eb is None:
                row.status = ONLY_B if ea is None else ONLY_A
                rows.append(row)
                continue
            turns_a, turns_b = a.turns(step, ea), b.turns(step, eb)
            if not turns_a or not turns_b:
                row.status, row.note = _missing(step, a, ea, b, eb)
                rows.append(row)
                continue
            for turn in sorted(set(turns_a) | set(turns_b), key=lambda t: tuple(map(int, t.split("_"))) if t else ()):
                turn_row = dataclasses.replace(row, turn=turn)
                skip = explain.skip_reason(ea, unseeded) or explain.carried_by_a_loop(turn_row, ea)
                rows.append(_compared(turn_row, a.load(step, ea, turn), b.load(step, eb, turn), atol, rtol, skip))
    for step in common:
        in_order = sorted((row for row in rows if row.step == step and row.order is not None),
                          key=lambda row: (row.order, row.io == "output"))
        explain.follow_skipped(in_order, a_entries, b_entries, _key)
    warnings = explain.step_warnings(a, b, common)
    warnings += explain.missing_warnings(f"A ({a.graph_id})", a, common)
    warnings += explain.missing_warnings(f"B ({b.graph_id})", b, common)
    return PairResult(a, b, common, rows, warnings)


def _missing(step, a, ea, b, eb) -> tuple[str, str]:
    why_a, why_b = a.why_missing(step, ea), b.why_missing(step, eb)
    if why_a and why_b and why_a.startswith("branch not taken") and why_b.startswith("branch not taken"):
        return NOT_RUN, why_a
    return MISSING, "; ".join(f"{label}: {why}" for label, why in (("A", why_a), ("B", why_b)) if why)


def _compared(row: Row, va, vb, atol: float, rtol: float, skip: str | None) -> Row:
    if va is None or vb is None:
        row.status, row.note = MISSING, f"turn {row.turn} is in {'B' if va is None else 'A'} only"
        return row
    row.shape = "x".join(map(str, va.shape)) or "scalar"
    if va.shape != vb.shape:
        row.status = SHAPE
        row.shape = f"{row.shape} vs {'x'.join(map(str, vb.shape)) or 'scalar'}"
        row.note = skip or ""
        return row
    row.cosine, row.max_abs_err, row.max_rel_err, nonfinite = metrics(va, vb)
    finite_a = np.asarray(va, dtype=np.float64)
    finite_a = finite_a[np.isfinite(finite_a)]
    scale = float(np.abs(finite_a).max()) if finite_a.size else 0.0
    if nonfinite or not row.max_abs_err <= atol + rtol * scale:
        row.status = DIVERGED
        row.note = skip or ""
    return row


def _differences(a: GraphDump, b: GraphDump, limit: int = 5) -> str:
    na, nb = a.source_nodes, b.source_nodes
    only_a = sorted(set(na) - set(nb))
    only_b = sorted(set(nb) - set(na))
    changed = sorted(name for name in set(na) & set(nb) if na[name] != nb[name])

    def listed(names, nodes):
        text = ", ".join(f"{name} ({nodes[name]})" for name in names[:limit])
        return text + (f" and {len(names) - limit} more" if len(names) > limit else "")

    parts = [f"A's graph has {len(na)} nodes, B's {len(nb)}"]
    if only_a:
        parts.append(f"only in A: {listed(only_a, na)}")
    if only_b:
        parts.append(f"only in B: {listed(only_b, nb)}")
    if changed:
        parts.append("op type changed: " + ", ".join(f"{name} ({na[name]} -> {nb[name]})" for name in changed[:limit]))
    return "; ".join(parts)


def compare_dumps(path_a: str, path_b: str, atol: float = 0.0, rtol: float = 0.0, steps=None,
                  progress_factory=None) -> CompareResult:
    """Compare every graph dumped under `path_a` with the dump of the same graph under `path_b`."""
    for name, value in (("atol", atol), ("rtol", rtol)):
        if not 0 <= value < float("inf"):  # nan would make every tensor "match"
            raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    found_a, found_b = find_dumps(path_a), find_dumps(path_b)
    dumps_a = [dump for dump in found_a if dump.steps()]
    dumps_b = [dump for dump in found_b if dump.steps()]
    empty = [f"{label} {dump.folder}: the manifest lists {len(dump.tensors)} tensors but no step was written "
             f"(dump_step {dump.manifest.get('options', {}).get('dump_step')!r}: did the run reach one of those "
             "steps of this graph?); not compared"
             for label, found in (("A", found_a), ("B", found_b))
             for dump in found if not dump.steps() and dump.tensors]
    for label, path, dumps in (("DUMP_A", path_a, dumps_a), ("DUMP_B", path_b, dumps_b)):
        if not dumps:
            raise DumpMismatchError(f"{label} {path!r} holds manifests but no dumped step; run the graph with "
                                    "enable_dump and a dump_step it reaches")
    notes = []
    pairs: list[tuple[GraphDump, GraphDump]] = []
    if len(dumps_a) == 1 and len(dumps_b) == 1:
        a, b = dumps_a[0], dumps_b[0]
        if a.fingerprint != b.fingerprint:
            raise DumpMismatchError(
                f"the dumps come from different graphs, so their tensors cannot be matched: A is {a.folder}, B is "
                f"{b.folder}; {_differences(a, b)}. Compare dumps of the same model (only options such as "
                "fusion_switch_file or precision_mode may differ)")
        pairs.append((a, b))
    else:
        unused = list(dumps_b)
        for a in dumps_a:
            match = next((b for b in unused if b.fingerprint == a.fingerprint), None)
            if match is None:
                notes.append(f"graph {a.folder} has no dump of the same graph in B; skipped")
                continue
            unused.remove(match)
            pairs.append((a, match))
        notes.extend(f"graph {b.folder} has no dump of the same graph in A; skipped" for b in unused)
        if not pairs:
            a, b = dumps_a[0], dumps_b[0]
            raise DumpMismatchError(
                f"no graph dumped under {path_a!r} ({len(dumps_a)} graphs) is the same graph as one under "
                f"{path_b!r} ({len(dumps_b)} graphs); for example {_differences(a, b)}")
    progress = None
    if progress_factory is not None:
        total = 0
        for a, b in pairs:
            keys = {_key(e) for e in a.tensors} | {_key(e) for e in b.tensors}
            total += len(keys) * len(set(a.steps()) & set(b.steps()))
        progress = progress_factory(total)
    unseeded = explain.unseeded_variables(dumps_a + dumps_b)
    results, refused = [], []
    try:
        for a, b in pairs:
            try:
                results.append(compare_pair(a, b, atol, rtol, steps, progress, unseeded))
            except DumpMismatchError as err:  # no common step in this pair: the others may still have one
                refused.append(err)
                notes.append(f"skipped: {err}")
    finally:
        if progress is not None:
            progress.close()
    if not results:
        raise refused[0]
    return CompareResult(results, notes, atol, rtol, empty)
