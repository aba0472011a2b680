"""The storage under a GraphView: one name -> place index and fixed-size columns by place (`PlaceColumns`,
the view's base class), the consumer index among them.

A node's place is its index in the GraphDef until `compact()` drops the removed nodes and gives the live
ones their new places. Outside code that keeps its own column by place (the edit journal, partition's
units) has the view cut it in step: `track_places`.

Design: memory
--------------
The rewrite's memory target is a traced peak (tracemalloc over one pipeline run) under 3x the GraphDef's
serialized size on real models (BERT: 2.1-2.3x in benchmarks/bench_scale.py); tests/test_view_memory.py
holds it on the 10k-node synthetic graph too, whose nodes are small (about 144 bytes each). Per-node
Python objects are what costs, so the view keeps per node only fixed-size columns by *place*, read
through one name -> place index (`_at`, graph.name_index):

    _op_codes   array   the op as a code into `_op_names` (two bytes, four past 65,536 op types)
    _inputs     list    the input strings: the lone input's str, else a tuple (graph.table.held_inputs)
    _rank       array   validation's topological rank (indexes.Ranks), UNRANKED for a node added since
    _users      list    the consumer index: None, the lone consumer's name, or a list, one name per edge
    _touched    bytes   validation's worklist (shorter when no later place was touched)
    GraphDef    nodes   the NodeDefs themselves (no protobuf wrapper is kept per node)

`_append_place` grows and `compact` cuts all of these in step (and the tracked outside columns, the
open journal's among them); any new per-place column must be added to both. Outside the columns:
`_dead` (removed places, an array until `compact`), `_dangling` (names read that no node has ->
readers) and `_hub_before` (hub -> the place it is listed before). Rules that follow: no dict or set
of every node's name kept past one step; sorts of every node done on numpy arrays of places
(indexes.py); the names and input strings are the index's own str objects, shared with the passes
(protobuf makes a new str at each read); results that are no longer read are dropped before the next
whole-graph step (a partition that proposes again lets go of the journal and placement's segments
first). The journal records each input edit (node, slot, old string), in columns too, so carrying
placement's proposal compares exact inputs.
"""

from __future__ import annotations

import weakref
from array import array
from typing import Callable, Iterable, Iterator

import numpy

from npu_sim_bridge.errors import GraphValidationError
from npu_sim_bridge.graph import control_hubs
from npu_sim_bridge.graph.indexes import UNRANKED, Positions, Ranks
from npu_sim_bridge.graph.name_index import new_index
from npu_sim_bridge.graph.names import node_name
from npu_sim_bridge.graph.table import edges, held_inputs

__all__ = ["PlaceColumns"]


