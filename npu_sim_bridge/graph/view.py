"""GraphView: a GraphDef with name and consumer indexes that every pass shares and mutates.

All mutation of names, edges and ops goes through the view's methods so the indexes never drift
from the GraphDef: `add_node`, `remove_node`, `set_op`, `set_input`, `add_input`, `remove_input` and
`replace_uses` (other fields a pass may set on the NodeDef `node()` returns). `remove_nodes` removes a
set of nodes at once. Removed nodes are dropped from the GraphDef in one sweep by `compact()` (called
by `to_graph_def`), which gives the live nodes their new places.

The index holds per node its place in the GraphDef, its op and its input strings, not a protobuf
wrapper: `node()` makes one at each call (keep it while working on a node), and `op()` and
`input_texts()` read no protobuf at all.
An open `EditJournal` records what the mutators do (a later pass asks what an earlier one changed).

Design: memory
--------------
The rewrite's memory target is a traced peak (tracemalloc over one pipeline run) under 3x the GraphDef's
serialized size on real models (BERT: 2.1-2.3x in benchmarks/bench_scale.py); tests/test_view_memory.py
holds the 10k-node synthetic graph, whose nodes are small (about 144 bytes each), under 3.2x (3.05x). Per-node Python
objects are what costs, so the view keeps per node only fixed-size columns by *place* (the node's index in
the GraphDef until `compact()`), read through one name -> place index (`_at`, graph.name_index):

    _op_codes   array   the op as a code into `_op_names` (two bytes, four past 65,536 op types)
    _inputs     list    the input strings: the lone input's str, else a tuple (graph.table.held_inputs)
    _rank       array   validation's topological rank (indexes.Ranks), UNRANKED for a node added since
    _users      list    the consumer index: None, the lone consumer's name, or a list, one name per edge
    _touched    bytes   validation's worklist (shorter when no later place was touched)
    GraphDef    nodes   the NodeDefs themselves (no protobuf wrapper is kept per node)

`_append_place` grows and `compact` cuts all of these in step (with the open journal's `_ordinal` column);
any new per-place column must be added to both. Outside the columns: `_dead` (removed places, an array
until `compact`), `_dangling` (names read that no node has -> readers) and `_hub_before` (hub -> the place
it is listed before). Rules that follow: no dict or set of every node's name kept past one step; sorts of
every node done on numpy arrays of places (indexes.py); the names and input strings are the index's own
str objects, shared with the passes (protobuf makes a new str at each read); results that are no longer
read are dropped before the next whole-graph step (a partition that proposes again lets go of the journal
and placement's segments first). The journal records each input edit (node, slot, old string), in columns
too, so carrying placement's proposal compares exact inputs.

Two listing orders: `names()` and `records()` list the *index order* (GraphDef order, with each control
hub just before its first reader), which validation and the topological order rest on; `nodes()`,
`graph_order_names()`, `named_nodes()` and `producers_with_users()` list *GraphDef order* (hubs last).
Making them one order would change which of two unordered nodes comes first in rewritten graphs, so both
stay; a pass picks the one its output's order is defined by.
"""

from __future__ import annotations

from array import array
from typing import Callable, Iterable, Iterator, Sequence

import numpy
from tensorflow.core.framework import graph_pb2, node_def_pb2

from npu_sim_bridge.errors import GraphValidationError
from npu_sim_bridge.graph import control_hubs
from npu_sim_bridge.graph.name_index import new_index
from npu_sim_bridge.graph.indexes import UNRANKED, ConsumerIndex, Positions, Ranks
from npu_sim_bridge.graph.names import TensorRef, format_input, node_name, parse_input
from npu_sim_bridge.graph.table import NodeTable, held_inputs, names_and_inputs


def edges(held: "str | Sequence[str]") -> "Sequence[str]":
    """The names an index value stands for, one per edge: the consumer index holds a producer's lone
    consumer as its name, and the input index a node's lone input string (see graph.table.held_inputs).
    Passes read consumers through `GraphView.consumers_of`."""
    return (held,) if held.__class__ is str else held


