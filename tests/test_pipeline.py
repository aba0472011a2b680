"""The pass pipeline: pass failures are named, invalid results are caught, runs are idempotent."""

import gc
import tracemalloc

import pytest
import tensorflow as tf
from tensorflow.core.framework import graph_pb2, node_def_pb2
from tensorflow.core.protobuf import rewriter_config_pb2

from npu_sim_bridge.config import from_dict
from npu_sim_bridge.errors import ConfigError, GraphValidationError, PassError
from npu_sim_bridge.native import entry
from npu_sim_bridge.passes import GraphPass, PassResult, run_pipeline
from npu_sim_bridge.passes import ItemInfo, pipeline
from npu_sim_bridge.testing.synthetic import scoped_graph


def _graph_def():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2], name="x")
        tf.identity(tf.nn.relu(x) * 2.0, name="y")
    return graph.as_graph_def()


class _Boom(GraphPass):
    name = "boom"

    def run(self, ctx):
        raise ValueError("kaboom")


class _Dangle(GraphPass):
    name = "dangle"

    def run(self, ctx):
        ctx.view.add_node(node_def_pb2.NodeDef(name="bad", op="Relu", input=["nowhere"]))
        return PassResult(changed=True, stats={"added": 1})


class _Count(GraphPass):
    name = "count"

    def run(self, ctx):
        return PassResult(changed=False, stats={"nodes": len(ctx.view)})


@pytest.fixture
def passes(monkeypatch):
    def install(*classes):
        monkeypatch.setattr(pipeline, "_pass_classes", lambda: list(classes))
    return install


def test_failing_pass_is_named(passes):
    passes(_Count, _Boom)
    with pytest.raises(PassError, match="pass 'boom' failed: internal error ValueError: kaboom"):
        run_pipeline(_graph_def(), from_dict({}))


def test_pass_leaving_invalid_graph_is_caught(passes):
    passes(_Dangle)
    with pytest.raises(PassError, match="pass 'dangle' failed: left an invalid graph.*nowhere"):
        run_pipeline(_graph_def(), from_dict({}))


def test_invalid_input_graph_is_rejected_before_any_pass(passes):
    passes(_Count)
    graph_def = _graph_def()
    graph_def.node.add(name="orphan", op="Relu", input=["missing"])
    with pytest.raises(GraphValidationError, match="orphan <- missing"):
        run_pipeline(graph_def, from_dict({}))


def test_pass_records_reach_the_report(passes):
    passes(_Count)
    result = run_pipeline(_graph_def(), from_dict({}))
    record = result.report.passes[0]
    assert record.name == "count" and record.changed is False
    assert record.stats == {"nodes": len(_graph_def().node)}
    assert result.report.to_dict()["summary"]["passes"][0]["name"] == "count"


class _Made:
    pass


class _Unread:
    pass


class _Publish(GraphPass):
    name = "publish"

    def run(self, ctx):
        ctx.publish(_Made())
        ctx.publish(_Unread())
        return PassResult(changed=False)


class _Peek(GraphPass):
    name = "peek"
    seen: list = []

    def run(self, ctx):
        _Peek.seen.append((self.name, ctx.result(_Made) is not None, ctx.result(_Unread) is not None))
        return PassResult(changed=False)


class _Read(_Peek):
    name = "read"
    reads = (_Made,)


def test_a_result_lives_while_a_later_pass_reads_it(passes):
    passes(_Publish, _Read, _Peek, _Read, _Peek)
    _Peek.seen = []
    run_pipeline(_graph_def(), from_dict({}))
    # The readers get what they declare; nothing declares _Unread, so it goes at once, and _Made goes
    # after its last reader (a pass with no claim on it sees it only while a reader is still to run).
    assert _Peek.seen == [("read", True, False), ("peek", True, False), ("read", True, False),
                          ("peek", False, False)]


class _Ask(GraphPass):
    name = "ask"
    asked: list = []

    def run(self, ctx):
        _Ask.asked.append((ctx.read_later(_Made), ctx.read_later(_Unread)))
        return PassResult(changed=False)


def test_a_pass_knows_whether_a_later_pass_reads_a_result(passes):
    passes(_Ask, _Read, _Ask)
    _Ask.asked = []
    run_pipeline(_graph_def(), from_dict({}))
    # Before the reader, _Made is wanted (worth publishing); after it, nothing reads anything.
    assert _Ask.asked == [(True, False), (False, False)]


