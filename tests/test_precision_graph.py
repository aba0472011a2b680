"""Invariants of the precision rewrite: idempotence, shared Casts, variables, fetches, list and repeated
type attrs, existing Casts, float16 graphs, integer tensors, v1 while frames and functional While/If."""

import collections

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.framework import types_pb2
from tensorflow.core.protobuf import rewriter_config_pb2

import npu_sim_bridge
from npu_sim_bridge.config import from_dict
from npu_sim_bridge.passes import ItemInfo, run_pipeline
from npu_sim_bridge.graph.attr_names import INSERTED_ATTR, PRECISION_ATTR

HALF, FLOAT = types_pb2.DT_HALF, types_pb2.DT_FLOAT


def codes(decision) -> list:
    """The codes of a report record's reasons, in order."""
    return [reason.code for reason in decision.reasons]


def rewrite(graph, fetches, **options):
    options = {"sim_passes": "precision", **options}
    return npu_sim_bridge.rewrite(graph.as_graph_def(), options, fetches=fetches)


def nodes_of(graph_def):
    return {node.name: node for node in graph_def.node}


def inserted(graph_def):
    return [node for node in graph_def.node if INSERTED_ATTR in node.attr]


def run_graph_def(graph_def, fetches, feed, init=None):
    """Import a GraphDef into a fresh graph and run it in a plain Session (no NpuOptimizer)."""
    with tf.Graph().as_default():
        tf.graph_util.import_graph_def(graph_def, name="")
        with tf.compat.v1.Session() as sess:
            if init:
                sess.run(init)
            return sess.run(fetches, feed)


def mlp_graph():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [4, 3], name="x")
        w = tf.compat.v1.get_variable("w", [3, 3], initializer=tf.compat.v1.constant_initializer(0.5),
                                      use_resource=False)
        mm = tf.matmul(x, w, name="mm")
        tf.identity(tf.math.log(mm, name="log") + tf.reduce_mean(mm, name="mean"), name="y")
        tf.compat.v1.global_variables_initializer()
    return graph


@pytest.mark.parametrize("execution", ["emulate", "native"])
def test_running_the_pass_twice_changes_nothing(execution):
    from npu_sim_bridge.testing import models

    model = models.lstm(batch_size=2, time_steps=3, input_dim=4, units=4, control_flow="v1")
    options = from_dict({"precision_mode": "allow_mix_precision", "sim_fp16_execution": execution,
                         "sim_passes": "precision"})
    item = ItemInfo(fetch=tuple(model.fetch_names()))
    first = run_pipeline(model.graph_def(), options, item)
    second = run_pipeline(first.graph_def, options, item)
    assert first.report.passes[0].changed and first.report.passes[0].stats["casts_inserted"] > 0
    assert second.graph_def == first.graph_def
    assert second.graph_def.SerializeToString(deterministic=True) == \
        first.graph_def.SerializeToString(deterministic=True)
    assert not second.report.passes[0].changed and second.report.passes[0].stats["already_rewritten"]
    assert second.report.nodes["rnn/while/lstm_cell/MatMul"].dtype_after == "float16"
    again = run_pipeline(model.graph_def(), options, item)  # deterministic names and order
    assert again.graph_def == first.graph_def


def test_rewritten_graph_with_other_options_is_refused():
    graph_def, _ = rewrite(mlp_graph(), ["y"], precision_mode="allow_mix_precision")
    with pytest.raises(npu_sim_bridge.PassError, match="already rewritten by the precision pass for "
                                                       "allow_mix_precision:emulate.*force_fp16:emulate"):
        npu_sim_bridge.rewrite(graph_def, {"precision_mode": "force_fp16", "sim_passes": "precision"})


