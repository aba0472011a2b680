"""How Grappler treats a GeOp's body: not at all (plain bodies: the Session's meta optimizer leaves them to
their call, which runs none), or in the Session's pass (bodies that call functions); either way the body
gives the plain results."""

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


def test_the_call_config_leaves_plain_bodies_to_the_call_and_others_to_the_session():
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [4], name="x")
        _, loop = tf.while_loop(lambda i, s: i < 2, lambda i, s: (i + 1, tf.tanh(s)),
                                [tf.constant(0), tf.sin(x)], name="device_loop")
        tf.identity(loop * 2.0, name="y")
    graph_def, _ = npu_sim_bridge.rewrite(graph, {"mix_compile_mode": True, "sim_passes": "placement,partition"},
                                          fetches=["y"])
    calls = _geop_calls(graph_def)
    assert calls
    for call in calls:
        body = _body(graph_def, call)
        config = config_pb2.ConfigProto.FromString(call.attr["config_proto"].s).graph_options.rewrite_options
        if any(node.op in ("While", "StatelessWhile") for node in body.node_def):
            # a body that calls functions: the Session's pass optimizes it and what it calls
            assert LEFT_TO_CALLER_ATTR not in body.attr and config.disable_meta_optimizer
        else:  # left by the Session's pass to its call, which runs it as the rewrite wrote it
            assert body.attr[LEFT_TO_CALLER_ATTR].b and config.disable_meta_optimizer


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
