"""The pipeline holds each pass to the results it declares: a required result that is missing, or a produced one
that was not published, is an internal error naming the pass and the result (never a silent None)."""

import dataclasses

import pytest
import tensorflow as tf

from npu_sim_bridge.config import from_dict
from npu_sim_bridge.passes import GraphPass, PassResult, pipeline, run_pipeline
from npu_sim_bridge.passes.base import PassContractError
from npu_sim_bridge.passes.placement import PlacementPass
from npu_sim_bridge.passes.results import Placement


def _graph_def():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2], name="x")
        tf.identity(tf.nn.relu(x) * 2.0, name="y")
    return graph.as_graph_def()


@dataclasses.dataclass
class _Thing:
    value: int


class _Maker(GraphPass):
    name = "maker"
    produces = (_Thing,)

    def run(self, ctx):
        ctx.publish(_Thing(1))
        return PassResult(changed=False)


class _Silent(GraphPass):
    name = "silent"
    produces = (_Thing,)

    def run(self, ctx):
        return PassResult(changed=False)


class _Dropper(GraphPass):
    name = "dropper"

    def run(self, ctx):
        ctx.drop_result(_Thing)
        return PassResult(changed=False)


class _Needer(GraphPass):
    name = "needer"
    reads = (_Thing,)
    requires = (_Thing,)
    got = []

    def run(self, ctx):
        _Needer.got.append(ctx.result(_Thing))
        return PassResult(changed=False)


@pytest.fixture
def passes(monkeypatch):
    def install(*classes):
        monkeypatch.setattr(pipeline, "_pass_classes", lambda: list(classes))
    _Needer.got = []
    return install


def test_a_pass_that_does_not_publish_what_it_produces_is_named(passes):
    passes(_Silent, _Needer)
    with pytest.raises(PassContractError, match="pass 'silent' failed: internal error: it produces the _Thing "
                                                "result, which a later pass reads, and did not publish one"):
        run_pipeline(_graph_def(), from_dict({}))
    assert _Needer.got == []


def test_a_pass_whose_requirement_is_missing_raises_the_named_error(passes):
    passes(_Maker, _Dropper, _Needer)
    with pytest.raises(PassContractError, match="pass 'needer' failed: internal error: it requires the _Thing "
                                                "result of pass 'maker', which ran before it and did not publish"):
        run_pipeline(_graph_def(), from_dict({}))
    assert _Needer.got == []


def test_a_requirement_is_handed_over_when_published(passes):
    passes(_Maker, _Needer)
    run_pipeline(_graph_def(), from_dict({}))
    assert _Needer.got == [_Thing(1)]


def test_without_the_producing_pass_selected_the_pass_runs_without_the_result(passes):
    passes(_Needer)
    run_pipeline(_graph_def(), from_dict({}))
    assert _Needer.got == [None]


def test_placement_that_publishes_no_placement_stops_the_pipeline_before_precision(monkeypatch):
    # Without the check, precision would read no Placement and pin no node to the host.
    monkeypatch.setattr(PlacementPass, "run", lambda self, ctx: PassResult(changed=False))
    with pytest.raises(PassContractError, match="pass 'placement' failed: internal error: it produces the "
                                                "Placement result"):
        run_pipeline(_graph_def(), from_dict({}))


def test_the_real_passes_declare_what_precision_and_partition_read():
    by_name = {graph_pass.name: graph_pass for graph_pass in pipeline.available_passes()}
    assert Placement in by_name["placement"].produces
    assert Placement in by_name["precision"].requires and Placement in by_name["partition"].requires
    for graph_pass in by_name.values():
        assert set(graph_pass.requires) <= set(graph_pass.reads), graph_pass.name
