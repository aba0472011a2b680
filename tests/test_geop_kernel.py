"""A GeOp's call in a Session on CPUs: an NpuSimGeOp that runs its body as one single-device function,
bit for bit as the PartitionedCall did (sim_geop_call)."""

import types

import numpy as np
import pytest
import tensorflow as tf

import npu_sim_bridge
from npu_sim_bridge.graph.attr_names import GEOP_ATTR
from npu_sim_bridge.graph.op_categories import GEOP_KERNEL_OP
from npu_sim_bridge.passes.partition.call_config import LEFT_TO_CALLER_ATTR, KernelCalls, geop_attrs, needs_lowering
from npu_sim_bridge.report import history
from npu_sim_bridge.testing import zoo
from npu_sim_bridge.testing.models import _control_flow as control_flow

v1 = tf.compat.v1


def _run(model, feed, config, steps=3):
    """(losses of `steps` training steps, the ops of the GeOp calls that ran, the training step's reports)."""
    history.clear_reports()
    metadata = v1.RunMetadata()
    with v1.Session(graph=model.graph, config=config) as sess:
        sess.run(model.init_op)
        losses = [sess.run([model.loss, model.train_op], feed,
                           options=v1.RunOptions(output_partition_graphs=True), run_metadata=metadata)[0]
                  for _ in range(steps)]
    calls = sorted(node.op for graph_def in metadata.partition_graphs for node in graph_def.node
                   if GEOP_ATTR in node.attr)
    return np.array(losses), calls, history.recent_reports()


@pytest.fixture(scope="module")
def keras_cnn():
    model = zoo.sweep_builders(["keras_cnn"])["keras_cnn"]()
    return model, model.feed(np.random.default_rng(0))


@pytest.mark.parametrize("precision_mode", ["allow_mix_precision", "force_fp32"])
def test_the_kernel_call_gives_the_partitioned_calls_losses_bit_for_bit(keras_cnn, npu_config, precision_mode):
    model, feed = keras_cnn
    by_choice = {}
    for choice in ("partitioned_call", "auto"):
        config = npu_config(precision_mode=precision_mode, sim_geop_call=choice)
        by_choice[choice] = _run(model, feed, config)
    kernel_losses, kernel_calls, reports = by_choice["auto"]
    partitioned_losses, partitioned_calls, _ = by_choice["partitioned_call"]
    assert kernel_calls and set(kernel_calls) == {GEOP_KERNEL_OP}
    assert set(partitioned_calls) <= {"PartitionedCall", "StatefulPartitionedCall"} and partitioned_calls
    np.testing.assert_array_equal(kernel_losses, partitioned_losses)  # the same bits (oneDNN's rewrite too)
    assert np.all(np.isfinite(kernel_losses)) and kernel_losses[-1] < kernel_losses[0]  # it trains
    stats = [record.stats for report in reports for record in report.passes if record.name == "partition"]
    assert any(stat.get("geops") and stat.get("geop_kernels") == stat["geops"] for stat in stats)


def _calling_model():
    """A function call (a tf.function's PartitionedCall) and a v2 while loop (a While calling its cond
    and body) between device ops; y = f(x) * cos(x) + loop(x) * flag. Grappler inlines the call; the While
    stays a While in the GeOp's body until TensorFlow lowers it."""
    graph = tf.Graph()
    with graph.as_default(), control_flow("v2"):
        x = v1.placeholder(tf.float32, [4], name="x")
        flag = v1.placeholder(tf.float32, [], name="flag")
        called = tf.function(lambda a: tf.sin(a) * 2.0)(x)
        _, loop = tf.while_loop(lambda i, s: i < 2, lambda i, s: (i + 1, tf.tanh(s)), [tf.constant(0), x])
        y = tf.identity(called * tf.cos(x) + loop * flag, name="y")
    assert any(node.op in ("While", "StatelessWhile") for node in graph.as_graph_def().node)
    return graph, x, flag, y


@pytest.mark.parametrize("choice", ["auto", "kernel", "partitioned_call"])
def test_a_lowered_loop_and_an_inlined_call_run_in_either_call(npu_config, choice):
    graph, x, flag, y = _calling_model()
    feed_x = np.array([0.1, -0.5, 1.5, 3.0], np.float32)
    with v1.Session(graph=graph) as sess:
        plain = [sess.run(y, {x: feed_x, flag: value}) for value in (1.0, 0.5)]
    metadata = v1.RunMetadata()
    with v1.Session(graph=graph, config=npu_config(precision_mode="force_fp32", sim_geop_call=choice)) as sess:
        values = [sess.run(y, {x: feed_x, flag: value}, options=v1.RunOptions(output_partition_graphs=True),
                           run_metadata=metadata) for value in (1.0, 0.5)]
    calls = {node.op for graph_def in metadata.partition_graphs for node in graph_def.node if GEOP_ATTR in node.attr}
    expected = {"PartitionedCall", "StatefulPartitionedCall"} if choice == "partitioned_call" else {GEOP_KERNEL_OP}
    assert calls and calls <= expected
    for value, expected_value in zip(values, plain):
        np.testing.assert_array_equal(value, expected_value)


class _Ctx:
    def __init__(self, choice, item_id="tf_graph"):
        self.options = {"sim_geop_call": choice}
        self.item = types.SimpleNamespace(id=item_id)
        self.report = None


CPU = "/job:localhost/replica:0/task:0/device:CPU:0"
GPU = "/job:localhost/replica:0/task:0/device:GPU:0"


