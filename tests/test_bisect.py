"""npu-sim bisect: the search, the graph route (API and CLI), the files it writes and that they fix the model, errors."""

import json
import math
import os
import random
import subprocess
import sys
import tempfile

import numpy as np
import pytest
import tensorflow as tf

import npu_sim_bridge
from npu_sim_bridge.bisect import BisectError, bisect_graph
from npu_sim_bridge.bisect.output import customize_path
from npu_sim_bridge.bisect.search import Oracle, smallest_fix
from npu_sim_bridge.cli.main import main as cli_main
from npu_sim_bridge.passes.customize_dtypes import load_customize_dtypes
from npu_sim_bridge.passes.precision.lists import load_mixlist

X = np.abs(np.random.RandomState(1).normal(3, 1, (8, 64))).astype(np.float32)


def overflow_graph(both_big=False, broken_float32=False):
    """big/MatMul gives ~1e5 (inf in float16) and is scaled down after; small/MatMul is harmless."""
    rs = np.random.RandomState(0)
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [8, 64], name="x")
        big = tf.matmul(x, tf.constant(rs.uniform(400, 800, (64, 16)).astype(np.float32)), name="big/MatMul")
        scaled = tf.multiply(big, 1e-3, name="big/scale")
        weights = rs.uniform(400, 800, (64, 16)) if both_big else rs.normal(0, 0.1, (64, 16))
        small = tf.matmul(x, tf.constant(weights.astype(np.float32)), name="small/MatMul")
        if both_big:
            small = tf.multiply(small, 1e-3, name="small/scale")
        out = tf.reduce_sum(tf.add(scaled, small, name="sum_branches"), axis=1, name="out")
        if broken_float32:
            tf.multiply(out, tf.math.log(tf.constant(-1.0)), name="broken")
    return graph


# ------------------------------------------------------------------------------------------ search
@pytest.mark.parametrize("n, k", [(8, 1), (64, 1), (64, 2), (256, 3)])
def test_search_finds_the_culprits_in_about_k_log_n_trials(n, k):
    rng = random.Random(n * 10 + k)
    for _ in range(10):
        bad = set(rng.sample(range(n), k))
        oracle = Oracle(lambda items: bad <= set(items))
        candidates = list(range(n))
        rng.shuffle(candidates)
        assert set(smallest_fix(candidates, oracle)) == bad
        assert oracle.calls <= k * (math.log2(n) + 2) + (k - 1 if k > 1 else 0)


def test_search_with_the_culprit_first_needs_one_trial():
    oracle = Oracle(lambda items: 7 in items)
    assert smallest_fix([7] + list(range(7)) + list(range(8, 300)), oracle) == [7]
    assert oracle.calls == 1


# ------------------------------------------------------------------------------------------ graph route
def session_values(graph, **params):
    """Run `graph` in a Session whose ConfigProto is built by hand with these options; (out, report)."""
    config = tf.compat.v1.ConfigProto()
    custom_op = config.graph_options.rewrite_options.custom_optimizers.add()
    custom_op.name = "NpuOptimizer"
    for key, value in params.items():
        custom_op.parameter_map[key].s = value.encode()
    npu_sim_bridge.clear_reports()
    with tf.compat.v1.Session(graph=graph, config=config) as sess:
        value = sess.run("out:0", {"x:0": X})
    report = next(r for r in npu_sim_bridge.recent_reports() if r.item_id == "tf_graph" and not r.rerun)
    return value, report