def test_one_cast_per_producer_output_shared_by_consumers():
    graph_def, report = rewrite(mlp_graph(), ["y"], precision_mode="allow_mix_precision",
                                sim_fp16_execution="native")
    nodes = nodes_of(graph_def)
    assert nodes["mm"].attr["T"].type == HALF
    # Log and Exp are black: both read mm through the same Cast back to float32, named after mm.
    cast = nodes["mm/NpuSimCast_0_float32"]
    assert (cast.attr["SrcT"].type, cast.attr["DstT"].type) == (HALF, FLOAT)
    readers = sorted(n.name for n in graph_def.node if "mm/NpuSimCast_0_float32" in n.input)
    assert readers == ["log", "mean"]
    assert report.nodes["log"].dtype_after == report.nodes["mean"].dtype_after == "float32"
    names = collections.Counter(node.name for node in inserted(graph_def))
    assert all(count == 1 for count in names.values())
    assert all(node.attr[PRECISION_ATTR].s == b"allow_mix_precision:native" for node in inserted(graph_def))
    assert codes(report.nodes["mm/NpuSimCast_0_float32"]) == ["precision.inserted"]
    assert report.nodes["mm/NpuSimCast_0_float32"].reason == "inserted by precision: Cast of mm"  # as read


def test_variables_keep_float32_and_their_reads_are_cast():
    graph_def, report = rewrite(mlp_graph(), ["y"], precision_mode="force_fp16", sim_fp16_execution="native")
    nodes = nodes_of(graph_def)
    assert nodes["w"].op == "VariableV2" and nodes["w"].attr["dtype"].type == FLOAT
    assert nodes["w/Assign"].attr["T"].type == FLOAT
    assert nodes["w/read"].attr["T"].type == FLOAT
    assert nodes["mm"].input[1] == "w/read/NpuSimCast_0_float16"
    assert report.nodes["w/Assign"].reason.startswith("reads or updates a variable")
    value = run_graph_def(graph_def, "y:0", {"x:0": np.ones((4, 3), np.float32)}, init="init")
    assert np.isfinite(value).all()


def test_fetched_and_fed_nodes_keep_dtype_and_name():
    graph = mlp_graph()
    graph_def, report = rewrite(graph, ["mm:0", "y"], precision_mode="force_fp16", sim_fp16_execution="native")
    nodes = nodes_of(graph_def)
    # A fetch reads the op's output: mm runs float16 like any MatMul under force_fp16, under a new name,
    # and the fetched name is an Identity of its output cast back to float32 at the device's boundary.
    assert codes(report.nodes["mm"]) == ["precision.forced"] and report.nodes["mm"].dtype_after == "float16"
    assert nodes["mm/NpuSimOnDevice"].op == "MatMul" and nodes["mm/NpuSimOnDevice"].attr["T"].type == HALF
    assert (nodes["mm"].op, nodes["mm"].attr["T"].type) == ("Identity", FLOAT)
    assert list(nodes["mm"].input) == ["mm/NpuSimCast_0_float32"]
    assert list(nodes["mm/NpuSimCast_0_float32"].input) == ["mm/NpuSimOnDevice"]
    assert nodes["y"].attr["T"].type == FLOAT
    item = ItemInfo(fetch=("y",), feed=("log",))
    result = run_pipeline(graph.as_graph_def(), from_dict({"precision_mode": "force_fp16", "sim_passes": "precision",
                                                           "sim_fp16_execution": "native"}), item)
    log = nodes_of(result.graph_def)["log"]
    assert log.attr["T"].type == FLOAT and codes(result.report.nodes["log"]) == ["precision.fed"]


def test_identity_n_list_type_attr_changes_per_element():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 2], name="x")
        low = tf.matmul(x, x, name="low")
        both = tf.identity_n([low, x], name="both")
        tf.identity(tf.nn.relu(both[0], name="relu") + tf.math.log(both[1], name="log"), name="y")
    graph_def, report = rewrite(graph, ["y"], precision_mode="allow_mix_precision", sim_fp16_execution="native")
    nodes = nodes_of(graph_def)
    assert list(nodes["both"].attr["T"].list.type) == [HALF, FLOAT]
    assert nodes["relu"].attr["T"].type == HALF and codes(report.nodes["relu"]) == ["precision.gray_follows"]
    assert report.nodes["relu"].reasons[0].get("node") == "both"
    value = run_graph_def(graph_def, "y:0", {"x:0": np.full((2, 2), 2.0, np.float32)})
    np.testing.assert_allclose(value, np.full((2, 2), 8.0 + np.log(2.0)), rtol=1e-3)


