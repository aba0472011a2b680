"""The CPU layout in Sessions and offline rewrites: NCHW/NCDHW training runs on the CPU and matches NHWC."""

import collections

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf.rewriter_config_pb2 import RewriterConfig

import npu_sim_bridge
from npu_sim_bridge.config import from_dict
from npu_sim_bridge.passes import run_pipeline
from npu_sim_bridge.passes.layout import on_cpu
from npu_sim_bridge.passes.layout.rewrite import SCOPE
from npu_sim_bridge.testing import channels_first

from conftest import npu_config

_v1 = tf.compat.v1
CPU = "/job:localhost/replica:0/task:0/device:CPU:0"
STEPS = 3

# Every op type the model and its gradients run channels-first (ops.py), and none else.
LAID_OUT_OPS = {
    "Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", "BiasAdd",  # BiasAdd: the fused conv1 + bias
    "Conv3D", "Conv3DBackpropInputV2", "Conv3DBackpropFilterV2",
    "DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropInput", "DepthwiseConv2dNativeBackpropFilter",
    "MaxPool", "MaxPoolGrad", "MaxPoolV2", "MaxPoolGradV2", "AvgPool", "AvgPoolGrad",
    "MaxPool3D", "MaxPool3DGrad", "AvgPool3D", "AvgPool3DGrad", "FusedBatchNormV3", "FusedBatchNormGradV3",
}


def _config(**params):
    config = npu_config(**params)
    config.graph_options.rewrite_options.remapping = RewriterConfig.OFF  # as npu_config_proto sets it
    return config


def _train(data_format, config, steps=STEPS):
    """Losses before each of `steps` updates and after them, the variables after, and the training
    step's report."""
    npu_sim_bridge.clear_reports()
    model = channels_first.cnn(data_format)
    with _v1.Session(graph=model.graph, config=config) as sess:
        sess.run(model.init_op)
        losses = [float(sess.run([model.loss, model.train_op], model.feed(np.random.default_rng(step)))[0])
                  for step in range(steps + 1)]
        with model.graph.as_default():
            variables = {v.op.name: value for v, value in zip(_v1.global_variables(),
                                                              sess.run(_v1.global_variables()))}
    reports = [r for r in npu_sim_bridge.recent_reports() if r.item_id == "tf_graph" and not r.rerun]
    return losses, variables, max(reports, key=lambda r: r.nodes_before)


def _laid_out(report):
    return {name: d for name, d in report.nodes.items() if any(r.code.startswith("layout.cpu") for r in d.reasons)}


@pytest.fixture(name="channels_last_run", scope="module")
def channels_last_run_fixture():
    return {mix: _train("channels_last", _config(precision_mode="force_fp32", mix_compile_mode=mix))
            for mix in (False, True)}


@pytest.mark.parametrize("mix", [False, True], ids=["full_sink", "mix_compile_mode"])
def test_channels_first_training_matches_channels_last(channels_last_run, mix):
    losses, variables, report = _train("channels_first", _config(precision_mode="force_fp32", mix_compile_mode=mix))
    reference_losses, reference_variables, _ = channels_last_run[mix]
    assert np.allclose(losses, reference_losses, rtol=0, atol=1e-5), (losses, reference_losses)
    assert variables.keys() == reference_variables.keys()
    for name, value in variables.items():
        assert np.allclose(value, reference_variables[name], rtol=0, atol=1e-5), name
    assert losses[-1] != losses[0]  # the steps trained

    laid_out = _laid_out(report)
    assert {d.op for d in laid_out.values()} == LAID_OUT_OPS
    assert any(d.geop for d in laid_out.values())  # inside a GeOp body
    for name, decision in laid_out.items():
        assert "laid out for the CPU" in decision.reason and "on the NPU it stays NC" in decision.reason, name
        # Batch norms have NCHW CPU kernels: the report says they are laid out for oneDNN's sums, not for a kernel.
        code = "layout.cpu_sums" if decision.op.startswith("FusedBatchNorm") else "layout.cpu"
        assert [r.code for r in decision.reasons if r.code.startswith("layout.")] == [code], name
    layout_record = next(p for p in report.passes if p.name == "layout")
    assert layout_record.stats["ops_laid_out"] == len(laid_out)
    inserted = [d for name, d in report.nodes.items() if f"/{SCOPE}/" in name]
    assert inserted and all(d.reasons[0].code == "layout.inserted" for d in inserted)


