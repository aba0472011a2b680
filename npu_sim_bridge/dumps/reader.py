"""Finds the graph dumps (folders with a manifest.json) under a path and reads their tensors and overflow flags."""

from __future__ import annotations

import dataclasses
import json
import os

import numpy as np

from npu_sim_bridge.errors import NpuSimError
from npu_sim_bridge.passes.dump import layout


class DumpReadError(NpuSimError):
    """A dump folder is missing, empty or malformed."""


@dataclasses.dataclass
class GraphDump:
    """The dump of one rewritten graph: its manifest and the steps found on disk."""

    folder: str
    manifest: dict
    _listing: dict = dataclasses.field(default_factory=dict, repr=False, compare=False)

    @property
    def graph_id(self) -> str:
        return self.manifest.get("graph_id", os.path.basename(self.folder))

    @property
    def fingerprint(self) -> str:
        return self.manifest["source_graph"]["fingerprint"]

    @property
    def source_nodes(self) -> dict:
        return self.manifest["source_graph"]["nodes"]

    @property
    def tensors(self) -> list[dict]:
        return self.manifest["tensors"]

    def steps(self) -> list[int]:
        return _steps(os.path.join(self.folder, layout.DUMP_DIR))

    def overflow_steps(self) -> list[int]:
        return _steps(os.path.join(self.folder, layout.OVERFLOW_DIR))

    def tensor_path(self, step: int, entry: dict, turn: str = "") -> str:
        name = entry["file"] if not turn else entry["file"][:-len(".npy")] + f"{layout.TURN_MARK}{turn}.npy"
        return os.path.join(self.folder, layout.DUMP_DIR, f"{layout.STEP_PREFIX}{step}", name)

    def files(self, step: int, kind: str = layout.DUMP_DIR) -> list[str]:
        """The file names in a step's folder (read once per step)."""
        key = (kind, step)
        if key not in self._listing:
            folder = os.path.join(self.folder, kind, f"{layout.STEP_PREFIX}{step}")
            self._listing[key] = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
        return self._listing[key]

    def turns(self, step: int, entry: dict, kind: str = layout.DUMP_DIR) -> list[str]:
        """The turns of a tensor in a while frame written at `step` ("" for a tensor outside loops)."""
        stem_text = entry["file"][:-len(".npy")]
        found = [layout.turn_of(name, stem_text) for name in self.files(step, kind) if name.startswith(stem_text + ".")]
        return sorted((turn for turn in found if turn is not None), key=_turn_key)

    def load(self, step: int, entry: dict, turn: str = "") -> np.ndarray | None:
        """The tensor of `entry` at `step` (and loop turn), or None when that file was not written."""
        path = self.tensor_path(step, entry, turn)
        if not os.path.exists(path):
            return None
        return load_npy(path)

    def branch_taken(self, step: int, number: int) -> bool:
        return any(layout.turn_of(name, layout.branch_stem(number)) is not None for name in self.files(step))

    def asked(self, step: int) -> bool:
        """Whether the run's dump_step asked for `step` (every step when it named none)."""
        ranges = self.manifest.get("dump_steps")
        return not ranges or any(low <= step <= high for low, high in ranges)

    def why_missing(self, step: int, entry: dict) -> str | None:
        """None when the tensor has a file at `step`; else why it has none, as far as the dump tells:
        "<kind>: <detail>", kind one of branch not taken, step not asked for, step not run, loop ran no turn,
        not written."""
        if self.turns(step, entry):
            return None
        if not self.asked(step):
            return (f"step not asked for: step {step} is outside dump_step "
                    f"{self.manifest.get('options', {}).get('dump_step')!r}")
        if step not in self.steps():
            return f"step not run: step {step} was not run (or not reached) in this dump"
        branches = {b["id"]: b for b in self.manifest.get("branches", [])}
        for number in entry.get("branches", []):
            if not self.branch_taken(step, number):
                branch = branches.get(number, {})
                return (f"branch not taken: in the {'true' if branch.get('port') else 'false'} branch of "
                        f"{branch.get('switch', '?')} at step {step}")
        if entry.get("frame"):
            return f"loop ran no turn: the while loop {entry['frame']} ran no turn at step {step}"
        return f"not written: at step {step} (the run stopped while writing, or the file was removed)"

    def missing(self, step: int) -> dict[str, list[dict]]:
        """The manifest's tensors with no file at `step`, grouped by why."""
        grouped: dict[str, list[dict]] = {}
        for entry in self.tensors:
            reason = self.why_missing(step, entry)
            if reason is not None:
                grouped.setdefault(reason, []).append(entry)
        return grouped

    def __str__(self) -> str:
        return f"{self.folder} (graph {self.graph_id}, {len(self.tensors)} tensors, steps {_ranges(self.steps())})"