def test_add_n_repeated_type_attr_casts_every_input():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 2], name="x")
        total = tf.add_n([tf.matmul(x, x, name="a"), tf.matmul(x, x, name="b"), x], name="total")
        tf.identity(total, name="y")
    graph_def, report = rewrite(graph, ["y"], precision_mode="allow_mix_precision", sim_fp16_execution="native")
    nodes = nodes_of(graph_def)
    assert nodes["total"].attr["T"].type == HALF and nodes["total"].attr["N"].i == 3
    assert list(nodes["total"].input) == ["a", "b", "x/NpuSimCast_0_float16"]
    # y (an Identity of total, fetched) runs in total's float16 and leaves the device through a Cast
    assert nodes["y/NpuSimOnDevice"].input[0] == "total" and nodes["y"].input[0] == "y/NpuSimCast_0_float32"
    value = run_graph_def(graph_def, "y:0", {"x:0": np.ones((2, 2), np.float32)})
    np.testing.assert_allclose(value, np.full((2, 2), 5.0))


def float16_graph():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 2], name="x")
        x16 = tf.cast(x, tf.float16, name="x16")
        w16 = tf.constant(np.full((2, 2), 0.5, np.float16), name="w16")
        relu16 = tf.nn.relu(tf.matmul(x16, w16, name="mm16"), name="relu16")
        tf.identity(tf.cast(relu16, tf.float32, name="back"), name="y")
    return graph


@pytest.mark.parametrize("execution", ["emulate", "native"])
def test_float16_graph_is_left_alone_under_mix_precision(execution):
    graph_def, report = rewrite(float16_graph(), ["y"], precision_mode="allow_mix_precision",
                                sim_fp16_execution=execution)
    assert graph_def == _with_defaults(float16_graph())
    assert codes(report.nodes["mm16"]) == ["precision.mix_keeps"] and report.nodes["mm16"].reasons[0].get("dtype") == \
        "float16"
    assert codes(report.nodes["x16"]) == ["precision.existing_cast"]


def _with_defaults(graph):
    graph_def, _ = npu_sim_bridge.rewrite(graph.as_graph_def(), {"sim_passes": "none"}, fetches=["y"])
    return graph_def


def test_force_fp32_raises_float16_ops_and_keeps_existing_casts():
    graph_def, report = rewrite(float16_graph(), ["y"], precision_mode="force_fp32")
    nodes = nodes_of(graph_def)
    assert nodes["mm16"].attr["T"].type == FLOAT and nodes["relu16"].attr["T"].type == FLOAT
    assert report.passes[0].stats["nodes_raised"] == 2
    assert (nodes["x16"].attr["SrcT"].type, nodes["x16"].attr["DstT"].type) == (FLOAT, HALF)
    assert list(nodes["mm16"].input) == ["x16/NpuSimCast_0_float32", "w16/NpuSimCast_0_float32"]
    value = run_graph_def(graph_def, "y:0", {"x:0": np.full((2, 2), 3.0, np.float32)})
    np.testing.assert_allclose(value, np.full((2, 2), 3.0))


def test_integer_and_bool_tensors_never_change():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [4], name="x")
        ids = tf.compat.v1.placeholder(tf.int32, [4], name="ids")
        doubled = tf.add(ids, ids, name="int_add")
        mask = tf.greater(x, 0.5, name="mask")
        picked = tf.where(mask, x * tf.cast(doubled, tf.float32), x, name="picked")
        tf.identity(tf.reduce_sum(picked, name="sum"), name="y")
    graph_def, report = rewrite(graph, ["y"], precision_mode="force_fp16", sim_fp16_execution="native")
    nodes = nodes_of(graph_def)
    assert nodes["int_add"].attr["T"].type == types_pb2.DT_INT32
    assert nodes["mask"].attr["T"].type == HALF  # a float op with a bool output
    floats = {FLOAT, HALF, types_pb2.DT_BFLOAT16}
    for node in inserted(graph_def):
        assert node.attr["SrcT"].type in floats and node.attr["DstT"].type in floats
    value = run_graph_def(graph_def, "y:0", {"x:0": np.array([0.0, 1.0, 2.0, 0.25], np.float32),
                                            "ids:0": np.array([1, 2, 3, 4], np.int32)})
    assert value == pytest.approx(0.25 + 4.0 + 12.0)


