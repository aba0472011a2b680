"""One child process in a process group of its own, read with a deadline, its group killed on every exit path.

`Child` starts a command with `start_new_session` (its own group), so a signal to the group reaches
whatever the command started too. The group is killed:
- when the `Child` is closed (a `with` block ends, normally or by an exception, KeyboardInterrupt
  included), whether the command is still running or has ended and left processes behind;
- when this process dies in a way no `finally` sees (SIGTERM's default action, SIGKILL): a watchdog,
  one small process per parent started with the first Child, holds a pipe from the parent and kills
  every group it was told of when that pipe closes. The direct child also gets SIGKILL at once from
  the kernel (PR_SET_PDEATHSIG, Linux) when it was started from the main thread.

`lines(deadline)` reads a pipe line by line without blocking past a deadline (`time.monotonic()`
value), raising `Deadline`. It also ends a short while (EXIT_DRAIN_SECONDS) after the command itself
exited, even with the pipe still open: a process the command started that left the group (setsid, a
daemon) may hold the pipe for ever. Such a process is not the command's group, so it is left running,
as `python script.py` would leave it; `pipe_held` then says so for the caller to tell. `drain()` reads a pipe to its end and drops the bytes, so a child never
blocks on a full pipe nobody reads.
"""

from __future__ import annotations

import ctypes
import os
import selectors
import signal
import subprocess
import sys
import threading
import time

_PR_SET_PDEATHSIG = 1
EXIT_DRAIN_SECONDS = 2.0  # how long lines() reads on once the command exited (what it wrote last)
_EXIT_POLL_SECONDS = 0.25  # how often lines() looks whether the command exited while its pipe is quiet
DEVNULL, PIPE = subprocess.DEVNULL, subprocess.PIPE

# The watchdog: reads "+PGID" / "-PGID" lines; at end of input (the parent died or closed it) it kills
# every group still listed. It ignores the signals a terminal sends to the parent's group.
_WATCHDOG = r"""
import os, signal, sys
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
    signal.signal(s, signal.SIG_IGN)
groups = set()
for line in sys.stdin:
    line = line.strip()
    if line[:1] == "+":
        groups.add(int(line[1:]))
    elif line[:1] == "-":
        groups.discard(int(line[1:]))
for group in groups:
    try:
        os.killpg(group, signal.SIGKILL)
    except OSError:
        pass
"""


class Deadline(Exception):
    """A read passed its deadline."""


class _Watchdog:
    _lock = threading.Lock()
    _process: subprocess.Popen | None = None
    _owner: int | None = None

    @classmethod
    def tell(cls, text: str) -> None:
        with cls._lock:
            if cls._process is None or cls._owner != os.getpid():  # a fork's parent's watchdog is not ours
                cls._process = subprocess.Popen(  # noqa: S603 - our own interpreter
                    [sys.executable, "-S", "-c", _WATCHDOG], stdin=PIPE, stdout=DEVNULL, stderr=DEVNULL,
                    start_new_session=True, text=True)
                cls._owner = os.getpid()
            try:
                cls._process.stdin.write(text + "\n")
                cls._process.stdin.flush()
            except (BrokenPipeError, OSError):
                cls._process = None  # it died: the next child starts another


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the thread that started it ends (Linux)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass  # not Linux: the watchdog still kills the group


class Child:
    """A running command in its own process group (see the module docstring)."""

    def __init__(self, command, *, env=None, cwd=None, stdin=DEVNULL, stdout=PIPE, stderr=PIPE):
        main = threading.current_thread() is threading.main_thread()
        self.process = subprocess.Popen(  # noqa: S603 - callers pass their own commands
            command, env=env, cwd=cwd, stdin=stdin, stdout=stdout, stderr=stderr, start_new_session=True,
            preexec_fn=_die_with_parent if main else None)
        self.pid = self.process.pid
        self._closed = False
        self.pipe_held = False  # lines() stopped reading a pipe that outlived the command (module docstring)
        _Watchdog.tell(f"+{self.pid}")

    def __enter__(self) -> "Child":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def stdout(self):
        return self.process.stdout

    @property
    def stderr(self):
        return self.process.stderr

    def poll(self) -> int | None:
        return self.process.poll()

    def signal_group(self, sig: int) -> None:
        """Send `sig` to the child's group (nothing when the group is gone)."""
        try:
            os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def wait(self, timeout: float | None = None) -> int:
        """The child's status; raises subprocess.TimeoutExpired past `timeout`."""
        return self.process.wait(timeout=timeout)

    def stop(self, grace: float) -> int:
        """SIGTERM to the group, SIGKILL after `grace` seconds; then the rest of the group is killed too.
        Returns the child's status."""
        if self.process.poll() is None:
            self.signal_group(signal.SIGTERM)
            try:
                self.process.wait(timeout=max(grace, 0.0))
            except subprocess.TimeoutExpired:
                pass
        self.signal_group(signal.SIGKILL)  # what it left behind, or itself past the grace
        return self.process.wait()

    def close(self) -> None:
        """Kill the group (anything left), close the pipes, reap the child. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        self.signal_group(signal.SIGKILL)
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        self.process.wait()
        _Watchdog.tell(f"-{self.pid}")

    def lines(self, stream, deadline: float | None = None, after_exit: float = EXIT_DRAIN_SECONDS):
        """The lines of `stream` (bytes, each with its newline), up to its end or `after_exit` seconds after
        the command exited (then `pipe_held` is True); Deadline past `deadline`."""
        fd = stream.fileno()
        pending = b""
        drain_until = None
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while True:
                now = time.monotonic()
                left = None if deadline is None else deadline - now
                if left is not None and left <= 0:
                    raise Deadline()
                if drain_until is None and self.process.poll() is not None:
                    drain_until = now + after_exit
                if drain_until is not None and now >= drain_until:
                    self.pipe_held = True
                    break
                wait = _EXIT_POLL_SECONDS if drain_until is None else drain_until - now
                if not selector.select(wait if left is None else min(left, wait)):
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                pending += chunk
                *whole, pending = pending.split(b"\n")
                for line in whole:
                    yield line + b"\n"
        if pending:
            yield pending


def drain(stream) -> None:
    """Read `stream` to its end and drop what it holds (a writer never blocks on it)."""
    try:
        while stream.read(65536):
            pass
    except (OSError, ValueError):
        pass
