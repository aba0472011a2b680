"""passes/fusion/apart.py: a fused MatMul of a GeOp body placed on a CPU runs as its MatMul, BiasAdd (and Relu)
where oneDNN gives them the fused kernel's bits; a training step then gives the same losses, bit for bit."""

import itertools

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2, function_pb2
from tensorflow.core.protobuf import rewriter_config_pb2

import npu_sim_bridge
from npu_sim_bridge.passes.fusion import apart
from npu_sim_bridge.testing import zoo

CPU = "/job:localhost/replica:0/task:0/device:CPU:0"


def _list(*items):
    return attr_value_pb2.AttrValue(list=attr_value_pb2.AttrValue.ListValue(s=[item.encode() for item in items]))


def _fused_attrs(fused_ops, transpose_a=False, transpose_b=False):
    return {"T": attr_value_pb2.AttrValue(type=tf.float32.as_datatype_enum), "num_args": attr_value_pb2.AttrValue(i=1),
            "fused_ops": _list(*fused_ops), "transpose_a": attr_value_pb2.AttrValue(b=transpose_a),
            "transpose_b": attr_value_pb2.AttrValue(b=transpose_b), "epsilon": attr_value_pb2.AttrValue(f=1e-4)}


def _bits(array):
    return np.asarray(array, np.float32).view(np.uint32)


def test_onednn_gives_the_ops_apart_the_fused_kernels_bits():
    """The premise of taking a fused MatMul apart: on this CPU the pair (and the Relu) give the fused kernel's
    float32 bits, for every shape of the grid, with weights that are a value of the step (a variable's, as
    in training); where TensorFlow runs without oneDNN nothing is taken apart."""
    if not apart.onednn_enabled():
        graph_def = tf.compat.v1.GraphDef()
        function = graph_def.library.function.add()
        function.node_def.add(name="f", op="_FusedMatMul", input=["a", "b", "c"], device=CPU)
        assert not apart.FusedMatMulApartPass().run(_Context(graph_def)).changed
        return
    config = tf.compat.v1.ConfigProto()
    config.graph_options.rewrite_options.disable_meta_optimizer = True
    config.graph_options.optimizer_options.opt_level = tf.compat.v1.OptimizerOptions.L0  # no CSE of the two forms
    rng = np.random.default_rng(0)
    shapes = list(itertools.product([1, 4, 33], [3, 64, 700], [1, 10, 257]))
    for fused_ops in (("BiasAdd",), ("BiasAdd", "Relu")):
        graph = tf.Graph()
        outputs, feed = [], {}
        with graph.as_default():
            for index, (m, k, n) in enumerate(shapes):
                a = tf.constant(rng.standard_normal((m, k)).astype(np.float32))
                b = tf.compat.v1.placeholder(tf.float32, (k, n))
                feed[b] = rng.standard_normal((k, n)).astype(np.float32)
                bias = tf.constant(rng.standard_normal(n).astype(np.float32))
                pair = tf.nn.bias_add(tf.matmul(a, b), bias)
                if "Relu" in fused_ops:
                    pair = tf.nn.relu(pair)
                fused = graph.create_op("_FusedMatMul", [a, b, bias], [tf.float32], name=f"fused_{index}",
                                        attrs=_fused_attrs(fused_ops)).outputs[0]
                outputs.append((pair, fused))
        with tf.compat.v1.Session(graph=graph, config=config) as sess:
            values = sess.run(outputs, feed)
        differ = [shape for shape, (pair, fused) in zip(shapes, values)
                  if not np.array_equal(_bits(pair), _bits(fused))]
        assert not differ, (fused_ops, differ)


class _Context:
    def __init__(self, graph_def):
        self.view = type("View", (), {"graph_def": graph_def})()


