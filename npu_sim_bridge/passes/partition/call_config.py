"""How Grappler treats a GeOp's body: the call's `config_proto` and the FunctionDef's attributes.

A GeOp body's nodes went through a whole Grappler iteration inside the graph that held them, before
the rewrite; the rewrite adds its Casts and roundings, one per tensor. Grappler has nothing left to do
there that changes a result: the Session's meta optimizer would run every optimizer over each body,
once per meta-optimizer iteration (on ResNet-50 twelve seconds of a first step), and the five that
changed anything (pruning, CSE, constant folding, arithmetic and dependency optimization, run once
at the call before) changed no loss bit on ten sweep models, ResNet-50 and EfficientNetB0 among
them, and their run took about a second of those two models' first step.

So a body that calls no functions is marked for the Session's meta optimizer to leave it to its
caller, and its call runs no Grappler: the body runs as the rewrite wrote it. A body that calls
functions (If, While, a nested call) keeps the Session's pass, which also optimizes the functions it
calls, and its call runs no Grappler either (the body is optimized already).
"""

from __future__ import annotations

from typing import Iterable

from tensorflow.core.framework import attr_value_pb2, function_pb2
from tensorflow.core.protobuf import config_pb2

from npu_sim_bridge.graph.ports import called_by

# Grappler's meta optimizer leaves library functions with this attribute to the callers that
# instantiate them (tensorflow/core/framework/dataset.h kTFDataFunction).
LEFT_TO_CALLER_ATTR = "_tf_data_function"


def _no_grappler() -> bytes:
    config = config_pb2.ConfigProto()
    config.graph_options.rewrite_options.disable_meta_optimizer = True
    return config.SerializeToString()


NO_GRAPPLER = _no_grappler()  # every GeOp call's config_proto: the body runs as it is


def calls_functions(nodes: Iterable, functions: dict[str, function_pb2.FunctionDef]) -> bool:
    """Whether any of `nodes` (NodeDefs) calls a function: its op is a library function, or an
    attribute names one (If, While, PartitionedCall, ...)."""
    return any(called_by(node, functions) for node in nodes)  # called_by reads only an op's func attrs


def geop_attrs(calls: bool) -> tuple[dict[str, attr_value_pb2.AttrValue], dict[str, attr_value_pb2.AttrValue]]:
    """(the call's extra attributes, the FunctionDef's attributes) for a body that `calls` functions or not."""
    call = {"config_proto": attr_value_pb2.AttrValue(s=NO_GRAPPLER)}
    if calls:
        return call, {}
    return call, {LEFT_TO_CALLER_ATTR: attr_value_pb2.AttrValue(b=True)}
