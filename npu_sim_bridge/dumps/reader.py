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

    def tensor_path(self, step: int, entry: dict) -> str:
        return os.path.join(self.folder, layout.DUMP_DIR, f"{layout.STEP_PREFIX}{step}", entry["file"])

    def load(self, step: int, entry: dict) -> np.ndarray | None:
        """The tensor of `entry` at `step`, or None when that file was not written."""
        path = self.tensor_path(step, entry)
        if not os.path.exists(path):
            return None
        return load_npy(path)

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
    """Per graph dump and overflow step: the ops whose float outputs were not finite, in graph order.

    [{"graph": folder, "step": k, "first": {op, type, order, slot, dtype, fusion}, "ops": [...]}]
    """
    records = []
    for dump in find_dumps(path):
        regions = dump.manifest.get("overflow", {})
        for step in dump.overflow_steps():
            flagged = []
            for region, entries in regions.items():
                flag_path = os.path.join(dump.folder, layout.OVERFLOW_DIR, f"{layout.STEP_PREFIX}{step}",
                                         f"{region}.npy")
                if not os.path.exists(flag_path):
                    continue
                flags = load_npy(flag_path)
                flagged.extend(entry for entry, flag in zip(entries, flags) if flag)
            flagged.sort(key=lambda entry: (entry["order"], entry["slot"]))
            if flagged:
                records.append({"graph": dump.folder, "step": step, "first": flagged[0], "ops": flagged})
    return records
