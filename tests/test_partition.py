"""Mixed compute: which nodes stay on host, how device segments become GeOps, and that results do not change."""

import contextlib
import io
import re

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2
from tensorflow.core.protobuf.rewriter_config_pb2 import RewriterConfig

import npu_sim_bridge
from npu_sim_bridge.graph.validate import validate_graph
from npu_sim_bridge.graph.attr_names import GEOP_ATTR

v1 = tf.compat.v1
PARTITION = "placement,partition"
GEOP_NAME = re.compile(r"GeOp\d+_\d+$")


# ------------------------------------------------------------------------------------------ helpers
def _config(npu_config, mix=True, passes=PARTITION, **params):
    """The seed's Session config: NpuOptimizer, remapping and memory optimization off."""
    config = npu_config(mix_compile_mode=mix, sim_passes=passes, **params)
    config.graph_options.rewrite_options.remapping = RewriterConfig.OFF
    config.graph_options.rewrite_options.memory_optimization = RewriterConfig.OFF
    return config


def _host_scope(graph):
    return graph._attr_scope({"_without_npu_compile": attr_value_pb2.AttrValue(b=True)})


@contextlib.contextmanager
def _control_flow_v1():
    was_v2 = v1.control_flow_v2_enabled()
    v1.disable_control_flow_v2()
    try:
        yield
    finally:
        if was_v2:
            v1.enable_control_flow_v2()


def _py_func(fn, x):
    out = v1.numpy_function(fn, [x], tf.float32)
    out.set_shape(x.shape)
    return out


def _plus_one(value):
    return (value + 1.0).astype(np.float32)


def _run(graph, fetches, feed=None, config=None, with_metadata=False):
    with v1.Session(graph=graph, config=config) as sess:
        metadata = v1.RunMetadata()
        options = v1.RunOptions(output_partition_graphs=True)
        values = sess.run(fetches, feed, options=options, run_metadata=metadata)
    if with_metadata:
        return values, [node for graph_def in metadata.partition_graphs for node in graph_def.node]
    return values


def _main_report(name):
    """The first report of a main graph that decided node `name` (function bodies are named GeOp...)."""
    for report in npu_sim_bridge.recent_reports():
        item = report.item_id
        decision = report.nodes.get(name)
        if decision is not None and decision.placement is not None and not item.startswith("GeOp"):
            return report
    raise AssertionError(f"no report of a main graph decided node {name}")


def _rewrite(graph, fetches, **options):
    options.setdefault("mix_compile_mode", True)
    options.setdefault("sim_passes", PARTITION)
    return npu_sim_bridge.rewrite(graph, options, fetches=fetches)


def _geop_nodes(graph_def):
    return [node for node in graph_def.node if GEOP_ATTR in node.attr]


def _body(graph_def, geop):
    call = next(node for node in graph_def.node if node.name == geop)
    name = call.attr["f"].func.name
    return next(func for func in graph_def.library.function if func.signature.name == name)


def _segment_of(graph_def):
    """node name -> GeOp that holds it."""
    found = {}
    for call in _geop_nodes(graph_def):
        for node in _body(graph_def, call.name).node_def:
            found[node.name] = call.name
    return found


def _py_func_model():
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [4], name="x")
        a = tf.tanh(x * 2.0, name="a") + 1.0
        b = _py_func(_plus_one, a)
        y = tf.identity(tf.sin(b, name="sin") * a, name="y")
    return graph, x, y


FEED = np.array([0.1, -0.5, 1.5, 3.0], np.float32)


# ------------------------------------------------------------------------- the seed 002 program
SEED_002 = """
from npu_sim_bridge.npu_init import *

X = tf.random_normal([2,])
Y = tf.random_normal([2,])

with npu_scope.without_npu_compile_scope():
    pred = tf.add(tf.multiply(X, 1.), 0.)

cost = tf.reduce_sum(tf.abs(pred-Y))

config = tf.ConfigProto(allow_soft_placement=True)
custom_op = config.graph_options.rewrite_options.custom_optimizers.add()
custom_op.name = "NpuOptimizer"
custom_op.parameter_map["mix_compile_mode"].b = True
config.graph_options.rewrite_options.remapping = RewriterConfig.OFF
config.graph_options.rewrite_options.memory_optimization = RewriterConfig.OFF

with tf.Session(config=config) as sess:
    print(sess.run(cost))
"""