def test_channels_last_graph_is_left_alone(channels_last_run):
    _, _, report = channels_last_run[False]
    assert not _laid_out(report)
    assert "layout" not in [p.name for p in report.passes]
    assert not [name for name in report.nodes if f"/{SCOPE}/" in name]


def test_mixed_precision_decisions_are_the_channels_last_ones():
    """allow_mix_precision: every node of the model is float16 (or not), on the device (or not), in both
    layouts alike; the CPU layout adds nodes of its own only."""
    runs = {fmt: _train(fmt, _config(precision_mode="allow_mix_precision"), steps=1)[2]
            for fmt in channels_first.FORMATS}

    def decisions(report):
        return {name: (d.placement, d.list, d.dtype_before, d.dtype_after, bool(d.geop))
                for name, d in report.nodes.items() if f"/{SCOPE}/" not in name}

    first, last = decisions(runs["channels_first"]), decisions(runs["channels_last"])
    assert first == last
    assert collections.Counter(v[3] for v in first.values())["float16"] > 20


def _offline(graph_def, device, options=None):
    graph_def = _v1.GraphDef.FromString(graph_def.SerializeToString())
    for node in graph_def.node:
        node.device = device
    return run_pipeline(graph_def, from_dict(options or {"precision_mode": "allow_mix_precision"}))


def test_layout_leaves_every_npu_decision_as_it_was():
    """The same NCHW graph placed on the CPU (laid out) and unplaced (an offline rewrite, left NCHW):
    the decisions of every node of the graph are the same."""
    graph_def = channels_first.cnn("channels_first").graph_def()
    placed, unplaced = _offline(graph_def, CPU), _offline(graph_def, "")
    assert _laid_out(placed.report) and not _laid_out(unplaced.report)
    assert not [n for n in unplaced.graph_def.node if f"/{SCOPE}/" in n.name]
    fields = ("op", "list", "dtype_before", "dtype_after", "placement")

    def decided(decision):  # GeOp names count the process's graphs: whether it is in one
        return [getattr(decision, f) for f in fields] + [bool(decision.geop)]

    for name, decision in unplaced.report.nodes.items():
        assert decided(placed.report.nodes[name]) == decided(decision), name


def _formats(graph_def):
    """{(op, data_format)} of every layout-carrying node in the graph and in its functions."""
    nodes = list(graph_def.node) + [n for f in graph_def.library.function for n in f.node_def]
    return {(n.op, n.attr["data_format"].s.decode()) for n in nodes if "data_format" in n.attr and
            n.op not in ("FusedBatchNormV3", "FusedBatchNormGradV3", "BiasAdd", "BiasAddGrad")}


def test_offline_rewrite_lays_out_cpu_nodes_only_and_inside_geop_bodies():
    graph_def = channels_first.cnn("channels_first").graph_def()
    placed = _offline(graph_def, CPU, {"mix_compile_mode": True})
    assert placed.graph_def.library.function  # the GeOp bodies
    assert {fmt for _, fmt in _formats(placed.graph_def)} == {"NHWC", "NDHWC"}
    assert all(on_cpu(n.device) for n in placed.graph_def.node)
    on_gpu = _offline(graph_def, "/job:localhost/replica:0/task:0/device:GPU:0", {"mix_compile_mode": True})
    assert {fmt for _, fmt in _formats(on_gpu.graph_def)} == {"NCHW", "NCDHW"}
    assert not _laid_out(on_gpu.report)


