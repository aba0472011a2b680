"""The "precision" pass: precision_mode / precision_mode_v2 / modify_mixlist / keep_dtype applied to the graph."""

from __future__ import annotations

from typing import Iterable, Iterator

from npu_sim_bridge.errors import ConfigError
from npu_sim_bridge.graph.alike import Renaming, alike_key
from npu_sim_bridge.graph.names import format_input, node_name, parse_input
from npu_sim_bridge.graph.op_categories import CALLING_OPS
from npu_sim_bridge.graph.view import GraphView
from npu_sim_bridge.passes.base import GraphPass, PassContext, PassResult
from npu_sim_bridge.passes.precision import boundary, casts, hoist, marks, ports, rounding
from npu_sim_bridge.passes.precision import functions as fn
from npu_sim_bridge.passes.precision.decide import Decider
from npu_sim_bridge.passes.precision.plan import FIXED, FP32, GRAY, mode_info, name_of, share_alike
from npu_sim_bridge.passes.precision.lists import build_lists
from npu_sim_bridge.passes.results import NpuPortDtypes, Placement
from npu_sim_bridge.report.decisions import InsertedText
from npu_sim_bridge.report.reasons import reason as coded

# The placement pass (run before this one) stores {node: 'host' | 'device'} here; host nodes keep their dtype.

# This pass stores {node: (input dtypes, output dtypes)} here: the dtype each data port holds on the NPU
# (float16 where the op runs in float16, also when emulated in float32); the dump pass reads it.


