"""The Python entry the C++ shim calls for every graph Grappler hands to NpuOptimizer.

Grappler only logs an optimizer's error and then runs the original graph, which would silently
run the unrewritten model. So every failure (bad option, failing pass, internal bug) is turned
into a graph that fails at run time with the message: an Assert that every fetched node waits
on. `sess.run` then raises InvalidArgumentError carrying the text. If that message cannot be
carried, a fixed ASCII one is; if no failing graph can be built at all (or Ctrl-C arrives), the
exception reaches the shim, which fails the graph itself.

The entry also refuses a custom optimizer registered under a misspelling of NpuOptimizer, and a
graph another NpuOptimizer entry of the same config already rewrote with different options.
"""

from __future__ import annotations

import hashlib
import logging
import threading

from tensorflow.core.framework import attr_value_pb2, graph_pb2, tensor_pb2, types_pb2
from tensorflow.core.protobuf import rewriter_config_pb2

from npu_sim_bridge.errors import ConfigError, NpuSimError
from npu_sim_bridge.graph.attr_names import OPTIONS_ATTR, SEEN_ATTR
from npu_sim_bridge.graph.names import node_name
from npu_sim_bridge.graph.table import NodeTable

logger = logging.getLogger("npu_sim_bridge")

ERROR_SCOPE = "npu_sim_error"
ERROR_PREFIX = "NpuOptimizer: "
NPU_OPTIMIZER = "NpuOptimizer"
# Which NpuOptimizer options rewrote a graph: a digest on the graph's first node, so that a second
# custom_optimizers entry with other options is told apart from Grappler's second iteration.
# What the run says when even the error graph cannot be built: ASCII only, nothing computed.
FALLBACK_MESSAGE = (ERROR_PREFIX + "the rewrite failed and its error could not be turned into a message "
                    "(see the log); the graph is not run")
_RESULT_OPS = frozenset({"_Retval", "_DeviceRetval"})
_FUNCTION_ITEM_OPS = frozenset({"_Arg", "_Retval"})  # what marks a function item (not the _Device* forms)

_failures_lock = threading.Lock()
_failures: list[str] = []


def recent_failures() -> list[str]:
    """Messages of the graphs this process's NpuOptimizer turned into failing graphs (at most 64)."""
    with _failures_lock:
        return list(_failures)


def optimize(item_id: str, graph_bytes: bytes, fetch: list[str], feed: list[str],
             preserve: list[str], config_bytes: bytes, columns: tuple | None = None) -> bytes:
    """Rewrite one Grappler item; never raises (errors become a failing graph).

    `columns`: the graph's nodes as columns, from the GraphDef the shim holds (graph.table.NodeTable);
    read from the parsed bytes when absent.

    Only if even the failing graph cannot be built does an exception reach the shim, which then
    returns its own failing graph: Grappler must never run the original graph after an error.
    """
    graph_def = None
    try:
        graph_def = graph_pb2.GraphDef.FromString(graph_bytes)
        table = (NodeTable.of(graph_def, stamp_attr=SEEN_ATTR, digest_attr=OPTIONS_ATTR) if columns is None
                 else NodeTable.from_columns(columns, graph_def))
        facts = _GraphFacts.of(table)
        if facts.error_graph:
            return graph_bytes  # already turned into an error graph by the first iteration
        message = _rewrite_or_message(item_id, graph_bytes, graph_def, table, facts, fetch, feed, preserve,
                                      config_bytes)
        if isinstance(message, bytes):
            return message
    except KeyboardInterrupt:
        _remember_failure(f"{ERROR_PREFIX}interrupted while rewriting graph {item_id}")
        raise  # the shim fails the run with an 'interrupted' message: the graph never runs unrewritten
    except BaseException as err:  # noqa: BLE001 - MemoryError, SystemExit, a bug: the run must still fail
        message = _internal_error(item_id, err)
    _remember_failure(message)
    if graph_def is None:  # the bytes did not parse: the shim builds the failing graph from its own copy
        raise RuntimeError(message)
    graph_def = graph_pb2.GraphDef.FromString(graph_bytes)  # as it came: the pipeline edits its graph in place
    try:
        return failing_graph(graph_def, fetch, message).SerializeToString()
    except Exception:  # noqa: BLE001 - the message itself may be what fails; the fixed one cannot
        logger.exception("NpuOptimizer could not build the error graph of %s", item_id)
        return failing_graph(graph_def, fetch, FALLBACK_MESSAGE).SerializeToString()


