"""Dumps and overflow checks through control flow: v1 cond and while, functional If, inserted roundings."""

import json
import os

import numpy as np
import tensorflow as tf

from npu_sim_bridge.cli.main import main as cli_main
from npu_sim_bridge.dumps import compare_dumps, read_overflow
from npu_sim_bridge.testing import models, zoo
from npu_sim_bridge.testing.dump_sweep import npu_config, training_dump

_v1 = tf.compat.v1


def cond_graph(control_flow="v1"):
    """out = sum(cond(pred, x @ 100s, x / 1000) ** 2): the true branch overflows float16 when x is 100."""
    with models._control_flow(control_flow):
        graph = tf.Graph()
        with graph.as_default():
            x = _v1.placeholder(tf.float32, [4, 8], name="x")
            pred = _v1.placeholder(tf.bool, [], name="pred")
            weights = tf.constant(np.full((8, 8), 100.0, np.float32))
            branch = tf.cond(pred, lambda: tf.nn.relu(tf.matmul(x, weights, name="big_mm"), name="big_relu"),
                             lambda: tf.multiply(x, 0.001, name="small"), name="choose")
            tf.reduce_sum(tf.square(branch), name="out")
    return graph


def run(graph, config, feeds, fetch="out:0", trace=False):
    values, ran = [], []
    with _v1.Session(graph=graph, config=config) as sess:
        for feed in feeds:
            metadata = _v1.RunMetadata()
            options = _v1.RunOptions(trace_level=_v1.RunOptions.FULL_TRACE) if trace else None
            values.append(sess.run(fetch, feed, options=options, run_metadata=metadata))
            ran.append({n.node_name for d in metadata.step_stats.dev_stats for n in d.node_stats})
    return values, ran


def feeds(*preds, x=1.0):
    return [{"x:0": np.full((4, 8), x, np.float32), "pred:0": pred} for pred in preds]


def test_cond_dumps_what_ran_and_the_manifest_says_which_branch_did_not(tmp_path):
    _, ran = run(cond_graph(), npu_config("float32", str(tmp_path), "0|1"), feeds(False, True), trace=True)
    dump = training_dump(str(tmp_path))
    assert dump.steps() == [0, 1]
    by_op = {entry["op"]: entry for entry in dump.tensors if entry["io"] == "output"}
    true_op, false_op = by_op["choose/big_mm"], by_op["choose/small"]
    assert true_op["branches"] and false_op["branches"]
    assert dump.turns(0, false_op) == [""] and dump.turns(0, true_op) == []      # step 0: pred False
    assert dump.turns(1, true_op) == [""] and dump.turns(1, false_op) == []      # step 1: pred True
    assert dump.why_missing(0, true_op).startswith("branch not taken: in the true branch of choose/")
    assert dump.why_missing(1, false_op).startswith("branch not taken: in the false branch of choose/")
    np.testing.assert_array_equal(dump.load(1, true_op), np.full((4, 8), 800.0, np.float32))
    for step in (0, 1):  # every op TensorFlow ran (its step stats) has its tensors written
        ran_ops = [entry for entry in dump.tensors if entry["op"] in ran[step]]
        assert len(ran_ops) >= 3
        for entry in ran_ops:   # a Switch runs, and its port into the branch not taken is dead
            assert dump.turns(step, entry) or (entry["type"] == "Switch" and dump.why_missing(step, entry).startswith(
                "branch not taken")), (step, entry["op"])
        merge = next(entry for entry in dump.tensors if entry["type"] == "Merge")
        assert dump.turns(step, merge) == [""]


def test_compare_reports_a_branch_that_did_not_run_instead_of_a_silent_gap(tmp_path, capsys):
    for name in ("a", "b"):
        os.makedirs(tmp_path / name)
        run(cond_graph(), npu_config("float32", str(tmp_path / name), "0"), feeds(False))
    result = compare_dumps(str(tmp_path / "a"), str(tmp_path / "b"))
    not_run = {row.op for row in result.rows if row.status == "not run"}
    assert "choose/big_mm" in not_run and "choose/small" not in not_run
    assert any("branch not taken" in line and "step 0" in line for line in result.warnings)
    assert cli_main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "warning: A (" in out and "have no file" in out and "branch not taken" in out


def test_overflow_in_a_cond_branch_is_flagged_at_its_step(tmp_path):
    config = npu_config("mixed", str(tmp_path), enable_dump=False, enable_dump_debug=True)
    values, _ = run(cond_graph(), config, feeds(False, True, x=100.0))
    assert np.isfinite(values[0]) and not np.isfinite(values[1])
    records = read_overflow(str(tmp_path))
    assert [record["step"] for record in records] == [1]
    first = records[0]["first"]
    assert first["op"] == "choose/big_mm" and first["type"] == "MatMul" and first["dtype"] == "float16"
    assert first["count"] == 32 and first["turn"] == ""


