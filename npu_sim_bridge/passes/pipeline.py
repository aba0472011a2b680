"""The pipeline: validate the graph, run the passes the options ask for, validate again, report.

Every pass runs on one shared GraphView. A failure inside a pass is raised as PassError naming
the pass; a graph a pass leaves malformed is a PassError too. The pipeline stamps each node it
has processed with the `_npu_sim_seen` attribute, which shows in the executed graph.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import itertools
import os
import re
import time

from tensorflow.core.framework import attr_value_pb2, graph_pb2, node_def_pb2

from npu_sim_bridge import envvars
from npu_sim_bridge.envvars import graph_dump
from npu_sim_bridge.envvars.logs import log_rewrite
from npu_sim_bridge.errors import ConfigError, GraphValidationError, NpuSimError, PassError
from npu_sim_bridge.fileio import unique_base, write_atomic
from npu_sim_bridge.graph.control_hubs import Hub
from npu_sim_bridge.graph import shared_ints
from npu_sim_bridge.graph.names import node_name
from npu_sim_bridge.graph.op_categories import FUNCTION_EDGE_OPS
from npu_sim_bridge.graph.table import NodeTable
from npu_sim_bridge.graph.validate import validate_graph
from npu_sim_bridge.graph.view import GraphView
from npu_sim_bridge.passes.base import SEEN_ATTR, GraphPass, ItemInfo, PassContext
from npu_sim_bridge.report import history
from npu_sim_bridge.report.model import PassRecord, Report

__all__ = ["SEEN_ATTR", "PipelineResult", "available_passes", "covered_by_caller", "nothing_new",
           "run_pipeline", "selected_passes"]

# Nodes Grappler adds around a function body when it hands the function over as an item.
_FUNCTION_EDGE_OPS = FUNCTION_EDGE_OPS

_graph_counter = itertools.count(1)

# A NodeDef holding only the stamp, serialized: merging it into a node stamps the node.
_STAMP = node_def_pb2.NodeDef(attr={SEEN_ATTR: attr_value_pb2.AttrValue(b=True)}).SerializeToString()


def available_passes() -> list[GraphPass]:
    """Every pass, in the order the pipeline runs them."""
    return [cls() for cls in _pass_classes()]


def _pass_classes() -> list[type[GraphPass]]:
    # Imported here so that a pass module can use the pipeline's helpers without a cycle.
    from npu_sim_bridge.passes.customize_dtypes import CustomizeDtypesPass
    from npu_sim_bridge.passes.dump import DumpPass
    from npu_sim_bridge.passes.fusion import FusionPass
    from npu_sim_bridge.passes.partition import PartitionPass, PlacementPass
    from npu_sim_bridge.passes.precision import PrecisionPass

    # fusion first (as the graph engine fuses before deciding precision), placement decides
    # host/device per node, precision skips host nodes, partition makes the GeOps, dump instruments them.
    classes: list[type[GraphPass]] = [CustomizeDtypesPass, FusionPass, PlacementPass, PrecisionPass, PartitionPass, DumpPass]
    return classes


@dataclasses.dataclass
class PipelineResult:
    graph_def: graph_pb2.GraphDef
    report: Report

    def __iter__(self):
        # Allows `graph_def, report = rewrite(...)`.
        return iter((self.graph_def, self.report))


def selected_passes(options) -> list[GraphPass]:
    """The passes `sim_passes` selects ('all', 'none' or a comma-separated list of names)."""
    passes = available_passes()
    spec = (options.get("sim_passes") or "all").strip()
    if spec == "all":
        return passes
    if spec == "none":
        return []
    names = [part.strip() for part in spec.split(",") if part.strip()]
    known = {p.name for p in passes}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ConfigError(
            f"option sim_passes names unknown passes {', '.join(map(repr, unknown))}; "
            f"it should be 'all', 'none' or a comma-separated list of: {', '.join(sorted(known)) or '(none)'}")
    return [p for p in passes if p.name in names]


def _graph_id(item: ItemInfo) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", item.id)[:80] or "graph"
    return f"{next(_graph_counter):03d}_{safe}"


@contextlib.contextmanager
def _gc_paused():
    """Pause the cyclic garbage collector while the pipeline allocates its indexes.

    Inside a TensorFlow process the heap is large, and the collections that a pass's many small
    allocations trigger cost more than the pass itself (measured: about a third of the pipeline
    time on a ResNet-50 graph). Nothing the pipeline builds is cyclic garbage.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def run_pipeline(graph_def: graph_pb2.GraphDef, options, item: ItemInfo | None = None,
                 remember: bool = True, source_bytes: bytes | None = None,
                 table: NodeTable | None = None) -> PipelineResult:
    """Rewrite `graph_def` as the options say; returns the graph and its report.

    The pipeline works on a copy, unless the caller also gives `source_bytes`, the GraphDef
    serialized (as Grappler hands it over): then `graph_def` itself is edited, and the bytes are
    parsed again only where a report needs the graph as it came. `table`: the GraphDef's node
    columns (with SEEN_ATTR as the stamp), when the caller has them.
    """
    with _gc_paused():
        try:
            return _run_pipeline(graph_def, options, item, remember, source_bytes, table)
        finally:
            # The shared numbers: a process keeps none of them after the rewrite.
            shared_ints.release()