def test_seed_002_program_runs_with_its_scoped_ops_on_host():
    printed = io.StringIO()
    with tf.Graph().as_default(), contextlib.redirect_stdout(printed):
        exec(compile(SEED_002, "seed_002", "exec"), {})
    assert np.isfinite(float(printed.getvalue().strip()))
    report = _main_report("Sum")
    placement = {d.name: d.placement for d in report.nodes.values() if d.placement}
    host = {name for name, where in placement.items() if where == "host"}
    assert host == {"Mul", "Mul/y", "Add", "Add/y"}, report.to_text()
    for name in ("Mul", "Add"):
        assert report.nodes[name].reason.startswith("host: in without_npu_compile_scope")
    device = [d for d in report.nodes.values() if d.placement == "device"]
    assert {"sub", "Abs", "Sum"} <= {d.name for d in device}
    assert all(GEOP_NAME.match(d.geop) for d in device)
    assert len(report.summary["geops"]) == 2  # random X before the host ops, the rest after them


def test_the_reports_counts_of_geops_are_the_rewritten_graphs():
    """The pipeline counts the GeOps from the call ops in its op column; the count read from every NodeDef agrees."""
    from npu_sim_bridge.report.views import drawn_counts

    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [3], name="x")
        first = tf.sin(x, name="first")
        with _host_scope(graph):
            host = tf.add(first, 1.0, name="host")
        tf.cos(host, name="last")
    rewritten, report = _rewrite(graph, ["last"])
    counts = report.counts
    assert (counts["geops"], counts["inside_geops"], counts["outside_geops"]) == drawn_counts(rewritten)
    assert counts["geops"] == len(_geop_nodes(rewritten)) == 2
    assert counts["inside_geops"] >= 2 and counts["outside_geops"] >= 2  # sin, cos inside; x, host outside


# --------------------------------------------------------------------------------- candidates
def test_host_reasons_name_the_rule(npu_config):
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [3], name="x")
        kept = tf.sin(x, name="kept")
        with _host_scope(graph):
            scoped = tf.cos(kept, name="scoped")
        py = _py_func(_plus_one, scoped)
        gamma = tf.math.polygamma(tf.ones([3]), py, name="gamma")
        text = tf.strings.as_string(gamma, name="text")
        summary = v1.summary.scalar("total", tf.reduce_sum(gamma, name="total"))
        tf.identity(tf.exp(gamma) + 1.0, name="out")
    _, report = _rewrite(graph, ["out", text.op.name, summary.op.name])
    reasons = {name: d.reason for name, d in report.nodes.items()}
    assert reasons["x"].startswith("host: graph input (Placeholder)")
    assert reasons["scoped"] == "host: in without_npu_compile_scope"
    assert reasons[py.op.name] == "host: PyFunc runs on the host"
    assert reasons["gamma"] == "host: op type Polygamma is not in the device op list"
    assert reasons["text"] == "host: string op AsString (string tensors stay on the host)"
    assert reasons[summary.op.name].startswith("host: summary op ScalarSummary")
    assert report.nodes["kept"].placement == "device" and report.nodes["out"].geop


def test_remapper_fused_op_runs_where_its_parts_run_else_says_to_turn_remapping_off():
    def rewritten(fused_ops):
        graph = tf.Graph()
        with graph.as_default():
            x = v1.placeholder(tf.float32, [2, 2], name="x")
            tf.identity(tf.sin(x), name="y")
        graph_def = graph.as_graph_def()
        graph_def.node[1].op = "_FusedMatMul"  # as Grappler's remapper leaves it when remapping is on
        graph_def.node[1].attr["T"].type = tf.float32.as_datatype_enum
        graph_def.node[1].attr["num_args"].i = 0
        graph_def.node[1].attr["fused_ops"].list.s.extend(fused_ops)
        return _rewrite(graph_def, ["y"]).report.nodes[graph_def.node[1].name]

    assert rewritten([b"BiasAdd", b"Relu"]).placement == "device"  # the NPU receives MatMul, BiasAdd, Relu
    decision = rewritten([b"BiasAdd", b"Polygamma"])
    assert decision.placement == "host" and "remapping = RewriterConfig.OFF" in decision.reason
    assert decision.host_reason().code == "host.not_device_op"