def test_sim_passes_selects_and_rejects_names(passes):
    passes(_Count, _Boom)
    result = run_pipeline(_graph_def(), from_dict({"sim_passes": "count"}))
    assert [p.name for p in result.report.passes] == ["count"]
    assert run_pipeline(_graph_def(), from_dict({"sim_passes": "none"})).report.passes == []
    with pytest.raises(ConfigError, match="sim_passes names unknown passes 'nope'.*boom, count"):
        run_pipeline(_graph_def(), from_dict({"sim_passes": "nope"}))


def test_input_graph_is_not_modified():
    graph_def = _graph_def()
    before = graph_def.SerializeToString()
    run_pipeline(graph_def, from_dict({}))
    assert graph_def.SerializeToString() == before


def _config_bytes(**params):
    config = rewriter_config_pb2.RewriterConfig.CustomGraphOptimizer(name="NpuOptimizer")
    for key, value in params.items():
        config.parameter_map[key].s = value.encode()
    return config.SerializeToString()


def test_entry_is_idempotent_across_grappler_iterations():
    first = entry.optimize("tf_graph", _graph_def().SerializeToString(), ["y:0"], ["x"],
                           ["x", "y"], _config_bytes())
    second = entry.optimize("tf_graph", first, ["y:0"], ["x"], ["x", "y"], _config_bytes())
    assert graph_pb2.GraphDef.FromString(first) == graph_pb2.GraphDef.FromString(second)


def test_entry_turns_errors_into_a_failing_graph_once():
    failing = entry.optimize("tf_graph", _graph_def().SerializeToString(), ["y:0"], [], ["y"],
                             _config_bytes(precision_mode="fp17"))
    again = entry.optimize("tf_graph", failing, ["y:0"], [], ["y"],
                           _config_bytes(precision_mode="fp17"))
    assert graph_pb2.GraphDef.FromString(failing) == graph_pb2.GraphDef.FromString(again)
    graph = tf.Graph()
    with graph.as_default():
        tf.graph_util.import_graph_def(graph_pb2.GraphDef.FromString(failing), name="")
    with tf.compat.v1.Session(graph=graph) as sess:
        with pytest.raises(tf.errors.InvalidArgumentError, match="NpuOptimizer: option precision_mode"):
            sess.run("y:0", {"x:0": [1.0, 2.0]})


class _EditThenBoom(GraphPass):
    name = "edit_then_boom"

    def run(self, ctx):
        ctx.view.node("y").op = "Neg"
        raise ValueError("kaboom after an edit")


def test_entry_builds_the_failing_graph_from_the_graph_as_it_came(passes):
    """The pipeline edits the graph Grappler handed over in place: a pass failing half-way must not leave
    its edits in the graph that carries the error (it holds the user's graph plus the failing Assert)."""
    passes(_EditThenBoom)
    original = _graph_def()
    failing = graph_pb2.GraphDef.FromString(entry.optimize(
        "tf_graph", original.SerializeToString(), ["y:0"], [], ["y"], _config_bytes()))
    assert any(node.name.startswith(entry.ERROR_SCOPE + "/") for node in failing.node)
    kept = {node.name: node.op for node in failing.node if not node.name.startswith(entry.ERROR_SCOPE + "/")}
    assert kept == {node.name: node.op for node in original.node}


def test_a_report_shows_the_graph_as_it_came_when_grappler_hands_it_over(tmp_path):
    """With the bytes Grappler gave, the pipeline edits the parsed graph in place; the report's
    'before' picture must still be the input graph."""
    original = _graph_def()
    entry.optimize("tf_graph", original.SerializeToString(), ["y:0"], ["x"], ["x", "y"],
                   _config_bytes(precision_mode="allow_mix_precision", sim_report_dir=str(tmp_path)))
    before = next(tmp_path.glob("*.before.pbtxt"))
    from google.protobuf import text_format
    assert text_format.Parse(before.read_text(), graph_pb2.GraphDef()) == original


def test_pipeline_is_idempotent_on_a_model_with_control_flow_and_functions():
    """What lets a later Grappler iteration hand the graph back untouched: running the passes again
    over their own output (BN behind a training flag, a cond dropout, GeOp bodies) changes nothing."""
    from npu_sim_bridge.passes import ItemInfo
    from npu_sim_bridge.testing import zoo

    model = zoo.tf1_batchnorm_cnn()
    options = from_dict({"precision_mode": "allow_mix_precision"})
    item = ItemInfo(id="tf_graph", fetch=tuple(model.fetch_names()))
    first = run_pipeline(model.graph_def(), options, item).graph_def
    assert first.library.function, "the GeOp bodies are library functions"
    assert pipeline.nothing_new(first, item)
    again = run_pipeline(first, options, item)
    assert again.report.rerun
    assert again.graph_def == first


