"""Rank environment, rank tables, groups and the launcher's argument errors, in-process (no second rank)."""

import json

import pytest
import tensorflow as tf
from tensorflow.python.client import session as session_lib

from npu_sim_bridge.cli.main import main
from npu_sim_bridge.runtime import distributed as hccl_ops
from npu_sim_bridge.runtime import hooks, loss_scale, util
from npu_sim_bridge.runtime.hccl import cluster, groups, ranktable


@pytest.fixture(name="ranks")
def ranks_fixture():
    """Pretend to be a rank of a bigger job (nothing is started); restores the real environment after."""
    def pretend(**environ):
        util.global_dict_init()  # forget what an init_resource of another test recorded
        cluster.reset_for_tests({key: str(value) for key, value in environ.items()})
        return cluster.info()

    yield pretend
    cluster.reset_for_tests()
    groups._groups.clear()  # pylint: disable=protected-access
    groups._keys.clear()  # pylint: disable=protected-access


def test_without_rank_variables_the_process_is_rank_0_of_1():
    info = ranktable.rank_info({})
    assert (info.rank_id, info.rank_size, info.local_rank_id, info.distributed) == (0, 1, 0, False)


def test_rank_helpers_read_the_rank_environment(ranks):
    ranks(RANK_ID=3, RANK_SIZE=4, DEVICE_ID=3)
    assert (hccl_ops.get_rank_id(), hccl_ops.get_rank_size()) == (3, 4)
    assert (hccl_ops.get_local_rank_id(), hccl_ops.get_local_rank_size()) == (3, 4)
    assert (hccl_ops.get_npu_rank_id(), hccl_ops.get_npu_rank_size()) == (3, 4)
    assert util.get_ranksize() == "4"


def test_a_rank_table_places_ranks_on_servers(ranks, tmp_path):
    table = ranktable.make_rank_table(2, "10.0.0.1")
    second = ranktable.make_rank_table(2, "10.0.0.2")["server_list"][0]
    for device in second["device"]:
        device["rank_id"] = str(int(device["rank_id"]) + 2)
    table["server_list"].append(second)
    table["server_count"] = "2"
    path = tmp_path / "rank_table.json"
    path.write_text(json.dumps(table))
    info = ranks(RANK_ID=3, RANK_SIZE=4, RANK_TABLE_FILE=path, NPU_SIM_PORT_BASE=31000)
    assert info.hosts == ("10.0.0.1", "10.0.0.1", "10.0.0.2", "10.0.0.2")
    assert (info.local_rank_id, info.local_rank_size, info.device_id) == (1, 2, 1)
    assert info.address(3) == "10.0.0.2:31003"
    assert (hccl_ops.get_local_rank_id(), hccl_ops.get_local_rank_size()) == (1, 2)
    assert ranktable.ranks_of_server(str(path), "10.0.0.2") == ("10.0.0.2", [2, 3])
    with pytest.raises(ranktable.RankConfigError, match="names 2 servers .* --server-id"):
        ranktable.ranks_of_server(str(path))


def test_the_generated_rank_table_is_in_the_version_1_format():
    table = ranktable.make_rank_table(2)
    assert table["version"] == "1.0" and table["status"] == "completed" and table["server_count"] == "1"
    devices = table["server_list"][0]["device"]
    assert [(d["device_id"], d["rank_id"]) for d in devices] == [("0", "0"), ("1", "1")]
    assert all(isinstance(d["device_ip"], str) for d in devices)


@pytest.mark.parametrize("environ, message", [
    ({"RANK_SIZE": "2"}, "RANK_SIZE is 2 but RANK_ID is not set"),
    ({"RANK_SIZE": "2", "RANK_ID": "2"}, "RANK_ID 2 is outside RANK_SIZE 2"),
    ({"RANK_SIZE": "two"}, r"RANK_SIZE='two' is not an integer"),
    ({"RANK_SIZE": "2", "RANK_ID": "0", "RANK_TABLE_FILE": "/nonexistent/table.json"},
     "rank table /nonexistent/table.json .* cannot be read"),
])
def test_rank_environment_errors_name_the_variable(environ, message):
    with pytest.raises(ranktable.RankConfigError, match=message):
        ranktable.rank_info(environ)


def test_rank_table_errors_name_the_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"server_list": [}')
    with pytest.raises(ranktable.RankConfigError, match="bad.json is not valid JSON: .* line 1"):
        ranktable.read_rank_table(str(bad))
    gap = tmp_path / "gap.json"
    table = ranktable.make_rank_table(2)
    table["server_list"][0]["device"][1]["rank_id"] = "5"
    gap.write_text(json.dumps(table))
    with pytest.raises(ranktable.RankConfigError, match=r"rank_ids \[0, 5\]; they must be 0..1"):
        ranktable.read_rank_table(str(gap))
    with_table = tmp_path / "two.json"
    with_table.write_text(json.dumps(ranktable.make_rank_table(2)))
    with pytest.raises(ranktable.RankConfigError, match="lists 2 ranks but RANK_SIZE is 4"):
        ranktable.rank_info({"RANK_SIZE": "4", "RANK_ID": "0", "RANK_TABLE_FILE": str(with_table)})