class AddedNodes:
    """The nodes added since a journal opened that are still in the graph, in the order they came: the
    view's places from a mark on, read through its place index (no set of their names). True once any
    node was added."""

    __slots__ = ("_view", "mark")

    def __init__(self, view: "GraphView"):
        self._view = view
        self.mark = view.place_count()  # the first place a node added from now on takes (`compact` moves it)

    def __contains__(self, name: object) -> bool:
        at = self._view._at.get(name)
        return at is not None and at >= self.mark

    def __iter__(self) -> Iterator[str]:
        mark = self.mark
        return (name for name, at in self._view._at.items() if at >= mark)

    def __bool__(self) -> bool:
        return self._view.place_count() > self.mark


class EditJournal:
    """What the mutators did since the journal was opened: nodes added (`added`, in order) and removed
    (in order), and every edit to the inputs of a node that was there when it opened, as
    (node, input slot, old value) records (`edits`; `rewired` lists those nodes, in the order they
    were first edited). `inputs_before` undoes a node's edits on its inputs now, newest first, so the
    inputs it had when the journal opened are known exactly.

    The edits are kept in columns (see the design note at the top of the module): per edit its kind,
    slot, old input string (None for an insertion) and the previous edit of the same node; per
    rewired node its latest edit."""

    SET, INSERT, DELETE = 0, 1, 2  # an edit's kind: input `slot` replaced, inserted, deleted

    def __init__(self, view: "GraphView"):
        self.added = AddedNodes(view)
        self.removed: dict[str, None] = {}
        # By place, from the view's nodes then: 1 + the node's ordinal in `_rewired`, 0 if not rewired.
        self._ordinal = array("i", bytes(4 * view.place_count()))
        self._rewired: list[str] = []
        self._last = array("i")  # by ordinal: the node's latest edit (fewer than 2**31 edits)
        self._kind = array("b")  # by edit
        self._slot = array("i")
        self._previous = array("i")  # the same node's edit before, -1 for its first
        self._old: list[str | None] = []

    def rewired(self) -> "Iterator[str]":
        """Each node that was there when the journal opened and whose inputs were edited since (it may
        have been removed since), in the order they were first edited."""
        return iter(self._rewired)

    def edits(self, name: str) -> "list[tuple[int, int, str | None]]":
        """(kind, slot, old input string or None) of each edit to node `name`'s inputs, oldest first."""
        found = []
        if name in self._rewired:
            at = self._last[self._rewired.index(name)]
            while at >= 0:
                found.append((self._kind[at], self._slot[at], self._old[at]))
                at = self._previous[at]
        found.reverse()
        return found

    def inputs_before(self, view: "GraphView", name: str) -> "tuple[str, ...]":
        """The input strings node `name` (there now, and when the journal opened) had when the journal
        opened: its inputs now with its edits undone, newest first."""
        texts = list(view.input_texts(name))
        ordinal = self._ordinal[view.place(name)] if view.place(name) < len(self._ordinal) else 0
        if not ordinal:
            return tuple(texts)
        at = self._last[ordinal - 1]
        kinds, slots, olds, previous = self._kind, self._slot, self._old, self._previous
        while at >= 0:
            kind, slot = kinds[at], slots[at]
            if kind == self.SET:
                texts[slot] = olds[at]
            elif kind == self.INSERT:
                del texts[slot]
            else:
                texts.insert(slot, olds[at])
            at = previous[at]
        return tuple(texts)

    def changed(self, view: "GraphView") -> bool:
        """Whether a node, or an edge of a node that was there when the journal opened, differs now."""
        return bool(self.added or self.removed) or any(
            tuple(view.input_texts(name)) != self.inputs_before(view, name)
            for name in self._rewired if name in view)

    def _record(self, at: int, name: str, kind: int, slot: int, old: "str | None") -> None:
        """Node `name` (at place `at`) has its input `slot` edited (`old` its string before)."""
        ordinals = self._ordinal
        if at >= len(ordinals):  # a node added since has a place past them all
            return
        ordinal = ordinals[at]
        if not ordinal:
            self._rewired.append(name)
            self._last.append(-1)
            ordinal = ordinals[at] = len(self._rewired)
        self._kind.append(kind)
        self._slot.append(slot)
        self._old.append(old)
        self._previous.append(self._last[ordinal - 1])
        self._last[ordinal - 1] = len(self._old) - 1

    def _compact(self, start: int, end: int) -> None:
        """The view drops the places [start, end)."""
        del self._ordinal[start:end]


