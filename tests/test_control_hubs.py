"""Control inputs many nodes share are gathered behind one NoOp: fewer edges, the same execution."""

import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format
from tensorflow.core.framework import graph_pb2

import npu_sim_bridge
from npu_sim_bridge.config import from_dict
from npu_sim_bridge.graph import GraphView, control_hubs, parse_input, topological_order
from npu_sim_bridge.passes import ItemInfo, run_pipeline
from npu_sim_bridge.testing import models

_v1 = tf.compat.v1


def _graph(text):
    return text_format.Parse(text, graph_pb2.GraphDef())


def _shared(readers, controls, op="Identity", extra=""):
    lines = [f'node {{ name: "{c}" op: "NoOp" }}' for c in controls]
    for reader in readers:
        inputs = " ".join(f'input: "^{c}"' for c in controls)
        lines.append(f'node {{ name: "{reader}" op: "{op}" input: "x" {inputs} {extra} }}')
    return 'node { name: "x" op: "Placeholder" }\n' + "\n".join(lines)


def _edges(graph_def):
    return sum(len(node.input) for node in graph_def.node)


def _controls(view, name):
    return [parse_input(text).node for text in view.input_texts(name) if text.startswith("^")]


def test_shared_control_inputs_get_one_hub_that_the_readers_wait_on():
    graph_def = _graph(_shared(["r0", "r1", "r2"], ["c0", "c1", "c2", "c3", "c4"]))
    before = _edges(graph_def)
    view = GraphView(graph_def, gather_control_inputs=True)
    [hub] = view.hubs
    assert (hub.inputs, hub.readers) == (tuple(f"^c{i}" for i in range(5)), ("r0", "r1", "r2"))
    for reader in ("r0", "r1", "r2"):
        assert view.input_texts(reader) == ("x", "^" + hub.name)
        assert list(view.node(reader).input) == ["x", "^" + hub.name]  # the NodeDef agrees with the index
    assert _controls(view, hub.name) == ["c0", "c1", "c2", "c3", "c4"]
    assert view.node(hub.name).op == "NoOp"
    assert before - _edges(view.to_graph_def()) == hub.edges_saved == 15 - 8
    assert view.consumers(hub.name) == ["r0", "r1", "r2"]
    assert view.consumers("c0") == [hub.name]
    order = topological_order(view)
    assert all(order.index(f"c{i}") < order.index(hub.name) < order.index("r0") for i in range(5))


def test_a_graph_in_topological_order_stays_so_in_the_views_order(monkeypatch):
    """The hub is appended to the GraphDef, but the view orders it before its first reader: ordering a graph
    TensorFlow wrote (already topological) still takes the one sweep, not Kahn's queue."""
    from npu_sim_bridge.graph import validate

    graph_def = _graph(_shared(["r0", "r1", "r2"], ["c0", "c1", "c2", "c3"]) + '\nnode { name: "z" op: "Identity" input: "r2" }')
    view = GraphView(graph_def, gather_control_inputs=True)
    assert graph_def.node[-1].name == view.hubs[0].name
    monkeypatch.setattr(validate, "_kahn", lambda *args: pytest.fail("Kahn's queue ran"))
    order = topological_order(view)
    assert order == [name for name, _, _ in view.records()]
    assert order.index("c3") < order.index(view.hubs[0].name) == order.index("r0") - 1


def test_a_hub_keeps_its_place_in_the_views_order_when_its_first_reader_goes():
    """The hub stands before its first reader; once that reader is removed, before the node that followed
    it, before and after compaction, and nodes added later come after it."""
    from tensorflow.core.framework import node_def_pb2

    graph_def = _graph(_shared(["r0", "r1", "r2"], ["c0", "c1", "c2", "c3"]) + '\nnode { name: "z" op: "Identity" input: "r2" }')
    view = GraphView(graph_def, gather_control_inputs=True)
    hub = view.hubs[0].name
    assert view.names() == ["x", "c0", "c1", "c2", "c3", hub, "r0", "r1", "r2", "z"]
    view.remove_node("r0")
    assert view.names() == ["x", "c0", "c1", "c2", "c3", hub, "r1", "r2", "z"]
    view.add_node(node_def_pb2.NodeDef(name="late", op="Identity", input=["z"]))
    view.compact()
    assert view.names() == ["x", "c0", "c1", "c2", "c3", hub, "r1", "r2", "z", "late"]
    assert [node.name for node in view.to_graph_def().node] == ["x", "c0", "c1", "c2", "c3", "r1", "r2", "z", hub, "late"]
    assert topological_order(view) == view.names()
    view.remove_nodes(["late", "z", "r2", "r1"])
    view.remove_node(hub)
    assert view.names() == ["x", "c0", "c1", "c2", "c3"]