def _second_order_graph(data_format):
    """MaxPool/MaxPool3D, their gradients and the gradients' gradients (MaxPoolGradGrad)."""
    first = data_format == "channels_first"
    graph = tf.Graph()
    with graph.as_default():
        x = _v1.placeholder(tf.float32, [2, 3, 8, 8] if first else [2, 8, 8, 3])
        v = _v1.placeholder(tf.float32, [2, 3, 4, 8, 8] if first else [2, 4, 8, 8, 3])
        y = tf.nn.max_pool2d(x, 2, 2, "SAME", data_format="NCHW" if first else "NHWC")
        z = tf.nn.max_pool3d(v, 2, 2, "SAME", data_format="NCDHW" if first else "NDHWC")
        wy = _v1.get_variable("wy", y.shape, initializer=_v1.ones_initializer())
        wz = _v1.get_variable("wz", z.shape, initializer=_v1.ones_initializer())
        gx, gv = tf.gradients(tf.reduce_sum(y * wy) + tf.reduce_sum(z * wz), [x, v])
        loss = tf.reduce_mean(gx * gx * x) + tf.reduce_mean(gv * gv * v)
        train = _v1.train.GradientDescentOptimizer(0.1).minimize(loss)
        init = _v1.global_variables_initializer()
    return graph, x, v, loss, train, init, (wy, wz)


def test_second_order_pool_gradients_run_laid_out():
    rng = np.random.default_rng(3)
    images, volumes = rng.random((2, 8, 8, 3), dtype=np.float32), rng.random((2, 4, 8, 8, 3), dtype=np.float32)
    results = {}
    for data_format in channels_first.FORMATS:
        npu_sim_bridge.clear_reports()
        graph, x, v, loss, train, init, weights = _second_order_graph(data_format)
        feed = {x: images, v: volumes} if data_format == "channels_last" else \
            {x: images.transpose(0, 3, 1, 2), v: volumes.transpose(0, 4, 1, 2, 3)}
        with _v1.Session(graph=graph, config=_config(precision_mode="force_fp32")) as sess:
            sess.run(init)
            sess.run(train, feed)
            results[data_format] = sess.run([loss, *weights], feed)
        report = max((r for r in npu_sim_bridge.recent_reports() if r.item_id == "tf_graph"),
                     key=lambda r: r.nodes_before)
        if data_format == "channels_first":
            assert {"MaxPoolGradGrad", "MaxPool3DGradGrad"} <= {d.op for d in _laid_out(report).values()}
    first, last = results["channels_first"], results["channels_last"]
    assert np.isclose(first[0], last[0], rtol=0, atol=1e-5)
    assert np.allclose(first[1], last[1].transpose(0, 3, 1, 2), rtol=0, atol=1e-5)
    assert np.allclose(first[2], last[2].transpose(0, 4, 1, 2, 3), rtol=0, atol=1e-5)


def test_model_sweep_measures_the_channels_first_cnn_as_the_channels_last_one():
    """The sweep's runs (sim_passes none, placement + partition, allow_mix_precision) of the channels-first
    CNN: the same figures as its channels-last twin; laid-out nodes are not counted as the NPU's."""
    from npu_sim_bridge.testing import sweep, zoo

    runs = ("plain", "pp_full", "pp_mix", "mixed")
    first = sweep.measure("cnn_channels_first", zoo.sweep_builders(applications=())["cnn_channels_first"], runs=runs)
    last = sweep.measure("cnn_channels_last", lambda: channels_first.cnn("channels_last"), runs=runs)
    figures = ("nodes", "heavy_device", "heavy_total", "geops_full", "geops_mix", "geops_mixed_precision",
               "host_crossings", "white_fp16", "white_total")
    assert [getattr(first, f) for f in figures] == [getattr(last, f) for f in figures]
    assert first.heavy_total >= 20 and first.white_fp16 == first.white_total > 0
    assert first.bit_identical and last.bit_identical
    for run in runs:
        assert abs(first.losses[run] - last.losses[run]) <= 1e-5, (run, first.losses, last.losses)