def _run_pipeline(graph_def, options, item, remember, source_bytes, table) -> PipelineResult:
    started = time.perf_counter()
    item = item or ItemInfo()
    if _geop_body(item):
        return _stamped_body(graph_def, options, item, started, remember)
    if source_bytes is None:
        work = graph_pb2.GraphDef()
        work.CopyFrom(graph_def)
        as_it_came = lambda: graph_def  # noqa: E731
    else:
        work = graph_def
        as_it_came = lambda: graph_pb2.GraphDef.FromString(source_bytes)  # noqa: E731
    report = Report(_graph_id(item), options.to_dict(), item_id=item.id)
    report.option_notes = options.describe()
    for text in options.warnings:
        report.warn(text)

    ran = [graph_pass for graph_pass in selected_passes(options) if graph_pass.wanted(options)]
    if table is None:
        table = NodeTable.of(work, stamp_attr=SEEN_ATTR)
    try:
        view = GraphView(work, gather_control_inputs=bool(ran) and not item.is_function, table=table)
        validate_graph(view, where="input graph", allow_external=_external_names(item))
    except GraphValidationError as err:
        raise GraphValidationError(f"NpuOptimizer cannot rewrite an invalid graph: {err}") from None

    report.record_graph(table, extra=[view.node(hub.name) for hub in view.hubs])
    _report_hubs(report, view.hubs)
    # Grappler's later iterations: NpuOptimizer has seen the graph (GeOp bodies never get here,
    # see _stamped_body).
    report.rerun = table.unstamped < len(table)
    table.let_go()  # the view and the report have their columns
    ignored = envvars.ignored_note()
    if ignored:
        report.warn(ignored)
    dumper = None if report.rerun else graph_dump.from_environment(report.graph_id)  # DUMP_GE_GRAPH
    if dumper:
        dumper.stage(graph_dump.FIRST, view.to_graph_def())
    ctx = PassContext(view=view, options=options, item=item, report=report, table=table)
    for index, graph_pass in enumerate(ran):
        ctx.later_reads = frozenset(kind for later in ran[index + 1:] for kind in later.reads)
        _run_one(graph_pass, ctx)
        ctx.keep_results(ctx.later_reads)
        if dumper:
            dumper.stage(graph_dump.stage_name(graph_pass.name), ctx.view.to_graph_def())
    for graph_pass in ran:
        graph_pass.finish(ctx)
    _lay_out_for_cpu(ctx, dumper)

    _place_new_nodes(view, report)
    _stamp_seen(view, bodies=not item.is_function)
    result_graph = view.to_graph_def()
    report.nodes_after = len(result_graph.node)
    report.seconds = time.perf_counter() - started
    if remember:
        history.remember(report)
    if dumper:
        dumper.finish(result_graph)
    if not report.rerun:
        log_rewrite(report)  # at INFO (ASCEND_GLOBAL_LOG_LEVEL=1): passes, GeOps, casts
    _write_report(report, options, as_it_came, result_graph)
    return PipelineResult(result_graph, report)


