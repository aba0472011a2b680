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
from process_checks import assert_none_left, running  # noqa: E402

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


def _free_port_base():
    """A base port with the next one free too (two ranks), as `npu-sim launch` would pick."""
    import socket

    for _ in range(50):
        with socket.socket() as first:
            first.bind(("127.0.0.1", 0))
            base = first.getsockname()[1]
            if base >= 65535:
                continue
            with socket.socket() as second:
                try:
                    second.bind(("127.0.0.1", base + 1))
                except OSError:
                    continue
        return base
    raise AssertionError("no two free ports in a row")


def test_a_rank_started_by_hand_stops_when_its_peer_ended_while_it_waits(tmp_path):
    """No launcher: the two ranks are started as a user starts them on two machines (RANK_ID, RANK_SIZE, a
    port base). Rank 1 exits after the first all-reduce; rank 0, waiting in the second, stops in seconds,
    not after HCCL_EXEC_TIMEOUT (600 s here), with one line naming rank 1 and its address."""
    env = dict(_env(), RANK_SIZE="2", NPU_SIM_PORT_BASE=str(_free_port_base()))
    ranks = []
    for rank in (0, 1):  # output to files: each rank's `sleep 600` child holds them open
        with open(tmp_path / f"out{rank}", "w") as out, open(tmp_path / f"err{rank}", "w") as err:
            ranks.append(subprocess.Popen([sys.executable, "-m", "npu_sim_bridge", "run", SCRIPT, "exit0_later",
                                           str(tmp_path)], env=dict(env, RANK_ID=str(rank)), stdout=out, stderr=err,
                                          start_new_session=True))
    try:
        for rank in ranks:
            rank.wait(timeout=GUARD)
    finally:
        for rank in ranks:
            if rank.poll() is None:
                os.killpg(rank.pid, signal.SIGKILL)
    pids = _pids(tmp_path)
    for pid in pids[1::2]:  # each rank's `sleep 600` child: a rank started by hand has no launcher to end it
        if running(pid):
            os.kill(pid, signal.SIGKILL)
    rank0_err, rank1_out, rank1_err = ((tmp_path / name).read_text() for name in ("err0", "out1", "err1"))
    assert ranks[1].returncode == 0 and "first all-reduce gives 2.0" in rank1_out, rank1_err[-3000:]
    assert ranks[0].returncode == 1, rank0_err[-3000:]
    lines = [line for line in rank0_err.splitlines() if line.startswith("npu-sim:")]
    assert len(lines) == 1 and lines[0].startswith(
        f"npu-sim: rank 1's server at 127.0.0.1:{int(env['NPU_SIM_PORT_BASE']) + 1} no longer accepts connections "
        "(its process ended) while rank 0 waits for it in a collective; stopping rank 0"), rank0_err[-3000:]
    assert "Traceback" not in rank0_err
    assert_none_left(pids)