def test_overflow_in_a_functional_if_branch_is_flagged(tmp_path):
    config = npu_config("mixed", str(tmp_path), enable_dump=False, enable_dump_debug=True)
    values, _ = run(cond_graph("v2"), config, feeds(True, x=100.0))
    assert not np.isfinite(values[0])
    records = read_overflow(str(tmp_path))
    assert [record["step"] for record in records] == [0]
    first = records[0]["first"]  # Grappler lowers the If to Switch/Merge before NpuOptimizer sees it
    assert first["op"].startswith("choose/") and first["op"].endswith("/big_mm") and first["type"] == "MatMul"


def while_graph(control_flow="v1"):
    """h <- h @ (10 I) six times, in a while loop: float16 overflows in turn 4 (1e5 > 65504)."""
    with models._control_flow(control_flow):
        graph = tf.Graph()
        with graph.as_default():
            x = _v1.placeholder(tf.float32, [4, 4], name="x")
            grow = tf.constant(np.eye(4, dtype=np.float32) * 10)
            _, h = tf.while_loop(lambda i, h: i < 6, lambda i, h: (i + 1, tf.matmul(h, grow, name="grow")),
                                 [tf.constant(0), x], name="loop")
            tf.reduce_sum(h * 1.0, name="out")
    return graph


def test_while_loop_dumps_every_turn(tmp_path):
    run(while_graph(), npu_config("float32", str(tmp_path), "0"), [{"x:0": np.eye(4, dtype=np.float32)}])
    dump = training_dump(str(tmp_path))
    entry = next(e for e in dump.tensors if e["op"] == "loop/grow" and e["io"] == "output")
    assert entry["frame"] and entry["per_iteration"]
    assert dump.turns(0, entry) == [str(turn) for turn in range(6)]
    for turn in range(6):
        np.testing.assert_array_equal(dump.load(0, entry, str(turn)), np.eye(4, dtype=np.float32) * 10 ** (turn + 1))


def test_overflow_in_a_while_loop_names_the_op_and_the_turn(tmp_path):
    config = npu_config("mixed", str(tmp_path), enable_dump=False, enable_dump_debug=True)
    values, _ = run(while_graph(), config, [{"x:0": np.eye(4, dtype=np.float32)}] * 2)
    assert not np.isfinite(values[0])
    records = read_overflow(str(tmp_path))
    assert [record["step"] for record in records] == [0, 1]
    first = records[0]["first"]
    assert first["op"] == "loop/grow" and first["turn"] == "4"        # 10**5: the first turn above 65504
    assert {(e["op"], e["turn"]) for e in records[0]["ops"] if e["op"] == "loop/grow"} == {("loop/grow", "4")}


