"""Ranks that ended while their peers still run: the launcher writes them down, a waiting rank stops on them.

A rank's collectives finish only once every peer takes part, so a rank that has ended (whatever its
status) leaves its peers waiting in their next collective until HCCL_EXEC_TIMEOUT (1,836 s by default),
or in the connect until HCCL_CONNECT_TIMEOUT. `npu-sim launch` gives every rank a folder
($NPU_SIM_RANK_EXITS) and writes one file per rank that ends while others still run, saying how it
ended (`record`). In a rank:
- `check_connect(waiting)`: the connect raises at once, naming the rank that ended instead of coming up;
- `watch(rank_info)`: a daemon thread that, once a peer has ended, stops this rank with one line on stderr
  (status 1) if a thread of this rank is in a Session run whose graph holds collective ops, that is,
  waits for the peer. A rank with other work left (saving, evaluating) goes on.

Ranks started by hand (or on other hosts) have no launcher to tell them. There the thread asks the
peers' TensorFlow servers themselves: while this rank waits in a collective it opens a TCP connection
to every peer's server port (the port TensorFlow's gRPC runtime talks to) every POLL_SECONDS. A port
that accepted connections once (every peer's did before the first Session ran: cluster.wait_for_peers)
and refuses them, or cannot be reached, for GONE_SECONDS on end means the peer's process ended (its
server lives as long as the process): the rank stops with one line naming the peer and its address.
The probe asks the same server TensorFlow's gRPC collective runtime talks to, from outside it: left to
itself, a collective whose peer ended blocks until the op's timeout (HCCL_EXEC_TIMEOUT), as gRPC keeps
retrying the peer's channel rather than failing the pending call, and a Session's master has no
heartbeat of TF2's coordination service (that is set up by the eager cluster context) to fail it
sooner. A rank that ends before its server ever came up cannot be told from one not started yet, so
the connect still waits HCCL_CONNECT_TIMEOUT there (npu-sim launch knows, and says so at once).
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time

from npu_sim_bridge.runtime.hccl import ranktable

EXITS_ENV = "NPU_SIM_RANK_EXITS"
POLL_SECONDS = 0.25
GONE_SECONDS = 2.0  # a peer's server refuses connections this long, while this rank waits for it: it ended
_PROBE_TIMEOUT = 1.0
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


def watch(rank_info) -> None:
    """Start (once per process) the thread that stops this rank when it waits for a peer that ended."""
    global _watching
    with _watch_lock:
        if _watching:
            return
        _watching = True
    threading.Thread(target=_watch, args=(rank_info,), name="npu-sim-peer-exits", daemon=True).start()


def _watch(rank_info) -> None:
    rank_id = rank_info.rank_id
    peers = [rank for rank in range(rank_info.rank_size) if rank != rank_id]
    refused_since: dict[int, float] = {}
    while True:
        time.sleep(POLL_SECONDS)
        if not _waits_in_collective():
            refused_since.clear()
            continue
        gone = ended()
        if gone:
            rank, how = min(gone.items())
            _stop(f"rank {rank} {how} while rank {rank_id} waits for it in a collective; stopping rank {rank_id}")
        now = time.monotonic()
        for rank in peers:
            if accepts(rank_info, rank, _PROBE_TIMEOUT):
                refused_since.pop(rank, None)
            else:
                refused_since.setdefault(rank, now)
        lost = sorted(rank for rank, since in refused_since.items() if now - since >= GONE_SECONDS)
        if lost:
            rank = lost[0]
            _stop(f"rank {rank}'s server at {rank_info.address(rank)} no longer accepts connections (its process "
                  f"ended) while rank {rank_id} waits for it in a collective; stopping rank {rank_id} (see rank "
                  f"{rank}'s output for why it ended)")


def _stop(line: str) -> None:
    sys.stderr.write(f"npu-sim: {line}\n")
    sys.stderr.flush()
    os._exit(1)  # the collective op blocks in TensorFlow's runtime: nothing else would end it


def accepts(rank_info, rank: int, timeout: float = 1.0) -> bool:
    """Whether rank `rank`'s TensorFlow server accepts a TCP connection now."""
    try:
        with socket.create_connection((rank_info.hosts[rank], rank_info.port_base + rank), timeout=timeout):
            return True
    except OSError:
        return False


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
