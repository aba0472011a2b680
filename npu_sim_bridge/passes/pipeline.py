"""The pipeline: validate the graph, run the passes the options ask for, validate again, report.

The pipeline is pure: it returns the rewritten graph and its report (a PipelineResult) and writes
nothing. The report files, the views, the process history, the log and the DUMP_GE_GRAPH files are
written by report/publish.py, which the callers (native/entry.py, api.py) call at the boundary.

Every pass runs on one shared GraphView. A failure inside a pass is raised as PassError naming
the pass; a graph a pass leaves malformed is a PassError too. The pipeline stamps each node it
has processed with the `_npu_sim_seen` attribute, which shows in the executed graph.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import re
import time
from collections.abc import Callable

from tensorflow.core.framework import attr_value_pb2, graph_pb2, node_def_pb2

from npu_sim_bridge import envvars
from npu_sim_bridge.envvars import graph_dump
from npu_sim_bridge.errors import ConfigError, GraphValidationError, NpuSimError, PassError
from npu_sim_bridge.graph.control_hubs import Hub
from npu_sim_bridge.graph import shared_ints
from npu_sim_bridge.graph.names import node_name
from npu_sim_bridge.graph.op_categories import CALL_OPS, FUNCTION_EDGE_OPS
from npu_sim_bridge.graph.table import NodeTable
from npu_sim_bridge.graph.validate import validate_graph
from npu_sim_bridge.graph.view import GraphView
from npu_sim_bridge.graph.attr_names import SEEN_ATTR
from npu_sim_bridge.passes.base import GraphPass, ItemInfo, PassContext, check_products, check_requirements
from npu_sim_bridge.passes.results import PipelineResult
from npu_sim_bridge.report.counts import graph_counts
from npu_sim_bridge.report import reasons
from npu_sim_bridge.report.model import PassRecord, Report
from npu_sim_bridge.report.roles import Role, graph_role

__all__ = ["SEEN_ATTR", "PipelineResult", "available_passes", "covered_by_caller", "nothing_new",
           "run_pipeline", "selected_passes"]

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
    from npu_sim_bridge.passes.partition.pass_ import PartitionPass
    from npu_sim_bridge.passes.placement import PlacementPass
    from npu_sim_bridge.passes.precision import PrecisionPass

    # fusion first (as the graph engine fuses before deciding precision), placement decides
    # host/device per node, precision skips host nodes, partition makes the GeOps, dump instruments them.
    classes: list[type[GraphPass]] = [CustomizeDtypesPass, FusionPass, PlacementPass, PrecisionPass, PartitionPass, DumpPass]
    return classes


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


def _graph_id(item: ItemInfo, role: Role | None = None) -> str:
    """'002_train': the graph's number in this process and its role (a function: its name)."""
    name = role.name if role is not None and role.name != "function" else item.id
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:80] or "graph"
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
                 source_bytes: bytes | None = None, table: NodeTable | None = None,
                 keep_stage: Callable[[str], bool] | None = None) -> PipelineResult:
    """Rewrite `graph_def` as the options say; returns the graph and its report, and writes nothing
    (report/publish.py writes what a rewrite leaves behind).

    The pipeline works on a copy, unless the caller also gives `source_bytes`, the GraphDef
    serialized (as Grappler hands it over): then `graph_def` itself is edited, and the bytes are
    parsed again only where a report needs the graph as it came. `table`: the GraphDef's node
    columns (with SEEN_ATTR as the stamp), when the caller has them. `keep_stage`: which graph stages
    (graph_dump's stage names) the result keeps for DUMP_GE_GRAPH (publish.dump_request gives it).
    """
    with _gc_paused():
        try:
            return _run_pipeline(graph_def, options, item, source_bytes, table, keep_stage)
        finally:
            # The shared numbers: a process keeps none of them after the rewrite.
            shared_ints.release()


