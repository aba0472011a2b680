"""`npu-sim bisect --script` never outlives its timeout, and leaves no process behind: a script that hangs
holding its output open, and bisect itself stopped by SIGTERM or SIGINT while its child runs.

Every wait is a generous failure guard, never a timing assertion.
"""

import os
import signal
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from process_checks import assert_none_left, running  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GUARD = 180

# Starts a grandchild, says where both are, prints one metric line, then hangs with stdout open.
HANG = """import os, subprocess, sys, time
child = subprocess.Popen(["sleep", "600"])
with open(sys.argv[1] + ".tmp", "w") as handle:
    handle.write(f"{os.getpid()} {child.pid}\\n")
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
print("loss = 1.0", flush=True)
time.sleep(600)
"""


def _bisect(tmp_path, *extra, **popen):
    script = tmp_path / "hang.py"
    script.write_text(HANG)
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""),
               TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.Popen([sys.executable, "-m", "npu_sim_bridge", "bisect", "--script", str(script),
                             "--metric", r"loss = (\S+)", "--workdir", str(tmp_path / "work"), "-o", str(tmp_path / "mixlist.json"), *extra,
                             "--script-args", str(tmp_path / "pids")], env=env, preexec_fn=_as_from_a_terminal,
                            **popen)


def _as_from_a_terminal():
    """SIGINT delivered as a terminal's Ctrl-C is, even when the suite itself runs in the background (where
    the shell starts it with SIGINT ignored, which children would inherit)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _pids(tmp_path, bisect=None):
    deadline = time.monotonic() + GUARD
    while not (tmp_path / "pids").exists():
        assert time.monotonic() < deadline, "the script did not start"
        assert bisect is None or bisect.poll() is None, f"bisect ended first: {bisect.stderr.read()[-2000:]}"
        time.sleep(0.1)
    return [int(pid) for pid in (tmp_path / "pids").read_text().split()]


def test_a_script_that_hangs_with_its_output_open_ends_at_the_timeout(tmp_path):
    bisect = _bisect(tmp_path, "--timeout", "10", stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _, stderr = bisect.communicate(timeout=GUARD)
    finally:
        bisect.kill()
    assert bisect.returncode != 0
    assert "ran longer than 10 s" in stderr, stderr[-2000:]
    assert "Traceback" not in stderr
    assert_none_left(_pids(tmp_path))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_bisect_stopped_by_a_signal_takes_its_script_with_it(sig, tmp_path):
    bisect = _bisect(tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        pids = _pids(tmp_path, bisect)
        bisect.send_signal(sig)
        bisect.communicate(timeout=GUARD)
    finally:
        bisect.kill()
    assert bisect.returncode != 0
    assert_none_left(pids)


def test_a_feed_of_the_wrong_shape_is_one_line_and_leaves_no_work_folder(tmp_path, monkeypatch, capsys):
    import tempfile

    import numpy as np
    import tensorflow as tf

    from npu_sim_bridge.cli.main import main as cli_main

    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 3], name="x")
        tf.identity(tf.matmul(x, tf.ones([3, 2])), name="y")
    tf.io.write_graph(graph.as_graph_def(), str(tmp_path), "graph.pb", as_text=False)
    np.save(tmp_path / "x.npy", np.ones((4, 3), np.float32))
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))  # where the bisect's own work folder would go
    status = cli_main(["bisect", str(tmp_path / "graph.pb"), "--fetch", "y", "--feed", f"x={tmp_path / 'x.npy'}",
                       "-o", str(tmp_path / "mixlist.json")])
    err = capsys.readouterr().err
    assert status == 1
    assert "--feed x:0: the file holds an array of shape (4, 3) but placeholder x takes shape (2, 3)" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert list(temporary.iterdir()) == []


# Prints one metric line and exits, leaving a grandchild that left the process group (setsid) holding stdout.
DETACHED = """import os, subprocess, sys
keeper = subprocess.Popen(["setsid", "sleep", "600"])  # inherits stdout, in a session of its own
with open(sys.argv[1], "a") as handle:
    handle.write(f"{keeper.pid}\\n")
print("loss = 1.0", flush=True)
"""


def test_a_script_whose_detached_grandchild_holds_its_output_ends_without_a_timeout(tmp_path, capsys):
    """One run of bisect's script route (ScriptTarget.run, what every trial of `bisect --script` does)."""
    from npu_sim_bridge.bisect.script_target import ScriptTarget

    script = tmp_path / "detached.py"
    script.write_text(DETACHED)
    target = ScriptTarget(str(script), [str(tmp_path / "pids")], metric=r"loss = (\S+)")
    try:
        outcome = target.run({})
    finally:
        pids = tmp_path / "pids"
        keepers = [int(pid) for pid in pids.read_text().split()] if pids.exists() else []
        for pid in keepers:  # left running on purpose (it left the script's group): this test ends it
            if running(pid):
                os.kill(pid, signal.SIGKILL)
    assert outcome.failure is None, outcome.failure
    assert [list(values) for values in outcome.values] == [[1.0]]
    assert len(keepers) == 1
    assert "still holds its output; that process was left running" in capsys.readouterr().err
    assert_none_left(keepers)
