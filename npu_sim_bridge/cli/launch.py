"""`npu-sim launch --nproc N [--] script.py args...`: one `npu-sim run` process per rank, as launch scripts start them.

Each rank gets RANK_ID, RANK_SIZE, DEVICE_ID, RANK_TABLE_FILE (a generated version 1.0 rank table,
or the one given with --rank-table) and NPU_SIM_PORT_BASE. Without --port-base the launcher takes
the first base from NPU_SIM_PORT_BASE (default 29600) upwards, in steps of N, whose N ports are
free and not held by another launch (a lock file per base under the temp folder, held while the
launch runs; per user). Ranks read no stdin. Every line a rank prints is prefixed `[rank R]`
(stdout to stdout, stderr to stderr). The launch ends when every rank has ended; its status is
that of the first rank to fail (0 when all succeed). When a rank fails, or on Ctrl-C / SIGTERM,
the others get SIGTERM, then SIGKILL after --grace seconds, so a launch never hangs on a dead
peer. Each rank runs in a process group of its own (childproc.Child): what a rank leaves behind is
killed when it ends, and every rank's group dies with the launcher, even by SIGKILL. The ranks'
pipes are read to their end whatever the launcher's own stdout does: when it is closed (`| head -1`)
the lines are dropped, so no rank blocks on a full pipe.
"""

import fcntl
import json
import math
import os
import signal
import socket
import sys
import tempfile
import threading
import time

from npu_sim_bridge.childproc import Child, drain
from npu_sim_bridge.cli.errors import UsageError
from npu_sim_bridge.runtime.hccl import peer_exits, ranktable

_LOCK_DIR = os.path.join(tempfile.gettempdir(), f"npu_sim_ports_{os.getuid()}")


def add_launch_command(commands):
    """Register the `launch` subcommand on the npu-sim subparsers."""
    import argparse

    launch = commands.add_parser(
        "launch", help="run a script as N ranks on this machine (RANK_ID, RANK_SIZE, RANK_TABLE_FILE), as "
                       "the adapter's launch scripts do",
        description="Starts one `npu-sim run` process per rank. Collectives (hccl_ops, NPUDistributedOptimizer, "
                    "the broadcast hooks) run between them on TensorFlow's collective ops over gRPC.")
    launch.add_argument("--nproc", type=int, default=None, metavar="N",
                        help="number of ranks (default: the ranks of this server in --rank-table)")
    launch.add_argument("--rank-table", metavar="FILE", default=None,
                        help="a version 1.0 rank table naming the servers; this host starts the ranks of "
                             "--server-id")
    launch.add_argument("--server-id", default=None, help="which server of --rank-table this host is")
    launch.add_argument("--port-base", type=int, default=None,
                        help="port of rank 0's TensorFlow server (rank r uses base + r); default: the first free "
                             f"base from ${ranktable.PORT_BASE_ENV} or {ranktable.DEFAULT_PORT_BASE}")
    launch.add_argument("--grace", type=float, default=5.0,
                        help="seconds the other ranks get to stop after one fails, before SIGKILL (default 5)")
    launch.add_argument("--all-sessions", action="store_true", help="as `npu-sim run --all-sessions`")
    launch.add_argument("--shadow-real-npu-bridge", action="store_true", help="as `npu-sim run`")
    launch.add_argument("--tf2", action="store_true", help="as `npu-sim run --tf2`")
    launch.add_argument("script", help="the Python script each rank runs")
    launch.add_argument("script_args", nargs=argparse.REMAINDER, metavar="ARGS", help="the script's arguments")
    launch.set_defaults(handler=cmd_launch)