# ------------------------------------------------------------------------------ segmentation
def test_py_func_in_the_middle_splits_the_model_into_two_geops(npu_config):
    graph, x, y = _py_func_model()
    expected = _run(graph, y, {x: FEED})
    value, executed = _run(graph, y, {x: FEED}, _config(npu_config), with_metadata=True)
    np.testing.assert_array_equal(value, expected)
    calls = sorted(node.name for node in executed if GEOP_ATTR in node.attr)
    assert len(calls) == 2 and all(GEOP_NAME.match(name) for name in calls)
    assert any(node.op == "PyFunc" for node in executed)
    stub = next(node for node in executed if node.name == "y")
    assert stub.op == "Identity"  # the fetched node keeps its name outside the GeOp
    report = _main_report("sin")
    assert report.nodes["a"].geop != report.nodes["sin"].geop
    assert report.nodes["a"].geop in calls and report.nodes["sin"].geop in calls
    assert report.nodes["y"].geop == report.nodes["sin"].geop


def test_offline_rewrite_outlines_valid_functions_and_is_idempotent():
    graph, _, _ = _py_func_model()
    graph_def, report = _rewrite(graph, ["y"])
    validate_graph(graph_def)
    assert len(_geop_nodes(graph_def)) == 2
    for call in _geop_nodes(graph_def):
        func = _body(graph_def, call.name)
        assert func.attr["_noinline"].b and func.attr["_nospecialize"].b
        assert call.op in ("PartitionedCall", "StatefulPartitionedCall")
        assert len(call.attr["Tin"].list.type) == len(func.signature.input_arg)
    again, second = _rewrite(graph_def, ["y"])
    assert again == graph_def
    assert second.passes[-1].changed is False
    # The same graph rewritten afresh gets the same structure (only the graph number differs).
    fresh, _ = _rewrite(graph, ["y"])
    numbered = re.compile(r"GeOp\d+_")
    assert numbered.sub("GeOp#_", str(fresh)) == numbered.sub("GeOp#_", str(graph_def))


def test_ops_in_without_npu_compile_scope_stay_on_host(npu_config):
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [4], name="x")
        # Binary ops: Grappler would fuse a chain of unary ops into one _UnaryOpsComposition.
        with _host_scope(graph):
            h = tf.add(tf.multiply(x, 3.0, name="m"), 0.5, name="h")
        y = tf.identity(tf.matmul(tf.reshape(h, [2, 2]), tf.reshape(x, [2, 2])), name="y")
    expected = _run(graph, y, {x: FEED})
    value = _run(graph, y, {x: FEED}, _config(npu_config))
    np.testing.assert_array_equal(value, expected)
    report = _main_report("h")
    for name in ("m", "h"):
        assert report.nodes[name].placement == "host"
        assert report.nodes[name].reason == "host: in without_npu_compile_scope"
        assert report.nodes[name].geop is None


def test_device_host_device_with_a_direct_edge_makes_no_cycle(npu_config):
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [4], name="x")
        a = tf.sin(x, name="a")
        h = _py_func(_plus_one, a)
        b = tf.add(h, a, name="b")                     # reads the host op and `a` directly
        h2 = _py_func(_plus_one, b)
        with tf.control_dependencies([a.op]):
            c = tf.identity(tf.cos(h2) + b + a, name="c")
    graph_def, report = _rewrite(graph, ["c"])
    validate_graph(graph_def)  # raises on a cycle
    segment = _segment_of(graph_def)
    assert len({segment["a"], segment["b"], segment["c"]}) == 3
    np.testing.assert_array_equal(_run(graph, c, {x: FEED}, _config(npu_config)), _run(graph, c, {x: FEED}))


