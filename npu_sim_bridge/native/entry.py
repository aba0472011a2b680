"""The Python entry the C++ shim calls for every graph Grappler hands to NpuOptimizer.

Grappler only logs an optimizer's error and then runs the original graph, which would silently
run the unrewritten model. So every failure (bad option, failing pass, internal bug) is turned
into a graph that fails at run time with the message: an Assert that every fetched node waits
on. `sess.run` then raises InvalidArgumentError carrying the text.
"""

from __future__ import annotations

import logging

from tensorflow.core.framework import attr_value_pb2, graph_pb2, tensor_pb2, types_pb2
from tensorflow.core.protobuf import rewriter_config_pb2

from npu_sim_bridge.errors import NpuSimError
from npu_sim_bridge.graph.names import node_name

logger = logging.getLogger("npu_sim_bridge")

ERROR_SCOPE = "npu_sim_error"
ERROR_PREFIX = "NpuOptimizer: "
_RESULT_OPS = frozenset({"_Retval", "_DeviceRetval"})


def optimize(item_id: str, graph_bytes: bytes, fetch: list[str], feed: list[str],
             preserve: list[str], config_bytes: bytes) -> bytes:
    """Rewrite one Grappler item; never raises (errors become a failing graph)."""
    graph_def = graph_pb2.GraphDef.FromString(graph_bytes)
    if any(node.name.startswith(ERROR_SCOPE + "/") for node in graph_def.node):
        return graph_bytes  # already turned into an error graph by the first iteration
    try:
        from npu_sim_bridge.config import parse_parameter_map
        from npu_sim_bridge.passes import ItemInfo, run_pipeline
        from npu_sim_bridge.passes.pipeline import covered_by_caller

        config = rewriter_config_pb2.RewriterConfig.CustomGraphOptimizer.FromString(config_bytes)
        options = parse_parameter_map(config.parameter_map)
        item = ItemInfo(id=item_id, fetch=tuple(fetch), feed=tuple(feed),
                        preserve=frozenset(preserve), is_function=_is_function_item(item_id, graph_def))
        if covered_by_caller(graph_def, item):
            logger.debug("NpuOptimizer: function %s was rewritten with its caller", item_id)
            return graph_bytes
        return run_pipeline(graph_def, options, item).graph_def.SerializeToString()
    except NpuSimError as err:
        message = ERROR_PREFIX + str(err)
        logger.error("%s", message)
    except Exception as err:  # noqa: BLE001 - a bug must still reach the user, never be skipped
        logger.exception("NpuOptimizer internal error on graph %s", item_id)
        message = (f"{ERROR_PREFIX}internal error {type(err).__name__}: {err} "
                   "(this is a bug in npu_sim_bridge; please report it with the graph)")
    return failing_graph(graph_def, fetch, message).SerializeToString()


def _is_function_item(item_id: str, graph_def: graph_pb2.GraphDef) -> bool:
    return any(node.op in ("_Arg", "_Retval") for node in graph_def.node)


def failing_graph(graph_def: graph_pb2.GraphDef, fetch: list[str], message: str) -> graph_pb2.GraphDef:
    """`graph_def` plus an Assert(false, message) that every fetched node depends on.

    TensorFlow prints the Assert's string escaped (' becomes \\'), so quotes are dropped from
    the copy carried in the graph; the logged message keeps them.
    """
    message = message.replace("'", "")
    failed = graph_pb2.GraphDef()
    failed.CopyFrom(graph_def)
    text = failed.node.add(name=f"{ERROR_SCOPE}/message", op="Const")
    text.attr["dtype"].type = types_pb2.DT_STRING
    text.attr["value"].tensor.CopyFrom(tensor_pb2.TensorProto(
        dtype=types_pb2.DT_STRING, string_val=[message.encode("utf-8")]))
    condition = failed.node.add(name=f"{ERROR_SCOPE}/condition", op="Const")
    condition.attr["dtype"].type = types_pb2.DT_BOOL
    condition.attr["value"].tensor.CopyFrom(tensor_pb2.TensorProto(
        dtype=types_pb2.DT_BOOL, bool_val=[False]))
    check = failed.node.add(name=f"{ERROR_SCOPE}/assert", op="Assert",
                            input=[condition.name, text.name])
    check.attr["T"].CopyFrom(attr_value_pb2.AttrValue(
        list=attr_value_pb2.AttrValue.ListValue(type=[types_pb2.DT_STRING])))
    check.attr["summarize"].i = 1
    targets = {node_name(name) for name in fetch}
    if not targets:  # no fetch list: make every sink wait on the assert
        consumed = {node_name(i) for node in graph_def.node for i in node.input}
        targets = {node.name for node in graph_def.node if node.name not in consumed}
    # Grappler hands over a placed graph: the new nodes need a device too.
    device = next((node.device for node in graph_def.node if node.device), "")
    for node in (text, condition, check):
        node.device = device
    for node in list(failed.node):
        if node.name not in targets:
            continue
        if node.op not in _RESULT_OPS:
            node.input.append("^" + check.name)
            continue
        # A function result takes exactly one input: the value passes through an Identity that waits.
        gate = failed.node.add(name=f"{ERROR_SCOPE}/{node.name}", op="Identity", device=device,
                               input=[node.input[0], "^" + check.name])
        gate.attr["T"].CopyFrom(node.attr["T"])
        node.input[0] = gate.name
    return failed