class PrecisionPass(GraphPass):
    """Decides the dtype of every float op for the precision mode and rewrites the graph to match."""

    name = "precision"
    reads = (Placement,)
    requires = (Placement,)  # the host nodes: their dtypes stay (without placement selected: none)
    description = ("precision modes: decides which ops run in float16/bfloat16, inserts the Casts, "
                   "emulates or runs float16")

    def run(self, ctx: PassContext) -> PassResult:
        view, report = ctx.view, ctx.report
        mode = mode_info(ctx.options)
        library = ctx.ops_library()
        lists = build_lists(library, ctx.options.get("modify_mixlist"))
        for text in lists.warnings:
            report.warn(text)

        setting = marks.setting(mode.mode, mode.emulate)
        functions = {f.signature.name: f for f in view.graph_def.library.function}
        # The shim's alike keys ({} without it): alike bodies are scanned and decided once.
        alike = ctx.alike_bodies(functions) if functions else {}
        scan = fn.LibraryScan(_calls_and_marks(ctx, functions), functions, alike)
        earlier = scan.marks
        if earlier and earlier != {setting}:
            raise ConfigError(
                f"the graph was already rewritten by the precision pass for {', '.join(sorted(earlier))} "
                f"(mode:execution), and now {setting} is asked; rewrite the original graph instead")
        # A graph the pipeline has seen (a later Grappler iteration) was decided then, even where the
        # pass changed nothing and left no mark: deciding its GeOp bodies again, out of their caller's
        # context (fetched and fed nodes), would run them in other dtypes than the report says.
        rewrite = not earlier and not ctx.report.rerun
        if not rewrite and ctx.item.is_function:  # a body Grappler hands over after its caller: reported there
            return PassResult(changed=False, stats={"already_rewritten": True})

        item = ctx.item
        fetched = {node_name(t) for t in item.fetch}
        fed = {node_name(t) for t in item.feed}
        preserved = set(item.preserve) - fetched - fed
        totals = _Totals()
        placement = ctx.result(Placement)
        host = placement.host_nodes() if placement is not None else set()
        plans = Decider(view, library, lists, mode, fed, preserved, functions, host=host).run()
        if ctx.read_later(NpuPortDtypes):  # the dump pass's
            ctx.publish(NpuPortDtypes(plans))
        _fill_report(report, _report_rows(plans), prefix="")
        rewriter = None
        hoisted = 0
        round_kernel = rewrite and rounding.uses_kernel(ctx, mode)
        if rewrite:
            share_alike(plans)  # the report has each node's reasons: the rewrite reads what is alike
            rewriter = casts.Rewriter(view, plans, mode.low, mode.emulate, setting, functions, round_kernel)
            rewriter.apply()
            exits = boundary.FetchBoundary(view, rewriter)
            exits.prepare(fetched - fed, plans)
            rewriter.check_types()
        totals.add(plans, rewriter)
        if rewriter is not None:
            # The plans and the rewriter's scratch go before the Casts' report rows come, unless the dump
            # pass reads the plans: with them, the end of this pass was the rewrite's peak on a graph
            # that gains 20k Casts.
            plans = None
            rewriter.finish()
            _report_inserted(report, rewriter, prefix="")
            # After the report's rows (they name each round trip's source as the rewrite wrote it).
            hoisted = hoist.hoist_invariant_round_trips(view, rewriter.inserted)
            exits.apply()
            _report_fetch_exits(report, exits.renamed)
        bodies = self._functions(view, report, library, lists, mode, setting, scan, totals, rewrite,
                                 round_kernel, alike)
        view.compact()

        stats = {
            "mode": mode.mode,
            "fp16_execution": "emulate" if mode.emulate else "native",
            "nodes_dropped": totals.dropped,
            "nodes_raised": totals.raised,
            "casts_inserted": totals.casts,
            "round_trips": totals.round_trips,
            "round_trips_left_out": totals.exact,  # of tensors of float16 values (exact.py): no bit would change
            "nodes_retyped": totals.retyped,
            "function_bodies": bodies,
        }
        if rewrite and mode.emulate:
            stats["rounding"] = "kernel" if round_kernel else "cast"
            stats["round_trips_hoisted"] = hoisted  # of loop-invariant values, out of their while frame (hoist.py)
        if lists.mixlist is not None:
            stats["mixlist_overrides"] = len(lists.overrides)
        if not rewrite:
            # Grappler's next meta-optimizer iteration hands back the rewritten graph (other optimizers may
            # have folded or moved its Casts since): the decisions are reported, the graph is left as it is.
            stats["already_rewritten"] = True
        return PassResult(changed=bool(totals.casts or totals.retyped), stats=stats)

    def _functions(self, view, report, library, lists, mode, setting, scan, totals, rewrite,
                   round_kernel=False, alike=None) -> int:
        """Decide (and when `rewrite`, rewrite) the bodies of the functions the graph calls.
        `alike`: the shim's alike keys of every library function (PassContext.alike_bodies), or
        empty: then each key is worked out here."""
        count = 0
        functions = scan.functions
        # XLA has no kernel for the rounding op: bodies it compiles round with Cast pairs (the same values).
        compiled = scan.xla_compiled() if round_kernel else set()
        # Bodies alike but for names and shapes (the branches and gradients of every batch norm's cond)
        # get the same decisions and the same rewrite: each is worked out once, the others renamed.
        done: dict[bytes, tuple] = {}
        stored_at = None  # function name -> its index in the library
        bodies = alike or {}
        for fname in scan.reachable():
            fdef = functions[fname]
            if fn.is_parametrized(fdef):
                report.warn(f"function {fname} has a signature parametrized by type attrs; its body is "
                            "left as it is (keeps its dtypes)")
                continue
            key = alike_key(fdef, fname in compiled, body=bodies.get(fname))

            def work():
                return self._function(fdef, library, lists, mode, setting, functions, rewrite,
                                      round_kernel and fname not in compiled)

            rename = None
            if key not in done:
                plans, rewriter, new_fdef = work()
                rows = list(_report_rows(plans))
                done[key] = ([arg.name for arg in fdef.signature.input_arg], plans, rewriter, new_fdef, rows)
            else:
                template_args, plans, rewriter, template_fdef, rows = done[key]
                derived = {name: node_name(source) for name, source, *_ in rewriter.inserted} if rewriter else None
                rename = Renaming(template_args, fdef, derived)
                new_fdef = rename.function(template_fdef) if template_fdef is not None else None
                if template_fdef is not None and new_fdef is None:  # a renamed node would clash: work it out
                    plans, rewriter, new_fdef = work()
                    rows = list(_report_rows(plans))
                    rename = None
            _fill_report(report, rows, prefix=f"{fname}/", rename=rename)
            count += 1
            if rewriter is not None:
                _report_inserted(report, rewriter, prefix=f"{fname}/", rename=rename)
            totals.add(plans, rewriter)
            if new_fdef is None:
                continue
            if stored_at is None:
                stored_at = {f.signature.name: index for index, f in enumerate(view.graph_def.library.function)}
            stored = view.graph_def.library.function[stored_at[fname]]
            stored.CopyFrom(new_fdef)
            stored.signature.name = fname
            functions[fname] = stored
        return count

    @staticmethod
    def _function(fdef, library, lists, mode, setting, functions, rewrite, round_kernel):
        """(plans, rewriter or None, the rewritten FunctionDef or None when unchanged) of one body."""
        body = fn.FunctionBody(fdef, functions)
        body_view = GraphView(body.graph_def)
        plans = Decider(body_view, library, lists, mode, functions=functions).run()
        if not rewrite:
            return plans, None, None
        rewriter = casts.Rewriter(body_view, plans, mode.low, mode.emulate, setting, functions, round_kernel)
        rewriter.apply()
        results = dict(body.results)
        dtypes = body.result_dtypes()
        for key, ref in body.results.items():
            if dtypes.get(key) in ports.FLOAT_TYPES:
                new = boundary.leaving(rewriter, ref, dtypes[key])
                if new is not None:
                    results[key] = new
        rewriter.check_types()
        if not (rewriter.casts_inserted or rewriter.retyped):
            return plans, rewriter, None
        body_view.compact()
        return plans, rewriter, body.to_function(body_view, results)


