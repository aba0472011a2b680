"""The CPU layout's second step: no Transpose pair that cancels is left, in the graph or a GeOp body, and
training gives the same loss bits, fetched activations and dumps as the first step alone."""

import numpy as np
import pytest
import tensorflow as tf

import npu_sim_bridge
from npu_sim_bridge.config import from_dict
from npu_sim_bridge.dumps import find_dumps
from npu_sim_bridge.passes import run_pipeline
from npu_sim_bridge.passes.layout import boundary, chains
from npu_sim_bridge.testing import channels_first

from conftest import npu_config

_v1 = tf.compat.v1
CPU = "/job:localhost/replica:0/task:0/device:CPU:0"
STEPS = 3
TO_TARGET, TO_SOURCE = [0, 2, 3, 1], [0, 3, 1, 2]


def _net():
    """A small NCHW conv net: conv + bias + relu, max pool, relu6, conv + relu, mean; SGD on a squared loss."""
    graph = tf.Graph()
    with graph.as_default():
        images = _v1.placeholder(tf.float32, [2, 3, 8, 8], name="images")
        rng = np.random.default_rng(0)
        k1 = _v1.get_variable("k1", initializer=tf.constant(rng.standard_normal((3, 3, 3, 4)).astype(np.float32)))
        k2 = _v1.get_variable("k2", initializer=tf.constant(rng.standard_normal((3, 3, 4, 4)).astype(np.float32)))
        bias = _v1.get_variable("bias", initializer=tf.constant(rng.standard_normal(4).astype(np.float32)))
        x = tf.nn.conv2d(images, k1, 1, "SAME", data_format="NCHW")
        x = tf.nn.relu(tf.nn.bias_add(x, bias, data_format="NCHW"))
        x = tf.nn.relu6(tf.nn.max_pool2d(x, 2, 2, "SAME", data_format="NCHW"), name="between")
        x = tf.nn.relu(tf.nn.conv2d(x, k2, 1, "SAME", data_format="NCHW"))
        loss = tf.reduce_mean(tf.square(tf.reduce_mean(x, axis=[2, 3]) - 1.0))
        train = _v1.train.GradientDescentOptimizer(0.1).minimize(loss)
        init = _v1.global_variables_initializer()
    return graph, images, loss, train, init


def _perm(nodes, text):
    """The permutation a Transpose's perm input holds (a Const of `nodes`)."""
    const = nodes[text.split(":", 1)[0]]
    return list(tf.make_ndarray(const.attr["value"].tensor))


def _cancelling_pairs(node_list):
    """(Transpose to NHWC, Transpose to NCHW it reads), directly or through an op of chains.FOLLOWS."""
    nodes = {node.name: node for node in node_list}
    found = []
    for node in node_list:
        if node.op != "Transpose" or _perm(nodes, node.input[1]) != TO_TARGET:
            continue
        producer = nodes.get(node.input[0].split(":", 1)[0])
        while producer is not None and producer.op in chains.FOLLOWS:
            producer = nodes.get(producer.input[0].split(":", 1)[0])
        if producer is not None and producer.op == "Transpose" and _perm(nodes, producer.input[1]) == TO_SOURCE:
            found.append((node.name, producer.name))
    return found


def _without_second_step(monkeypatch):
    monkeypatch.setattr(chains, "chain", lambda scope: None)
    monkeypatch.setattr(boundary, "export_results", lambda graph, bodies, library: 0)


@pytest.mark.parametrize("mix", [False, True], ids=["full_sink", "mix_compile_mode"])
def test_laid_out_graph_and_bodies_hold_no_transpose_pair_that_cancels(mix, monkeypatch):
    graph_def = _net()[0].as_graph_def()
    for node in graph_def.node:
        node.device = CPU

    def rewrite():
        copy = _v1.GraphDef.FromString(graph_def.SerializeToString())
        return run_pipeline(copy, from_dict({"precision_mode": "allow_mix_precision", "mix_compile_mode": mix}))

    result = rewrite()
    bodies = [list(function.node_def) for function in result.graph_def.library.function]
    assert bodies  # the GeOp bodies
    for nodes in [list(result.graph_def.node)] + bodies:
        assert not _cancelling_pairs(nodes)
    stats = next(p for p in result.report.passes if p.name == "layout").stats
    assert stats["transposes_cancelled"] > 0 and stats["ops_following"] > 0
    _without_second_step(monkeypatch)
    first_step_only = rewrite()
    assert any(_cancelling_pairs(list(f.node_def)) for f in first_step_only.graph_def.library.function) or \
        _cancelling_pairs(list(first_step_only.graph_def.node))