def test_v1_while_loop_with_a_host_op_stays_whole_on_host(npu_config):
    graph = tf.Graph()
    with graph.as_default(), _control_flow_v1():
        x = v1.placeholder(tf.float32, [4], name="x")

        def body(i, s):
            return i + 1, tf.tanh(_py_func(_plus_one, s))

        _, looped = tf.while_loop(lambda i, s: i < 3, body, [tf.constant(0), tf.sin(x)], name="loop")
        y = tf.identity(looped * 2.0, name="y")
    np.testing.assert_array_equal(_run(graph, y, {x: FEED}, _config(npu_config)), _run(graph, y, {x: FEED}))
    report = _main_report("y")
    frame_nodes = [d for name, d in report.nodes.items() if name.startswith("loop/") and d.op != "Const"
                   or d.op in ("Enter", "Exit", "Merge", "NextIteration", "LoopCond")]
    assert frame_nodes and all(d.placement == "host" and d.geop is None for d in frame_nodes)
    merge = next(d for d in frame_nodes if d.op == "Merge")
    assert re.match(r"host: v1 while frame loop/while_context holds host op loop/PyFunc", merge.reason)
    assert report.nodes["y"].geop  # the code after the loop still sinks


def test_host_op_in_an_inner_v1_loop_keeps_the_outer_frame_on_host():
    graph = tf.Graph()
    with graph.as_default(), _control_flow_v1():
        x = v1.placeholder(tf.float32, [4], name="x")

        def outer_body(i, s):
            _, inner = tf.while_loop(lambda j, t: j < 2, lambda j, t: (j + 1, _py_func(_plus_one, t)),
                                     [tf.constant(0), tf.tanh(s)], name="inner")
            return i + 1, inner * 0.5

        _, looped = tf.while_loop(lambda i, s: i < 2, outer_body, [tf.constant(0), x], name="outer")
        tf.identity(tf.exp(looped), name="y")
    _, report = _rewrite(graph, ["y"])
    outer_only = [d for name, d in report.nodes.items() if name.startswith("outer/") and "inner" not in name]
    assert outer_only and all(d.placement == "host" for d in outer_only)
    assert all("v1 while frame outer/while_context holds host op outer/inner/PyFunc" in d.reason
               for d in outer_only if d.op in ("Enter", "Exit", "Merge", "Switch"))
    assert report.nodes["y"].geop


def test_v1_while_loop_of_device_ops_sinks_whole_into_one_geop():
    graph = tf.Graph()
    with graph.as_default(), _control_flow_v1():
        x = v1.placeholder(tf.float32, [4], name="x")
        _, looped = tf.while_loop(lambda i, s: i < 3, lambda i, s: (i + 1, tf.tanh(s) * 1.5),
                                  [tf.constant(0), tf.sin(x)], name="loop")
        y = tf.identity(looped, name="y")
    graph_def, _ = _rewrite(graph, ["y"])
    segment = _segment_of(graph_def)
    frame = [node.name for node in graph.as_graph_def().node if node.op in ("Enter", "Exit", "NextIteration")]
    assert frame and len({segment[name] for name in frame}) == 1
    imported = tf.Graph()
    with imported.as_default():
        tf.graph_util.import_graph_def(graph_def, name="")
    np.testing.assert_array_equal(_run(imported, "y:0", {"x:0": FEED}), _run(graph, y, {x: FEED}))


