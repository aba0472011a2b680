"""Multi-rank faults end the launch and leave no process: a rank that raises, one killed by SIGKILL, one
that exits 0 while rank 0 waits for it, the launcher stopped by SIGTERM or killed by SIGKILL, and the
launcher's stdout closed by its reader (`| head -1`).

Every wait is a generous failure guard (subprocess timeouts), never a timing assertion: a hang fails
the test at the guard, and a process left behind fails it by its pid.
"""

import os
import signal
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from process_checks import assert_none_left  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "multirank_scripts", "fault.py")
REPO = os.path.dirname(HERE)
GUARD = 180  # seconds: only a hung launch gets near it


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env["HCCL_CONNECT_TIMEOUT"] = env["HCCL_EXEC_TIMEOUT"] = "600"  # a launch ending early is not a timeout
    for name in ("RANK_ID", "RANK_SIZE", "DEVICE_ID", "RANK_TABLE_FILE"):
        env.pop(name, None)
    return env


def _launch(mode, folder, **popen):
    return subprocess.Popen([sys.executable, "-m", "npu_sim_bridge", "launch", "--nproc", "2", "--grace", "2",
                             SCRIPT, mode, str(folder)], env=_env(), **popen)


def _pids(folder):
    """The pids every rank wrote (its own and its child's), once both wrote them."""
    deadline = time.monotonic() + GUARD
    paths = [folder / f"rank{rank}.pids" for rank in (0, 1)]
    while not all(path.exists() for path in paths):
        assert time.monotonic() < deadline, "the ranks did not start"
        time.sleep(0.1)
    return [int(pid) for path in paths for pid in path.read_text().split()]


def _launch_to_end(mode, folder):
    """(launcher, its stderr, every rank's pids) of a launch run to its end (GUARD is a failure guard)."""
    launcher = _launch(mode, folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _, stderr = launcher.communicate(timeout=GUARD)
    finally:
        launcher.kill()
    return launcher, stderr, _pids(folder)


@pytest.mark.parametrize("mode, status, line", [
    ("raise", 1, "npu-sim launch: rank 1 failed with exit status 1; stopping the other ranks (0)"),
    ("sigkill", 128 + signal.SIGKILL, "npu-sim launch: rank 1 failed with exit status 137"),
])
def test_a_failing_rank_ends_the_launch_and_every_group(mode, status, line, tmp_path):
    launcher, stderr, pids = _launch_to_end(mode, tmp_path)
    assert launcher.returncode == status, stderr[-3000:]
    assert line in stderr
    assert_none_left(pids)


@pytest.mark.parametrize("mode, line", [
    ("exit0", "rank 1 exited with status 0 before its collectives came up, so rank 0 cannot connect to it"),
    ("exit0_later", "npu-sim: rank 1 exited with status 0 while rank 0 waits for it in a collective; "
                    "stopping rank 0"),
])
def test_a_rank_that_ends_while_rank_0_waits_for_it_ends_the_launch(mode, line, tmp_path):
    """Not after HCCL_CONNECT_TIMEOUT / HCCL_EXEC_TIMEOUT (600 s here): one line names the rank that ended."""
    launcher, stderr, pids = _launch_to_end(mode, tmp_path)
    assert launcher.returncode == 1, stderr[-3000:]
    assert line in stderr, stderr[-3000:]
    assert "Traceback" not in stderr
    assert "npu-sim launch: rank 0 failed with exit status 1" in stderr
    assert_none_left(pids)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_the_launcher_stopped_or_killed_takes_every_rank_and_child_with_it(sig, tmp_path):
    launcher = _launch("wait", tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        pids = _pids(tmp_path)
        launcher.send_signal(sig)
        _, stderr = launcher.communicate(timeout=GUARD)
    finally:
        launcher.kill()
    if sig == signal.SIGTERM:
        assert launcher.returncode == 128 + signal.SIGTERM
        assert "npu-sim launch: interrupted (SIGTERM): stopping ranks 0, 1" in stderr
    assert_none_left(pids)


def test_a_closed_stdout_does_not_hang_the_ranks(tmp_path):
    """As `npu-sim launch ... | head -1`: the reader takes one line and goes; the ranks still finish."""
    launcher = _launch("chatty", tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        first = launcher.stdout.readline()
        launcher.stdout.close()
        _, stderr = launcher.communicate(timeout=GUARD)
    finally:
        launcher.kill()
    assert first.startswith(b"[rank ")
    assert launcher.returncode == 0, stderr[-3000:]
    assert b"Traceback" not in stderr and b"BrokenPipeError" not in stderr
    assert all((tmp_path / f"rank{rank}.done").exists() for rank in (0, 1))  # both wrote all their lines
