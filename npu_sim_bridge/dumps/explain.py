"""Why a comparison has gaps or differences that are not precision: tensors with no file, steps one dump lacks,
unseeded random ops and the variables they initialize."""

from __future__ import annotations

from npu_sim_bridge.dumps.reader import GraphDump

INITIALIZER_SCOPE = "/Initializer/"
_SHOWN = 4


def missing_warnings(label: str, dump: GraphDump, steps) -> list[str]:
    """One line per step of `dump` where tensors its manifest lists have no file, with the reasons and counts."""
    lines = []
    for step in steps:
        grouped = dump.missing(step)
        if not grouped:
            continue
        total = sum(len(entries) for entries in grouped.values())
        kinds: dict[str, int] = {}
        for reason, entries in grouped.items():
            kinds[reason.split(":", 1)[0]] = kinds.get(reason.split(":", 1)[0], 0) + len(entries)
        ranked = sorted(grouped.items(), key=lambda item: -len(item[1]))
        shown = "; ".join(f"{len(entries)} {reason} (e.g. {entries[0]['op']})" for reason, entries in ranked[:_SHOWN])
        more = f"; and {len(ranked) - _SHOWN} more reasons" if len(ranked) > _SHOWN else ""
        lines.append(f"{label} step {step}: {total} of {len(dump.tensors)} tensors the manifest lists have no file "
                     f"({', '.join(f'{count} {kind}' for kind, count in kinds.items())}): {shown}{more}")
    return lines


def step_warnings(a: GraphDump, b: GraphDump, compared) -> list[str]:
    """A line per step one dump holds and the other does not, saying whether dump_step asked for it."""
    lines = []
    for label, dump, other, other_label in (("A", a, b, "B"), ("B", b, a, "A")):
        for step in sorted(set(dump.steps()) - set(other.steps())):
            why = (f"{other_label}'s dump_step ({other.manifest.get('options', {}).get('dump_step')!r}) did not ask "
                   "for it" if not other.asked(step) else f"{other_label}'s run did not reach it")
            lines.append(f"step {step} is dumped in {label} only, not compared: {why}")
    if compared is not None and not compared:
        lines.append("no step is compared")
    return lines


def unseeded_variables(dumps) -> dict[str, str]:
    """Variable name -> the unseeded random op of its initializer, over the graph dumps given (the
    initializer's graph is dumped next to the training graph's when its random ops run on the device)."""
    found = {}
    for dump in dumps:
        for entry in dump.tensors:
            if entry.get("random") == "unseeded" and INITIALIZER_SCOPE in entry["op"]:
                found.setdefault(entry["op"].split(INITIALIZER_SCOPE, 1)[0], entry["op"])
    return found


def skip_reason(entry: dict | None, variables: dict[str, str]) -> str | None:
    """Why a diverged tensor is not a candidate for the first divergent op (None: it is one)."""
    if entry is None:
        return None
    if entry.get("random") == "unseeded":
        return (f"{entry['op']} is a random op without a seed (seed and seed2 are 0), so each run draws other "
                "values; give it a seed (tf.compat.v1.set_random_seed) to compare it")
    variable = entry.get("variable")
    if variable and variable in variables:
        return (f"{entry['op']} reads the variable {variable}, whose initializer {variables[variable]} has no seed, "
                "so each run starts it from other values; set a seed (tf.compat.v1.set_random_seed) or restore "
                "both runs from one checkpoint")
    return None


def carried_by_a_loop(row, entry: dict | None) -> str | None:
    """Why a diverged while loop Merge after the first turn is no first divergent op: it holds what the turn
    before passed on (NextIteration), so the difference began in an op of an earlier turn."""
    if entry is None or entry.get("type") not in ("Merge", "RefMerge") or not entry.get("frame") or not row.turn:
        return None
    turn = row.turn.split("_")[-1]
    if turn == "0":
        return None
    return (f"{row.op} is a while loop's Merge: at turn {row.turn} it holds what turn {int(turn) - 1} passed on, "
            "so the difference began in an op of an earlier turn")


def follow_skipped(rows, a_entries: dict, b_entries: dict, key) -> None:
    """Mark diverged rows that only pass on a skipped difference: an op whose inputs include an op skipped (or
    already marked) at the same step and loop turn differs because its input does, so it is no first
    divergent op either. `rows` in graph order (one step); `key(entry)` matches rows to manifest entries."""
    followed: dict[tuple[str, str], str] = {}
    for row in rows:
        counted_shape = row.status == "shape differs" and (not row.type_b or row.type_b == row.type)
        if row.status != "DIVERGED" and not counted_shape:
            continue
        if row.note and not row.note.startswith("follows "):
            followed[(row.op, row.turn)] = row.op
            continue
        entry = a_entries.get((row.op, row.io, row.slot)) or b_entries.get((row.op, row.io, row.slot)) or {}
        sources = [entry["producer"]] if entry.get("producer") else entry.get("inputs", [])
        origin = next((followed[(source, row.turn)] for source in sources if (source, row.turn) in followed), None)
        if origin is not None:
            row.note = (f"follows {origin}, which differs between the runs for a reason that is not precision "
                        "(see the skipped op)")
            followed[(row.op, row.turn)] = origin