def _run_pipeline(graph_def, options, item, source_bytes, table, keep_stage) -> PipelineResult:
    started = time.perf_counter()
    item = item or ItemInfo()
    if _geop_body(item):
        return _stamped_body(graph_def, options, item, started)
    if source_bytes is None:
        work = graph_pb2.GraphDef()
        work.CopyFrom(graph_def)
        result = PipelineResult(work, None, source_graph=graph_def)
    else:
        work = graph_def
        result = PipelineResult(work, None, source_bytes=source_bytes)
    if table is None:
        table = NodeTable.of(work, stamp_attr=SEEN_ATTR)
    role = graph_role(table.names, table.ops, table.inputs, item.fetch, item.is_function, table.reached)
    report = Report(_graph_id(item, role), options.to_dict(), item_id=item.id)
    report.role = role
    report.option_notes = options.describe()
    for text in options.warnings:
        report.warn(text)

    ran = [graph_pass for graph_pass in selected_passes(options) if graph_pass.wanted(options)]
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
    stage = None if report.rerun or keep_stage is None else _stage_keeper(result, view, keep_stage)
    if stage:
        stage(graph_dump.FIRST)
    ctx = PassContext(view=view, options=options, item=item, report=report, table=table)
    for index, graph_pass in enumerate(ran):
        ctx.later_reads = frozenset(kind for later in ran[index + 1:] for kind in later.reads)
        check_requirements(graph_pass, ctx, ran[:index])
        _run_one(graph_pass, ctx)
        check_products(graph_pass, ctx)
        ctx.keep_results(ctx.later_reads)
        if stage:
            stage(graph_dump.stage_name(graph_pass.name))
    for graph_pass in ran:
        graph_pass.finish(ctx)
    _run_cpu_steps(ctx, stage, ran)

    _place_new_nodes(view, report)
    _stamp_seen(view, bodies=not item.is_function)
    result.graph_def = view.to_graph_def()
    result.files = ctx.files
    report.nodes_after = len(result.graph_def.node)
    calls = [view.node(name) for name in view.names_with_op_in(CALL_OPS)]
    report.counts = graph_counts(report, result.graph_def, calls)
    report.seconds = time.perf_counter() - started
    result.report = report
    return result


def _stage_keeper(result: PipelineResult, view: GraphView, keep_stage: Callable[[str], bool]):
    """Keeps the graph at a stage DUMP_GE_GRAPH asks for in `result.stages`, as bytes (later passes edit the
    graph), for the publishing step to write."""
    def stage(name: str) -> None:
        if keep_stage(name):
            result.stages.append((name, view.to_graph_def().SerializeToString()))
    return stage


def _run_cpu_steps(ctx: PassContext, stage, ran: list[GraphPass]) -> None:
    """Run the CPU's own steps after every selected pass. The CPU layout runs whatever `sim_passes` says:
    it is no NPU decision but what lets the channels-first ops they decided run on the CPU
    (passes/layout). After the fusion pass, the fused MatMuls that oneDNN runs cheaper apart, with the
    same bits, are taken apart (passes/fusion/apart.py). A graph a step leaves as it is gets no pass
    record from it."""
    from npu_sim_bridge.passes.fusion import FusedMatMulApartPass, FusionPass
    from npu_sim_bridge.passes.layout import CpuLayoutPass

    steps = [CpuLayoutPass()] + ([FusedMatMulApartPass()] if any(isinstance(p, FusionPass) for p in ran) else [])
    for step in steps:
        started = time.perf_counter()
        result = _run_checked(step, ctx)
        if not result.changed:
            continue
        _record_pass(step.name, result, ctx, started)
        if stage:
            stage(graph_dump.stage_name(step.name))


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
        report.nodes[hub.name].add_reason(reasons.reason(
            "hub.control", inputs=len(hub.inputs), readers=len(hub.readers), saved=hub.edges_saved))


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


def _stamped_body(graph_def, options, item, started) -> PipelineResult:
    """A GeOp body that Grappler's other optimizers changed after its caller's run: no pass would
    change it (the placement and dtypes of a body are its caller's), so the nodes they added are only
    stamped, and the report says how many."""
    work = graph_pb2.GraphDef()
    work.CopyFrom(graph_def)
    added = [node for node in work.node if SEEN_ATTR not in node.attr and node.op not in FUNCTION_EDGE_OPS]
    for node in added:
        node.attr[SEEN_ATTR].b = True
    report = Report(_graph_id(item), options.to_dict(), item_id=item.id)
    report.rerun = True
    report.nodes_before = report.nodes_after = len(work.node)
    report.skipped = (f"GeOp body decided with its caller; {len(added)} node(s) other Grappler optimizers "
                      "added since were stamped")
    report.seconds = time.perf_counter() - started
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
                                    if node.op not in FUNCTION_EDGE_OPS)


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