def while_graph(v2):
    was_v2 = tf.compat.v1.control_flow_v2_enabled()
    (tf.compat.v1.enable_control_flow_v2 if v2 else tf.compat.v1.disable_control_flow_v2)()
    try:
        graph = tf.Graph()
        with graph.as_default():
            x = tf.compat.v1.placeholder(tf.float32, [2, 2], name="x")
            w = tf.compat.v1.get_variable("w", [2, 2], initializer=tf.compat.v1.constant_initializer(0.5))
            _, out = tf.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, tf.nn.relu(tf.matmul(a, w)) + 0.1),
                                   [0, x])
            branch = tf.cond(out[0, 0] > 0.0, lambda: out * 2.0, lambda: out)
            tf.identity(branch, name="y")
            tf.compat.v1.global_variables_initializer()
    finally:
        (tf.compat.v1.enable_control_flow_v2 if was_v2 else tf.compat.v1.disable_control_flow_v2)()
    return graph


FEED = {"x:0": np.full((2, 2), 1.3, np.float32)}


@pytest.mark.parametrize("execution", ["emulate", "native"])
def test_v1_while_frame_casts_stay_in_the_producer_frame(execution):
    graph = while_graph(v2=False)
    graph_def, report = rewrite(graph, ["y"], precision_mode="allow_mix_precision", sim_fp16_execution=execution)
    assert report.nodes["while/MatMul"].dtype_after == "float16"
    assert report.nodes["while/Merge_1"].dtype_after == "float16"
    nodes = nodes_of(graph_def)
    for cast in inserted(graph_def):  # each Cast reads the producer it is named after (or its first Cast)
        source = cast.input[0].split(":")[0]
        while INSERTED_ATTR in nodes[source].attr:
            source = nodes[source].input[0].split(":")[0]
        # the fetched y runs as y/NpuSimOnDevice; its boundary Cast keeps the fetched name's prefix
        assert cast.name.rsplit("/NpuSim", 1)[0] == source.removesuffix("/NpuSimOnDevice")
        assert nodes[source].op != "NextIteration"  # nothing sits between NextIteration and its Merge
    merge = nodes["while/Merge_1"]
    assert [nodes[i.split(":")[0]].op for i in merge.input] == ["Cast", "NextIteration"]
    reference = run_graph_def(graph.as_graph_def(), "y:0", FEED, init="init")
    value = run_graph_def(graph_def, "y:0", FEED, init="init")
    np.testing.assert_allclose(value, reference, rtol=5e-3)
    assert not np.array_equal(value, reference)


@pytest.mark.parametrize("execution", ["emulate", "native"])
def test_functional_while_and_if_bodies_are_rewritten(execution):
    graph = while_graph(v2=True)
    graph_def, report = rewrite(graph, ["y"], precision_mode="allow_mix_precision", sim_fp16_execution=execution)
    nodes = nodes_of(graph_def)
    loop = next(n for n in graph_def.node if n.op in ("While", "StatelessWhile"))
    assert loop.attr["T"] == nodes_of(graph.as_graph_def())[loop.name].attr["T"]  # signature kept
    assert codes(report.nodes[loop.name])[0] == "precision.function_call"
    body = next(f for f in graph_def.library.function if f.signature.name == loop.attr["body"].func.name)
    matmul = next(n for n in body.node_def if n.op == "MatMul")
    assert any("NpuSimCast" in n.name for n in body.node_def)
    assert report.nodes[f"{body.signature.name}/{matmul.name}"].dtype_after == "float16"
    assert matmul.attr["T"].type == (HALF if execution == "native" else FLOAT)
    assert report.passes[0].stats["function_bodies"] >= 3  # cond, body, and the If branches
    reference = run_graph_def(graph.as_graph_def(), "y:0", FEED, init="init")
    value = run_graph_def(graph_def, "y:0", FEED, init="init")
    np.testing.assert_allclose(value, reference, rtol=5e-3)
    again, _ = npu_sim_bridge.rewrite(graph_def, {"sim_passes": "precision", "precision_mode": "allow_mix_precision",
                                                  "sim_fp16_execution": execution}, fetches=["y"])
    assert again == graph_def