def test_overflow_in_a_rounding_the_precision_pass_inserted_names_it_and_its_producer(tmp_path, capsys):
    graph = tf.Graph()
    with graph.as_default():
        x = _v1.placeholder(tf.float32, [1, 8, 8, 3], name="x")
        scale = _v1.placeholder_with_default(np.float32(3e5), [], name="scale")  # not folded into the filter
        scaled = tf.multiply(x, scale, name="scaled")      # float32: finite
        conv = tf.nn.conv2d(scaled, tf.constant(np.full((3, 3, 3, 4), 1e-6, np.float32)), 1, "SAME", name="conv")
        tf.reduce_sum(conv, name="out")
    config = npu_config("mixed", str(tmp_path), enable_dump=False, enable_dump_debug=True)
    run(graph, config, [{"x:0": np.ones((1, 8, 8, 3), np.float32)}])
    records = read_overflow(str(tmp_path))
    assert [record["step"] for record in records] == [0]
    first = records[0]["first"]
    assert first["op"].startswith("scaled/NpuSim") and first["inserted_by"] == "precision"
    assert first["producer"] == "scaled" and "conv" in first["consumers"] and first["count"] == 192
    assert "scaled" not in {entry["op"] for entry in records[0]["ops"]}    # its float32 output is finite
    assert cli_main(["overflow", str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["first"]["producer"] == "scaled"
    assert cli_main(["overflow", str(tmp_path)]) == 0
    assert "192 non-finite values; inserted by the precision pass after scaled for conv" in capsys.readouterr().out


def test_dump_layout_names_turn_files():
    from npu_sim_bridge.passes.dump import layout

    assert layout.turn_of("000003.output.0.iter_2_5.npy", "000003.output.0") == "2_5"
    assert layout.turn_of("000003.output.0.npy", "000003.output.0") == ""
    assert layout.turn_of("000003.output.1.npy", "000003.output.0") is None


def test_nested_while_loops_dump_each_turn_of_both_frames(tmp_path):
    with zoo.tf1_graph_mode(ref_variables=False):
        graph = tf.Graph()
        with graph.as_default():
            x = _v1.placeholder(tf.float32, [2, 2], name="x")

            def outer(i, h):
                _, inner_h = tf.while_loop(lambda j, g: j < 3, lambda j, g: (j + 1, tf.add(g, 1.0, name="step")),
                                           [tf.constant(0), h], name="inner")
                return i + 1, inner_h * 2.0

            _, h = tf.while_loop(lambda i, h: i < 2, outer, [tf.constant(0), x], name="outer")
            tf.reduce_sum(h, name="out")
    run(graph, npu_config("float32", str(tmp_path), "0"), [{"x:0": np.zeros((2, 2), np.float32)}])
    dump = training_dump(str(tmp_path))
    entry = next(e for e in dump.tensors if e["op"].endswith("inner/step") and e["io"] == "output")
    assert "|" in entry["frame"] and entry["per_iteration"]
    assert dump.turns(0, entry) == [f"{i}_{j}" for i in range(2) for j in range(3)]
    # outer turn 0: 0+1, +1, +1 -> 3, doubled to 6; outer turn 1: 7, 8, 9
    values = [float(dump.load(0, entry, f"{i}_{j}")[0, 0]) for i in range(2) for j in range(3)]
    assert values == [1.0, 2.0, 3.0, 7.0, 8.0, 9.0]


def test_unseeded_initializer_is_skipped_as_first_divergent_op_of_two_identical_runs(tmp_path):
    def train(folder):
        os.makedirs(folder)
        graph = tf.Graph()
        with graph.as_default():   # no graph seed: the initializer's RandomUniform has seed 0, seed2 0
            x = _v1.placeholder(tf.float32, [4, 8], name="x")
            w = _v1.get_variable("w", [8, 2], initializer=_v1.random_uniform_initializer())
            loss = tf.reduce_sum(tf.square(tf.matmul(x, w, name="mm")), name="out")
            train_op = _v1.train.GradientDescentOptimizer(0.01).minimize(loss)
            init = _v1.global_variables_initializer()
        with _v1.Session(graph=graph, config=npu_config("float32", folder, "0")) as sess:
            sess.run(init)
            sess.run([loss, train_op], {x: np.ones((4, 8), np.float32)})

    train(str(tmp_path / "a"))
    train(str(tmp_path / "b"))
    result = compare_dumps(str(tmp_path / "a"), str(tmp_path / "b"))
    skipped = {row.op for row in result.skipped}
    assert any(op.startswith("w/Initializer/") for op in skipped)
    assert result.first_divergent is None, result.first_divergent[1].op  # the rest differs only through w


def test_functional_while_dumps_and_flags_its_overflow(tmp_path):
    config = npu_config("mixed", str(tmp_path), "0", enable_dump_debug=True)
    values, _ = run(while_graph("v2"), config, [{"x:0": np.eye(4, dtype=np.float32)}])
    assert not np.isfinite(values[0])
    dump = training_dump(str(tmp_path))   # Grappler lowers the While to a v1 frame before NpuOptimizer
    grow = next(entry for entry in dump.tensors if entry["type"] == "MatMul" and entry["io"] == "output")
    assert grow["op"].startswith("loop/") and dump.turns(0, grow) == [str(turn) for turn in range(6)]
    records = read_overflow(str(tmp_path))
    assert [record["step"] for record in records] == [0]
    assert records[0]["first"]["op"] == grow["op"] and records[0]["first"]["turn"] == "4"


def test_compare_in_a_while_loop_names_the_op_and_turn_where_the_difference_began(tmp_path):
    for mode in ("float32", "mixed"):
        os.makedirs(tmp_path / mode)
        run(while_graph(), npu_config(mode, str(tmp_path / mode), "0"), [{"x:0": np.eye(4, dtype=np.float32)}])
    result = compare_dumps(str(tmp_path / "float32"), str(tmp_path / "mixed"))
    pair, row = result.first_divergent
    assert (row.op, row.turn) == ("loop/grow", "4")          # 1e5: inf in float16, exact powers of 10 before
    carried = [r for r in result.skipped if "while loop's Merge" in r.note]
    assert carried and all(int(r.turn) >= 5 for r in carried)  # the loop variable after turn 4 carries the inf