def test_a_node_holding_the_shared_run_among_other_control_inputs_waits_on_the_hub_for_it():
    """The gradient tuples' NoOps wait on the update ops and on one or two more: the run of shared control
    inputs goes behind the hub, the others stay. A run that is not contiguous is left as it is."""
    controls = ["c0", "c1", "c2", "c3"]
    run = " ".join(f'input: "^{c}"' for c in controls)
    text = "\n".join([
        'node { name: "x" op: "Placeholder" }',
        'node { name: "y" op: "NoOp" }',
        *[f'node {{ name: "{c}" op: "NoOp" }}' for c in controls],
        f'node {{ name: "early" op: "Identity" input: "x" input: "^y" {run} }}',  # before the run, first in the graph
        f'node {{ name: "r0" op: "Identity" input: "x" {run} }}',
        f'node {{ name: "r1" op: "Identity" input: "x" {run} }}',
        f'node {{ name: "late" op: "NoOp" {run} input: "^y" }}',  # after the run
        'node { name: "apart" op: "NoOp" input: "^c0" input: "^y" input: "^c1" input: "^c2" input: "^c3" }',
    ])
    graph_def = _graph(text)
    before = _edges(graph_def)
    view = GraphView(graph_def, gather_control_inputs=True)
    [hub] = view.hubs
    assert hub.readers == ("early", "r0", "r1", "late")
    assert view.input_texts("early") == ("x", "^y", "^" + hub.name)
    assert view.input_texts("late") == ("^y", "^" + hub.name)
    assert list(view.node("late").input) == ["^y", "^" + hub.name]
    assert view.input_texts("apart") == ("^c0", "^y", "^c1", "^c2", "^c3")
    assert before - _edges(view.to_graph_def()) == hub.edges_saved == 4 * 3 - 4
    order = topological_order(view)
    assert order.index(hub.name) == order.index("early") - 1


@pytest.mark.parametrize("text, why", [
    (_shared(["r0"], ["c0", "c1", "c2", "c3"]), "one reader"),
    (_shared(["r0", "r1"], ["c0", "c1", "c2"]), "three control inputs"),
    (_shared(["m0", "m1"], ["c0", "c1", "c2", "c3"], op="Merge"), "Merge counts control inputs apart"),
    (_shared(["m0", "m1"], ["c0", "c1", "c2", "c3"], op="ControlTrigger"), "ControlTrigger ignores deadness"),
    (_shared(["r0", "r1"], ["c0", "c1", "c2", "c3"]).replace('node { name: "c3" op: "NoOp" }', ""),
     "a control input naming a missing node"),
])
def test_no_hub_where_it_would_change_more_than_the_edge_count(text, why):
    view = GraphView(_graph(text), gather_control_inputs=True)
    assert view.hubs == [], why


def test_a_hub_name_never_takes_a_name_in_use():
    text = _shared(["r0", "r1"], ["c0", "c1", "c2", "c3"]) + f'\nnode {{ name: "{control_hubs.HUB_SCOPE}/0" op: "NoOp" }}'
    view = GraphView(_graph(text), gather_control_inputs=True)
    assert [hub.name for hub in view.hubs] == [f"{control_hubs.HUB_SCOPE}/0_1"]


def test_without_the_flag_the_view_leaves_the_graph_as_it_is():
    graph_def = _graph(_shared(["r0", "r1"], ["c0", "c1", "c2", "c3"]))
    expected = graph_pb2.GraphDef()
    expected.CopyFrom(graph_def)
    view = GraphView(graph_def)
    assert view.hubs == [] and view.to_graph_def() == expected