def _conv_pool_graph(data_format, in_while_loop=False):
    """Conv2D + MaxPool (NCHW or NHWC), in a v1 while loop's body or not, trained with SGD."""
    first = data_format == "channels_first"
    fmt = "NCHW" if first else "NHWC"
    graph = tf.Graph()
    was_v2 = _v1.control_flow_v2_enabled()
    _v1.disable_control_flow_v2()
    try:
        with graph.as_default():
            x = _v1.placeholder(tf.float32, [2, 3, 8, 8] if first else [2, 8, 8, 3])
            kernel = _v1.get_variable("kernel", initializer=tf.constant(
                np.random.default_rng(0).standard_normal((3, 3, 3, 3)).astype(np.float32) * 0.2))

            def block(y):
                y = tf.nn.conv2d(y, kernel, 1, "SAME", data_format=fmt)
                return tf.nn.max_pool2d(y, 3, 1, "SAME", data_format=fmt)

            if in_while_loop:
                _, y = tf.while_loop(lambda i, y: i < 2, lambda i, y: (i + 1, block(y)), [0, x])
            else:
                y = block(x)
            loss = tf.reduce_mean(y * y)
            train = _v1.train.GradientDescentOptimizer(0.1).minimize(loss)
            init = _v1.global_variables_initializer()
    finally:
        if was_v2:
            _v1.enable_control_flow_v2()
    return graph, x, loss, train, init, kernel


def _conv_pool_steps(data_format, config, in_while_loop=False):
    graph, x, loss, train, init, kernel = _conv_pool_graph(data_format, in_while_loop)
    data = np.random.default_rng(1).random((2, 8, 8, 3), dtype=np.float32)
    feed = {x: data.transpose(0, 3, 1, 2) if data_format == "channels_first" else data}
    npu_sim_bridge.clear_reports()
    with _v1.Session(graph=graph, config=config) as sess:
        sess.run(init)
        losses = [float(sess.run([loss, train], feed)[0]) for _ in range(STEPS)]
        reports = [r for r in npu_sim_bridge.recent_reports() if r.item_id == "tf_graph" and not r.rerun]
        return losses, sess.run(kernel), _laid_out(max(reports, key=lambda r: r.nodes_before))


@pytest.mark.parametrize("mix", [False, True], ids=["full_sink", "mix_compile_mode"])
def test_ops_in_a_v1_while_loop_inside_a_geop_are_laid_out_in_their_frame(mix):
    """The partition pass sinks a while frame whole into a GeOp body; the layout's Consts must live in
    the loop's frame there (TensorFlow refuses a graph whose node reads from two frames)."""
    config = _config(precision_mode="force_fp32", mix_compile_mode=mix)
    last_losses, last_kernel, _ = _conv_pool_steps("channels_last", config, in_while_loop=True)
    first_losses, first_kernel, laid_out = _conv_pool_steps("channels_first", config, in_while_loop=True)
    assert {"Conv2D", "MaxPool", "MaxPoolGrad", "Conv2DBackpropInput"} <= {d.op for d in laid_out.values()}
    assert all(d.geop for d in laid_out.values())
    assert np.allclose(first_losses, last_losses, rtol=0, atol=1e-5)
    assert np.allclose(first_kernel, last_kernel, rtol=0, atol=1e-5)


def test_native_float16_kernels_run_laid_out():
    """sim_fp16_execution=native runs float16 kernels: TensorFlow has no NCHW float16 Conv2D or MaxPool
    on the CPU, oneDNN or not."""
    config = _config(precision_mode="allow_mix_precision", sim_fp16_execution="native")
    last_losses, last_kernel, _ = _conv_pool_steps("channels_last", config)
    first_losses, first_kernel, laid_out = _conv_pool_steps("channels_first", config)
    assert {"Conv2D", "MaxPool"} <= {d.op for d in laid_out.values()}
    assert all(d.dtype_after == "float16" for d in laid_out.values() if d.op == "Conv2D")
    assert np.allclose(first_losses, last_losses, rtol=1e-3, atol=0)
    assert np.allclose(first_kernel, last_kernel, rtol=0, atol=1e-3)