def test_groups_number_their_ranks_in_ascending_world_order(ranks):
    ranks(RANK_ID=2, RANK_SIZE=4)
    hccl_ops.create_group("odd_even", 2, [2, 0])
    assert hccl_ops.get_rank_size("odd_even") == 2 and hccl_ops.get_rank_id("odd_even") == 1
    assert hccl_ops.get_world_rank_from_group_rank("odd_even", 0) == 0
    assert hccl_ops.get_group_rank_from_world_rank(2, "odd_even") == 1
    assert groups.group_key("odd_even") != groups.group_key()
    with pytest.raises(ValueError, match="already exists"):
        hccl_ops.create_group("odd_even", 2, [0, 2])
    with pytest.raises(ValueError, match=r"rank_ids must be distinct world ranks 0..3"):
        hccl_ops.create_group("big", 2, [0, 4])
    hccl_ops.create_group("others", 2, [1, 3])
    with pytest.raises(ValueError, match="rank 2 is not in HCCL group 'others'"):
        hccl_ops.get_rank_id("others")
    hccl_ops.destroy_group("others")
    with pytest.raises(ValueError, match="HCCL group 'others' does not exist"):
        hccl_ops.get_rank_size("others")


def test_collective_arguments_are_checked_against_the_group(ranks):
    ranks(RANK_ID=0, RANK_SIZE=2)
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="allgather rank_size 1 does not match .* which has 2 ranks"):
            hccl_ops.allgather(tf.ones([1]), 1)
        with pytest.raises(ValueError, match="root_rank 2 does not exist in HCCL group 'hccl_world_group'"):
            hccl_ops.broadcast([tf.ones([1])], 2)
        with pytest.raises(ValueError, match="reduction 'avg' is invalid"):
            hccl_ops.allreduce(tf.ones([1]), "avg")
        with pytest.raises(ValueError, match="dest_rank 0 is this rank itself"):
            hccl_ops.send(tf.ones([1]), 0, 0)
        with pytest.raises(ValueError, match="root_rank 3 does not exist"):
            hooks.NPUBroadcastGlobalVariablesHook(3)


def test_one_rank_keeps_identity_collectives_and_local_sessions():
    assert not cluster.sessions_routed()
    with tf.Graph().as_default():
        x = tf.constant([1.0, 2.0])
        outputs = [hccl_ops.allreduce(x, "sum"), hccl_ops.allgather(x, 1), hccl_ops.broadcast([x], 0)[0],
                   hccl_ops.reduce_scatter(x, "max", 1), hccl_ops.npu_allreduce(x)]
        assert {out.op.type for out in outputs} == {"Identity"}
        finite = tf.constant(True)
        assert loss_scale.finite_on_every_rank(finite) is finite
        opt = tf.compat.v1.train.GradientDescentOptimizer(0.1)
        variable = tf.compat.v1.get_variable("v", initializer=1.0)
        grads = hccl_ops.NPUDistributedOptimizer(opt).compute_gradients(variable * 2.0)
        assert grads[0][0].op.type != "CollectiveReduceV2"
        with session_lib.Session() as sess:
            assert sess.sess_str == b""  # a local Session, not a server's
            assert sess.run(outputs[0]).tolist() == [1.0, 2.0]
    assert not cluster.sessions_routed()


def test_launch_argument_errors(tmp_path, capsys):
    assert main(["launch", str(tmp_path / "missing.py")]) == 2
    assert "script" in capsys.readouterr().err
    script = tmp_path / "script.py"
    script.write_text("print('hi')\n")
    assert main(["launch", str(script)]) == 2
    assert "npu-sim launch needs --nproc N" in capsys.readouterr().err


def test_collective_timeout_comes_from_hccl_exec_timeout(monkeypatch):
    from npu_sim_bridge.runtime.hccl import collectives

    monkeypatch.delenv("HCCL_EXEC_TIMEOUT", raising=False)
    assert collectives._timeout() == 1836.0  # pylint: disable=protected-access
    monkeypatch.setenv("HCCL_EXEC_TIMEOUT", "30")
    assert collectives._timeout() == 30.0  # pylint: disable=protected-access
    monkeypatch.setenv("HCCL_EXEC_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="HCCL_EXEC_TIMEOUT='soon' must be a number of seconds >= 0"):
        collectives._timeout()  # pylint: disable=protected-access


def test_launch_with_a_rank_table_checks_nproc_against_the_server(tmp_path, capsys):
    table = tmp_path / "rank_table.json"
    table.write_text(json.dumps(ranktable.make_rank_table(2)))
    script = tmp_path / "script.py"
    script.write_text("print('hi')\n")
    assert main(["launch", "--rank-table", str(table), "--nproc", "3", str(script)]) == 2
    assert "--nproc 3 but rank table" in capsys.readouterr().err
    assert main(["launch", "--rank-table", str(table), "--server-id", "10.1.1.1", str(script)]) == 2
    assert "has no server '10.1.1.1'; its servers are 127.0.0.1" in capsys.readouterr().err
