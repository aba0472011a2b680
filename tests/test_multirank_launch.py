"""Multi-rank training end to end: `npu-sim launch --nproc 2` against `npu-sim run` (one rank), the launcher's failures.

Each launch is a few processes importing TensorFlow (about 10-25 s on two cores), so the scripts
do several things per launch; every wait is bounded by a timeout.
"""

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.join(HERE, "multirank_scripts")
REPO = os.path.dirname(HERE)


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    for name in ("RANK_ID", "RANK_SIZE", "DEVICE_ID", "RANK_TABLE_FILE"):
        env.pop(name, None)
    return env


def npu_sim(*args, timeout):
    return subprocess.run([sys.executable, "-m", "npu_sim_bridge", *args], env=_env(), capture_output=True,
                          text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module", name="trained")
def trained_fixture(tmp_path_factory):
    """(rank 0 and rank 1 results of a 2-rank launch, the results of one rank under plain `npu-sim run`, stdout)."""
    two, one = tmp_path_factory.mktemp("two_ranks"), tmp_path_factory.mktemp("one_rank")
    script = os.path.join(SCRIPTS, "train_three_ways.py")
    launched = npu_sim("launch", "--nproc", "2", "--", script, str(two), timeout=300)
    assert launched.returncode == 0, launched.stderr[-4000:]
    single = npu_sim("run", script, str(one), timeout=300)
    assert single.returncode == 0, single.stderr[-4000:]
    ranks = [json.loads((two / f"rank{rank}.json").read_text()) for rank in (0, 1)]
    return ranks, json.loads((one / "rank0.json").read_text()), launched.stdout


def _close(a, b):
    np.testing.assert_allclose(np.asarray(a, np.float32), np.asarray(b, np.float32), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("api", ["session", "estimator", "keras"])
def test_two_ranks_on_half_batches_end_where_one_rank_on_the_whole_batch_ends(trained, api):
    (rank0, rank1), single, _ = trained
    assert (rank0["size"], rank1["size"], single["size"]) == (2, 2, 1)
    final = f"{api}_final"
    _close_tree(rank0[final], single[final])
    _close_tree(rank1[final], single[final])
    start = f"{api}_broadcast"
    _close_tree(rank0[start], single[start])  # training started from the same values, not only ended there
    assert _flatten(rank0[final]) != _flatten(rank0[start])  # and it moved


def _flatten(tree):
    if isinstance(tree, dict):
        return [value for key in sorted(tree) for value in _flatten(tree[key])]
    if isinstance(tree, list):
        return [value for item in tree for value in _flatten(item)]
    return [tree]


def _close_tree(a, b):
    _close(_flatten(a), _flatten(b))


def test_ranks_starting_from_different_values_are_identical_after_the_broadcast(trained):
    (rank0, rank1), _, _ = trained
    assert not np.allclose(_flatten(rank0["session_initial"]), _flatten(rank1["session_initial"]))
    assert _flatten(rank1["session_broadcast"]) == _flatten(rank0["session_initial"])
    for api in ("session", "estimator", "keras"):
        assert _flatten(rank0[f"{api}_broadcast"]) == _flatten(rank1[f"{api}_broadcast"]), api


def test_overflow_on_one_rank_makes_every_rank_skip_that_step(trained):
    (rank0, rank1), _, _ = trained
    for steps in (rank0["loss_scale_steps"], rank1["loss_scale_steps"]):
        assert [step["finite"] for step in steps] == [True, False, True, True]
        assert steps[1]["w"] == steps[0]["w"]  # skipped everywhere, also where the gradients were finite
        assert steps[2]["w"] != steps[1]["w"]
        assert np.isfinite(_flatten(steps[-1]["w"])).all()


def test_hccl_ops_across_two_ranks(trained):
    (rank0, rank1), single, _ = trained
    for result in (rank0["collectives"], rank1["collectives"]):
        assert result["sum"] == [3.0, 6.0] and result["prod"] == [2.0, 8.0]
        assert result["max"] == [2.0, 4.0] and result["min"] == [1.0, 2.0]
        assert result["allgather"] == [[1.0, 2.0], [2.0, 4.0]]  # in rank order
        assert result["broadcast"] == [2.0, 4.0]  # from rank 1
        assert result["npu_allreduce"] == [1.5, 3.0]  # the mean
        assert result["group_sum"] == [3.0, 6.0]  # a created group of both ranks
        assert result["sparse_mean"] == [[0.5, 0.5], [0.5, 0.5]]  # each rank's row, gathered and averaged
    assert rank0["collectives"]["reduce_scatter"] == [3.0, 6.0]
    assert rank1["collectives"]["reduce_scatter"] == [3.0, 6.0]
    assert rank1["collectives"]["receive"] == [10.0, 20.0]
    assert rank0["collectives"]["own_group_sum"] == [1.0, 2.0] and rank1["collectives"]["own_group_sum"] == [2.0, 4.0]
    for result in (rank0["collectives"], rank1["collectives"]):  # a 24 MB all-reduce, cut into ring pieces
        assert result["large_sum_size"] == 6_000_001 and result["large_sum_mismatches"] == 0
    # d/d mine of sum(allreduce(mine * mine)) = 2 * mine * allreduce(ones) = 4 * mine: the gradient all-reduces.
    assert rank0["collectives"]["gradient"] == [2 * 2 * 1.0, 2 * 2 * 2.0]
    assert rank1["collectives"]["gradient"] == [2 * 2 * 2.0, 2 * 2 * 4.0]
    # One rank: every collective gives its input.
    assert single["collectives"]["sum"] == single["collectives"]["allgather"][0] == [1.0, 2.0]
    assert single["collectives"]["sparse_mean"] == [[1.0, 1.0]]


def test_launch_prefixes_each_line_with_its_rank(trained):
    _, _, stdout = trained
    assert "[rank 0] rank 0 of 2 done" in stdout and "[rank 1] rank 1 of 2 done" in stdout


def test_a_raising_rank_ends_the_launch_with_its_error():
    result = npu_sim("launch", "--nproc", "2", os.path.join(SCRIPTS, "raise_on_rank1.py"), timeout=300)
    assert result.returncode == 1
    assert "[rank 1] ValueError: rank 1 fails on purpose after its first step" in result.stderr
    assert "npu-sim launch: rank 1 failed with exit status 1; stopping the other ranks (0)" in result.stderr


def test_ctrl_c_stops_every_rank(tmp_path):
    script = tmp_path / "wait.py"
    script.write_text("import os, time\nprint('pid', os.getpid(), flush=True)\ntime.sleep(600)\n")
    launcher = subprocess.Popen([sys.executable, "-m", "npu_sim_bridge", "launch", "--nproc", "2", str(script)],
                                env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = queue.Queue()
    errors = []
    readers = [threading.Thread(target=lambda stream=stream, sink=sink: [sink(line) for line in stream], daemon=True)
               for stream, sink in ((launcher.stdout, lines.put), (launcher.stderr, errors.append))]
    for reader in readers:
        reader.start()
    try:
        pids = []
        deadline = time.monotonic() + 120
        while len(pids) < 2 and time.monotonic() < deadline:
            try:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line.startswith("[rank ") and " pid " in line:
                pids.append(int(line.split()[-1]))
        assert len(pids) == 2, "the ranks did not start"
        launcher.send_signal(signal.SIGINT)
        launcher.wait(timeout=30)
        readers[1].join(timeout=10)  # the launcher's last lines
        stderr = "".join(errors)
    finally:
        if launcher.poll() is None:
            launcher.kill()
    assert launcher.returncode == 128 + signal.SIGINT
    assert "npu-sim launch: interrupted (SIGINT): stopping ranks 0, 1" in stderr
    for pid in pids:
        assert not os.path.exists(f"/proc/{pid}") or _is_zombie(pid), f"rank process {pid} survived"


def _is_zombie(pid):
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            return handle.read().split(") ")[1].startswith("Z")
    except OSError:
        return True


def test_ranks_on_two_servers_of_a_rank_table_one_started_by_hand(tmp_path):
    """Two "hosts" (127.0.0.1 and 127.0.0.2, both loopback): rank 0 by hand, rank 1 by `npu-sim launch --server-id`."""
    from npu_sim_bridge.cli.launch import reserve_port_base
    from npu_sim_bridge.runtime.hccl import ranktable

    port_base, lock = reserve_port_base(None, 2)
    table = ranktable.make_rank_table(1, "127.0.0.1")
    second = ranktable.make_rank_table(1, "127.0.0.2")["server_list"][0]
    second["device"][0]["rank_id"] = "1"
    table["server_list"].append(second)
    table["server_count"] = "2"
    path = tmp_path / "rank_table.json"
    path.write_text(json.dumps(table))
    script = os.path.join(SCRIPTS, "allreduce_once.py")
    env = dict(_env(), RANK_TABLE_FILE=str(path), NPU_SIM_PORT_BASE=str(port_base), HCCL_CONNECT_TIMEOUT="60")
    commands = [
        (["run", script], dict(env, RANK_ID="0", RANK_SIZE="2")),
        (["launch", "--rank-table", str(path), "--server-id", "127.0.0.2", "--port-base", str(port_base), script],
         env),
    ]
    processes = [subprocess.Popen([sys.executable, "-m", "npu_sim_bridge", *args], env=environ,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for args, environ in commands]
    try:
        outputs = [process.communicate(timeout=120) for process in processes]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
        lock.close()
    for process, (_, stderr) in zip(processes, outputs):
        assert process.returncode == 0, stderr[-3000:]
    assert "rank 0 of 2 local 0: sum 3.0" in outputs[0][0]
    assert "[rank 1] rank 1 of 2 local 0: sum 3.0" in outputs[1][0]