class _Totals:
    """Counters over the main graph and the function bodies."""

    def __init__(self):
        self.dropped = self.raised = self.casts = self.round_trips = self.retyped = self.exact = 0

    def add(self, plans, rewriter) -> None:
        for plan in plans.values():
            if plan.role not in (FIXED, GRAY) or plan.orig is None or plan.npu is None:
                continue
            if plan.orig == FP32 and plan.npu in ports.LOW_TYPES:
                self.dropped += 1
            elif plan.orig in ports.LOW_TYPES and plan.npu == FP32:
                self.raised += 1
        if rewriter is not None:
            self.casts += rewriter.casts_inserted
            self.round_trips += rewriter.round_trips
            self.exact += rewriter.exact_left_out
            self.retyped += rewriter.retyped


def _calls_and_marks(ctx: PassContext, functions) -> Iterable:
    """The graph's nodes LibraryScan must read: every node, or, in a graph no earlier run wrote (no
    mark to find), only those calling a function, found from the view's op column."""
    view = ctx.view
    if not ctx.came_unstamped():
        return view.nodes()
    return [view.node(name) for name in view.names_with_op_in(CALLING_OPS | functions.keys())]


def _report_rows(plans) -> Iterator[tuple]:
    """What the report says of each decided node: (name, op, whether the list is set, list,
    (dtype before, dtype after) or None, reason), one at a time (a list of them all was a twentieth of
    the peak memory on BERT); the bodies alike keep them as a list, worked out once."""
    for name, plan in plans.items():
        dtypes = None
        if plan.port_npu is not None:
            floats = [(p.dtype, plan.port_npu[p.list_index]) for p in plan.sig.outputs
                      if p.is_float and p.list_index is not None]
            if floats:
                dtypes = name_of(floats[0][0]), name_of(floats[0][1])
        elif plan.orig is not None:
            dtypes = name_of(plan.orig), name_of(plan.npu)
        listed = plan.role in (FIXED, GRAY)
        yield name, plan.op, listed, plan.colour if listed else None, dtypes, plan.reason


def _fill_report(report, rows, prefix: str, rename=None) -> None:
    """Records of the decided nodes (`_report_rows`); `rename` maps the names of an alike body's
    rows to this body's."""
    decide = report.nodes.decide  # a body's node gets a new record, the graph's have theirs
    for name, op, listed, colour, dtypes, reason in rows:
        decide(prefix + (rename(name) if rename is not None else name), op, listed, colour, dtypes, reason)


def _report_fetch_exits(report, renamed: dict[str, str]) -> None:
    """A fetched op that now runs under another name gets its decision under that name; the fetched
    name (an Identity of what leaves the device) keeps its row."""
    for fetched, moved in renamed.items():
        record = report.nodes[fetched]
        dtypes = None if record.dtype_before is None else (record.dtype_before, record.dtype_after)
        report.nodes.decide(moved, record.op, record.list is not None, record.list, dtypes,
                            coded("precision.fetch_exit", decision=record.reason, fetched=fetched,
                                   dtype=record.dtype_before or "its dtype"))


def _report_inserted(report, rewriter, prefix: str, rename=None) -> None:
    for name, source, src, dst, kind in rewriter.inserted:
        what = "float16 round trip" if kind == "round" else "Cast"
        op = marks.ROUND_OP if kind == "round" and src == dst else "Cast"
        if rename is not None:
            ref = parse_input(source)
            name, source = rename(name), format_input(ref._replace(node=rename(ref.node)))
        report.nodes.add(prefix + name, op, dtype_before=name_of(src), dtype_after=name_of(dst),
                         text=InsertedText("precision", what, source))