def grappler_optimize(graph, fetch, **params):
    """The graph as Grappler's meta optimizer leaves it, with only NpuOptimizer enabled, run once."""
    from tensorflow.python.grappler import tf_optimizer

    from npu_sim_bridge.testing.grappler import npu_only_config

    graph.add_to_collection("train_op", graph.get_operation_by_name(fetch))
    meta = tf.compat.v1.train.export_meta_graph(graph=graph)
    return tf_optimizer.OptimizeGraph(npu_only_config(params), meta)


def test_grappler_function_items_keep_the_body_their_caller_rewrote(monkeypatch):
    """Grappler hands each function over after the graph that calls it: the body is rewritten once,
    with its caller, and the shim hands the stamped function items back without calling Python."""
    import npu_sim_bridge.passes as passes
    from npu_sim_bridge.native import entry
    from npu_sim_bridge.passes.pipeline import SEEN_ATTR

    graph = while_graph(v2=True)
    handed, piped = [], []
    real_optimize, real_pipeline = entry.optimize, passes.run_pipeline
    monkeypatch.setattr(entry, "optimize", lambda item_id, *rest: handed.append(item_id) or real_optimize(item_id, *rest))
    monkeypatch.setattr(passes, "run_pipeline", lambda graph_def, options, item, **kw: piped.append(item.id) or
                        real_pipeline(graph_def, options, item, **kw))

    optimized = grappler_optimize(graph, "y", precision_mode="allow_mix_precision", sim_passes="precision")

    functions = [f.signature.name for f in optimized.library.function]
    assert handed == piped == ["graph_to_optimize"] and functions
    # A Session rounds with the kernel (sim_fp16_rounding auto), an offline rewrite with Casts unless asked.
    expected, _ = rewrite(graph, ["y"], precision_mode="allow_mix_precision", sim_fp16_rounding="kernel")
    for function in optimized.library.function:
        assert all(SEEN_ATTR in node.attr for node in function.node_def)
        casts = sorted(n.name for n in function.node_def if INSERTED_ATTR in n.attr)
        offline = next(f for f in expected.library.function if f.signature.name == function.signature.name)
        assert casts == sorted(n.name for n in offline.node_def if INSERTED_ATTR in n.attr)
    assert any(INSERTED_ATTR in n.attr for f in optimized.library.function for n in f.node_def)


def test_an_error_in_a_function_item_still_reaches_the_run():
    """A function's results take one input each, so their wait on the error passes through an Identity."""
    optimized = grappler_optimize(while_graph(v2=True), "y", precision_mode="fp17")
    gated = [node for f in optimized.library.function for node in f.node_def
             if node.name.startswith("npu_sim_error/") and node.op == "Identity"]
    assert gated and all(node.input[1] == "^npu_sim_error/assert" for node in gated)
    with pytest.raises(tf.errors.InvalidArgumentError, match="NpuOptimizer: option precision_mode value fp17"):
        run_graph_def(optimized, "y:0", FEED, init="init")


