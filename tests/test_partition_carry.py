"""Placement's proposal carried over the precision pass's Casts equals a fresh proposal on real graphs."""

import pytest
from tensorflow.core.framework import graph_pb2, node_def_pb2

from npu_sim_bridge.config import from_dict
from npu_sim_bridge.graph.outline import function_library
from npu_sim_bridge.graph.view import GraphView
from npu_sim_bridge.passes import ItemInfo, PassContext
from npu_sim_bridge.passes.pipeline import _run_one, selected_passes
from npu_sim_bridge.passes.partition.carry import Proposed
from npu_sim_bridge.passes.partition.units import UnitsByPlace
from npu_sim_bridge.passes.placement import pass_ as placement
from npu_sim_bridge.report.model import Report
from npu_sim_bridge.testing import models, zoo

MODES = {
    "full sink, emulate": {"precision_mode": "allow_mix_precision"},
    "mixed compute, emulate": {"precision_mode": "allow_mix_precision", "mix_compile_mode": True},
    "mixed compute, native": {"precision_mode": "allow_mix_precision", "mix_compile_mode": True,
                              "sim_fp16_execution": "native"},
    "allow_fp32_to_fp16": {"precision_mode": "allow_fp32_to_fp16"},
}
GRAPHS = {
    "keras_cnn": zoo.keras_cnn,                # v1 conds, Casts after host inputs
    "tf1_batchnorm_cnn": zoo.tf1_batchnorm_cnn,
    "user_cond_mlp": zoo.user_cond_mlp,
    "user_while_mlp": zoo.user_while_mlp,      # a v1 while frame
    "bert_small": lambda: models.bert(with_saver=False, **models.SMALL_KWARGS["bert"]),
}


@pytest.fixture(scope="module")
def built():
    return {name: build() for name, build in GRAPHS.items()}


def _before_partition(model, options):
    """The pipeline's passes up to partition, on a copy of the model's graph."""
    work = graph_pb2.GraphDef()
    work.CopyFrom(model.graph_def())
    item = ItemInfo(id="carry", fetch=tuple(model.fetch_names()))
    ctx = PassContext(view=GraphView(work), options=options, item=item, report=Report("carry"))
    for graph_pass in selected_passes(options):
        if graph_pass.name == "partition":
            break
        if graph_pass.wanted(options):
            _run_one(graph_pass, ctx)
    return ctx


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("graph", list(GRAPHS))
def test_carried_proposal_equals_a_fresh_one(built, graph, mode):
    ctx = _before_partition(built[graph], from_dict(MODES[mode]))
    ctx.view.close_journal()
    functions = function_library(ctx.view)
    carried = placement.carried_proposal(ctx, functions)
    if carried is None:
        return  # the partition proposes again: nothing to compare
    names = [node.name for node in ctx.view.nodes()]
    fresh = placement.fresh_proposal(ctx, names, functions, set())
    assert list(carried.host.items()) == list(fresh.host.items())
    assert carried.segments == fresh.segments
    assert carried.bridges == fresh.bridges == []


@pytest.mark.parametrize("graph", ["keras_cnn", "bert_small"])
def test_the_default_pipeline_carries_the_proposal(built, graph):
    ctx = _before_partition(built[graph], from_dict(MODES["full sink, emulate"]))
    assert ctx.result(Proposed).journal.added  # precision inserted conversions
    assert placement.carried_proposal(ctx, function_library(ctx.view)) is not None


def test_a_removed_node_makes_partition_propose_again(built):
    ctx = _before_partition(built["keras_cnn"], from_dict(MODES["full sink, emulate"]))
    view = ctx.view
    view.add_node(node_def_pb2.NodeDef(name="unused_const", op="NoOp"))
    view.remove_node("unused_const")
    assert placement.carried_proposal(ctx, function_library(view)) is None



def test_the_units_of_a_layout_follow_the_view_across_compaction():
    """Placement's layout numbers the nodes it saw through the view's places: after nodes are removed and
    the view compacted, each node it saw keeps its unit, and a node added since, or removed, has none."""
    graph = graph_pb2.GraphDef()
    for name, inputs in (("a", []), ("b", ["a"]), ("c", ["b"]), ("d", ["a"])):
        graph.node.add(name=name, op="Identity" if inputs else "Placeholder", input=inputs)
    view = GraphView(graph)
    units = UnitsByPlace(view, ["a", "d", "b", "c"])  # a topological order: the units' numbering
    view.add_node(node_def_pb2.NodeDef(name="e", op="Identity", input=["d"]))
    view.set_input("c", 0, "a")
    view.remove_node("b")
    view.compact()
    assert [units[name] for name in ("a", "d", "c")] == [0, 1, 3]
    assert "b" not in units and "e" not in units and units.get("e", -1) == -1
    with pytest.raises(KeyError):
        units["b"]


@pytest.mark.parametrize("mode", ["full sink, emulate", "mixed compute, emulate"])
def test_a_validated_graph_orders_the_carried_segments_by_its_ranks(built, mode, monkeypatch):
    """After the precision pass the view is validated: the carried segments are sorted by its ranks,
    with no order of every node (the partition pass's memory peak), into the order a fresh proposal,
    which orders the whole graph, gives them."""
    ctx = _before_partition(built["bert_small"], from_dict(MODES[mode]))
    ctx.view.close_journal()
    functions = function_library(ctx.view)
    from npu_sim_bridge.passes.partition import carry

    def whole_order(view, **_):
        raise AssertionError("the carried segments asked for an order of every node")

    with monkeypatch.context() as patched:
        patched.setattr(carry, "topological_order", whole_order)
        carried = placement.carried_proposal(ctx, functions)
    assert carried is not None and len(carried.segments) >= 1
    fresh = placement.fresh_proposal(ctx, [node.name for node in ctx.view.nodes()], functions, set())
    assert carried.segments == fresh.segments


def test_a_rewired_input_that_no_chain_explains_makes_partition_propose_again(built):
    """The journal keeps each edit (node, slot, old input): a node precision rewired whose input is then
    pointed at another tensor is not carried; pointed back at its chain, it is carried again."""
    ctx = _before_partition(built["keras_cnn"], from_dict(MODES["full sink, emulate"]))
    view, journal = ctx.view, ctx.result(Proposed).journal
    name, slot, text, other = next(
        (name, slot, text, other) for name in journal.rewired() if name in view
        for slot, text in enumerate(view.input_texts(name)) if text in journal.added
        for other in view.input_texts(name)
        if other not in journal.added and other != journal.inputs_before(view, name)[slot])
    view.set_input(name, slot, other)
    assert journal.inputs_before(view, name) != tuple(view.input_texts(name))
    assert placement.carried_proposal(ctx, function_library(view)) is None
    view.set_input(name, slot, text)
    assert placement.carried_proposal(ctx, function_library(view)) is not None
