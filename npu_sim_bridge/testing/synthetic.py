"""Synthetic graphs of a chosen size with realistic name scopes, for the picture's scale tests and benchmark.

Written as NodeDefs directly (building 10k TensorFlow ops in Python takes seconds; this takes a tenth).
"""

from __future__ import annotations

import numpy as np
from tensorflow.core.framework import graph_pb2, types_pb2
from tensorflow.python.framework import tensor_util

from npu_sim_bridge.runtime.scopes import WITHOUT_NPU_COMPILE_ATTR

OPS_PER_BLOCK = 6  # dense (MatMul), weight, bias (BiasAdd), bias_value, relu, residual (AddV2)


def scoped_graph(target_nodes: int, blocks_per_stage: int = 8, host_every: int = 40) -> graph_pb2.GraphDef:
    """A forward graph of about `target_nodes` nodes: stage_<k>/block_<j>/{dense,weight,bias,relu,residual}.

    Every `host_every`-th block is marked for the host (without_npu_compile_scope's attribute), so
    mix_compile_mode cuts the device part into several GeOps with host ops between them. Output: "out".
    """
    graph = graph_pb2.GraphDef()
    rng = np.random.default_rng(0)
    x = graph.node.add(name="x", op="Placeholder")
    x.attr["dtype"].type = types_pb2.DT_FLOAT
    x.attr["shape"].shape.CopyFrom(tensor_util.tensor_shape.TensorShape([2, 8]).as_proto())
    h = "x"
    blocks = max(1, (target_nodes - 3) // OPS_PER_BLOCK)
    for index in range(blocks):
        stage, block = divmod(index, blocks_per_stage)
        scope = f"stage_{stage}/block_{block}/"
        host = bool(host_every) and index % host_every == host_every - 1
        added = []
        added.append(_const(graph, scope + "weight", rng.standard_normal((8, 8)).astype(np.float32) * 0.3))
        added.append(_const(graph, scope + "bias_value", np.zeros(8, np.float32)))
        added.append(_op(graph, scope + "dense", "MatMul", [h, scope + "weight"],
                         transpose_a=False, transpose_b=False))
        bias = _op(graph, scope + "bias", "BiasAdd", [scope + "dense", scope + "bias_value"])
        bias.attr["data_format"].s = b"NHWC"
        added.append(bias)
        added.append(_op(graph, scope + "relu", "Relu", [scope + "bias"]))
        added.append(_op(graph, scope + "residual", "AddV2", [h, scope + "relu"]))
        if host:
            for node in added:
                node.attr[WITHOUT_NPU_COMPILE_ATTR].b = True
        h = scope + "residual"
    _const(graph, "out/axes", np.array([0, 1], np.int32))
    out = _op(graph, "out", "Sum", [h, "out/axes"], keep_dims=False)
    out.attr["Tidx"].type = types_pb2.DT_INT32
    return graph


def _const(graph, name, value):
    node = graph.node.add(name=name, op="Const")
    node.attr["value"].tensor.CopyFrom(tensor_util.make_tensor_proto(value))
    node.attr["dtype"].type = node.attr["value"].tensor.dtype
    return node


def _op(graph, name, op, inputs, **flags):
    node = graph.node.add(name=name, op=op, input=inputs)
    node.attr["T"].type = types_pb2.DT_FLOAT
    for key, value in flags.items():
        node.attr[key].b = value
    return node