def test_later_iteration_rewrites_what_another_optimizer_added(monkeypatch):
    """Grappler's second iteration: with nothing new the graph comes back as it went in and no pass
    runs; a node another optimizer added in between is rewritten like the rest."""
    import npu_sim_bridge.passes as passes_package

    ran = []
    original = passes_package.run_pipeline
    monkeypatch.setattr(passes_package, "run_pipeline", lambda *a, **k: ran.append(1) or original(*a, **k))
    args = (["y:0"], ["x"], ["x", "y"], _config_bytes(precision_mode="allow_mix_precision"))
    first = entry.optimize("tf_graph", _graph_def().SerializeToString(), *args)
    assert len(ran) == 1
    assert entry.optimize("tf_graph", first, *args) == first
    assert len(ran) == 1, "a later iteration with nothing new runs no pass"

    changed = graph_pb2.GraphDef.FromString(first)
    added = changed.node.add(name="y_added", op="Relu", input=["y"])
    added.attr["T"].type = tf.float32.as_datatype_enum
    assert not pipeline.nothing_new(changed, pipeline.ItemInfo(id="tf_graph"))
    out = graph_pb2.GraphDef.FromString(entry.optimize("tf_graph", changed.SerializeToString(), *args))
    assert len(ran) == 2
    node = next(n for n in out.node if n.name == "y_added" or n.name.endswith("/y_added"))
    assert pipeline.SEEN_ATTR in node.attr


def test_a_later_run_changes_nothing_after_a_fetched_op_was_dropped():
    """force_fp16 drops a fetched Mul to float16 (the fetched name then leaves the device through a Cast
    back to float32); a second run over the output, where that Mul sits in a GeOp body under another
    name, changes nothing."""
    from npu_sim_bridge.passes import ItemInfo

    graph = tf.Graph()
    with graph.as_default():
        a = tf.compat.v1.placeholder(tf.float32, [], name="a")
        tf.multiply(a, 3.0, name="b")
    options = from_dict({"precision_mode": "force_fp16"})
    item = ItemInfo(id="tf_graph", fetch=("b:0",), feed=("a",))
    first = run_pipeline(graph.as_graph_def(), options, item)
    assert first.report.nodes["b"].dtype_after == "float16"
    again = run_pipeline(first.graph_def, options, item)
    assert again.graph_def == first.graph_def


def test_a_geop_body_changed_by_other_optimizers_is_stamped_not_decided_again():
    """Grappler's default optimizers run on a GeOp body before NpuOptimizer sees it as a function
    item; the body's dtypes and placement are its caller's, so what they added is only stamped."""
    from npu_sim_bridge.passes import ItemInfo

    body = _graph_def()
    body.node[0].attr[pipeline.SEEN_ATTR].b = True  # decided with the caller; the rest is "new"
    item = ItemInfo(id="GeOp3_0", is_function=True)
    result = run_pipeline(body, from_dict({"precision_mode": "force_fp16"}), item)
    assert not result.report.passes and result.report.rerun
    assert "4 node(s) other Grappler optimizers added since were stamped" in result.report.skipped
    assert all(pipeline.SEEN_ATTR in node.attr for node in result.graph_def.node)
    for node in result.graph_def.node:
        del node.attr[pipeline.SEEN_ATTR]
    plain = _graph_def()
    assert result.graph_def == plain  # nothing else changed: no Casts, no float16


def _grappler_calls(monkeypatch, optimizer_name):
    """The item ids the shim hands to Python while Grappler optimizes a graph with a functional cond
    and a GeOp (only NpuOptimizer enabled, one iteration, every function item considered)."""
    from tensorflow.python.grappler import tf_optimizer

    from npu_sim_bridge.testing import models
    from npu_sim_bridge.testing.grappler import npu_only_config

    graph = tf.Graph()
    with models._control_flow("v2"), graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [4], name="x")
        flag = tf.compat.v1.placeholder(tf.bool, [], name="flag")
        y = tf.cond(flag, lambda: tf.nn.relu(x) * 2.0, lambda: tf.tanh(x) + 1.0)
        loss = tf.reduce_sum(y, name="loss")
        tf.compat.v1.add_to_collection("train_op", loss)
        meta = tf.compat.v1.train.export_meta_graph(graph=graph)
    config = npu_only_config({"precision_mode": "allow_mix_precision"}, name=optimizer_name)
    calls = []
    original = entry.optimize
    monkeypatch.setattr(entry, "optimize", lambda item_id, *rest: calls.append(item_id) or original(item_id, *rest))
    optimized = tf_optimizer.OptimizeGraph(config, meta)
    return calls, optimized