def test_bisect_finds_the_overflowing_matmul_and_its_files_fix_the_model(tmp_path):
    mixlist = str(tmp_path / "mixlist.json")
    workdir = str(tmp_path / "runs")
    result = bisect_graph(overflow_graph().as_graph_def(), ["out"], feeds={"x:0": X}, output=mixlist,
                          progress=None, workdir=workdir)
    assert result.workdir == workdir and "dump_float32" in os.listdir(workdir)  # the runs' files, where asked
    assert result.fix.types == () and result.fix.nodes == ("big/MatMul",)
    assert result.guidance.overflow[0] == "big/MatMul"
    assert math.isinf(result.error_before) and result.error_after <= 0.01
    assert "small/MatMul" in result.stayed_float16
    assert [t.stage for t in result.trials] == ["mixed", "types", "nodes"] and result.runs == 4
    assert load_mixlist(mixlist).names("black-list", "to-add") == ()
    entries = load_customize_dtypes(customize_path(mixlist))
    assert [e.name for e in entries] == ["big/MatMul"]
    assert "float16 overflowed in big/MatMul" in open(customize_path(mixlist)).read()

    reference, _ = session_values(overflow_graph(), precision_mode="allow_fp32_to_fp16")
    broken, _ = session_values(overflow_graph(), precision_mode="allow_mix_precision")
    fixed, report = session_values(overflow_graph(), precision_mode="allow_mix_precision", modify_mixlist=mixlist,
                                   customize_dtypes=customize_path(mixlist))
    assert not np.all(np.isfinite(broken))
    assert np.all(np.isfinite(fixed))
    assert np.max(np.abs(fixed - reference)) / np.max(np.abs(reference)) <= 0.01
    assert report.nodes["small/MatMul"].dtype_after == "float16"     # the harmless MatMul stays float16
    assert report.nodes["big/MatMul"].dtype_after == "float32"
    assert "customize_dtypes" in report.nodes["big/MatMul"].reason


def test_a_type_whose_every_node_overflows_goes_into_the_black_list(tmp_path):
    mixlist = str(tmp_path / "mixlist.json")
    result = bisect_graph(overflow_graph(both_big=True).as_graph_def(), ["out"], feeds={"x:0": X}, output=mixlist,
                          progress=None, workdir=str(tmp_path / "runs"))
    assert result.fix.types == ("MatMul",) and not result.fix.nodes
    assert load_mixlist(mixlist).names("black-list", "to-add") == ("MatMul",)
    text = open(mixlist).read()
    assert "// MatMul: all 2 node(s) of the type must stay float32; float16 overflowed in" in text
    assert not os.path.exists(customize_path(mixlist))
    fixed, _ = session_values(overflow_graph(both_big=True), precision_mode="allow_mix_precision",
                              modify_mixlist=mixlist)
    assert np.all(np.isfinite(fixed))


