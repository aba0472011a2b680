"""How Grappler treats a GeOp's body: not at all (the Session's meta optimizer leaves every body to its call,
which runs none); the body gives the plain results, also where its call lowers a loop in it."""

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import config_pb2
from tensorflow.core.protobuf.rewriter_config_pb2 import RewriterConfig

import npu_sim_bridge
from npu_sim_bridge.graph.attr_names import GEOP_ATTR
from npu_sim_bridge.passes.partition.call_config import LEFT_TO_CALLER_ATTR

v1 = tf.compat.v1
FEED = np.array([0.1, -0.5, 1.5, 3.0], np.float32)


def _twice_model():
    """y = sin(x) * sin(x) + tanh(x), the sine built twice (two alike nodes for Grappler to merge)."""
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [4], name="x")
        y = tf.identity(tf.sin(x, name="sin_a") * tf.sin(x, name="sin_b") + tf.tanh(x), name="y")
    return graph, x, y


def _geop_calls(graph_def):
    return [node for node in graph_def.node if GEOP_ATTR in node.attr]


def _plain_and_rewritten_values(graph, graph_def):
    """y for FEED from the plain graph and from its offline rewrite imported into a plain Session."""
    rewritten = tf.Graph()
    with rewritten.as_default():
        tf.graph_util.import_graph_def(graph_def, name="")
    values = []
    for run_graph in (graph, rewritten):
        with v1.Session(graph=run_graph) as sess:
            values.append(sess.run("y:0", {"x:0": FEED}))
    return values


def _body(graph_def, call):
    return next(f for f in graph_def.library.function if f.signature.name == call.attr["f"].func.name)


def test_a_body_left_to_its_call_runs_and_gives_the_plain_result(npu_config):
    graph, x, y = _twice_model()
    with v1.Session(graph=graph) as sess:
        expected = sess.run(y, {x: FEED})
    config = npu_config(sim_passes="placement,partition")
    config.graph_options.rewrite_options.remapping = RewriterConfig.OFF
    metadata = v1.RunMetadata()
    with v1.Session(graph=graph, config=config) as sess:
        value = sess.run(y, {x: FEED}, options=v1.RunOptions(output_partition_graphs=True),
                         run_metadata=metadata)
        again = sess.run(y, {x: FEED})
    np.testing.assert_array_equal(value, expected)
    np.testing.assert_array_equal(again, expected)
    executed = [node for graph_def in metadata.partition_graphs for node in graph_def.node]
    calls = [node for node in executed if GEOP_ATTR in node.attr]
    assert calls  # the sines and the tanh ran in a GeOp


def test_a_body_with_a_functional_loop_is_left_to_its_call_which_lowers_it_to_the_plain_result():
    # The loop's While stays in the offline rewrite's GeOp body; the call's instantiation lowers it (the
    # function runtime's pre-placement passes), with no Grappler pass over the body or the loop's functions.
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [4], name="x")
        _, loop = tf.while_loop(lambda i, s: i < 2, lambda i, s: (i + 1, tf.tanh(s) + tf.sin(s)),
                                [tf.constant(0), tf.sin(x)], name="device_loop")
        tf.identity(loop * 2.0, name="y")
    graph_def, _ = npu_sim_bridge.rewrite(graph, {"mix_compile_mode": True, "sim_passes": "placement,partition"},
                                          fetches=["y"])
    calls = _geop_calls(graph_def)
    bodies = [_body(graph_def, call) for call in calls]
    assert any(node.op in ("While", "StatelessWhile") for body in bodies for node in body.node_def)
    for call, body in zip(calls, bodies):
        config = config_pb2.ConfigProto.FromString(call.attr["config_proto"].s).graph_options.rewrite_options
        assert body.attr[LEFT_TO_CALLER_ATTR].b and config.disable_meta_optimizer
    np.testing.assert_array_equal(*_plain_and_rewritten_values(graph, graph_def))


def test_a_body_without_calls_is_left_to_its_call_in_the_rewritten_graph():
    graph, _, _ = _twice_model()
    graph_def, _ = npu_sim_bridge.rewrite(graph, {"sim_passes": "placement,partition"}, fetches=["y"])
    calls = _geop_calls(graph_def)
    assert calls
    for call in calls:
        body = _body(graph_def, call)
        rewrite = config_pb2.ConfigProto.FromString(call.attr["config_proto"].s).graph_options.rewrite_options
        assert body.attr[LEFT_TO_CALLER_ATTR].b  # the Session's meta optimizer skips it
        assert rewrite.disable_meta_optimizer  # and its call runs no Grappler over it


def test_a_body_with_a_plain_nested_call_is_left_to_its_call_which_inlines_it_to_the_plain_result():
    @tf.function
    def inner(s):
        return tf.tanh(s) * tf.sin(s)

    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [4], name="x")
        tf.identity(inner(tf.sin(x)) * 2.0, name="y")
    graph_def, _ = npu_sim_bridge.rewrite(graph, {"sim_passes": "placement,partition"}, fetches=["y"])
    bodies = [_body(graph_def, call) for call in _geop_calls(graph_def)]
    assert any(node.op in ("PartitionedCall", "StatefulPartitionedCall") for body in bodies for node in body.node_def)
    assert bodies and all(body.attr[LEFT_TO_CALLER_ATTR].b for body in bodies)
    np.testing.assert_array_equal(*_plain_and_rewritten_values(graph, graph_def))
