"""Where dumps go on disk and what the manifest says: shared by the dump pass (writer) and the readers.

    <dump_path>/<YYYYmmddHHMMSS>_<pid>/<graph id>/
        manifest.json                      written when the graph is rewritten
        dump/step_<k>/<stem>.npy           one file per dumped tensor per dumped step (numpy.load reads it)
        dump/step_<k>/<stem>.iter_<t>.npy  a tensor in a v1 while frame: one file per turn t of the loop
                                           (nested frames: .iter_<outer>_<inner>)
        dump/step_<k>/branch_<id>.taken    cond branch <id> of the manifest ran at that step (empty file)
        overflow/step_<k>/<stem>.npy       enable_dump_debug: the number of non-finite values of a checked
                                           output, written only where that op overflowed (its float inputs
                                           were finite); in a while frame per turn, as above

<stem> is "<order>.<input|output>.<slot>", order being the op's place in graph order (the GeOps in
topological order, then each body in topological order). The manifest maps stems to op names, and
lists each tensor's while frame and the cond branches it depends on.
"""

from __future__ import annotations

import json
import os
import time

from npu_sim_bridge.fileio import write_atomic

FORMAT = "npu_sim_dump/2"
MANIFEST = "manifest.json"
DUMP_DIR = "dump"
OVERFLOW_DIR = "overflow"
STEP_PREFIX = "step_"

_run_stamp = None


def run_stamp() -> str:
    """The folder name of this process's dumps: its first dump time and its process id."""
    global _run_stamp
    if _run_stamp is None:
        _run_stamp = f"{time.strftime('%Y%m%d%H%M%S')}_{os.getpid()}"
    return _run_stamp


def stem(order: int, io: str, slot: int) -> str:
    return f"{order:06d}.{io}.{slot}"


BRANCH_SUFFIX = ".taken"
TURN_MARK = ".iter_"


def branch_stem(number: int) -> str:
    return f"branch_{number}"


def turn_of(file_name: str, stem_text: str) -> str | None:
    """"3" for "<stem>.iter_3.npy", "1_2" for nested turns, "" for "<stem>.npy", None for another file."""
    if not file_name.startswith(stem_text + "."):
        return None
    rest = file_name[len(stem_text):]
    if rest in (".npy", BRANCH_SUFFIX):
        return ""
    if rest.startswith(TURN_MARK):
        turn = rest[len(TURN_MARK):].rsplit(".", 1)[0]
        return turn if turn.replace("_", "").isdigit() else None
    return None


def manifest_text(manifest: dict) -> str:
    """The manifest as its file holds it."""
    return json.dumps(manifest, indent=1)


def write_manifest(directory: str, manifest: dict) -> str:
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, MANIFEST)
    write_atomic(path, manifest_text(manifest), "dump manifest")  # never a partial manifest
    return path


def step_of(folder_name: str) -> int | None:
    """5 for "step_5", None for anything else."""
    if folder_name.startswith(STEP_PREFIX) and folder_name[len(STEP_PREFIX):].isdigit():
        return int(folder_name[len(STEP_PREFIX):])
    return None
