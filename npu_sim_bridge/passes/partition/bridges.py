"""Live crossings for v1 cond branch tensors that a GeOp boundary must cut.

A tensor inside a v1 cond branch is dead when the branch is not taken, and a dead tensor cannot
be a function's argument or result. Keras and `layers.batch_normalization` conds are cut by any
host op between a forward pass and its gradient (the gradient's branch reads the forward branch's
batch-norm statistics), so without help the whole cond would have to stay on the host.

A bridge crosses such an edge with a live value and gives the deadness back on the other side:

    producer side:  live = Merge(t, Switch(stand_in, pred)[not branch])    alive in either case
    consumer side:  t'   = Switch(live, pred)[branch]                      dead exactly when t is

`stand_in` is a zero of the tensor's dtype (for a switched variable handle: the handle itself).
Both sides only forward values, so float32 results are unchanged. A bridge needs the tensor's
branches to be decided by one predicate tensor and one branch port, and that predicate to be live
itself; the predicate is an ancestor of the producer and the consumer, so wiring it into their
segments creates no cycle.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict

from tensorflow.core.framework import attr_value_pb2, node_def_pb2, tensor_pb2, types_pb2
from tensorflow.core.framework import tensor_shape_pb2

from npu_sim_bridge.graph.names import TensorRef, format_input, node_name, parse_input
from npu_sim_bridge.graph.op_categories import SWITCH_OPS, VARIABLE_OPS
from npu_sim_bridge.graph.view import GraphView

_PASS_THROUGH_HANDLE_OPS = SWITCH_OPS | frozenset({"Identity", "Snapshot"})
_ZERO_FIELDS = {
    types_pb2.DT_FLOAT: "float_val", types_pb2.DT_DOUBLE: "double_val", types_pb2.DT_HALF: "half_val",
    types_pb2.DT_BFLOAT16: "half_val", types_pb2.DT_INT32: "int_val", types_pb2.DT_INT16: "int_val",
    types_pb2.DT_INT8: "int_val", types_pb2.DT_UINT8: "int_val", types_pb2.DT_INT64: "int64_val",
    types_pb2.DT_BOOL: "bool_val",
}


@dataclasses.dataclass(frozen=True)
class Bridge:
    """One cut edge producer:port -> consumer whose tensor lives in branch `branch` of predicate `pred`."""

    producer: str
    port: int
    consumer: str
    pred: str            # the predicate tensor, "node:port"
    branch: int          # the Switch output port of the branch (0: false, 1: true)


def variable_origin(view: GraphView, producer: str, port: int) -> str | None:
    """The variable op whose handle this tensor forwards (through Switch and Identity), else None."""
    name, seen = producer, 0
    while seen < 64:
        node = view.get(name)
        if node is None:
            return None
        if node.op in VARIABLE_OPS:
            return node.name
        if node.op not in _PASS_THROUGH_HANDLE_OPS or not node.input:
            return None
        name = node_name(node.input[0])
        seen += 1
    return None


def bridge_for(view: GraphView, producer: str, port: int, consumer: str, guard, tensor_guard,
               dtype: int) -> Bridge | None:
    """A Bridge for the edge when its guard is one predicate and one branch and the dtype allows; else None."""
    if port < 0 or not guard:
        return None
    if dtype not in _ZERO_FIELDS and not (dtype == types_pb2.DT_RESOURCE and variable_origin(view, producer, port)):
        return None
    conditions = set()
    for switch, branch in guard:
        node = view.get(switch)
        if node is None or len(node.input) < 2:
            return None
        ref = parse_input(node.input[1])
        conditions.add((format_input(ref), branch))
    if len(conditions) != 1:
        return None
    pred, branch = next(iter(conditions))
    pred_ref = parse_input(pred)
    if tensor_guard(pred_ref.node, pred_ref.port):
        return None  # the predicate is itself inside a branch (a nested cond)
    return Bridge(producer, port, consumer, pred, branch)


def apply_bridges(view: GraphView, bridges, segment_of_node: dict[str, int], dtype_of) -> dict[str, int | None]:
    """Rewrite the graph for `bridges`; returns each new node with the segment it joins (None: host).

    `segment_of_node` maps member nodes to their segment index; `dtype_of(producer, port)` gives
    the tensor's (base) dtype.
    """
    added: dict[str, int | None] = {}
    live_of: dict[tuple[str, int], str] = {}
    back_of: dict[tuple[str, int, int | None], str] = {}
    by_consumer = defaultdict(list)
    for bridge in bridges:
        by_consumer[bridge.consumer].append(bridge)
    for consumer in sorted(by_consumer):
        for bridge in by_consumer[consumer]:
            key = (bridge.producer, bridge.port)
            side = segment_of_node.get(bridge.producer)
            dtype = dtype_of(bridge.producer, bridge.port)
            device = view.node(bridge.producer).device
            if key not in live_of:
                live_of[key] = _live_side(view, bridge, dtype, device, side, added)
            target = segment_of_node.get(consumer)
            back_key = (bridge.producer, bridge.port, target)
            if back_key not in back_of:
                name = view.unique_name(f"{bridge.producer}/NpuSimBranch_{bridge.port}")
                view.add_node(_node(name, "Switch", [f"{live_of[key]}:0", bridge.pred], dtype,
                                    view.node(consumer).device))
                added[name] = target
                back_of[back_key] = name
            old = format_input(parse_input(f"{bridge.producer}:{bridge.port}"))
            node = view.node(consumer)
            for index, text in enumerate(list(node.input)):
                if not text.startswith("^") and format_input(parse_input(text)) == old:
                    view.set_input(consumer, index, TensorRef(back_of[back_key], bridge.branch))
    return added


def _live_side(view: GraphView, bridge: Bridge, dtype: int, device: str, side, added) -> str:
    base = f"{bridge.producer}/NpuSimLive_{bridge.port}"
    if dtype == types_pb2.DT_RESOURCE:
        stand_in = variable_origin(view, bridge.producer, bridge.port)
    else:
        stand_in = view.unique_name(f"{base}/zero")
        view.add_node(_zero(stand_in, dtype, device))
        added[stand_in] = side
    other = view.unique_name(f"{base}/other")
    view.add_node(_node(other, "Switch", [stand_in, bridge.pred], dtype, device))
    added[other] = side
    live = view.unique_name(base)
    merge = _node(live, "Merge", [f"{bridge.producer}:{bridge.port}", f"{other}:{1 - bridge.branch}"], dtype, device)
    merge.attr["N"].i = 2
    view.add_node(merge)
    added[live] = side
    return live


def _node(name: str, op: str, inputs, dtype: int, device: str) -> node_def_pb2.NodeDef:
    node = node_def_pb2.NodeDef(name=name, op=op, device=device)
    node.input.extend(format_input(parse_input(text)) for text in inputs)
    node.attr["T"].CopyFrom(attr_value_pb2.AttrValue(type=dtype))
    return node


def _zero(name: str, dtype: int, device: str) -> node_def_pb2.NodeDef:
    tensor = tensor_pb2.TensorProto(dtype=dtype, tensor_shape=tensor_shape_pb2.TensorShapeProto())
    getattr(tensor, _ZERO_FIELDS[dtype]).append(False if dtype == types_pb2.DT_BOOL else 0)
    node = node_def_pb2.NodeDef(name=name, op="Const", device=device)
    node.attr["dtype"].type = dtype
    node.attr["value"].tensor.CopyFrom(tensor)
    return node