class PlaceColumns:
    """A GraphView's name -> place index and columns by place, and the consumer index (`users_of`); the
    GraphView (graph/view.py) adds the queries by name and the mutators over them."""

    def _start_columns(self, graph_def) -> None:
        """The state before `_index` fills the columns."""
        self._graph_def = graph_def
        self._stored = graph_def.node  # the NodeDefs, which `_at` indexes
        self._dead = array("q")  # the places of the nodes removed since `compact`, which drops them
        self._touched = bytearray()
        self._ranked = False  # whether `_rank` holds validation's ranks (`set_ranks`)
        # Outside columns by place, cut in step by `compact` (`track_places`).
        self._place_columns: weakref.WeakSet = weakref.WeakSet()

    # ---------------------------------------------------------------- places
    def place(self, name: str) -> int:
        """Node `name`'s place: its index in the view's per-place columns, which stays until `compact()`
        (a node added since has a place past every earlier one)."""
        return self._at[name]

    def name_at(self, place: int) -> str:
        """The name of the live node at `place` (the view's own str: a name made again is equal, not the
        same object, and one kept would hold a second copy)."""
        return self._at.name(place)

    def place_count(self) -> int:
        """How many places the view holds until `compact()`: live nodes, and the removed ones' places."""
        return len(self._op_codes)

    @property
    def ranks(self) -> "Ranks | None":
        """Validation's topological rank of each live node (UNRANKED for a node added since), or None
        when validation has set none (see `set_ranks`)."""
        return Ranks(self._at, self._rank) if self._ranked else None

    def set_ranks(self, order: list[str] | None) -> None:
        """Rank the live nodes by their place in `order`, a topological order of all of them; None forgets
        the ranks."""
        self._ranked = order is not None
        if order is not None:
            if len(order) != len(self._at):
                raise ValueError(f"ranks for {len(order)} of the view's {len(self._at)} nodes")
            rank = self._rank
            for value, at in enumerate(map(self._at.__getitem__, order)):
                rank[at] = value

    def positions(self, order: list[str]) -> Positions:
        """Each live node's position in `order`, a list of every live node (say a topological order):
        call it with a name, or sort names by it with its `sorted`. The positions are an array by place."""
        at = self._at
        if len(order) != len(at):
            raise ValueError(f"positions for {len(order)} of the view's {len(at)} nodes")
        where = array("q", bytes(8 * self.place_count()))  # by place
        for index, place in enumerate(map(at.__getitem__, order)):
            where[place] = index
        return Positions(at, where)

    def op(self, name: str) -> str:
        """A node's op, from the index (no protobuf read); change it with `set_op`."""
        try:
            return self._op_names[self._op_codes[self._at[name]]]
        except KeyError:
            raise KeyError(f"no node named {name!r} in the graph") from None

    def ops_of(self, names: "Iterable[str]") -> list[str]:
        """The ops of the live nodes `names`, in one list: `op` for each, without a Python call per node
        (the passes that read every node's op read them this way)."""
        return list(map(self._op_names.__getitem__, map(self._op_codes.__getitem__, map(self._at.__getitem__, names))))

    def names_with_op_in(self, ops: "Iterable[str]") -> list[str]:
        """The live nodes whose op is in `ops`, in GraphDef order, from the op column: a pass that reads
        only some ops' NodeDefs finds them without reading every node's. The column is searched in numpy,
        so the Python work is per node found, not per node."""
        codes = [self._op_code_of[op] for op in ops if op in self._op_code_of]
        if not codes:
            return []
        column = numpy.frombuffer(self._op_codes, dtype=numpy.uint16 if self._op_codes.itemsize == 2 else numpy.uint32)
        places = numpy.flatnonzero(numpy.isin(column, codes))
        if len(self._dead):
            places = places[~numpy.isin(places, numpy.frombuffer(self._dead, dtype=numpy.int64))]
        return list(map(self._at.name, places.tolist()))

    def never_had_ops(self, ops: "Iterable[str]") -> bool:
        """True when no node the view has held (removed ones included) had one of `ops`: a pass that
        looks for a rare op can skip the graph (False does not say a live node has one)."""
        return all(op not in self._op_code_of for op in ops)

    def place_or_none(self, name: object) -> "int | None":
        """Node `name`'s place, or None when no live node has that name."""
        return self._at.get(name)

    def place_lookup(self) -> "Callable[[object], int | None]":
        """`place_or_none` as the index's own bound method, for a caller that asks for every node: one
        call less per lookup. It stays valid for the view's life (compaction renumbers the index in place)."""
        return self._at.get

    def names_with_places(self) -> "Iterator[tuple[str, int]]":
        """(name, place) of every live node, in GraphDef order."""
        return iter(self._at.items())

    def track_places(self, column) -> None:
        """Have `compact` cut `column`, an outside column by place (from place 0 on, as long as it likes),
        in step with the view's: it calls `column.drop_places(start, end)` for each run of removed places,
        the last run first. The view holds the column weakly: it is tracked while its owner keeps it."""
        self._place_columns.add(column)

    def untrack_places(self, column) -> None:
        self._place_columns.discard(column)

    def compact(self) -> None:
        """Drop removed nodes from the GraphDef (the live nodes keep their order and their index entries).
        The removed nodes' places say what to drop: no NodeDef's name is read."""
        if not self._dead:
            return
        dead = numpy.sort(numpy.frombuffer(self._dead, dtype=numpy.int64))
        # The runs [start, end) of removed places, in GraphDef order, dropped last to first.
        breaks = numpy.flatnonzero(numpy.diff(dead) != 1) + 1
        starts = dead[numpy.concatenate(([0], breaks))]
        ends = dead[numpy.concatenate((breaks - 1, [len(dead) - 1]))] + 1
        columns = list(self._place_columns)  # (a weak set: no column is kept for the view's sake)
        for run in range(len(starts) - 1, -1, -1):
            start, end = int(starts[run]), int(ends[run])
            del self._graph_def.node[start:end]
            del self._op_codes[start:end]
            del self._inputs[start:end]
            del self._rank[start:end]
            del self._users[start:end]
            del self._touched[start:end]  # (shorter when no node past `start` was touched)
            for column in columns:
                column.drop_places(start, end)
        if self._hub_before:  # a hub stands before the same node, or the first live one after a removed one
            self._hub_before = {hub: at - int(numpy.searchsorted(dead, at)) for hub, at in self._hub_before.items()}
        del dead, starts, ends, breaks  # (views of the array, which goes next)
        self._dead = array("q")
        self._at.renumber()  # the live nodes' new places

    # ----------------------------------------------------------------- index
    def _index(self, names: list[str], inputs, ops: list[str], gather_control_inputs: bool,
               given_consumers: Callable[[], dict[str, list[str]] | None] | None = None) -> None:
        """Index the GraphDef's nodes from their names, inputs (`held_inputs`) and ops (the view takes
        the lists and edits them). `given_consumers` gives their consumer index (the view takes it), or None; asked
        only where no hubs change the edges."""
        # name -> the node's place in the GraphDef, live nodes in GraphDef order (`compact` renumbers).
        self._at = new_index(names)
        # By place, as `_at` gives it, the op of every NodeDef the GraphDef holds: a code into `_op_names`.
        self._op_names: list[str] = []
        self._op_code_of: dict[str, int] = {}
        self._op_codes = array("H")
        codes = list(map(self._op_code, ops))  # (past 65,536 op types the array is made wider)
        self._op_codes = array(self._op_codes.typecode, codes)
        del codes
        self._inputs: list[str | tuple[str, ...]] = inputs  # by place too (see held_inputs): no dict of its own
        self._rank = array("d", [UNRANKED]) * len(names)  # by place: validation's ranks (see `ranks`)
        self._hub_before: dict[str, int] = {}  # hub -> the place of the node it stands before (see `names`)
        if len(self._at) != len(names):
            seen: set[str] = set()
            duplicates = {name for name in names if name in seen or seen.add(name)}
            raise GraphValidationError(
                "the graph has duplicate node names: " + ", ".join(sorted(duplicates)[:10]))
        hubs = control_hubs.plan_hubs(self._at, inputs, self.op) if gather_control_inputs else []
        # The consumer index: by place, the names of the nodes that read the node there (None for none,
        # else as `edges` reads them), and the names read but not in the graph in a dict of their own.
        self._users: list = [None] * len(self._op_codes)
        self._dangling: dict[str, str | list[str]] = {}
        given = None
        if hubs:  # the hubs take most control edges away (ResNet-50: 78k of 92k): index what is left
            self._gather(hubs)
        elif given_consumers is not None:
            given = given_consumers()
        if given is not None:  # by producer name, as the shim gives it (values as `edges` reads them)
            users, dangling, place = self._users, self._dangling, self._at.get
            for producer, held in given.items():
                at = place(producer)
                if at is None:
                    dangling[producer] = held
                else:
                    users[at] = held
            return
        # `_link` without a call per edge (ResNet-50's graph links 15k edges here once its hubs are in).
        users, place, link = self._users, self._at.get, self._link
        for name, node_inputs in zip(self._at, self._inputs):
            for text in (node_inputs,) if node_inputs.__class__ is str else node_inputs:
                producer = text if ":" not in text and text[:1] != "^" else node_name(text)
                at = place(producer)
                if at is None:  # a name no node has: the dangling index
                    link(producer, name)
                    continue
                held = users[at]
                if held is None:
                    users[at] = name
                elif held.__class__ is str:
                    users[at] = [held, name]
                else:
                    held.append(name)

    def _gather(self, hubs: list[control_hubs.Hub]) -> None:
        """Add the hubs (on the device of their first reader) and point their readers at them.

        A hub is appended to the GraphDef, but the index orders it just before its first reader, so that
        a graph whose edges ran forward still does in the view's order (see graph.validate).
        """
        if not hubs:
            return
        self._hub_before = {hub.name: self._at[hub.readers[0]] for hub in hubs}
        for hub in hubs:
            count = len(hub.inputs)
            mark = "^" + hub.name  # one str for all its readers' lists
            for reader, start in zip(hub.readers, hub.starts):
                at = self._at[reader]
                node, texts = self._stored[at], list(edges(self._inputs[at]))
                del node.input[start:start + count]
                node.input.append(mark)
                del texts[start:start + count]
                texts.append(mark)
                self._inputs[at] = held_inputs(texts)
            stored = self._stored.add()
            stored.CopyFrom(hub.node(self._stored[self._at[hub.readers[0]]].device))
            self._append_place(hub.name, stored.op, held_inputs(hub.inputs), None)
        self.hubs = hubs

    def _append_place(self, name: str, op: str, inputs: "str | tuple[str, ...]", users) -> int:
        """Index a NodeDef just appended to the GraphDef, unranked; returns its place."""
        at = self.place_count()
        self._at.append(name)  # at place_count(): the index gives out places as the lists grow
        code = self._op_code(op)  # first: a new code may widen the array
        self._op_codes.append(code)
        self._inputs.append(inputs)
        self._rank.append(UNRANKED)
        self._users.append(users)
        return at

    def _op_code(self, op: str) -> int:
        """The code of op type `op` in `_op_names` (made on first use)."""
        code = self._op_code_of.get(op)
        if code is None:
            code = self._op_code_of[op] = len(self._op_names)
            self._op_names.append(op)
            if code == 1 << 16:  # past two bytes: four
                self._op_codes = array("I", self._op_codes)
        return code

    def users_of(self, producer: str) -> "str | list[str] | tuple":
        """The consumer index's value for `producer` (see `edges`), () for none; a name no node has
        counts as a producer too."""
        held = self._users_entry(producer)[1]
        return () if held is None else held

    def _users_entry(self, producer: str) -> "tuple[int | None, str | list[str] | None]":
        """(the producer's place, or None for a name no node has; its consumers as held, or None)."""
        at = self._at.get(producer)
        return at, (self._users[at] if at is not None else self._dangling.get(producer))

    def _link(self, producer: str, consumer: str) -> None:
        at, users = self._users_entry(producer)
        if users is None:
            users = consumer
        elif users.__class__ is str:
            users = [users, consumer]
        else:
            users.append(consumer)
            return
        if at is not None:
            self._users[at] = users
        else:
            self._dangling[producer] = users

    def _unlink(self, producer: str, consumer: str) -> None:
        """Take one edge from `producer` to `consumer` out of the index."""
        at, users = self._users_entry(producer)
        if users is None:
            return
        if users.__class__ is str:
            if users != consumer:
                return
            users = None
        elif consumer in users:
            users.remove(consumer)
            if len(users) != 1:
                return
            users = users[0]
        else:
            return
        if at is not None:
            self._users[at] = users
        elif users is None:
            del self._dangling[producer]
        else:
            self._dangling[producer] = users
