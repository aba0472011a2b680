"""Ranks that ended while their peers still run: the launcher writes them down, a waiting rank stops on them.

A rank's collectives finish only once every peer takes part, so a rank that has ended (whatever its
status) leaves its peers waiting in their next collective until HCCL_EXEC_TIMEOUT (1,836 s by default),
or in the connect until HCCL_CONNECT_TIMEOUT. `npu-sim launch` gives every rank a folder
($NPU_SIM_RANK_EXITS) and writes one file per rank that ends while others still run, saying how it
ended (`record`). In a rank:
- `check_connect(waiting)`: the connect raises at once, naming the rank that ended instead of coming up;
- `watch(rank_id)`: a daemon thread that, once a peer has ended, stops this rank with one line on stderr
  (status 1) if a thread of this rank is in a Session run whose graph holds collective ops, that is,
  waits for the peer. A rank with other work left (saving, evaluating) goes on.
"""

from __future__ import annotations

import os
import sys
import threading
import time

from npu_sim_bridge.runtime.hccl import ranktable

EXITS_ENV = "NPU_SIM_RANK_EXITS"
POLL_SECONDS = 0.25
_COLLECTIVE_OPS = frozenset({"CollectiveReduceV2", "CollectiveGatherV2", "CollectiveBcastSendV2",
                             "CollectiveBcastRecvV2", "CollectiveReduce", "CollectiveGather",
                             "CollectiveBcastSend", "CollectiveBcastRecv", "CollectiveAllToAllV2",
                             "CollectiveReduceScatterV2"})
_watching = False
_watch_lock = threading.Lock()
_graph_has_collectives: dict[tuple[int, int], bool] = {}


def record(folder: str, rank: int, how: str) -> None:
    """Launcher side: rank `rank` ended (`how`, e.g. "exited with status 0"), written atomically."""
    path = os.path.join(folder, f"rank{rank}")
    with open(path + ".tmp", "w", encoding="utf-8") as handle:
        handle.write(how)
    os.replace(path + ".tmp", path)


def ended(environ=None) -> dict[int, str]:
    """{rank: how it ended} of the peers the launcher saw end; {} outside a launch."""
    folder = (os.environ if environ is None else environ).get(EXITS_ENV, "")
    if not folder:
        return {}
    found = {}
    try:
        names = os.listdir(folder)
    except OSError:
        return {}
    for name in names:
        if name.startswith("rank") and name[4:].isdigit():
            try:
                with open(os.path.join(folder, name), encoding="utf-8") as handle:
                    found[int(name[4:])] = handle.read().strip()
            except OSError:
                continue
    return found


def check_connect(rank_id: int, waiting) -> None:
    """Raise (one line) when a rank this one waits to connect to has already ended."""
    gone = ended()
    for rank in waiting:
        if rank in gone:
            raise ranktable.RankConfigError(
                f"rank {rank} {gone[rank]} before its collectives came up, so rank {rank_id} cannot connect "
                f"to it; every rank of the job must reach its collectives")


def watch(rank_id: int) -> None:
    """Start (once per process) the thread that stops this rank when it waits for a peer that ended."""
    global _watching
    if not os.environ.get(EXITS_ENV):
        return
    with _watch_lock:
        if _watching:
            return
        _watching = True
    threading.Thread(target=_watch, args=(rank_id,), name="npu-sim-peer-exits", daemon=True).start()


def _watch(rank_id: int) -> None:
    while True:
        time.sleep(POLL_SECONDS)
        gone = ended()
        if not gone or not _waits_in_collective():
            continue
        rank, how = min(gone.items())
        sys.stderr.write(f"npu-sim: rank {rank} {how} while rank {rank_id} waits for it in a collective; "
                         f"stopping rank {rank_id}\n")
        sys.stderr.flush()
        os._exit(1)  # the collective op blocks in TensorFlow's runtime: nothing else would end it


def _waits_in_collective() -> bool:
    """Whether a thread of this process is in a Session run of a graph that holds collective ops."""
    me = threading.get_ident()
    for ident, frame in sys._current_frames().items():  # noqa: SLF001 - the one way to see another thread's stack
        if ident == me:
            continue
        while frame is not None:
            if frame.f_code.co_name == "run" and frame.f_code.co_filename.endswith(os.path.join("client", "session.py")):
                graph = getattr(frame.f_locals.get("self"), "graph", None)
                if graph is not None and _has_collectives(graph):
                    return True
            frame = frame.f_back
    return False


def _has_collectives(graph) -> bool:
    key = (id(graph), graph.version)
    found = _graph_has_collectives.get(key)
    if found is None:
        found = _graph_has_collectives[key] = any(op.type in _COLLECTIVE_OPS for op in graph.get_operations())
    return found