def _lay_out_for_cpu(ctx: PassContext, dumper) -> None:
    """Run the CPU layout after every selected pass, whatever `sim_passes` says: it is no NPU decision but
    what lets the channels-first ops they decided run on the CPU (passes/layout). A graph it leaves as
    it is gets no pass record."""
    from npu_sim_bridge.passes.layout import CpuLayoutPass

    started = time.perf_counter()
    result = _run_checked(CpuLayoutPass(), ctx)
    if not result.changed:
        return
    _record_pass(CpuLayoutPass.name, result, ctx, started)
    if dumper:
        dumper.stage(graph_dump.stage_name(CpuLayoutPass.name), ctx.view.to_graph_def())


def _run_one(graph_pass: GraphPass, ctx: PassContext) -> None:
    started = time.perf_counter()
    result = _run_checked(graph_pass, ctx)
    _record_pass(graph_pass.name, result, ctx, started)


def _record_pass(name: str, result, ctx: PassContext, started: float) -> None:
    ctx.report.passes.append(PassRecord(
        name=name, changed=result.changed,
        seconds=round(time.perf_counter() - started, 6), stats=dict(result.stats)))


def _run_checked(graph_pass: GraphPass, ctx: PassContext):
    """Run one pass; its errors and a graph it leaves invalid become PassErrors naming it. Returns its result."""
    try:
        result = graph_pass.run(ctx)
    except PassError:
        raise
    except NpuSimError as err:
        raise PassError(graph_pass.name, str(err)) from err
    except Exception as err:
        raise PassError(graph_pass.name, f"internal error {type(err).__name__}: {err}") from err
    ctx.view.compact()
    ctx.library_edited = ctx.library_edited or graph_pass.edits_library
    if result.changed:  # a pass that changed nothing cannot have broken the graph
        try:
            validate_graph(ctx.view, where=f"graph after pass {graph_pass.name!r}",
                           allow_external=_external_names(ctx.item))
        except GraphValidationError as err:
            raise PassError(graph_pass.name, f"left an invalid graph: {err}") from err
    return result


def _report_hubs(report: Report, hubs: list[Hub]) -> None:
    """The hubs are the pipeline's own nodes: not input nodes, each recorded with what it stands for."""
    report.nodes_before -= len(hubs)
    for hub in hubs:
        report.nodes[hub.name].add_reason(
            f"inserted: waits on the {len(hub.inputs)} control inputs {len(hub.readers)} nodes shared, and they "
            f"wait on it instead ({hub.edges_saved} edges fewer)")


def _external_names(item: ItemInfo) -> frozenset[str]:
    return frozenset()


def _place_new_nodes(view: GraphView, report: Report) -> None:
    """Give nodes that passes added the device of a neighbour.

    Grappler hands NpuOptimizer a placed graph (every node has a device) and the executor
    needs one on every node; offline graphs have none, and then nothing is set.
    """
    records = report.nodes
    unplaced = [node for node in map(view.node, (name for name in view.names() if name not in records))
                if not node.device]
    if not unplaced or not any(node.device for node in view.nodes()):
        return
    for node in unplaced:
        neighbours = [node_name(text) for text in node.input] + view.consumers(node.name)
        node.device = next((view.node(n).device for n in neighbours if view.node(n).device), "")
    fallback = next(node.device for node in view.nodes() if node.device)
    for node in unplaced:
        if not node.device:
            node.device = fallback


def _geop_body(item: ItemInfo) -> bool:
    """A GeOp body Grappler hands over as a function item: the partition pass outlined it and every
    node in it was decided in its caller's run (the caller's report holds those decisions)."""
    return item.is_function and item.id.startswith("GeOp")