def test_v1_cond_region_with_a_host_op_stays_whole_on_the_host(npu_config):
    graph = tf.Graph()
    with graph.as_default(), _control_flow_v1():
        x = v1.placeholder(tf.float32, [4], name="x")
        flag = v1.placeholder(tf.bool, [], name="flag")
        chosen = tf.cond(flag, lambda: _py_func(_plus_one, tf.sin(x)), lambda: tf.cos(x) * 2.0)
        y = tf.identity(tf.exp(chosen), name="y")
    config = _config(npu_config)
    for value in (True, False):
        np.testing.assert_array_equal(_run(graph, y, {x: FEED, flag: value}, config),
                                      _run(graph, y, {x: FEED, flag: value}))
    report = _main_report("y")
    region = [d for d in report.nodes.values() if d.name.startswith("cond/")]
    assert region and all(d.placement == "host" for d in region)
    host_op = next(d.name for d in region if d.op in ("PyFunc", "EagerPyFunc"))
    # Every node of the cond (Switch, Cos in the other branch, Merge) says which op kept it there.
    for decision in region:
        if decision.name != host_op:
            assert f"v1 cond region of predicate flag holds host op {host_op}" in decision.reason
    assert report.nodes["y"].geop


def test_functional_while_is_host_when_its_body_is():
    # Offline: in a Session, TensorFlow lowers While to a v1 frame before Grappler runs.
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [4], name="x")
        _, host_loop = tf.while_loop(lambda i, s: i < 2, lambda i, s: (i + 1, _py_func(_plus_one, s)),
                                     [tf.constant(0), tf.sin(x)], name="host_loop")
        _, device_loop = tf.while_loop(lambda i, s: i < 2, lambda i, s: (i + 1, tf.tanh(s)),
                                       [tf.constant(0), host_loop], name="device_loop")
        tf.identity(device_loop * 2.0, name="y")
    _, report = _rewrite(graph, ["y"])
    loops = {d.name: d for d in report.nodes.values() if d.op in ("While", "StatelessWhile")}
    assert loops["host_loop"].placement == "host"
    assert re.match(r"host: function \S+ holds host op \S+ \(PyFunc runs on the host\)",
                    loops["host_loop"].reason)
    assert loops["device_loop"].geop


def test_string_tensor_never_crosses_a_segment_boundary():
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [4], name="x")
        message = tf.constant("x too small", name="message")
        length = tf.strings.length(message, name="length")     # a string op: host
        check = tf.debugging.Assert(tf.reduce_all(x > -10.0), [message], name="check")
        with tf.control_dependencies([check]):
            tf.identity(tf.sin(x) + tf.cast(length, tf.float32), name="y")
    graph_def, report = _rewrite(graph, ["y"])
    assert report.nodes["message"].reason == \
        "host: string tensor at the segment boundary (message -> length)"
    assert report.nodes[check.name].placement == "host"
    assert f"string tensor at the segment boundary (message -> {check.name})" in report.nodes[check.name].reason
    for func in graph_def.library.function:
        assert all(arg.type != tf.string.as_datatype_enum
                   for arg in list(func.signature.input_arg) + list(func.signature.output_arg))


def test_ref_variable_updates_sink_and_train_the_same(npu_config):
    def build():
        graph = tf.Graph()
        with graph.as_default():
            v1.set_random_seed(3)
            x = v1.placeholder(tf.float32, [8, 3], name="x")
            w = v1.Variable(v1.random_normal([3, 1]), use_resource=False, name="w")
            loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - 1.0), name="loss")
            step = v1.train.GradientDescentOptimizer(0.1).minimize(loss, name="step")
            init = v1.global_variables_initializer()
        return graph, x, w, loss, step, init

    data = np.random.default_rng(2).standard_normal((8, 3)).astype(np.float32)
    results = []
    for config in (_config(npu_config, passes="none"), _config(npu_config)):
        graph, x, w, loss, step, init = build()
        with v1.Session(graph=graph, config=config) as sess:
            sess.run(init)
            losses = [sess.run([loss, step], {x: data})[0] for _ in range(3)]
            results.append((losses, sess.run(w)))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])
    report = _main_report("loss")
    update = next(d for d in report.nodes.values() if d.op == "ApplyGradientDescent")
    # The update sinks with the gradient: its GeOp holds a copy of VariableV2 w that shares the variable.
    assert update.placement == "device" and update.geop == report.nodes["loss"].geop
    assert report.nodes["w"].placement == "host"


