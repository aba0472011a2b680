"""The offline API: run the NpuOptimizer pipeline on a graph outside any Session."""

from __future__ import annotations

from typing import Any, Iterable

from npu_sim_bridge.graph.io import load_graph
from npu_sim_bridge.passes import ItemInfo, PipelineResult, run_pipeline


def rewrite(graph: Any, options: Any = None, fetches: Iterable[str] | None = None) -> PipelineResult:
    """Rewrite a graph as NpuOptimizer would inside a Session.

    graph:   a GraphDef, MetaGraphDef, tf.Graph, or the path of a GraphDef/MetaGraphDef file or
             SavedModel directory.
    options: a dict of parameter_map keys ({"precision_mode": "allow_mix_precision"}), a
             ConfigProto whose custom optimizers include NpuOptimizer, or None for defaults.
    fetches: tensor or node names the caller will fetch; they keep their names and dtypes.
             Defaults to a MetaGraph's train_op collection and signature outputs.

    Returns a PipelineResult (`graph_def, report = rewrite(...)` unpacks it). Raises the
    npu_sim_bridge error that explains any problem.
    """
    from npu_sim_bridge.config import from_any

    graph_def, default_fetches = load_graph(graph)
    parsed = from_any(options)
    if parsed is None:
        parsed = from_any(None)
    fetch = tuple(fetches) if fetches is not None else tuple(default_fetches)
    item = ItemInfo(id="offline", fetch=fetch, preserve=frozenset())
    return run_pipeline(graph_def, parsed, item)