@pytest.mark.parametrize("v2", [False, True])
def test_while_loop_in_a_session(npu_config, v2):
    graph = while_graph(v2)
    config = npu_config(precision_mode="allow_mix_precision")
    config.graph_options.rewrite_options.remapping = rewriter_config_pb2.RewriterConfig.OFF
    with tf.compat.v1.Session(graph=graph, config=config) as sess:
        sess.run("init")
        value = sess.run("y:0", FEED)
    reference = run_graph_def(graph.as_graph_def(), "y:0", FEED, init="init")
    np.testing.assert_allclose(value, reference, rtol=5e-3)
    np.testing.assert_array_equal(value, value.astype(np.float16).astype(np.float32))
    matmuls = [d for r in npu_sim_bridge.recent_reports() for d in r.nodes.values()
               if d.op == "MatMul" and "while/" in d.name and d.list]  # the lowered frame of either version
    assert matmuls and all(d.dtype_after == "float16" for d in matmuls)


def test_emulation_shares_round_trips_and_skips_exact_ops():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 2], name="x")
        mm = tf.matmul(x, x, name="mm")
        relu = tf.nn.relu(mm, name="relu")                    # exact on float16 inputs: no round trip after it
        tf.identity(tf.sigmoid(relu, name="a") + tf.tanh(relu, name="b") + tf.tanh(mm, name="c"), name="y")
    graph_def, report = rewrite(graph, ["y"], precision_mode="allow_mix_precision")
    names = {node.name for node in inserted(graph_def)}
    # x is rounded once for both MatMul inputs; mm once for relu and c; relu (exact) not at all.
    assert {"x/NpuSimCast_0_float16", "x/NpuSimRound_0_float16", "mm/NpuSimCast_0_float16",
            "mm/NpuSimRound_0_float16"} <= names
    assert not any(name.startswith("relu/") for name in names)
    nodes = nodes_of(graph_def)
    assert list(nodes["mm"].input) == ["x/NpuSimRound_0_float16", "x/NpuSimRound_0_float16"]
    assert nodes["relu"].input[0] == nodes["c"].input[0] == "mm/NpuSimRound_0_float16"
    assert report.passes[0].stats["round_trips"] == len(names) // 2


def test_cube_fp16in_fp32out_rounds_the_inputs_only():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 2], name="x")
        tf.identity(tf.matmul(x, x, name="mm") + 1.0, name="y")
    for execution in ("emulate", "native"):
        graph_def, _ = rewrite(graph, ["y"], precision_mode="cube_fp16in_fp32out", sim_fp16_execution=execution)
        nodes = nodes_of(graph_def)
        assert nodes["mm"].attr["T"].type == FLOAT
        assert list(nodes["mm"].input) == ["x/NpuSimRound_0_float16"] * 2
        assert not any(name.startswith("mm/") for name in nodes)
        x = np.array([[1.0001, 2.0], [3.0, 4.0]], np.float32)
        value = run_graph_def(graph_def, "y:0", {"x:0": x})
        rounded = x.astype(np.float16).astype(np.float32)
        np.testing.assert_allclose(value, rounded @ rounded + 1.0, rtol=1e-6)


def test_a_type_mismatch_would_be_raised_not_run(monkeypatch):
    from npu_sim_bridge.passes.precision import casts

    original = casts.Rewriter._retype

    def forget_one(self):  # simulate a bug: the Casts are inserted for a retype that did not happen
        original(self)
        node = self.view.node("mm")
        node.attr["T"].type = FLOAT

    monkeypatch.setattr(casts.Rewriter, "_retype", forget_one)
    with pytest.raises(npu_sim_bridge.PassError, match=r"internal error of the precision pass: input 0 of mm "
                                                       r"\(MatMul\) would get float16 from x/NpuSimCast_0_float16 "
                                                       "but takes float32"):
        rewrite(mlp_graph(), ["y"], precision_mode="allow_mix_precision", sim_fp16_execution="native")