# ------------------------------------------------------------------------ variables and effects
def test_stateful_segment_without_outputs_still_runs(npu_config):
    graph = tf.Graph()
    with graph.as_default():
        counter = v1.get_variable("counter", initializer=0.0, use_resource=True)
        bump = counter.assign_add(1.0, read_value=False, name="bump")
        with tf.control_dependencies([bump]):
            after = _py_func(_plus_one, tf.constant([0.0]))   # a host op that waits on the update
        init = v1.global_variables_initializer()
        read = counter.read_value()
    with v1.Session(graph=graph, config=_config(npu_config)) as sess:
        sess.run(init)
        sess.run(bump)                 # only a target: the GeOp has no outputs
        sess.run(after)                # reached through a control edge out of the GeOp
        assert sess.run(read) == 2.0
    report = _main_report(bump.name)
    assert report.nodes[bump.name].geop and report.nodes["counter"].placement == "host"


def test_variables_enter_geops_as_resource_handles():
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [2, 3], name="x")
        w = v1.get_variable("w", [3, 2], use_resource=True)
        tf.identity(tf.matmul(x, w), name="y")
    graph_def, report = _rewrite(graph, ["y"])
    assert report.nodes["w"].reason.startswith("host: variable op VarHandleOp stays on the host")
    segment = _segment_of(graph_def)
    call = next(node for node in graph_def.node if node.name == segment["MatMul"])
    body = _body(graph_def, call.name)
    assert tf.resource.as_datatype_enum in [arg.type for arg in body.signature.input_arg]
    assert "w" in [text.split(":")[0] for text in call.input]


# --------------------------------------------------------------------------------- modes
def test_full_sink_mode_sinks_only_the_largest_segment_and_warns(npu_config):
    graph, x, y = _py_func_model()
    expected = _run(graph, y, {x: FEED})
    value, executed = _run(graph, y, {x: FEED}, _config(npu_config, mix=False), with_metadata=True)
    np.testing.assert_array_equal(value, expected)
    assert len([node for node in executed if GEOP_ATTR in node.attr]) == 1
    report = _main_report("sin")
    assert report.nodes["a"].geop and report.nodes["sin"].placement == "host"
    assert "only the largest segment sinks" in report.nodes["sin"].reason
    (warning,) = [w for w in report.warnings if "mix_compile_mode" in w]
    assert "PyFunc" in warning and "mix_compile_mode'].b = True" in warning


def test_iterations_per_loop_with_mix_compile_mode_fails_sess_run(npu_config):
    graph, x, y = _py_func_model()
    config = _config(npu_config, iterations_per_loop=2)
    with v1.Session(graph=graph, config=config) as sess:
        with pytest.raises(tf.errors.InvalidArgumentError, match="iterations_per_loop.*must be 1 with"
                                                                 ".*mix_compile_mode.*is True"):
            sess.run(y, {x: FEED})


@pytest.mark.parametrize("mix", [False, True])
def test_the_shims_layering_kernel_places_a_real_model_as_python_does(monkeypatch, mix):
    """The TF1 batch-norm CNN (v1 cond on a training placeholder, UPDATE_OPS) rewritten with the
    shim's NpuSimSegments and with its Python twin: the same graph and the same report."""
    from npu_sim_bridge.native.loader import shim_function
    from npu_sim_bridge.passes.partition import cluster
    from npu_sim_bridge.testing import zoo

    assert shim_function("NpuSimSegments") is not None, "the shim is loaded in tests"
    graph = zoo.tf1_batchnorm_cnn().graph
    options = {"precision_mode": "allow_mix_precision", "mix_compile_mode": mix}

    def rewritten():  # each rewrite numbers its GeOps anew (GeOp<n>_<i>): compare without the number
        graph_def, report = npu_sim_bridge.rewrite(graph, options)
        records = [record.to_dict() for record in report.nodes.values()]
        stats = [(p.name, p.changed, p.stats) for p in report.passes]
        return re.sub(r"GeOp\d+_", "GeOp_", f"{graph_def}\n{records}\n{stats}")

    with_kernel = rewritten()
    monkeypatch.setattr(cluster, "shim_function", lambda name: None)
    without = rewritten()
    assert with_kernel == without
    assert "'geop': 'GeOp_" in with_kernel
