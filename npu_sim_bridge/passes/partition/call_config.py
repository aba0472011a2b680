"""How Grappler treats a GeOp's body: the call's `config_proto` and the FunctionDef's attributes.

A GeOp body's nodes went through a whole Grappler iteration inside the graph that held them, before
the rewrite. On the rewritten body Grappler still prunes what nothing reads, merges alike nodes (the
Casts the rewrite adds per consumer), folds constants and cleans dependencies; the Session's meta
optimizer would instead run every optimizer over each body, once per meta-optimizer iteration (on
ResNet-50 twelve seconds of a first step, where those four changed 214 nodes and the others none).

So a body is marked for the Session's meta optimizer to leave it to its caller, and the GeOp call
runs those optimizers, one iteration, when it instantiates its function. A body that calls functions
(If, While, a nested call) keeps the Session's pass, which also optimizes the functions it calls,
and its call runs no Grappler (the body is optimized already).
"""

from __future__ import annotations

from typing import Iterable

from tensorflow.core.framework import attr_value_pb2, function_pb2
from tensorflow.core.protobuf import config_pb2, rewriter_config_pb2

from npu_sim_bridge.graph.ports import called_by

# Grappler's meta optimizer leaves library functions with this attribute to the callers that
# instantiate them (tensorflow/core/framework/dataset.h kTFDataFunction).
LEFT_TO_CALLER_ATTR = "_tf_data_function"

_OFF = rewriter_config_pb2.RewriterConfig.OFF
_ON = rewriter_config_pb2.RewriterConfig.ON
_AT_CALL = ("common_subgraph_elimination", "constant_folding", "arithmetic_optimization", "dependency_optimization")
_NOT_AT_CALL = ("layout_optimizer", "shape_optimization", "remapping", "loop_optimization", "function_optimization",
                "debug_stripper", "scoped_allocator_optimization", "pin_to_host_optimization",
                "implementation_selector", "auto_mixed_precision", "auto_mixed_precision_onednn_bfloat16",
                "auto_mixed_precision_mkl", "auto_mixed_precision_cpu", "use_plugin_optimizers",
                "experimental_conditional_code_motion")


def _config(optimize: bool) -> bytes:
    config = config_pb2.ConfigProto()
    rewrite = config.graph_options.rewrite_options
    if not optimize:
        rewrite.disable_meta_optimizer = True
        return config.SerializeToString()
    rewrite.meta_optimizer_iterations = rewriter_config_pb2.RewriterConfig.ONE
    rewrite.min_graph_nodes = -1
    rewrite.memory_optimization = rewriter_config_pb2.RewriterConfig.NO_MEM_OPT
    rewrite.disable_tfg_optimizer = True  # toposort, shape inference, control-flow sinking: nothing for a flat body
    for field in _NOT_AT_CALL:
        setattr(rewrite, field, _OFF)
    for field in _AT_CALL:
        setattr(rewrite, field, _ON)
    return config.SerializeToString()


OPTIMIZED_AT_CALL = _config(True)   # the call's config_proto for a body left to it
OPTIMIZED_BEFORE = _config(False)   # the call's config_proto for a body the Session's pass optimizes


def calls_functions(nodes: Iterable, functions: dict[str, function_pb2.FunctionDef]) -> bool:
    """Whether any of `nodes` (NodeDefs) calls a function: its op is a library function, or an
    attribute names one (If, While, PartitionedCall, ...)."""
    return any(called_by(node, functions) for node in nodes)  # called_by reads only an op's func attrs


def geop_attrs(calls: bool) -> tuple[dict[str, attr_value_pb2.AttrValue], dict[str, attr_value_pb2.AttrValue]]:
    """(the call's extra attributes, the FunctionDef's attributes) for a body that `calls` functions or not."""
    if calls:
        return {"config_proto": attr_value_pb2.AttrValue(s=OPTIMIZED_BEFORE)}, {}
    return ({"config_proto": attr_value_pb2.AttrValue(s=OPTIMIZED_AT_CALL)},
            {LEFT_TO_CALLER_ATTR: attr_value_pb2.AttrValue(b=True)})