def test_grappler_second_iteration_leaves_the_graph_and_reports(npu_config):
    graph = mlp_graph()
    with tf.compat.v1.Session(graph=graph, config=npu_config(precision_mode="allow_mix_precision")) as sess:
        sess.run("init")
        sess.run("y:0", {"x:0": np.ones((4, 3), np.float32)})
    main = [r for r in npu_sim_bridge.recent_reports() if r.item_id == "tf_graph" and "mm" in r.nodes]
    # The second meta-optimizer iteration finds nothing new and hands the graph back without a pass.
    assert len(main) == 1 and not main[0].rerun
    assert main[0].nodes["mm"].dtype_after == "float16"

    # Where another optimizer did add nodes in between, the pipeline runs again over the rewritten
    # graph: it leaves the graph as it is and reports the decisions again, read from it (here inside
    # the GeOp body).
    item = ItemInfo(id="tf_graph", fetch=("y:0",), feed=("x",))
    options = from_dict({"precision_mode": "allow_mix_precision"})
    first = run_pipeline(mlp_graph().as_graph_def(), options, item)
    second = run_pipeline(first.graph_def, options, item)
    record = next(p for p in second.report.passes if p.name == "precision")
    assert second.report.rerun and record.stats.get("already_rewritten") and not record.changed
    assert second.graph_def == first.graph_def
    again = [d for d in second.report.nodes.values() if d.name.split("/")[-1] == "mm" and d.list]
    assert again and again[0].dtype_after == "float16" and codes(again[0]) == ["precision.white_list"]



def cond_graph():
    """A functional cond (control flow v2) whose true branch has a MatMul."""
    was_v2 = tf.compat.v1.control_flow_v2_enabled()
    tf.compat.v1.enable_control_flow_v2()
    try:
        graph = tf.Graph()
        with graph.as_default():
            x = tf.compat.v1.placeholder(tf.float32, [2, 2], name="x")
            w = tf.constant(np.full((2, 2), 0.5, np.float32))
            out = tf.cond(x[0, 0] > 0.0, lambda: tf.nn.relu(tf.matmul(x, w)) + 0.1, lambda: x * 2.0, name="cond")
            tf.identity(out, name="y")
    finally:
        (tf.compat.v1.enable_control_flow_v2 if was_v2 else tf.compat.v1.disable_control_flow_v2)()
    return graph.as_graph_def()


def with_twin_cond(graph_def):
    """The graph with a second cond after the first whose branches are copies of the first's, renamed."""
    twin = type(graph_def)()
    twin.CopyFrom(graph_def)
    cond = next(node for node in twin.node if node.op in ("If", "StatelessIf"))
    second = twin.node.add()
    second.CopyFrom(cond)
    second.name = "cond_twin"
    second.input[1] = cond.name  # reads the first cond's result instead of x
    for key in ("then_branch", "else_branch"):
        body = next(f for f in twin.library.function if f.signature.name == cond.attr[key].func.name)
        copy = twin.library.function.add()
        copy.CopyFrom(body)
        copy.signature.name = body.signature.name + "_twin"
        second.attr[key].func.name = copy.signature.name
    next(node for node in twin.node if node.name == "y").input[0] = "cond_twin"
    return twin


@pytest.mark.parametrize("execution", ["emulate", "native"])
def test_bodies_alike_are_rewritten_as_each_would_be_alone(execution):
    options = {"sim_passes": "precision", "precision_mode": "allow_mix_precision", "sim_fp16_execution": execution}
    base = cond_graph()
    alone, alone_report = npu_sim_bridge.rewrite(base, options, fetches=["y"])
    both, both_report = npu_sim_bridge.rewrite(with_twin_cond(base), options, fetches=["y"])
    rewritten = {f.signature.name: f for f in both.library.function}
    for body in alone.library.function:
        name = body.signature.name
        twin = rewritten[name + "_twin"]
        renamed = type(twin)()
        renamed.CopyFrom(twin)
        renamed.signature.name = name
        assert rewritten[name] == body and renamed == body  # each got what it gets on its own
        decisions = {key: d.to_dict() for key, d in alone_report.nodes.items() if key.startswith(name + "/")}
        assert decisions
        for key, decision in decisions.items():
            twin_key = key.replace(name, name + "_twin", 1)
            assert both_report.nodes[twin_key].to_dict() | {"name": key} == decision
    assert any("NpuSim" in node.name for body in alone.library.function for node in body.node_def)


