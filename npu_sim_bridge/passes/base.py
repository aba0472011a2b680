"""The pass contract: a pass reads and edits the shared GraphView and says what it changed, and declares the
typed results (results.py) it requires from the passes before it and those it produces for the passes after it.

`check_requirements` and `check_products` hold the passes to what they declare: a result a pass requires that
the pass which produces it did not publish is an internal error naming both (it would otherwise read as None
and change the rewrite silently)."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, TypeVar

from npu_sim_bridge.errors import PassError
from npu_sim_bridge.graph.table import NodeTable
from npu_sim_bridge.graph.view import GraphView
from npu_sim_bridge.passes.results import FileToWrite
from npu_sim_bridge.report.model import Report

T = TypeVar("T")

@dataclasses.dataclass(frozen=True)
class ItemInfo:
    """What Grappler (or the offline caller) says about the graph: its id and protected nodes."""

    id: str = "offline"
    fetch: tuple[str, ...] = ()
    feed: tuple[str, ...] = ()
    preserve: frozenset[str] = frozenset()
    is_function: bool = False

    @property
    def protected_nodes(self) -> frozenset[str]:
        """Node names that must keep their name and output dtypes (fetched, fed or preserved)."""
        from npu_sim_bridge.graph.names import node_name

        names = {node_name(t) for t in self.fetch} | {node_name(t) for t in self.feed}
        return frozenset(names | set(self.preserve))


@dataclasses.dataclass
class PassResult:
    """Whether the pass changed the graph, and counters for the report (e.g. casts_inserted=4)."""

    changed: bool
    stats: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class PassContext:
    """Everything a pass may read or edit: the graph view, the options, the item and the report."""

    view: GraphView
    options: Any          # npu_sim_bridge.config.Options
    item: ItemInfo
    report: Report
    results: dict[type, Any] = dataclasses.field(default_factory=dict)
    table: NodeTable | None = None   # the graph's columns as it came
    library_edited: bool = False     # a pass that may edit library functions has run (GraphPass.edits_library)
    # The result types the passes still to run read (GraphPass.reads), set by the pipeline before each
    # pass; None where no pipeline says (every result is then kept).
    later_reads: frozenset | None = None
    # Files the passes leave to the publishing step (leave_file); the pipeline returns them.
    files: list[FileToWrite] = dataclasses.field(default_factory=list)
    _ops_library: Any = None         # the operator library, loaded on first use (ops_library())

    def read_later(self, kind: type) -> bool:
        """Whether a pass still to run reads results of type `kind` (publishing one is otherwise no use,
        and the pass may let go of what it holds for it)."""
        return self.later_reads is None or kind in self.later_reads

    def publish(self, result: Any) -> None:
        """Hand `result` to the passes after this one; they ask for it by its type."""
        self.results[type(result)] = result

    def leave_file(self, path: str, text: str, what: str) -> None:
        """Have the publishing step (report/publish.py) write `text` to `path` once the pipeline returns;
        `what` names the file in an error message."""
        self.files.append(FileToWrite(path, text, what))

    def result(self, kind: type[T]) -> T | None:
        """The result of type `kind` an earlier pass published, or None."""
        return self.results.get(kind)

    def drop_result(self, kind: type) -> None:
        """Forget the result of type `kind` (its last reader is done with it)."""
        self.results.pop(kind, None)

    def keep_results(self, kinds) -> None:
        """Drop the published results of every type not in `kinds` (no pass still to run reads them)."""
        self.results = {kind: result for kind, result in self.results.items() if kind in kinds}

    def came_unstamped(self) -> bool:
        """True when no node of the graph as it came carries the stamp (SEEN_ATTR) every node a rewrite
        leaves has, in the graph and in its library, and that whatever copies such a node copies too:
        none holds what an earlier run wrote (GeOps, precision marks), and a pass need not read every
        NodeDef to find out. False when not known (no table)."""
        return self.table is not None and self.table.unstamped == len(self.table)

    def alike_bodies(self, names) -> dict[str, bytes]:
        """{name: alike body} of the named library functions, from the shim while the library is as it
        came (it reads them in C++ from the graph it handed over): equal for two functions exactly
        when graph/alike.py `alike_body` is, though not the same bytes. {} when the library was edited,
        outside a Session, or when the shim cannot give every name: the caller works them all out."""
        read = self.table.alike_bodies if self.table is not None else None
        if read is None or self.library_edited:
            return {}
        names = list(dict.fromkeys(names))
        found = read(names)
        return found if len(found) == len(names) else {}

    def ops_library(self):
        """The operator library the options name (loaded once per pipeline run)."""
        if self._ops_library is None:
            from npu_sim_bridge.ops_info import load_library

            path = self.options.get("sim_ops_info_path") or None
            self._ops_library = load_library(path)
        return self._ops_library


class GraphPass:
    """Base class of every pass.

    Subclasses set `name` (used by `sim_passes`, in errors and in the report) and `description`,
    override `wanted(options)` when the pass only runs for some options, and implement `run`.
    A pass must be idempotent: Grappler runs NpuOptimizer on each meta-optimizer iteration, so
    running it on its own output must change nothing.
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    # Whether `run` may change or add library functions (facts read from the library as it came,
    # PassContext.alike_bodies, are stale after such a pass). A pass that never does says False.
    edits_library: ClassVar[bool] = True
    # The types of the results of earlier passes that `run` reads (PassContext.result): the pipeline
    # keeps a published result only while a pass still to run reads it (`finish` finds none).
    reads: ClassVar[tuple[type, ...]] = ()
    # Of `reads`, the results the pass cannot do without once the pass that produces them has run before it
    # (with that pass not selected, `run` does without them, as its docstring says).
    requires: ClassVar[tuple[type, ...]] = ()
    # The results `run` publishes every time it runs, where a pass still to run reads them.
    produces: ClassVar[tuple[type, ...]] = ()

    def wanted(self, options) -> bool:
        return True

    def run(self, ctx: PassContext) -> PassResult:
        raise NotImplementedError

    def finish(self, ctx: PassContext) -> None:
        """Called after every selected pass has run: complete this pass's report records from later decisions."""


class PassContractError(PassError):
    """A pass did not get, or did not publish, a result the passes declare (an internal error, not the user's)."""


def check_requirements(graph_pass: GraphPass, ctx: PassContext, ran_before) -> None:
    """Raise PassContractError when a result `graph_pass` requires is missing though a pass in `ran_before`
    produces it."""
    for kind in graph_pass.requires:
        producers = [earlier.name for earlier in ran_before if kind in earlier.produces]
        if producers and ctx.result(kind) is None:
            raise PassContractError(graph_pass.name, (
                f"internal error: it requires the {kind.__name__} result of pass {producers[-1]!r}, which ran "
                f"before it and did not publish one"))


def check_products(graph_pass: GraphPass, ctx: PassContext) -> None:
    """Raise PassContractError when `graph_pass` ran without publishing a result it produces that a pass still
    to run reads."""
    for kind in graph_pass.produces:
        if ctx.read_later(kind) and ctx.result(kind) is None:
            raise PassContractError(graph_pass.name, (
                f"internal error: it produces the {kind.__name__} result, which a later pass reads, and did not "
                f"publish one"))
