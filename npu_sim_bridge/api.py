"""The offline API: run the NpuOptimizer pipeline on a graph outside any Session."""

from __future__ import annotations

from typing import Any, Iterable

from npu_sim_bridge.errors import ConfigError
from npu_sim_bridge.graph.io import load_graph
from npu_sim_bridge.graph.names import node_name
from npu_sim_bridge.passes import ItemInfo, PipelineResult, run_pipeline
from npu_sim_bridge.report.publish import dump_request, publish


def rewrite(graph: Any, options: Any = None, fetches: Iterable[str] | None = None,
            prune: bool = False) -> PipelineResult:
    """Rewrite a graph as NpuOptimizer would inside a Session.

    graph:   a GraphDef, MetaGraphDef, tf.Graph, or the path of a GraphDef/MetaGraphDef file or
             SavedModel directory.
    options: a dict of parameter_map keys ({"precision_mode": "allow_mix_precision"}), a
             ConfigProto whose custom optimizers include NpuOptimizer, or None for defaults.
    fetches: tensor or node names the caller will fetch; they keep their names and dtypes.
             Defaults to a MetaGraph's train_op collection and signature outputs; a graph
             with neither keeps every output (every node nothing consumes) by its name, so
             nothing the graph computed becomes unreachable. A name that is no node of the
             graph is an error. An empty list says nothing is fetched: outputs are not kept.
    prune:   rewrite only the nodes the fetches reach (data and control inputs), as a Session
             does for one `sess.run` (`npu-sim inspect` does: a .meta's initializers are then
             left out); the report warns how many nodes were left out. Without fetches, nothing
             is pruned.

    Returns a PipelineResult (`graph_def, report = rewrite(...)` unpacks it). Raises the
    npu_sim_bridge error that explains any problem.
    """
    from npu_sim_bridge.config import from_any

    from npu_sim_bridge.offline_checks import check_graph, check_options_source

    graph_def, default_fetches = load_graph(graph)
    check_options_source(options)
    parsed = from_any(options)
    if parsed is None:
        parsed = from_any(None)
    fetch = tuple(fetches) if fetches is not None else tuple(default_fetches)
    _check_fetches(graph_def, fetch)
    check_graph(graph_def, fetch)
    left_out = 0
    if prune and fetch:
        graph_def, left_out = _pruned(graph_def, fetch)
    keep_outputs = fetches is None and not fetch  # nothing said what is fetched: every output may be
    preserve = graph_outputs(graph_def) if keep_outputs else frozenset()
    item = ItemInfo(id="offline", fetch=fetch, preserve=preserve)
    dump = dump_request()
    result = run_pipeline(graph_def, parsed, item, keep_stage=dump.wants if dump else None)
    if left_out:
        result.report.warn(f"pruned to the fetches ({', '.join(fetch[:3])}{' ...' if len(fetch) > 3 else ''}) "
                           f"as a Session run is: {left_out} nodes they do not reach (initializers, savers, "
                           "other runs' ops) are left out of this rewrite")
    publish(result, parsed, dump)  # report files, history, log, DUMP_GE_GRAPH
    return result


def _pruned(graph_def, fetch):
    """(the graph with only the nodes `fetch` reaches, how many nodes were left out)."""
    from tensorflow.core.framework import graph_pb2

    from npu_sim_bridge.graph.table import names_and_inputs
    from npu_sim_bridge.report.roles import reached

    names, inputs = names_and_inputs(graph_def)
    kept = reached(names, inputs, fetch)
    if len(kept) == len(names):
        return graph_def, 0
    pruned = graph_pb2.GraphDef()
    pruned.versions.CopyFrom(graph_def.versions)
    pruned.library.CopyFrom(graph_def.library)
    pruned.node.extend(node for index, node in enumerate(graph_def.node) if index in kept)
    return pruned, len(names) - len(kept)


def graph_outputs(graph_def) -> frozenset[str]:
    """The nodes no other node consumes (by data or control edge): what a caller of the graph can fetch."""
    consumed = {node_name(name) for node in graph_def.node for name in node.input}
    return frozenset(node.name for node in graph_def.node if node.name not in consumed)


def _check_fetches(graph_def, fetch) -> None:
    names = {node.name for node in graph_def.node}
    missing = [name for name in fetch if node_name(name) not in names]
    if missing:
        outputs = sorted(graph_outputs(graph_def))[:5]
        raise ConfigError(f"fetch {missing[0]!r} names no node of the graph; fetch a node or tensor it has "
                          f"(its outputs include: {', '.join(outputs) or 'none'})")