def _asymmetric_ops(data_format):
    """Ops whose attrs differ per dimension (strides, dilations, explicit paddings, windows) and whose
    shape input is a constant (conv2d_transpose), channels-first or channels-last, on one input."""
    first = data_format == "channels_first"
    fmt = "NCHW" if first else "NHWC"

    def dims(h, w):  # a per-dimension list in the op's layout
        return [1, 1, h, w] if first else [1, h, w, 1]

    graph = tf.Graph()
    with graph.as_default():
        x = _v1.placeholder(tf.float32, [2, 4, 9, 10] if first else [2, 9, 10, 4])
        kernel = tf.constant(np.random.default_rng(0).standard_normal((3, 2, 4, 6)).astype(np.float32))
        padding = [[0, 0], [0, 0], [1, 2], [0, 1]] if first else [[0, 0], [1, 2], [0, 1], [0, 0]]
        outs = [
            tf.nn.conv2d(x, kernel, dims(2, 1), padding, data_format=fmt, name="explicit"),
            tf.nn.conv2d(x, kernel, 1, "SAME", data_format=fmt, dilations=dims(1, 2), name="dilated"),
            tf.nn.conv2d_transpose(x, tf.constant(np.ones((3, 2, 5, 4), np.float32)),
                                   [2, 5, 18, 10] if first else [2, 18, 10, 5], dims(2, 1), "SAME",
                                   data_format=fmt, name="transposed"),
            tf.nn.avg_pool2d(x, [3, 2], [2, 1], "VALID", data_format=fmt, name="pool"),
        ]
    return graph, x, outs


def test_per_dimension_attrs_and_constant_shapes_are_permuted():
    data = np.random.default_rng(2).random((2, 9, 10, 4), dtype=np.float32)
    results = {}
    for data_format in channels_first.FORMATS:
        graph, x, outs = _asymmetric_ops(data_format)
        npu_sim_bridge.clear_reports()
        feed = {x: data.transpose(0, 3, 1, 2) if data_format == "channels_first" else data}
        with _v1.Session(graph=graph, config=_config(precision_mode="force_fp32")) as sess:
            results[data_format] = sess.run(outs, feed)
        if data_format == "channels_first":
            report = max((r for r in npu_sim_bridge.recent_reports() if r.item_id == "tf_graph" and not r.rerun),
                         key=lambda r: r.nodes_before)
            assert {d.op for d in _laid_out(report).values()} == {"Conv2D", "Conv2DBackpropInput", "AvgPool"}
    for first, last in zip(results["channels_first"], results["channels_last"]):
        assert np.allclose(first, last.transpose(0, 3, 1, 2), rtol=0, atol=1e-5)


def test_a_body_parametrized_by_its_dtype_is_left_with_a_warning_naming_the_op():
    from tensorflow.core.framework import function_pb2, node_def_pb2

    graph_def = _v1.GraphDef()
    graph_def.node.add(name="seed", op="NoOp", device=CPU)
    function = function_pb2.FunctionDef()
    function.signature.name = "generic_conv"
    attr = function.signature.attr.add(name="T", type="type")
    attr.allowed_values.list.type.append(tf.float32.as_datatype_enum)
    for arg in ("x", "kernel"):
        function.signature.input_arg.add(name=arg, type_attr="T")
    function.signature.output_arg.add(name="y", type_attr="T")
    conv = node_def_pb2.NodeDef(name="conv", op="Conv2D", input=["x", "kernel"], device=CPU)
    conv.attr["T"].placeholder = "T"
    conv.attr["data_format"].s = b"NCHW"
    conv.attr["padding"].s = b"SAME"
    conv.attr["strides"].list.i.extend([1, 1, 1, 1])
    function.node_def.append(conv)
    function.ret["y"] = "conv:output:0"
    graph_def.library.function.append(function)
    result = run_pipeline(graph_def, from_dict({"sim_passes": "none"}))
    body = result.graph_def.library.function[0]
    assert [n.op for n in body.node_def] == ["Conv2D"] and body.node_def[0].attr["data_format"].s == b"NCHW"
    assert any("conv (Conv2D in function generic_conv) runs NCHW on the CPU" in text and "NHWC" in text
               for text in result.report.warnings), result.report.warnings