class GraphView:
    """Indexed, mutable view of one GraphDef (which it owns and edits in place)."""

    def __init__(self, graph_def: graph_pb2.GraphDef, gather_control_inputs: bool = False,
                 table: NodeTable | None = None):
        """With `gather_control_inputs`, control inputs many nodes share are gathered behind hubs as the
        view is built (see graph.control_hubs; `hubs` lists them), before the edges are indexed.
        `table`: the GraphDef's node columns, when the caller has them (the index is built from them)."""
        self._graph_def = graph_def
        self._stored = graph_def.node  # the NodeDefs, which `_at` indexes
        # The places of the nodes removed since `compact`, which drops them.
        self._dead = array("q")
        # Validation state: a topological rank per node from the last full check (see `ranks`; kept by
        # place in `_rank`, made in `_index`), and the nodes added or given new inputs since (see
        # graph.validate); only the mutators below update them.
        # Validation's worklist (see `take_touched`): a byte per place, set where a node was added or
        # edited; `_touched_any` stays set for a node removed since.
        self._ranked = False
        self._touched = bytearray()
        self._touched_any = False
        self._journal: EditJournal | None = None
        # A topological order of the graph as it is (see `remember_order`): every mutator forgets it, so
        # that a stale one is not kept.
        self._order_memo: list[str] | None = None
        self.hubs: list[control_hubs.Hub] = []
        if table is not None:
            self._index(table.names, table.take_inputs(), list(table.ops), gather_control_inputs,
                        table.take_consumers)
            if table.forward:  # the shim saw every edge run forward: the GraphDef order is topological
                self.remember_order(self.names())
        else:  # only names and inputs: the other columns are not the view's
            names, inputs = names_and_inputs(graph_def)
            self._index(names, inputs, [node.op for node in graph_def.node], gather_control_inputs)

    # ----------------------------------------------------------------- queries
    @property
    def graph_def(self) -> graph_pb2.GraphDef:
        """The underlying GraphDef; may still hold removed nodes until `compact()`."""
        return self._graph_def

    def __len__(self) -> int:
        return len(self._at)

    def __contains__(self, name: str) -> bool:
        return name in self._at

    def nodes(self) -> Iterator[node_def_pb2.NodeDef]:
        """Live nodes in GraphDef order (take a list first to remove nodes while going through them)."""
        if not self._dead:  # the common case
            return iter(self._graph_def.node)
        dead = set(self._dead)
        return (node for at, node in enumerate(self._graph_def.node) if at not in dead)

    def names(self) -> list[str]:
        """Names of the live nodes in the index order (`records`' order): GraphDef order, but with each hub
        just before its first reader (or, once that reader is removed, before the node that followed it).
        Made at each call from the place index (see the module's design note)."""
        if not self._hub_before:
            return list(self._at)
        hubs = self._hub_before
        pending = sorted((place, name) for name, place in hubs.items())  # (stands before, hub)
        names, next_hub, count = [], 0, len(pending)
        for name, at in self._at.items():
            if name in hubs:
                continue
            while next_hub < count and pending[next_hub][0] <= at:
                names.append(pending[next_hub][1])
                next_hub += 1
            names.append(name)
        names.extend(name for _, name in pending[next_hub:])
        return names

    def graph_order_names(self) -> list[str]:
        """Names of the live nodes in GraphDef order (`nodes()`' order: hubs last), from the index: a
        pass that keeps every name shares the view's strings (protobuf makes a new str at each read)."""
        return list(self._at)

    def named_nodes(self) -> Iterable[tuple[str, node_def_pb2.NodeDef]]:
        """(name, NodeDef) of the live nodes in GraphDef order, the names from the index (see
        `graph_order_names`; take a list first to remove nodes while going through them)."""
        stored = self._stored
        if len(stored) == len(self._at):  # nothing removed: the index lists the GraphDef's nodes in order
            return zip(self._at, stored)
        return ((name, stored[at]) for name, at in self._at.items())

    def records(self) -> list[tuple[str, str, list[str]]]:
        """(name, op, input strings) of every live node in GraphDef order (a hub just before its first
        reader), from the index.

        Cheap: the inputs are kept as Python strings, so validation and ordering need not read
        the protobuf back.
        """
        codes, ops, at, inputs, records = self._op_codes, self._op_names, self._at, self._inputs, []
        for name in self.names():
            place = at[name]
            held = inputs[place]
            records.append((name, ops[codes[place]], (held,) if held.__class__ is str else held))
        return records

    def consumer_index(self) -> "ConsumerIndex":
        """producer name -> its consumers' names, one per edge (a consumer reading the producer twice is
        there twice; no order to rely on): a list, or the name of a lone consumer (read values through
        `edges`); read-only, kept current by the mutators. Producers a node reads that are not in the
        graph are in it too (validation reports them)."""
        return ConsumerIndex(self)

    def consumers_of(self, name: str) -> "Sequence[str]":
        """The consumers of node `name`, one per edge (a consumer reading it twice is there twice; no
        order to rely on; () for none): the consumer index's entry decoded, read-only. A name no node
        has counts as a producer too (its readers)."""
        return edges(self.users_of(name))

    def consumer_edges(self) -> "Iterator[tuple[str, Sequence[str]]]":
        """(producer, `consumers_of(producer)`) of every producer that has a consumer: the nodes in
        GraphDef order, then the names read that no node has."""
        for name, held in self.producers_with_users():
            yield name, edges(held)
        for name, held in self._dangling.items():
            yield name, edges(held)

    def producers_with_users(self) -> "Iterator[tuple[str, str | list[str]]]":
        """(producer, its consumers as `edges` reads them) for each node that has one, in GraphDef
        order."""
        users = self._users
        for name, at in self._at.items():
            held = users[at]
            if held is not None:
                yield name, held

    def missing_producers(self) -> "dict[str, str | list[str]]":
        """The names nodes read that no node has -> their readers (read-only)."""
        return self._dangling

    def node(self, name: str) -> node_def_pb2.NodeDef:
        try:
            return self._stored[self._at[name]]
        except KeyError:
            raise KeyError(f"no node named {name!r} in the graph") from None

    def op(self, name: str) -> str:
        """A node's op, from the index (no protobuf read); change it with `set_op`."""
        try:
            return self._op_names[self._op_codes[self._at[name]]]
        except KeyError:
            raise KeyError(f"no node named {name!r} in the graph") from None

    def get(self, name: str) -> node_def_pb2.NodeDef | None:
        at = self._at.get(name)
        return None if at is None else self._stored[at]

    def input_texts(self, name: str) -> Sequence[str]:
        """A node's input strings as the NodeDef lists them, from the index (a tuple; no protobuf read)."""
        held = self._inputs[self._at[name]]
        return (held,) if held.__class__ is str else held

    def inputs(self, name: str) -> list[TensorRef]:
        """Every input of a node, data inputs first, as written in the NodeDef."""
        return [parse_input(text) for text in self.input_texts(name)]

    def data_inputs(self, name: str) -> list[TensorRef]:
        return [ref for ref in self.inputs(name) if not ref.is_control]

    def producers(self, name: str) -> list[str]:
        """Names of the nodes a node reads (data and control inputs, in input order, repeats kept)."""
        return [node_name(text) for text in self.input_texts(name)]

    def consumers(self, name: str) -> list[str]:
        """Names of nodes with at least one edge (data or control) from `name`, sorted."""
        return sorted(set(edges(self.users_of(name))))

    def data_consumers(self, ref: TensorRef) -> list[tuple[str, int]]:
        """(consumer name, input index) for every data edge reading tensor `ref`."""
        found = []
        for consumer in self.consumers(ref.node):
            for index, text in enumerate(self.input_texts(consumer)):
                if parse_input(text) == ref:
                    found.append((consumer, index))
        return found

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

    def unique_name(self, base: str) -> str:
        """`base` if unused, else `base_1`, `base_2`, ... (deterministic)."""
        if base not in self._at:
            return base
        suffix = 1
        while f"{base}_{suffix}" in self._at:
            suffix += 1
        return f"{base}_{suffix}"

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

    def remember_order(self, order: list[str]) -> None:
        """Keep a topological order of the graph as it is now (validation computes one anyway)."""
        self._order_memo = order

    def remembered_order(self, copy: bool = True) -> list[str] | None:
        """A copy of the remembered topological order (the list itself without `copy`, for a caller
        that only reads it), or None when the graph was edited since."""
        memo = self._order_memo
        if memo is None:
            return None
        return list(memo) if copy else memo

    # ---------------------------------------------------------------- journal
    def touch(self, name: str) -> None:
        """Have validation look at node `name` again (the mutators do this for the nodes they change)."""
        self._touch(self._at[name])

    def _touch(self, at: int) -> None:
        marks = self._touched
        if at >= len(marks):
            marks.extend(bytes(at + 1 - len(marks)))
        marks[at] = 1
        self._touched_any = True

    def has_touched(self) -> bool:
        """Whether a node was added, edited or removed since `take_touched` was last called."""
        return self._touched_any

    def take_touched(self) -> Iterator[str]:
        """The live nodes added or edited since the last call (in the index's order, each once), and
        forget them: validation's worklist. An iterator over the index: read it before the next edit."""
        marks, self._touched, self._touched_any = self._touched, bytearray(), False
        if not marks:
            return iter(())
        count = len(marks)
        return (name for name, at in self._at.items() if at < count and marks[at])

    def open_journal(self) -> EditJournal:
        """Start recording what the mutators do (one journal at a time; see `close_journal`)."""
        self._journal = EditJournal(self)
        return self._journal

    def close_journal(self) -> None:
        self._journal = None

    # --------------------------------------------------------------- mutators
    def add_node(self, node: node_def_pb2.NodeDef, name: str | None = None,
                 inputs: list[str] | None = None) -> node_def_pb2.NodeDef:
        """Append a copy of `node`; its name must be new. Returns the stored NodeDef.

        `name` and `inputs`: the node's name and input strings, when the caller holds those str objects
        already; the indexes then share them (protobuf makes a new str at each read, and a pass adding
        thousands of Casts keeps their names and reads their inputs from the graph)."""
        self._order_memo = None
        if name is None:
            name = node.name  # one str for every index
        elif name != node.name:
            raise ValueError(f"add_node was given the name {name!r} for a node named {node.name!r}")
        if inputs is not None and inputs != node.input:
            raise ValueError(f"add_node was given the inputs {inputs} for node {name!r}, which reads "
                             f"{list(node.input)}")
        if name in self._at:
            raise GraphValidationError(f"cannot add node {name!r}: the name is taken")
        stored = self._stored.add()
        stored.CopyFrom(node)
        inputs = held_inputs(stored.input if inputs is None else inputs)
        users = self._dangling.pop(name, None) if self._dangling else None  # read before it came
        self._touch(self._append_place(name, stored.op, inputs, users))
        for text in edges(inputs):
            self._link(node_name(text), name)
        return stored

    def remove_node(self, name: str) -> None:
        """Remove a node that no other node reads (rewire its consumers first)."""
        self._order_memo = None
        users = self.consumers(name)
        if users:
            raise GraphValidationError(
                f"cannot remove node {name!r}: still read by {', '.join(users[:5])}")
        if self._journal is not None:
            self._journal.removed[name] = None
        at = self._at.pop(name)
        self._hub_before.pop(name, None)
        held, self._inputs[at] = self._inputs[at], ()  # the place goes at `compact`
        self._dead.append(at)
        for text in edges(held):
            self._unlink(node_name(text), name)
        self._users[at] = None

    def set_op(self, name: str, op: str) -> None:
        """Give a node another op (the index keeps each node's op: set it here, not on the NodeDef)."""
        self._order_memo = None
        at = self._at[name]
        self._stored[at].op = op
        code = self._op_code(op)  # first: a new code may widen the array
        self._op_codes[at] = code
        self._touch(at)

    def set_input(self, name: str, index: int, ref: TensorRef | str) -> None:
        self._order_memo = None
        at = self._at[name]
        node = self._stored[at]
        new = ref if isinstance(ref, str) else format_input(ref)
        texts = list(edges(self._inputs[at]))
        if self._journal is not None:
            self._journal._record(at, name, EditJournal.SET, index % len(texts), texts[index])
        self._unlink(node_name(node.input[index]), name)
        node.input[index] = new
        texts[index] = new
        self._inputs[at] = held_inputs(texts)
        self._link(node_name(new), name)
        self._touch(at)

    def add_input(self, name: str, ref: TensorRef | str) -> None:
        """Add an input; control inputs go last, data inputs before the first control input."""
        self._order_memo = None
        at = self._at[name]
        node = self._stored[at]
        text = ref if isinstance(ref, str) else format_input(ref)
        inputs = list(edges(self._inputs[at]))
        if text.startswith("^"):
            if text in inputs:
                return
            position = len(inputs)
        else:
            position = next((i for i, old in enumerate(inputs) if old.startswith("^")), len(inputs))
        if self._journal is not None:
            self._journal._record(at, name, EditJournal.INSERT, position, None)
        node.input.insert(position, text)
        inputs.insert(position, text)
        self._inputs[at] = held_inputs(inputs)
        self._link(node_name(text), name)
        self._touch(at)

    def remove_input(self, name: str, index: int) -> None:
        self._order_memo = None
        at = self._at[name]
        node = self._stored[at]
        producer = node_name(node.input[index])
        inputs = list(edges(self._inputs[at]))
        if self._journal is not None:
            self._journal._record(at, name, EditJournal.DELETE, index % len(inputs), inputs[index])
        del node.input[index]
        del inputs[index]
        self._inputs[at] = held_inputs(inputs)
        self._unlink(producer, name)

    def replace_uses(self, old: TensorRef, new: TensorRef,
                     exclude: Iterable[str] = ()) -> int:
        """Point every data edge reading `old` at `new` (except in `exclude`); returns the count."""
        skip = set(exclude)
        count = 0
        for consumer, index in self.data_consumers(old):
            if consumer not in skip:
                self.set_input(consumer, index, new)
                count += 1
        return count

    def remove_nodes(self, names: Iterable[str]) -> None:
        """Remove several nodes at once; they may read each other, but no other node may read them.
        A dict of names (say from dict.fromkeys) is taken as it is: no copy of a large set of names."""
        self._order_memo = None
        gone = names if isinstance(names, dict) else dict.fromkeys(names)
        for name in gone:
            users = edges(self.users_of(name))
            if not all(user in gone for user in users):  # no set per node: the message makes one
                outside = sorted({user for user in users if user not in gone})
                raise GraphValidationError(f"cannot remove node {name!r}: still read by {', '.join(outside[:5])}")
        if self._journal is not None:
            self._journal.removed.update(gone)
        for name in gone:
            at = self._at.pop(name)
            self._hub_before.pop(name, None)
            held, self._inputs[at] = self._inputs[at], ()  # the place goes at `compact`
            self._dead.append(at)
            for text in edges(held):
                producer = node_name(text)
                if producer not in gone:
                    self._unlink(producer, name)
            self._users[at] = None

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
        for run in range(len(starts) - 1, -1, -1):
            start, end = int(starts[run]), int(ends[run])
            del self._graph_def.node[start:end]
            del self._op_codes[start:end]
            del self._inputs[start:end]
            del self._rank[start:end]
            del self._users[start:end]
            del self._touched[start:end]  # (shorter when no node past `start` was touched)
            if self._journal is not None:
                self._journal._compact(start, end)
        if self._hub_before:  # a hub stands before the same node, or the first live one after a removed one
            self._hub_before = {hub: at - int(numpy.searchsorted(dead, at)) for hub, at in self._hub_before.items()}
        if self._journal is not None:  # the nodes added since it opened keep coming after the mark
            self._journal.added.mark -= int(numpy.searchsorted(dead, self._journal.added.mark))
        del dead, starts, ends, breaks  # (views of the array, which goes next)
        self._dead = array("q")
        self._at.renumber()  # the live nodes' new places

    def to_graph_def(self) -> graph_pb2.GraphDef:
        self.compact()
        return self._graph_def

    # -------------------------------------------------------------- internals
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
        link = self._link
        for name, node_inputs in zip(self._at, self._inputs):
            for text in (node_inputs,) if node_inputs.__class__ is str else node_inputs:
                link(node_name(text), name)

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
            stored.CopyFrom(hub.node(self.node(hub.readers[0]).device))
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