def _small_run():
    graph, images, loss, train, init = _net()
    return graph, loss, train, init, lambda rng: {images: rng.random((2, 3, 8, 8), dtype=np.float32)}, "between:0"


def _cnn_run():
    """testing/channels_first.cnn: 2D and 3D ops, batch norms; without mix_compile_mode its gradients run
    outside the GeOp, reading the GeOp's results."""
    model = channels_first.cnn("channels_first")
    return model.graph, model.loss, model.train_op, model.init_op, model.feed, "Relu:0"


def _train(config, build):
    """Losses of STEPS + 1 steps with a fetched channels-first activation of each (an op that follows into
    the target layout: its name still gives the source layout), the Transpose kernels one traced step
    runs, and the layout's stats."""
    graph, loss, train, init, feed, fetched = build()
    activation = graph.get_tensor_by_name(fetched)
    feeds = [feed(np.random.default_rng(step)) for step in range(STEPS + 1)]
    npu_sim_bridge.clear_reports()
    with _v1.Session(graph=graph, config=config) as sess:
        sess.run(init)
        runs = [sess.run([loss, activation, train], values)[:2] for values in feeds]
        metadata = _v1.RunMetadata()
        sess.run(train, feeds[0], options=_v1.RunOptions(trace_level=_v1.RunOptions.FULL_TRACE),
                 run_metadata=metadata)
    transposes = sum(1 for device in metadata.step_stats.dev_stats for stats in device.node_stats
                     if "Transpose(" in stats.timeline_label)
    report = max((r for r in npu_sim_bridge.recent_reports() if r.item_id == "tf_graph" and not r.rerun),
                 key=lambda r: r.nodes_before)
    stats = next(p for p in report.passes if p.name == "layout").stats
    follows = [r.code for r in report.nodes[activation.op.name].reasons if r.code == "layout.follows"]
    assert follows or not stats.get("ops_following")  # the fetched op ran channels-last (second step on)
    assert all(value.shape == tuple(activation.shape) for _, value in runs)  # NCHW, as built
    return [(float(value).hex(), values.tobytes()) for value, values in runs], transposes, stats


CASES = [("force_fp32", _small_run), ("allow_mix_precision", _small_run), ("allow_mix_precision", _cnn_run)]


@pytest.mark.parametrize("precision, build", CASES, ids=["fp32-small", "mix-small", "mix-cnn"])
def test_training_gives_the_first_steps_loss_bits_with_fewer_transposes(precision, build, monkeypatch):
    config = npu_config(precision_mode=precision)
    losses, transposes, stats = _train(config, build)
    assert stats["transposes_cancelled"] > 0 and stats["ops_following"] > 0
    if build is _cnn_run:  # the gradients outside the GeOp read its results channels-last
        assert stats["results_exported"] > 0
    _without_second_step(monkeypatch)
    reference, reference_transposes, _ = _train(config, build)
    assert losses == reference  # the losses and the fetched activations, bit for bit
    assert losses[0][0] != losses[-1][0]  # the steps trained
    assert transposes < reference_transposes


def _dumped(tmp_path, name):
    """{(op, io, slot): bytes and shape} of every tensor the training step's dump wrote at step 0."""
    graph, loss, train, init, feed, _ = _small_run()
    folder = tmp_path / name
    folder.mkdir()
    config = npu_config(precision_mode="allow_mix_precision", enable_dump=True, dump_path=str(folder),
                        dump_step="0")
    with _v1.Session(graph=graph, config=config) as sess:
        sess.run(init)
        sess.run([loss, train], feed(np.random.default_rng(0)))
    dump = max(find_dumps(str(folder)), key=lambda found: len(found.tensors))
    return {(t["op"], t["io"], t["slot"]): (dump.load(0, t).shape, dump.load(0, t).tobytes()) for t in dump.tensors}


def test_dumps_hold_the_same_tensors_in_the_source_layout(tmp_path, monkeypatch):
    dumped = _dumped(tmp_path, "second_step")
    assert ("between", "output", 0) in dumped
    _without_second_step(monkeypatch)
    assert dumped == _dumped(tmp_path, "first_step_only")