def npu_sim(*args):
    """`npu-sim ARGS` in a child process, as a user runs it; (exit status, stdout, stderr)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(npu_sim_bridge.__file__)))
    env = dict(os.environ, PYTHONPATH=root)
    done = subprocess.run([sys.executable, "-m", "npu_sim_bridge", *args], capture_output=True, text=True, env=env,
                          timeout=300)
    return done.returncode, done.stdout, done.stderr


def test_npu_sim_bisect_on_a_graph_file_with_feeds(tmp_path):
    graph_path = str(tmp_path / "model.pb")
    tf.io.write_graph(overflow_graph().as_graph_def(), str(tmp_path), "model.pb", as_text=False)
    np.save(tmp_path / "x.npy", X)
    mixlist, report = str(tmp_path / "fix.json"), str(tmp_path / "report.json")
    status, out, err = npu_sim("bisect", graph_path, "--fetch", "out", "--feed", f"x={tmp_path / 'x.npy'}",
                               "--param", "precision_mode=allow_mix_precision", "--rtol", "0.01", "-o", mixlist,
                               "--report", report, "--workdir", str(tmp_path / "runs"))
    assert status == 0, err
    assert "run 3 (types): type MatMul" in err            # progress on stderr
    assert "keep float32: node big/MatMul" in out and "set customize_dtypes" in out
    data = json.load(open(report))
    assert data["fix"]["nodes"] == ["big/MatMul"] and data["runs"] == 4 and len(data["trials"]) == 3
    before = set(os.listdir(tempfile.gettempdir()))
    status, out, err = npu_sim("bisect", graph_path, "--fetch", "out", "-o", mixlist)   # no --feed x=...
    assert status == 1 and "npu-sim bisect: error: the model does not run in float32" in err
    assert not {name for name in set(os.listdir(tempfile.gettempdir())) - before
                if name.startswith("npu_sim_bisect_")}  # a failed bisect leaves no folder behind
    assert "placeholder x needs a value" in err and "--feed x=FILE.npy" in err


@pytest.mark.parametrize("args, message", [
    (["-o", "m.json"], "give either GRAPH (with --fetch) or --script"),
    (["model.pb", "--fetch", "out"], "name the mixlist to write with -o FILE.json"),
    (["model.pb", "--fetch", "out", "-o", "m.json", "--rtol", "tight"], "--rtol 'tight' is not a number"),
    (["model.pb", "--fetch", "out", "-o", "m.json", "--rtol", "nan"], "must be a positive finite number"),
    (["--script", "no_such.py", "--metric", "x", "-o", "m.json"], "--script 'no_such.py' does not exist"),
])
def test_cli_usage_errors_exit_2_with_one_line(capsys, args, message):
    assert cli_main(["bisect", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("npu-sim bisect: error: ") and message in err


def test_an_output_folder_that_does_not_exist_is_refused_before_any_run(tmp_path, capsys):
    assert cli_main(["bisect", "model.pb", "--fetch", "out", "-o", str(tmp_path / "no" / "m.json")]) == 1
    assert "its folder" in capsys.readouterr().err


def test_a_work_folder_that_cannot_be_made_is_refused(tmp_path):
    (tmp_path / "taken").write_text("a file, not a folder")
    with pytest.raises(BisectError, match=r"the work folder .*taken' cannot be created"):
        bisect_graph(overflow_graph().as_graph_def(), ["out"], feeds={"x:0": X}, progress=None,
                     workdir=str(tmp_path / "taken"))


def test_unguided_search_also_finds_it(tmp_path):
    result = bisect_graph(overflow_graph().as_graph_def(), ["out"], feeds={"x:0": X}, guided=False, progress=None,
                          workdir=str(tmp_path))
    assert result.fix.nodes == ("big/MatMul",) and result.guidance is None


@pytest.mark.parametrize("kwargs, message", [
    ({"graph": "broken", "fetches": ["broken"]}, "float32 itself is broken"),
    ({"fetches": ["out"], "feeds": {}}, "does not run in float32"),
    ({"fetches": ["outt"]}, "the graph has no node 'outt' (did you mean 'out'?)"),
    ({"fetches": []}, "--fetch"),
    ({"fetches": ["out"], "params": {"precision_mode": "force_fp16"}}, "bisect needs a mixed mode"),
])
def test_bad_inputs_get_clear_errors(kwargs, message, tmp_path):
    graph = overflow_graph(broken_float32=kwargs.pop("graph", None) == "broken").as_graph_def()
    kwargs.setdefault("feeds", {"x:0": X})
    with pytest.raises(BisectError) as caught:
        bisect_graph(graph, progress=None, workdir=str(tmp_path), **kwargs)
    assert message in str(caught.value)


def test_a_model_that_is_fine_in_mixed_precision_needs_nothing(tmp_path):
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [8, 64], name="x")
        tf.reduce_sum(tf.matmul(x, tf.constant(np.full((64, 4), 0.01, np.float32))), axis=1, name="out")
    result = bisect_graph(graph.as_graph_def(), ["out"], feeds={"x:0": X}, output=str(tmp_path / "m.json"),
                          progress=None, workdir=str(tmp_path / "runs"))
    assert not result.found and "nothing to keep in float32" in result.message
    assert not os.path.exists(tmp_path / "m.json")


def test_a_saved_model_or_a_checkpointed_meta_graph_has_its_variables_frozen(tmp_path):
    rs = np.random.RandomState(0)
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [8, 64], name="x")
        w_big = tf.compat.v1.get_variable("w_big", initializer=rs.uniform(400, 800, (64, 16)).astype(np.float32))
        w_small = tf.compat.v1.get_variable("w_small", initializer=rs.normal(0, 0.1, (64, 16)).astype(np.float32))
        big = tf.multiply(tf.matmul(x, w_big, name="big/MatMul"), 1e-3, name="big/scale")
        tf.reduce_sum(big + tf.matmul(x, w_small, name="small/MatMul"), axis=1, name="out")
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            tf.compat.v1.train.Saver().save(sess, str(tmp_path / "model.ckpt"))
            builder = tf.compat.v1.saved_model.Builder(str(tmp_path / "saved"))
            builder.add_meta_graph_and_variables(sess, ["serve"])
            builder.save()
    for source in (str(tmp_path / "saved"), str(tmp_path / "model.ckpt.meta")):
        result = bisect_graph(source, ["out"], feeds={"x:0": X}, progress=None, workdir=str(tmp_path / "runs"))
        assert result.fix.nodes == ("big/MatMul",), source
    with pytest.raises(BisectError, match="holds variables .* whose values this file does not carry"):
        bisect_graph(graph.as_graph_def(), ["out"], feeds={"x:0": X}, progress=None, workdir=str(tmp_path / "runs"))


def test_a_fused_culprit_is_kept_with_the_nodes_fused_into_it_and_float16_only_ops_are_no_candidates(tmp_path):
    """The issue's CNN graph with a MatMul+BiasAdd (fused by MatMulBiasAddFusionPass) that overflows."""
    rs = np.random.RandomState(0)
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 8, 8, 3], name="x")
        c = tf.nn.conv2d(x, tf.constant(rs.normal(size=(3, 3, 3, 8)).astype(np.float32)), 1, "SAME", name="conv")
        r = tf.nn.relu(tf.nn.bias_add(c, tf.constant(rs.normal(size=8).astype(np.float32)), name="bias1"),
                       name="relu")
        p = tf.reshape(tf.nn.max_pool2d(r, 2, 2, "VALID", name="pool"), [2, 128], name="flat")
        m = tf.matmul(p, tf.constant(rs.uniform(300, 600, (128, 10)).astype(np.float32)), name="matmul")
        b2 = tf.nn.bias_add(m, tf.constant(rs.normal(size=10).astype(np.float32)), name="bias2")
        m2 = tf.matmul(p, tf.constant(rs.normal(0, 0.1, (128, 10)).astype(np.float32)), name="matmul2")
        logits = tf.multiply(b2, 1e-5, name="scale") + m2
        tf.reduce_sum(tf.math.log(tf.nn.softmax(logits, name="softmax"), name="log"), name="sum")
    feed = {"x:0": np.abs(rs.normal(size=(2, 8, 8, 3))).astype(np.float32) * 3}
    mixlist = str(tmp_path / "mixlist.json")
    result = bisect_graph(graph.as_graph_def(), ["sum"], feeds=feed, output=mixlist, progress=None,
                          workdir=str(tmp_path / "runs"))
    assert result.fix.nodes == ("bias2",) and result.expanded_nodes == ["bias2", "matmul"]
    assert {"conv", "bias1", "relu", "pool"} <= set(result.float16_only)
    assert [e.name for e in load_customize_dtypes(customize_path(mixlist))] == ["bias2", "matmul"]
    assert "matmul2" in result.stayed_float16


def test_the_example_runs(tmp_path):
    import runpy

    example = runpy.run_path(os.path.join(os.path.dirname(__file__), os.pardir, "examples", "bisect_overflow.py"),
                             run_name="bisect_overflow")
    result, fixed = example["main"](str(tmp_path))
    assert result.fix.nodes == ("big/MatMul",) and np.all(np.isfinite(fixed))