@pytest.mark.parametrize("mode", ["allow_mix_precision", "force_fp16"])
def test_max_pool_grads_alike_by_their_ports_round_by_their_own_windows(mode):
    """A MaxPoolGrad over windows that do not overlap only routes float16 values (no round trip after
    it); one over overlapping windows sums them (rounded after). Nodes alike by their ports share one
    plan: each still goes by its own windows."""
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [1, 8, 8, 2], name="x")
        conv = tf.nn.conv2d(x, tf.ones([3, 3, 2, 2]), 1, "SAME", name="conv")
        apart = tf.nn.max_pool2d(conv, 2, 2, "VALID", name="apart")
        overlapping = tf.nn.max_pool2d(conv, 3, 1, "SAME", name="overlapping")
        loss = tf.reduce_sum(apart) + tf.reduce_sum(overlapping)
        tf.identity(tf.gradients(loss, conv)[0], name="y")
    graph_def, _ = rewrite(graph, ["y"], precision_mode=mode)
    grads = {node.name: node for node in graph_def.node if node.op == "MaxPoolGrad"}
    assert len(grads) == 2 and all(node.attr["T"].type == FLOAT for node in grads.values())
    rounded = {name.split("/NpuSimRound")[0] for name in nodes_of(graph_def) if "/NpuSimRound" in name}
    by_window = {tuple(node.attr["ksize"].list.i) == tuple(node.attr["strides"].list.i): name
                 for name, node in grads.items()}
    assert by_window[True] not in rounded and by_window[False] in rounded


def test_nodes_alike_by_their_ports_share_a_plan_only_when_named_alike():
    """Host nodes keep float32 by their name; a node alike to them by its ports that is not on the host
    still takes its list's dtype, whichever comes first in the graph. Being fetched is no reason to keep
    float32: a fetch reads the op's output, it does not change how the op runs."""
    from npu_sim_bridge.runtime.scopes import without_npu_compile_scope

    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 2], name="x")
        fetched = tf.matmul(x, x, name="fetched")
        with without_npu_compile_scope():
            host_a = tf.matmul(x, x, name="host_a")
            host_b = tf.matmul(x, x, name="host_b")
        plain = tf.matmul(x, x, name="plain")
        tf.identity(fetched + host_a + host_b + plain, name="y")
    result = npu_sim_bridge.rewrite(graph.as_graph_def(), {"precision_mode": "allow_mix_precision",
                                                           "mix_compile_mode": True}, fetches=["y", "fetched"])
    nodes = result.report.nodes
    assert (nodes["fetched"].dtype_after, codes(nodes["fetched"])) == ("float16", ["precision.white_list"])
    for name in ("host_a", "host_b"):
        assert (nodes[name].placement, nodes[name].dtype_after) == ("host", "float32")
        assert nodes[name].reason.endswith("host: keeps float32")
    assert (nodes["plain"].dtype_after, codes(nodes["plain"])) == ("float16", ["precision.white_list"])


def test_a_function_body_reads_its_results_in_the_signature_order():
    """The Casts on a body's results are added in the order its results are read: the signature's, not
    the order of the `ret` map, which differs between processes (the rewritten library would too)."""
    from tensorflow.core.framework import function_pb2

    from npu_sim_bridge.passes.precision.functions import FunctionBody

    fdef = function_pb2.FunctionDef()
    fdef.signature.name = "body"
    fdef.signature.input_arg.add(name="x", type=FLOAT)
    keys = [f"out{index}" for index in range(8)]
    for key in keys:
        fdef.signature.output_arg.add(name=key, type=FLOAT)
        node = fdef.node_def.add(name=f"neg{key}", op="Neg", input=["x"])
        node.attr["T"].type = FLOAT
    for key in reversed(keys):
        fdef.ret[key] = f"neg{key}:y:0"
    body = FunctionBody(fdef, {})
    assert list(body.results) == keys
    assert [ref.node for ref in body.results.values()] == [f"neg{key}" for key in keys]