@pytest.mark.parametrize("choice, item_id, lowered, device, wanted", [
    ("auto", "tf_graph", False, CPU, True),
    ("auto", "tf_graph", False, "", True),        # a Session places an unplaced call on a CPU
    ("auto", "tf_graph", True, CPU, False),       # a body with If/While/calls to lower: only a PartitionedCall does
    ("auto", "offline", False, CPU, False),       # a GraphDef that may run without the op library
    ("auto", "tf_graph", False, GPU, False),      # the kernel runs on CPUs
    ("kernel", "tf_graph", True, CPU, True),
    ("kernel", "offline", False, CPU, True),
    ("kernel", "tf_graph", False, GPU, False),
    ("partitioned_call", "tf_graph", False, CPU, False),
])
def test_which_geops_are_kernel_calls(choice, item_id, lowered, device, wanted):
    assert KernelCalls(_Ctx(choice, item_id)).wanted(lowered, device) is wanted


def test_an_offline_rewrite_keeps_partitioned_calls_that_run_without_the_simulator():
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [4], name="x")
        tf.identity(tf.sin(x) * tf.tanh(x), name="y")
    graph_def, report = npu_sim_bridge.rewrite(graph, {"sim_passes": "placement,partition"}, fetches=["y"])
    calls = [node.op for node in graph_def.node if GEOP_ATTR in node.attr]
    assert calls and set(calls) <= {"PartitionedCall", "StatefulPartitionedCall"}
    stats = next(record.stats for record in report.passes if record.name == "partition")
    assert stats["geops"] and stats["geop_kernels"] == 0


def test_a_bad_sim_geop_call_value_names_the_key_and_the_values(npu_config):
    graph, x, flag, y = _calling_model()
    with pytest.raises(Exception) as caught:
        with v1.Session(graph=graph, config=npu_config(sim_geop_call="inline")) as sess:
            sess.run(y, {x: np.zeros(4, np.float32), flag: 1.0})
    text = str(caught.value)
    assert "sim_geop_call" in text and "partitioned_call" in text


def _grouped_conv_model():
    """Keras's grouped convolution, as ConvNeXt and RegNet use it: on a CPU a call of a function XLA
    compiles whole (`_XlaMustCompile`), inside the GeOp's body."""
    graph = tf.Graph()
    with graph.as_default():
        v1.set_random_seed(1)
        x = v1.placeholder(tf.float32, [2, 6, 6, 4], name="x")
        h = tf.keras.layers.Conv2D(8, 3, groups=2, padding="same", name="grouped")(x)
        loss = tf.reduce_mean(tf.square(tf.nn.relu(h) - 0.5), name="loss")
        train_op = v1.train.GradientDescentOptimizer(0.1).minimize(loss)
        init_op = v1.global_variables_initializer()
    assert any(node.attr["_XlaMustCompile"].b for node in graph.as_graph_def().node if "_XlaMustCompile" in node.attr)
    return types.SimpleNamespace(graph=graph, loss=loss, train_op=train_op, init_op=init_op), x


def test_a_body_that_calls_a_jit_compiled_function_runs_in_the_kernel_bit_for_bit(npu_config):
    model, x = _grouped_conv_model()
    feed = {x: np.random.default_rng(2).normal(size=(2, 6, 6, 4)).astype(np.float32)}
    by_choice = {choice: _run(model, feed, npu_config(precision_mode="allow_mix_precision", sim_geop_call=choice))
                 for choice in ("partitioned_call", "auto")}
    kernel_losses, kernel_calls, _ = by_choice["auto"]
    partitioned_losses, partitioned_calls, _ = by_choice["partitioned_call"]
    assert kernel_calls and set(kernel_calls) == {GEOP_KERNEL_OP}  # XLA compiles the call inside the kernel
    assert partitioned_calls and set(partitioned_calls) <= {"PartitionedCall", "StatefulPartitionedCall"}
    np.testing.assert_array_equal(kernel_losses, partitioned_losses)
    assert np.all(np.isfinite(kernel_losses)) and kernel_losses[-1] < kernel_losses[0]


def test_only_calls_to_lower_keep_a_body_from_the_kernel():
    from tensorflow.core.framework import function_pb2, node_def_pb2

    functions = {"f": function_pb2.FunctionDef()}
    jit = node_def_pb2.NodeDef(name="c", op="StatefulPartitionedCall")
    jit.attr["f"].func.name = "f"
    jit.attr["_XlaMustCompile"].b = True
    plain = node_def_pb2.NodeDef(name="p", op="StatefulPartitionedCall")
    plain.attr["f"].func.name = "f"
    sine = node_def_pb2.NodeDef(name="s", op="Sin")
    assert not needs_lowering([sine, jit], functions)
    assert needs_lowering([sine, jit, plain], functions)
    assert geop_attrs()[1][LEFT_TO_CALLER_ATTR].b  # every body, lowered or not, is left to its call


@pytest.mark.slow
def test_a_sweep_model_with_jit_compiled_calls_runs_in_the_kernel_bit_for_bit(npu_config):
    """RegNetX002 as the model sweep builds it: 26 grouped convolutions, each a `_XlaMustCompile` call."""
    model = zoo.sweep_builders(["RegNetX002"])["RegNetX002"]()
    feed = model.feed(np.random.default_rng(0))
    by_choice = {choice: _run(model, feed, npu_config(precision_mode="allow_mix_precision", sim_geop_call=choice),
                              steps=2)
                 for choice in ("partitioned_call", "auto")}
    kernel_losses, kernel_calls, _ = by_choice["auto"]
    partitioned_losses, partitioned_calls, _ = by_choice["partitioned_call"]
    assert kernel_calls and set(kernel_calls) == {GEOP_KERNEL_OP}
    assert partitioned_calls and set(partitioned_calls) <= {"PartitionedCall", "StatefulPartitionedCall"}
    np.testing.assert_array_equal(kernel_losses, partitioned_losses)
    assert np.all(np.isfinite(kernel_losses))