def load_npy(path: str) -> np.ndarray:
    """The array in a dump's .npy file; DumpReadError when it is empty, cut short or not .npy."""
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as err:
        raise DumpReadError(f"dump file {path!r} cannot be read as .npy ({err or 'it is empty'}); it may have "
                            "been cut short (was the run stopped while writing, or the disk full?): dump that step "
                            "again") from None


def _turn_key(turn: str) -> tuple:
    return tuple(int(part) for part in turn.split("_")) if turn else ()


def _steps(folder: str) -> list[int]:
    if not os.path.isdir(folder):
        return []
    return sorted(step for step in (layout.step_of(name) for name in os.listdir(folder)) if step is not None)


def _ranges(steps: list[int]) -> str:
    if not steps:
        return "none"
    parts = []
    start = previous = steps[0]
    for step in steps[1:] + [None]:
        if step is not None and step == previous + 1:
            previous = step
            continue
        parts.append(str(start) if start == previous else f"{start}-{previous}")
        start = previous = step
    return ",".join(parts)


def find_dumps(path: str) -> list[GraphDump]:
    """Every graph dump at or under `path` (a dump_path, a run folder or one graph folder), sorted by folder."""
    if not os.path.exists(path):
        raise DumpReadError(f"dump folder {path!r} does not exist; give the dump_path of a run with enable_dump, "
                            "or one of the folders under it")
    if not os.path.isdir(path):
        raise DumpReadError(f"{path!r} is not a folder; give the dump_path of a run with enable_dump, or one of "
                            "the folders under it")
    found = []
    for root, folders, files in os.walk(path):
        if layout.MANIFEST in files:
            found.append(_load(root))
            folders[:] = []
        else:
            folders[:] = sorted(f for f in folders if f not in (layout.DUMP_DIR, layout.OVERFLOW_DIR))
    if not found:
        raise DumpReadError(f"no dump under {path!r}: no {layout.MANIFEST} was found; was the graph run with "
                            "enable_dump (and does dump_path point here)?")
    return sorted(found, key=lambda dump: dump.folder)


def _load(folder: str) -> GraphDump:
    path = os.path.join(folder, layout.MANIFEST)
    try:
        with open(path, encoding="utf-8") as handle:
            manifest = json.load(handle)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DumpReadError(f"dump manifest {path!r} cannot be read ({err}); dump the graph again") from None
    if not isinstance(manifest, dict) or manifest.get("format") != layout.FORMAT:
        manifest = manifest if isinstance(manifest, dict) else {}
        raise DumpReadError(f"dump manifest {path!r} has format {manifest.get('format')!r}, expected "
                            f"{layout.FORMAT!r}; it was written by another tool or version")
    source = manifest.get("source_graph")
    if (not isinstance(source, dict) or not isinstance(source.get("nodes"), dict) or "fingerprint" not in source
            or not isinstance(manifest.get("tensors"), list) or not isinstance(manifest.get("overflow", {}), dict)):
        raise DumpReadError(f"dump manifest {path!r} lacks its source_graph, tensors or overflow record (it was cut "
                            "short or edited); dump the graph again")
    return GraphDump(folder, manifest)


def read_overflow(path: str) -> list[dict]:
    """Per graph dump and step with an overflow: the ops whose float outputs overflowed there, in graph order.

    [{"graph": folder, "step": k, "first": {op, type, order, slot, dtype, kind, fusion, count, turn, and for a
    Cast or rounding the precision pass inserted: inserted_by, producer, consumers}, "ops": [...]}]
    """
    records = []
    for dump in find_dumps(path):
        entries = [entry for checked in dump.manifest.get("overflow", {}).values() for entry in checked]
        for step in dump.overflow_steps():
            flagged = []
            for entry in entries:
                for turn in dump.turns(step, entry, layout.OVERFLOW_DIR):
                    name = entry["file"] if not turn else entry["file"][:-len(".npy")] + f"{layout.TURN_MARK}{turn}.npy"
                    folder = os.path.join(dump.folder, layout.OVERFLOW_DIR, f"{layout.STEP_PREFIX}{step}")
                    count = load_npy(os.path.join(folder, name))
                    flagged.append(dict(entry, count=int(count), turn=turn))
            flagged.sort(key=lambda entry: (entry["order"], entry["slot"], _turn_key(entry["turn"])))
            if flagged:
                records.append({"graph": dump.folder, "step": step, "first": flagged[0], "ops": flagged})
    return records