def _batch_norm_training(seed=3):
    """tf.compat.v1.layers batch norm behind a training placeholder, minimized after the UPDATE_OPS: the
    pattern of migrated scripts that puts the same control inputs on every gradient op without a data input
    from the block."""
    with models._building(seed) as graph:  # Keras layers draw their initializer seeds from Python's random
        x = _v1.placeholder(tf.float32, [4, 6, 6, 3], name="x")
        training = _v1.placeholder_with_default(True, [], name="training")
        # Resource variables: a ref variable's reads alias its buffer, and an update may race with them.
        with _v1.variable_scope("model", use_resource=True):
            h = _layers(x, training)
        loss = tf.reduce_mean(tf.square(h), name="loss")
        with tf.control_dependencies(_v1.get_collection(_v1.GraphKeys.UPDATE_OPS)):
            train = _v1.train.MomentumOptimizer(0.1, 0.9).minimize(loss, name="train")
        init = _v1.global_variables_initializer()
    return graph, train, loss, init


def _layers(h, training):
    for index in range(3):
        h = _v1.layers.conv2d(h, 4, 3, padding="same", name=f"conv{index}")
        h = tf.nn.relu(_v1.layers.batch_normalization(h, training=training, name=f"bn{index}"))
    return h


def _train(config, steps=3):
    graph, train, loss, init = _batch_norm_training()
    value = np.linspace(-1.0, 1.0, 4 * 6 * 6 * 3, dtype=np.float32).reshape(4, 6, 6, 3)
    with _v1.Session(graph=graph, config=config) as sess:
        sess.run(init)
        losses = [sess.run([train, loss], {"x:0": value})[1] for _ in range(steps)]
        variables = sess.run(graph.get_collection(_v1.GraphKeys.GLOBAL_VARIABLES))
    return losses, variables


def test_a_training_session_runs_the_same_with_hubs(npu_config, monkeypatch):
    """Bit for bit: the hubs change the edges, not when anything runs relative to what it waits on."""
    config = npu_config(precision_mode="allow_mix_precision")
    with_hubs = _train(config)
    reports = npu_sim_bridge.recent_reports()
    assert any(name.startswith(control_hubs.HUB_SCOPE) for report in reports for name in report.nodes)
    npu_sim_bridge.clear_reports()
    monkeypatch.setattr(control_hubs, "plan_hubs", lambda place, inputs, op_of: [])
    without = _train(config)
    assert not any(name.startswith(control_hubs.HUB_SCOPE) for report in npu_sim_bridge.recent_reports()
                   for name in report.nodes)
    np.testing.assert_array_equal(with_hubs[0], without[0])
    for a, b in zip(with_hubs[1], without[1]):
        np.testing.assert_array_equal(a, b)


def test_the_report_records_each_hub_and_counts_only_input_nodes():
    graph, train, loss, _ = _batch_norm_training()
    graph_def = graph.as_graph_def()
    options = from_dict({"precision_mode": "allow_mix_precision"})
    result = run_pipeline(graph_def, options, ItemInfo(id="bn", fetch=(train.name, "loss")))
    hubs = [record for name, record in result.report.nodes.items() if name.startswith(control_hubs.HUB_SCOPE)]
    assert hubs, "the UPDATE_OPS pattern shares its control inputs among the gradient ops"
    assert all(record.op == "NoOp" and [r.code for r in record.reasons] == ["hub.control"] for record in hubs)
    assert all(record.reasons[0].get("inputs") >= 2 and "control inputs" in record.reason for record in hubs)
    assert result.report.nodes_before == len(graph_def.node)
    again = run_pipeline(result.graph_def, options, ItemInfo(id="bn", fetch=(train.name, "loss")))
    assert not [name for name in again.report.nodes if name.startswith(control_hubs.HUB_SCOPE + "/")
                and name not in result.report.nodes], "a second run adds no hub"


def test_no_pass_no_hub():
    graph, train, *_ = _batch_norm_training()
    graph_def = graph.as_graph_def()
    result = run_pipeline(graph_def, from_dict({"sim_passes": "none"}), ItemInfo(fetch=(train.name,)))
    assert [list(node.input) for node in result.graph_def.node] == [list(node.input) for node in graph_def.node]
