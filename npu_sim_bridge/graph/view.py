"""GraphView: a GraphDef with name and consumer indexes that every pass shares and mutates.

All mutation of names, edges and ops goes through the view's methods so the indexes never drift
from the GraphDef: `add_node`, `remove_node`, `set_op`, `set_input`, `add_input`, `remove_input` and
`replace_uses` (other fields a pass may set on the NodeDef `node()` returns). `remove_nodes` removes a
set of nodes at once. Removed nodes are dropped from the GraphDef in one sweep by `compact()` (called
by `to_graph_def`), which gives the live nodes their new places.

The index holds per node its place in the GraphDef, its op and its input strings, not a protobuf
wrapper: `node()` makes one at each call (keep it while working on a node), and `op()` and
`input_texts()` read no protobuf at all. Its storage, the columns by place and their memory design
note, is graph/places.py's (`PlaceColumns`, this class's base).
An open `EditJournal` (graph/journal.py) records what the mutators do (a later pass asks what an earlier
one changed).

Two listing orders: `names()` and `records()` list the *index order* (GraphDef order, with each control
hub just before its first reader), which validation and the topological order rest on; `nodes()`,
`graph_order_names()`, `named_nodes()` and `producers_with_users()` list *GraphDef order* (hubs last).
Making them one order would change which of two unordered nodes comes first in rewritten graphs, so both
stay; a pass picks the one its output's order is defined by.
"""

from __future__ import annotations

from typing import Iterable, Iterator, Sequence

from tensorflow.core.framework import graph_pb2, node_def_pb2

from npu_sim_bridge.errors import GraphValidationError
from npu_sim_bridge.graph import control_hubs
from npu_sim_bridge.graph.indexes import ConsumerIndex
from npu_sim_bridge.graph.journal import EditJournal
from npu_sim_bridge.graph.names import TensorRef, format_input, node_name, parse_input
from npu_sim_bridge.graph.places import PlaceColumns
from npu_sim_bridge.graph.table import NodeTable, edges, held_inputs, names_and_inputs

class GraphView(PlaceColumns):
    """Indexed, mutable view of one GraphDef (which it owns and edits in place)."""

    def __init__(self, graph_def: graph_pb2.GraphDef, gather_control_inputs: bool = False,
                 table: NodeTable | None = None):
        """With `gather_control_inputs`, control inputs many nodes share are gathered behind hubs as the
        view is built (see graph.control_hubs; `hubs` lists them), before the edges are indexed.
        `table`: the GraphDef's node columns, when the caller has them (the index is built from them)."""
        self._start_columns(graph_def)
        # Validation state (see graph.validate): a topological rank per node from the last full check
        # (`ranks`, a column by place), and its worklist (see `take_touched`): a byte per place
        # (`_touched`), set where a node was added or edited; `_touched_any` stays set for a node
        # removed since. Only the mutators below update them.
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
        Made at each call from the place index (see graph.places' design note)."""
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

    def unique_name(self, base: str) -> str:
        """`base` if unused, else `base_1`, `base_2`, ... (deterministic)."""
        if base not in self._at:
            return base
        suffix = 1
        while f"{base}_{suffix}" in self._at:
            suffix += 1
        return f"{base}_{suffix}"

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
        self.close_journal()
        self._journal = EditJournal(self)
        self.track_places(self._journal)  # `compact` cuts its column and moves its mark
        return self._journal

    def close_journal(self) -> None:
        if self._journal is not None:
            self.untrack_places(self._journal)
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
            self._journal.record(at, name, EditJournal.SET, index % len(texts), texts[index])
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
            self._journal.record(at, name, EditJournal.INSERT, position, None)
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
            self._journal.record(at, name, EditJournal.DELETE, index % len(inputs), inputs[index])
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

    def to_graph_def(self) -> graph_pb2.GraphDef:
        self.compact()
        return self._graph_def
