"""estimate(graph, options, batch, soc): rewrite a graph as NpuOptimizer would and estimate its step on a 910."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from npu_sim_bridge.estimate.hardware import hardware
from npu_sim_bridge.estimate.shapes import infer_shapes, with_batch
from npu_sim_bridge.estimate.step import StepEstimate, estimate_step
from npu_sim_bridge.estimate.walk import step_nodes, walk


def estimate(graph: Any, options: Any = None, batch: int | None = None, soc: str | None = None,
             fetches: Iterable[str] | None = None, constants: Mapping[str, float] | None = None,
             timings: dict | None = None) -> StepEstimate:
    """Estimate one training step of `graph` on an Ascend 910 (the SoC preset `soc`, default Ascend910A).

    graph, options, fetches: as for npu_sim_bridge.rewrite (the options are the Session's parameter_map).
    batch: placeholders whose first dimension is unknown get it. samples/s counts the first dimension of the
           first fed placeholder (static in the graph or given by `batch`), else `batch`.
    constants: hardware constants to replace (see npu_sim_bridge.estimate.hardware.TABLE_910A).
    timings: a dict to fill with the seconds each phase took ("load", "shapes", "rewrite", "walk", "time").
    """
    from npu_sim_bridge.api import rewrite
    from npu_sim_bridge.config import from_any
    from npu_sim_bridge.graph.io import load_graph
    from npu_sim_bridge.ops_info import load_library

    clock = _Clock(timings)
    hw = hardware(soc, constants)
    graph_def, default_fetches = load_graph(graph)
    fetch = list(fetches) if fetches is not None else list(default_fetches)
    graph_def, _ = with_batch(graph_def, batch)
    clock.lap("load")
    parsed = from_any(options if options is not None else None)
    result = rewrite(graph_def, options, fetches=fetch if fetches is not None or fetch else None)
    clock.lap("rewrite")
    shapes = infer_shapes(graph_def, only=_costed_nodes(graph_def, result.graph_def, fetch))
    clock.lap("shapes")
    walked = walk(result.graph_def, fetch, shapes, result.report.nodes, load_library(parsed.get("sim_ops_info_path")
                                                                                    or None), hw, batch)
    clock.lap("walk")
    samples = _fed_batch(graph_def) or batch  # a graph built with a static batch keeps it; --batch fills unknowns
    values = {"iterations_per_loop": parsed.get("iterations_per_loop"),
              "precision_mode": parsed.get("precision_mode")}
    step = estimate_step(walked, hw, samples, values)
    clock.lap("time")
    step.rewrite = result
    step.graph_def = graph_def  # the graph as estimated (the batch set), before the rewrite
    return step


def _costed_nodes(graph_def, rewritten, fetch) -> list:
    """The nodes of `graph_def` whose shapes the walk reads: those the rewritten step runs outside GeOps and
    every node of the rewritten graph's functions (a GeOp runs its whole body, also nodes the fetches do not
    need), with their inputs. The saver and the initializers are left out when the step does not run them."""
    wanted = {node.name for node in step_nodes(rewritten, fetch)}
    for function in rewritten.library.function:
        wanted.update(node.name for node in function.node_def)
    return [node.name for node in step_nodes(graph_def, sorted(wanted))]


def _fed_batch(graph_def) -> int | None:
    for node in graph_def.node:
        if node.op == "Placeholder" and "shape" in node.attr:
            dims = node.attr["shape"].shape.dim
            if dims and dims[0].size > 0 and len(dims) > 1:
                return int(dims[0].size)
    for node in graph_def.node:
        if node.op == "Placeholder" and "shape" in node.attr:
            dims = node.attr["shape"].shape.dim
            if dims and dims[0].size > 0:
                return int(dims[0].size)
    return None


class _Clock:
    """Seconds per phase into a caller's dict (nothing when there is none)."""

    def __init__(self, into: dict | None):
        import time

        self.into, self.now, self.last = into, time.perf_counter, time.perf_counter()

    def lap(self, phase: str) -> None:
        if self.into is not None:
            now = self.now()
            self.into[phase] = self.into.get(phase, 0.0) + now - self.last
            self.last = now