def _rewrite_or_message(item_id, graph_bytes, graph_def, table, facts, fetch, feed, preserve,
                        config_bytes) -> bytes | str:
    """The rewritten graph's bytes, or the message the failing graph must carry.

    `graph_def` is `graph_bytes` parsed, `table` its node columns; the pipeline edits it in place (it
    has the bytes for the graph as it came).
    """
    try:
        from npu_sim_bridge.config import parse_parameter_map
        from npu_sim_bridge.passes import ItemInfo, run_pipeline
        from npu_sim_bridge.passes.pipeline import nothing_new
        from npu_sim_bridge.report.publish import dump_request, publish

        config = rewriter_config_pb2.RewriterConfig.CustomGraphOptimizer.FromString(config_bytes)
        _check_name(config.name)
        options = parse_parameter_map(config.parameter_map)
        digest = _options_digest(config)
        _check_single_entry(facts.digests, digest)
        item = ItemInfo(id=item_id, fetch=tuple(fetch), feed=tuple(feed),
                        preserve=frozenset(preserve), is_function=facts.function_item)
        if nothing_new(graph_def, item, table):  # a body rewritten with its caller, or a later iteration
            logger.debug("NpuOptimizer: %s holds nothing it has not rewritten already", item_id)
            return graph_bytes
        dump = dump_request()
        result = run_pipeline(graph_def, options, item, source_bytes=graph_bytes, table=table,
                              keep_stage=dump.wants if dump else None)
        publish(result, options, dump, announce=True)  # report, history, log, DUMP_GE_GRAPH: before the digest
        rewritten = result.graph_def
        if rewritten.node:
            rewritten.node[0].attr[OPTIONS_ATTR].s = digest.encode("ascii")
        return rewritten.SerializeToString()
    except NpuSimError as err:
        message = ERROR_PREFIX + str(err)
        logger.error("%s", message)
        return message
    except KeyboardInterrupt:
        raise
    except Exception as err:  # noqa: BLE001 - a bug must still reach the user, never be skipped
        return _internal_error(item_id, err)


def _check_name(name: str) -> None:
    if name != NPU_OPTIMIZER:
        raise ConfigError(
            f"the custom optimizer is named {name!r}, which TensorFlow would silently ignore and run the "
            f"graph unrewritten; the name is case-sensitive: set custom_op.name = \"{NPU_OPTIMIZER}\"")


def _options_digest(config) -> str:
    items = sorted((key, value.SerializeToString(deterministic=True))
                   for key, value in config.parameter_map.items())
    digest = hashlib.sha256()
    for key, value in items:
        digest.update(key.encode("utf-8") + b"\0" + value + b"\0")
    return digest.hexdigest()[:16]


def _check_single_entry(earlier_digests: set[str], digest: str) -> None:
    if earlier_digests - {digest}:
        raise ConfigError(
            "this graph was already rewritten by another NpuOptimizer entry with different options: the "
            "ConfigProto names NpuOptimizer more than once in graph_options.rewrite_options.custom_optimizers, "
            "and TensorFlow runs each entry on the graph in turn; keep one NpuOptimizer entry with all options")


def _internal_error(item_id: str, err: BaseException) -> str:
    try:
        logger.error("NpuOptimizer internal error on graph %s", item_id, exc_info=err)
        return (f"{ERROR_PREFIX}internal error {type(err).__name__}: {err} "
                "(this is a bug in npu_sim_bridge; please report it with the graph)")
    except Exception:  # noqa: BLE001 - an exception whose text cannot be made
        return FALLBACK_MESSAGE


def _remember_failure(message: str) -> None:
    with _failures_lock:
        _failures.append(message)
        del _failures[:-64]


class _GraphFacts:
    """What the entry needs to know about a graph before rewriting it, read from its node columns."""

    __slots__ = ("error_graph", "function_item", "digests")

    def __init__(self, error_graph: bool, function_item: bool, digests: set[str]):
        self.error_graph = error_graph      # a failing graph made by an earlier iteration
        self.function_item = function_item  # a function body (Grappler's _Arg/_Retval nodes)
        self.digests = digests              # the option digests earlier NpuOptimizer runs left

    @classmethod
    def of(cls, table: NodeTable) -> "_GraphFacts":
        error_prefix = ERROR_SCOPE + "/"
        error_graph = any(name.startswith(error_prefix) for name in table.names)
        function_item = not _FUNCTION_ITEM_OPS.isdisjoint(table.ops)
        return cls(error_graph, function_item, set(table.digests))


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
        dtype=types_pb2.DT_STRING, string_val=[message.encode("utf-8", "backslashreplace")]))
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