def cmd_launch(args):
    """Run the launch; returns its exit status."""
    if args.script == "--":
        if not args.script_args:
            raise UsageError("give the script to run after --")
        args.script, args.script_args = args.script_args[0], args.script_args[1:]
    if not os.path.isfile(args.script):
        raise UsageError(f"script {args.script!r} does not exist or is not a file")
    if not math.isfinite(args.grace) or args.grace < 0:
        raise UsageError(f"--grace {args.grace}: give the seconds the other ranks get to stop, a number >= 0")
    run_options = [flag for flag, on in (("--all-sessions", args.all_sessions), ("--tf2", args.tf2),
                                         ("--shadow-real-npu-bridge", args.shadow_real_npu_bridge)) if on]
    with tempfile.TemporaryDirectory(prefix="npu_sim_launch_") as folder:
        if args.rank_table:
            table = os.path.abspath(args.rank_table)
            size = len(ranktable.read_rank_table(table))  # a malformed table is a failure (status 1)
            try:
                _, ranks = ranktable.ranks_of_server(table, args.server_id)
            except ranktable.RankConfigError as err:  # --server-id missing or not in the table: usage (2)
                raise UsageError(str(err)) from None
            if args.nproc is not None and args.nproc != len(ranks):
                raise UsageError(f"--nproc {args.nproc} but rank table {table} gives this server "
                                 f"{len(ranks)} ranks; leave --nproc out")
            port_base, lock = reserve_port_base(args.port_base, size, search=False)
        else:
            if args.nproc is None or args.nproc < 1:
                raise UsageError("npu-sim launch needs --nproc N (N >= 1) or --rank-table FILE")
            size, ranks = args.nproc, list(range(args.nproc))
            table = os.path.join(folder, "rank_table.json")
            with open(table, "w", encoding="utf-8") as handle:
                json.dump(ranktable.make_rank_table(size), handle, indent=2)
            port_base, lock = reserve_port_base(args.port_base, size, search=args.port_base is None)
        try:
            taken = [port_base + rank for rank in ranks if not _port_free(port_base + rank)]
            if taken:
                raise UsageError(f"--port-base {port_base}: port {taken[0]} (rank {taken[0] - port_base}) is in use on "
                                 "this host; choose another --port-base, or leave it out to get free ports")
            command = [sys.executable, "-m", "npu_sim_bridge", "run", *run_options, args.script, *args.script_args]
            exits = os.path.join(folder, "rank_exits")
            os.mkdir(exits)
            return Launch(command, ranks, size, table, port_base, args.grace, exits).run()
        finally:
            if lock is not None:
                lock.close()


def reserve_port_base(given, size, search=True):
    """(port base, open lock file or None): the given base, or the first free and unlocked one (locked until closed)."""
    base = given if given is not None else int(os.environ.get(ranktable.PORT_BASE_ENV, ranktable.DEFAULT_PORT_BASE))
    if not search:
        return base, None
    os.makedirs(_LOCK_DIR, exist_ok=True)
    for _ in range(200):
        if base + size > 65535:
            break
        lock = open(os.path.join(_LOCK_DIR, f"{base}.lock"), "w", encoding="utf-8")  # noqa: SIM115 - held open
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lock.close()
            base += size
            continue
        if all(_port_free(port) for port in range(base, base + size)):
            return base, lock
        lock.close()
        base += size
    raise ranktable.RankConfigError(f"no {size} free consecutive ports found from {ranktable.PORT_BASE_ENV} "
                                    f"{given or os.environ.get(ranktable.PORT_BASE_ENV, ranktable.DEFAULT_PORT_BASE)}"
                                    "; choose another base with --port-base")


def _port_free(port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("", port))
        except OSError:
            return False
    return True