def _stamped_body(graph_def, options, item, started, remember) -> PipelineResult:
    """A GeOp body that Grappler's other optimizers changed after its caller's run: no pass would
    change it (the placement and dtypes of a body are its caller's), so the nodes they added are only
    stamped, and the report says how many."""
    work = graph_pb2.GraphDef()
    work.CopyFrom(graph_def)
    added = [node for node in work.node if SEEN_ATTR not in node.attr and node.op not in _FUNCTION_EDGE_OPS]
    for node in added:
        node.attr[SEEN_ATTR].b = True
    report = Report(_graph_id(item), options.to_dict(), item_id=item.id)
    report.rerun = True
    report.nodes_before = report.nodes_after = len(work.node)
    report.skipped = (f"GeOp body decided with its caller; {len(added)} node(s) other Grappler optimizers "
                      "added since were stamped")
    report.seconds = time.perf_counter() - started
    if remember:
        history.remember(report)
    return PipelineResult(work, report)


def _stamp_seen(view: GraphView, bodies: bool) -> None:
    """Stamp every node, and with `bodies` every node of the library's functions: the passes have
    seen those as part of this graph (precision rewrote the bodies the graph calls).

    The stamp is merged in as bytes: one call per node, 2.5x faster than setting the attr field by field.
    """
    for node in view.nodes():
        node.MergeFromString(_STAMP)
    if bodies:
        for function in view.graph_def.library.function:
            for node in function.node_def:
                node.MergeFromString(_STAMP)


def covered_by_caller(graph_def: graph_pb2.GraphDef, item: ItemInfo) -> bool:
    """True for a function Grappler hands over after the graph that calls it: every node of its body
    carries the stamp the caller's run left, so the pipeline would change nothing and report nothing
    new (the caller's report holds the body's decisions). Grappler's own _Arg/_Retval nodes do not
    count, so a body that only returns its arguments is covered too.
    """
    return item.is_function and all(SEEN_ATTR in node.attr for node in graph_def.node
                                    if node.op not in _FUNCTION_EDGE_OPS)


def nothing_new(graph_def: graph_pb2.GraphDef, item: ItemInfo, table: NodeTable | None = None) -> bool:
    """True when the pipeline has already seen every node Grappler hands over, and every node of the
    library's functions: a function body covered by its caller, or Grappler's later iteration over a
    graph that no other optimizer changed in between. The pipeline would return the graph unchanged
    (it is idempotent), so the caller can hand it back as it came. A node another optimizer added
    carries no stamp, and then the pipeline runs. `table`: the graph's node columns, when known.
    """
    if item.is_function:
        return covered_by_caller(graph_def, item)
    if table is not None:
        if not len(table) or table.unstamped:
            return False
    elif not graph_def.node or not all(SEEN_ATTR in node.attr for node in graph_def.node):
        return False
    return all(SEEN_ATTR in node.attr for function in graph_def.library.function for node in function.node_def)


def _write_report(report: Report, options, as_it_came, after: graph_pb2.GraphDef) -> None:
    """Write the report files where sim_report_dir says; `as_it_came()` gives the input graph."""
    directory = options.get("sim_report_dir")
    if not directory or report.rerun:  # one file set per graph, not one per Grappler iteration
        return
    base = None
    try:
        os.makedirs(directory, exist_ok=True)
        base = unique_base(directory, report.graph_id)  # a reused folder keeps earlier runs' reports
        write_atomic(base + ".json", report.to_json(), "report")
        write_atomic(base + ".txt", report.to_text(), "report")
        from npu_sim_bridge.report.views import write_views

        write_views(base, report, as_it_came(), after)  # .pbtxt before/after, TensorBoard run, HTML picture
    except OSError as err:
        if base is not None and os.path.exists(base + ".json") and not os.path.getsize(base + ".json"):
            os.unlink(base + ".json")  # the name claimed for a report that could not be written
        raise ConfigError(
            f"option sim_report_dir {directory!r}: cannot write the report there ({err}); "
            "point it at a writable directory") from err
