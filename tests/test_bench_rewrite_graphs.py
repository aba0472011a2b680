"""The rewrite harness's two graphs (benchmarks/bench_precision.py handed_over): the Keras graph as built holds
batch norm's If branches as library functions; as a Session's Grappler hands it to auto_mixed_precision_cpu it
holds none. NpuOptimizer's GeOp body is left to its caller on both: on the graph as built it still holds the Ifs,
and Grappler leaves the branch functions it calls to the call as well."""

import pytest
from tensorflow.python.grappler import tf_optimizer

from npu_sim_bridge.passes.partition.call_config import LEFT_TO_CALLER_ATTR
from npu_sim_bridge.testing import models
from script_modules import load_script

_IFS = {"If", "StatelessIf"}


@pytest.fixture(scope="module")
def graphs():
    harness = load_script("benchmarks/bench_precision.py")
    meta = models.resnet50(batch_size=1, image_size=32).meta_graph_def()
    return harness, meta, harness.handed_over(meta)


def _ops(graph_def):
    return {node.op for node in graph_def.node}


def _geop_bodies(graph_def):
    return [function for function in graph_def.library.function if function.signature.name.startswith("GeOp")]


def test_the_handed_over_graph_has_its_ifs_lowered_and_no_library(graphs):
    _, meta, handed = graphs
    assert _ops(meta.graph_def) & _IFS and meta.graph_def.library.function
    assert not _ops(handed.graph_def) & _IFS and not handed.graph_def.library.function
    assert {"Switch", "Merge"} <= _ops(handed.graph_def)
    assert list(handed.collection_def) == list(meta.collection_def)  # the same fetches for the harness


def test_the_geop_body_and_what_it_calls_are_left_to_the_call_on_both_graphs(graphs):
    harness, meta, handed = graphs
    config = harness.optimize_config("npu_all")
    built = tf_optimizer.OptimizeGraph(config, meta)
    handed_bodies = _geop_bodies(tf_optimizer.OptimizeGraph(config, handed))
    built_bodies = _geop_bodies(built)
    assert built_bodies and handed_bodies
    assert all(body.attr[LEFT_TO_CALLER_ATTR].b for body in built_bodies + handed_bodies)
    ifs = [node for body in built_bodies for node in body.node_def if node.op in _IFS]
    assert ifs  # the graph as built keeps them in the body, for the call to lower
    branches = {node.attr[key].func.name for node in ifs for key in ("then_branch", "else_branch")}
    library = {function.signature.name: function for function in built.library.function}
    assert branches and all(library[name].attr[LEFT_TO_CALLER_ATTR].b for name in branches)