class Launch:
    """The running ranks: start, relay output, watch, stop."""

    def __init__(self, command, ranks, size, table, port_base, grace, exits):
        self._command = command
        self._ranks = ranks
        self._size = size
        self._table = table
        self._port_base = port_base
        self._grace = grace
        self._exits = exits  # peer_exits' folder: the ranks that ended while others still run
        self._processes = {}
        self._relays = []
        self._stopping = None  # why the launch is stopping (a message), once it is
        self._interrupt = None  # the exit status a signal to the launcher gives

    def _environment(self, rank, device):
        env = dict(os.environ)
        env.update({"RANK_ID": str(rank), "RANK_SIZE": str(self._size), "DEVICE_ID": str(device),
                    "RANK_TABLE_FILE": self._table, ranktable.PORT_BASE_ENV: str(self._port_base),
                    peer_exits.EXITS_ENV: self._exits,
                    "PYTHONUNBUFFERED": "1"})
        return env

    def run(self):
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            for device, rank in enumerate(self._ranks):
                process = Child(self._command, env=self._environment(rank, device))
                self._processes[rank] = process
                for stream, sink in ((process.stdout, sys.stdout), (process.stderr, sys.stderr)):
                    relay = threading.Thread(target=_relay, args=(stream, sink, f"[rank {rank}] "), daemon=True)
                    relay.start()
                    self._relays.append(relay)
            return self._watch()
        finally:
            self._stop_all()
            for relay in self._relays:  # every group is killed: the pipes end (unless a process left its group)
                relay.join(timeout=2.0)
            for process in self._processes.values():
                process.close()
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _on_signal(self, signum, frame):
        name = signal.Signals(signum).name
        if self._stopping is None:
            self._stopping = f"interrupted ({name})"
            self._interrupt = 128 + signum

    def _watch(self):
        status = None
        running = dict(self._processes)
        while running:
            if self._stopping is not None and status is None:
                _write(sys.stderr, f"npu-sim launch: {self._stopping}: stopping ranks "
                                   f"{', '.join(map(str, running))}\n")
                status = self._interrupt
                self._terminate(running)
            for rank, process in list(running.items()):
                code = process.poll()
                if code is None:
                    continue
                del running[rank]
                process.signal_group(signal.SIGKILL)  # what the rank started and left running
                if running and self._stopping is None:  # a peer waiting for it stops at once (peer_exits)
                    how = f"exited with status {code}" if code >= 0 else f"was killed by {_signal_name(-code)}"
                    peer_exits.record(self._exits, rank, how)
                if code != 0 and status is None:
                    status = code if code > 0 else 128 - code
                    _write(sys.stderr, f"npu-sim launch: rank {rank} failed with exit status {status}; stopping the "
                                       f"other ranks ({', '.join(str(other) for other in running) or 'none left'})\n")
                    self._stopping = f"rank {rank} failed"
                    self._terminate(running)
            time.sleep(0.05)
        return status or 0

    def _terminate(self, running):
        for process in running.values():
            process.signal_group(signal.SIGTERM)
        deadline = time.monotonic() + self._grace
        while time.monotonic() < deadline and any(process.poll() is None for process in running.values()):
            time.sleep(0.05)
        for process in running.values():
            process.signal_group(signal.SIGKILL)

    def _stop_all(self):
        left = {rank: process for rank, process in self._processes.items() if process.poll() is None}
        if left:
            self._terminate(left)


def _signal_name(number):
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


_sink_lock = threading.Lock()


def _relay(stream, sink, prefix):
    """Copy lines from a rank's pipe to our stream with the rank prefix; once our stream is closed
    (a reader such as `head` went away), read the rest of the pipe and drop it."""
    try:
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", errors="replace")
            if not _write(sink, prefix + line if line.endswith("\n") else prefix + line + "\n"):
                break
    except (OSError, ValueError):  # the pipe was closed under us: the rank is being stopped
        return
    drain(stream)


def _write(sink, text):
    """Write to our stdout or stderr; False once it is closed, which then points at /dev/null so that
    no later write (nor the interpreter's flush at exit) fails on it."""
    with _sink_lock:
        try:
            sink.write(text)
            sink.flush()
            return True
        except (BrokenPipeError, OSError, ValueError):
            _to_devnull(sink)
            return False


def _to_devnull(sink):
    try:
        fd = sink.fileno()
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)
    except (OSError, ValueError):
        pass
