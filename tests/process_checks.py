"""What the fault tests ask of processes: is a pid still running, and are none of a set left."""

import os
import signal
import time


def running(pid):
    """Whether the process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            return not handle.read().rsplit(") ", 1)[1].startswith("Z")
    except OSError:
        return False


def assert_none_left(pids):
    """Every pid is gone (the guard gives a kill in flight time to land; it is no timing assertion).

    Any left is killed before the assertion fails, so a failing test leaves no process behind either.
    """
    deadline = time.monotonic() + 30
    while any(running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [pid for pid in pids if running(pid)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"processes left running: {left}"