def test_function_items_rewritten_with_their_caller_do_not_go_to_python(monkeypatch):
    """Grappler hands every library function to NpuOptimizer after the graph that calls it; the
    shim hands back those its caller's rewrite stamped without the trip to Python."""
    calls, optimized = _grappler_calls(monkeypatch, "NpuOptimizer")
    assert calls == ["graph_to_optimize"]
    functions = {f.signature.name for f in optimized.library.function}
    assert any(name.startswith("GeOp") for name in functions)
    assert len(functions) >= 3, "the GeOp body and both branches were function items"
    for function in optimized.library.function:
        assert all(pipeline.SEEN_ATTR in node.attr for node in function.node_def)


def test_a_misspelled_optimizer_name_still_reaches_python_for_every_item(monkeypatch):
    calls, optimized = _grappler_calls(monkeypatch, "NPUOptimizer")
    assert calls[0] == "graph_to_optimize" and len(calls) > 1
    assert any(node.name.startswith(entry.ERROR_SCOPE + "/") for node in optimized.node)


def test_the_shim_reads_the_attribute_names_the_python_side_writes():
    import os
    import re

    source = open(os.path.join(os.path.dirname(entry.__file__), "npu_optimizer.cc")).read()
    constants = dict(re.findall(r'constexpr char (k\w+)\[\] = "([^"]*)"', source))
    assert constants["kSeenAttr"] == pipeline.SEEN_ATTR
    assert constants["kOptionsAttr"] == entry.OPTIONS_ATTR
    assert constants["kRegisteredName"] == entry.NPU_OPTIMIZER
    assert constants["kErrorScope"] == entry.ERROR_SCOPE + "/"


def _functions_by_name(graph_def) -> dict:
    return {function.signature.name: function.SerializeToString(deterministic=True)
            for function in graph_def.library.function}


def test_the_passes_that_say_they_leave_the_library_alone_do():
    """PassContext.alike_bodies trusts the library as it came until a pass with edits_library runs."""
    from npu_sim_bridge.passes import ItemInfo
    from npu_sim_bridge.passes.pipeline import available_passes
    from npu_sim_bridge.testing import zoo

    trusted = [graph_pass.name for graph_pass in available_passes() if not graph_pass.edits_library]
    assert {"fusion", "placement", "customize_dtypes"} <= set(trusted)
    model = zoo.keras_cnn(control_flow="v2")
    graph_def = model.graph_def()
    assert graph_def.library.function
    libraries = []
    real = pipeline._run_one

    def after_each(graph_pass, ctx):
        real(graph_pass, ctx)
        libraries.append((graph_pass.name, ctx.library_edited, _functions_by_name(ctx.view.graph_def)))

    options = from_dict({"precision_mode": "allow_mix_precision", "sim_passes": ",".join(trusted + ["precision"]),
                         "customize_dtypes": ""})
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pipeline, "_run_one", after_each)
        run_pipeline(graph_def, options, ItemInfo(id="tf_graph", fetch=tuple(model.fetch_names())))
    as_it_came = _functions_by_name(graph_def)
    assert [name for name, *_ in libraries] == [name for name in trusted if name != "customize_dtypes"] + ["precision"]
    for name, edited, library in libraries[:-1]:
        assert not edited and library == as_it_came, name
    assert libraries[-1][1], "after precision the library counts as edited"


def test_a_rewrite_leaves_nothing_of_its_graph_behind_in_the_process():
    """After a rewrite, the process holds none of the graph's names and input strings (a Session's
    process keeps running for the whole training; the parsed inputs of a 30k-node graph were 11 MB)."""
    options = from_dict({"precision_mode": "allow_mix_precision", "mix_compile_mode": True})
    item = ItemInfo(fetch=("out",))
    run_pipeline(scoped_graph(200), options, item)  # imports and the op library, once
    graph_def = scoped_graph(3000)
    tracemalloc.start()
    try:
        run_pipeline(graph_def, options, item)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert held < 0.5 * graph_def.ByteSize(), f"{held} bytes held after the rewrite"