def _body(device=CPU, transpose_b=False, constant_weights=False):
    """A function body: x @ w + b -> Relu (fused), read by a Sigmoid, returned, and a control edge; with
    `constant_weights`, w is a Const through an Identity, as a frozen graph's."""
    function = function_pb2.FunctionDef()
    function.signature.name = "body"
    for name in ("x", "w", "b"):
        function.signature.input_arg.add(name=name, type=tf.float32.as_datatype_enum)
    function.signature.output_arg.add(name="y", type=tf.float32.as_datatype_enum)
    function.signature.output_arg.add(name="z", type=tf.float32.as_datatype_enum)
    function.node_def.add(name="gate", op="NoOp", device=device)
    weights = "w"
    if constant_weights:
        const = function.node_def.add(name="kernel", op="Const", device=device)
        const.attr["dtype"].type = tf.float32.as_datatype_enum
        const.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(np.ones((2, 2), np.float32)))
        function.node_def.add(name="kernel/read", op="Identity", input=["kernel:output:0", "^gate"], device=device)
        weights = "kernel/read:output:0"
    fused = function.node_def.add(name="dense/Relu", op="_FusedMatMul", input=["x", weights, "b", "^gate"],
                                  device=device)
    for key, value in _fused_attrs(("BiasAdd", "Relu"), transpose_b=transpose_b).items():
        fused.attr[key].CopyFrom(value)
    fused.attr["_npu_sim_fused"].s = b"MatMulBiasAddFusionPass"
    sigmoid = function.node_def.add(name="act", op="Sigmoid", input=["dense/Relu:product:0"], device=device)
    sigmoid.attr["T"].type = tf.float32.as_datatype_enum
    function.ret["y"] = "dense/Relu:product:0"
    function.ret["z"] = "act:y:0"
    return function


def test_a_body_on_a_cpu_runs_the_fused_node_as_its_ops_under_its_name(monkeypatch):
    monkeypatch.setattr(apart, "onednn_enabled", lambda: True)
    graph_def = tf.compat.v1.GraphDef()
    graph_def.library.function.add().CopyFrom(_body())
    result = apart.FusedMatMulApartPass().run(_Context(graph_def))
    assert result.changed and result.stats == {"fused_matmuls_apart": 1}
    nodes = {node.name: node for node in graph_def.library.function[0].node_def}
    matmul, bias_add, relu = nodes["dense/Relu/MatMul"], nodes["dense/Relu/BiasAdd"], nodes["dense/Relu"]
    assert (matmul.op, list(matmul.input)) == ("MatMul", ["x", "w"])
    assert (bias_add.op, list(bias_add.input)) == ("BiasAdd", ["dense/Relu/MatMul:product:0", "b"])
    assert (relu.op, list(relu.input)) == ("Relu", ["dense/Relu/BiasAdd:output:0", "^gate"])
    assert {node.device for node in (matmul, bias_add, relu)} == {CPU}
    assert relu.attr["_npu_sim_fused"].s == b"MatMulBiasAddFusionPass"  # the marks stay on the named node
    # readers and results read the Relu's output arg now
    assert list(nodes["act"].input) == ["dense/Relu:activations:0"]
    assert dict(graph_def.library.function[0].ret) == {"y": "dense/Relu:activations:0", "z": "act:y:0"}
    # run again on its own output: nothing left to take apart
    assert not apart.FusedMatMulApartPass().run(_Context(graph_def)).changed


@pytest.mark.parametrize("case", ["transpose_b", "constant weights", "gpu", "unplaced", "no oneDNN"])
def test_a_fused_matmul_stays_fused_where_the_bits_or_the_place_are_not_known_the_same(monkeypatch, case):
    monkeypatch.setattr(apart, "onednn_enabled", lambda: case != "no oneDNN")
    device = {"gpu": "/job:localhost/replica:0/task:0/device:GPU:0", "unplaced": ""}.get(case, CPU)
    graph_def = tf.compat.v1.GraphDef()
    graph_def.library.function.add().CopyFrom(_body(device=device, transpose_b=case == "transpose_b",
                                                    constant_weights=case == "constant weights"))
    before = graph_def.SerializeToString()
    assert not apart.FusedMatMulApartPass().run(_Context(graph_def)).changed
    assert graph_def.SerializeToString() == before


