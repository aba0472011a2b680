"""Where dumps go on disk and what the manifest says: shared by the dump pass (writer) and the readers.

    <dump_path>/<YYYYmmddHHMMSS>_<pid>/<graph id>/
        manifest.json                      written when the graph is rewritten
        dump/step_<k>/<stem>.npy           one file per dumped tensor per dumped step (numpy.load reads it)
        overflow/step_<k>/<GeOp>.npy       enable_dump_debug: one bool per checked tensor of that GeOp,
                                           written only at steps where one of them is not finite

<stem> is "<order>.<input|output>.<slot>", order being the op's place in graph order (the GeOps in
topological order, then each body in topological order). The manifest maps stems to op names.
"""

from __future__ import annotations

import json
import os
import time

from npu_sim_bridge.fileio import write_atomic

FORMAT = "npu_sim_dump/1"
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


def write_manifest(directory: str, manifest: dict) -> str:
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, MANIFEST)
    write_atomic(path, json.dumps(manifest, indent=1), "dump manifest")  # never a partial manifest
    return path


def step_of(folder_name: str) -> int | None:
    """5 for "step_5", None for anything else."""
    if folder_name.startswith(STEP_PREFIX) and folder_name[len(STEP_PREFIX):].isdigit():
        return int(folder_name[len(STEP_PREFIX):])
    return None