def _session_losses(name, steps=3):
    model = zoo.sweep_builders()[name]()
    config = tf.compat.v1.ConfigProto()
    custom = config.graph_options.rewrite_options.custom_optimizers.add()
    custom.name = "NpuOptimizer"
    custom.parameter_map["precision_mode"].s = b"allow_mix_precision"
    config.graph_options.rewrite_options.remapping = rewriter_config_pb2.RewriterConfig.OFF
    feed = model.feed(np.random.default_rng(0))
    npu_sim_bridge.clear_reports()
    losses = []
    with tf.compat.v1.Session(graph=model.graph, config=config) as sess:
        sess.run(model.init_op)
        for _ in range(steps):
            losses.append(sess.run([model.loss, model.train_op], feed)[0])
        metadata = tf.compat.v1.RunMetadata()
        sess.run(model.train_op, feed, options=tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE),
                 run_metadata=metadata)
    kernels = {stats.timeline_label.split(" = ", 1)[1].split("(", 1)[0]
               for device in metadata.step_stats.dev_stats for stats in device.node_stats
               if " = " in stats.timeline_label}
    records = [record.stats for report in npu_sim_bridge.recent_reports() for record in report.passes
               if record.name == "matmul_apart"]
    return _bits(losses), kernels, records


@pytest.mark.parametrize("name", ["user_cond_mlp", "lstm_v1"])
def test_a_training_step_runs_the_fused_matmuls_apart_and_gives_the_same_losses(monkeypatch, name):
    """Sweep models (dense layers behind a tf.cond; an LSTM cell in v1 while loops), three steps under
    allow_mix_precision with Grappler's remapper off (as npu_config_proto sets it), with their fused
    MatMuls apart and kept fused: the same losses, bit for bit."""
    onednn = apart.onednn_enabled()
    apart_losses, apart_kernels, apart_records = _session_losses(name)
    monkeypatch.setattr(apart, "onednn_enabled", lambda: False)
    fused_losses, fused_kernels, fused_records = _session_losses(name)
    np.testing.assert_array_equal(apart_losses, fused_losses)  # bit for bit
    assert not fused_records
    if not onednn:  # TensorFlow without oneDNN: nothing was taken apart in either run
        assert not apart_records
        return
    assert apart_records and apart_records[0]["fused_matmuls_apart"] >= 2  # two dense layers / the cell and the head
    assert "_MklNativeFusedMatMul" in fused_kernels and "_MklNativeFusedMatMul" not in apart_kernels
    assert "_MklMatMul" in apart_kernels


def test_constant_weights_give_other_bits_apart_so_they_stay_fused():
    """Why a frozen graph's fused MatMul stays fused: with a constant weight oneDNN's fused kernel sums in
    another order than the MatMul at some shapes (a 1x700 by 700x10 product here)."""
    if not apart.onednn_enabled():
        return  # the premise is oneDNN's; without it nothing is taken apart (the first test)
    rng = np.random.default_rng(0)
    config = tf.compat.v1.ConfigProto()
    config.graph_options.rewrite_options.disable_meta_optimizer = True
    config.graph_options.optimizer_options.opt_level = tf.compat.v1.OptimizerOptions.L0
    graph = tf.Graph()
    with graph.as_default():
        a = tf.constant(rng.standard_normal((1, 700)).astype(np.float32))
        b = tf.constant(rng.standard_normal((700, 10)).astype(np.float32))
        bias = tf.constant(rng.standard_normal(10).astype(np.float32))
        pair = tf.nn.bias_add(tf.matmul(a, b), bias)
        fused = graph.create_op("_FusedMatMul", [a, b, bias], [tf.float32], name="fused",
                                attrs=_fused_attrs(("BiasAdd",))).outputs[0]
    with tf.compat.v1.Session(graph=graph, config=config) as sess:
        pair_value, fused_value = sess.run([pair, fused])
    assert not np.array_equal(_bits(pair_value), _bits(fused_value))
