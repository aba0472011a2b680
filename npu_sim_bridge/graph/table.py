"""A GraphDef's nodes as columns: what the view's index and the report's first records are built from.

Reading a node's fields back through protobuf costs a Python object per field and per input string
(ResNet-50's training graph: 8,330 nodes, 91,797 input strings, 9,032 of them distinct). Inside a
Session the C++ shim already holds the GraphDef and hands these columns over with it, one Python
string per distinct text; elsewhere `NodeTable.of` reads them from the protobuf.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from tensorflow.core.framework import graph_pb2, node_def_pb2, types_pb2

__all__ = ["NodeTable", "edges", "held_inputs", "main_dtype", "names_and_inputs"]

# The attrs whose type value is "the" dtype of a node, in the order they are consulted; then the list
# attrs whose first type is. The shim's MainDtype (native/npu_optimizer.cc) reads them the same way.
_TYPE_ATTRS = ("T", "dtype", "DstT", "Tparams", "out_type")
_LIST_ATTRS = ("T", "Tin", "dtypes")


def main_dtype(node: node_def_pb2.NodeDef) -> int:
    """The main DataType of a node (DT_FLOAT for a float32 Conv2D), or DT_INVALID (0) when it has none."""
    attrs = node.attr
    for key in _TYPE_ATTRS:
        if key in attrs:
            value = attrs[key]
            if value.WhichOneof("value") == "type":
                return value.type
    for key in _LIST_ATTRS:
        if key in attrs and attrs[key].list.type:
            return attrs[key].list.type[0]
    return types_pb2.DT_INVALID


def held_inputs(texts: Sequence[str]) -> "str | tuple[str, ...]":
    """A node's input strings as the view holds them: the str of a lone input, else a tuple (the empty
    one for none). Read them back with `edges`. A list each was a sixth of a rewrite's peak
    memory on BERT: a third of the nodes read nothing and a fifth read one tensor."""
    return texts[0] if len(texts) == 1 else tuple(texts)


def edges(held: "str | Sequence[str]") -> "Sequence[str]":
    """The names an index value stands for, one per edge: the view's consumer index holds a producer's
    lone consumer as its name, and its input index a node's lone input string (`held_inputs`). Passes
    read consumers through `GraphView.consumers_of`."""
    return (held,) if held.__class__ is str else held


def names_and_inputs(graph_def: graph_pb2.GraphDef,
                     texts: dict[str, str] | None = None) -> "tuple[list[str], list[str | tuple[str, ...]]]":
    """Each node's name and its inputs (`held_inputs`), in GraphDef order, with one str per distinct
    text as the shim gives them (`texts` collects them): protobuf makes a new str at every read, and
    most input strings repeat a node's name (ResNet-50: 91,797 input strings, 9,032 distinct)."""
    one = (texts if texts is not None else {}).setdefault
    nodes = graph_def.node
    names = [one(name, name) for name in (node.name for node in nodes)]
    return names, [held_inputs([one(text, text) for text in node.input]) for node in nodes]


class NodeTable:
    """Per node, in GraphDef order: name, op, inputs (`held_inputs`) and main dtype; plus the count of nodes
    without `stamp_attr` and the option digests (`digest_attr`) that earlier rewrites left."""

    __slots__ = ("names", "ops", "inputs", "dtypes", "unstamped", "digests", "alike_bodies", "forward",
                 "_consumers", "reached", "_count")

    def __init__(self, names: list[str], ops: list[str], inputs: "list[str | tuple[str, ...]]", dtypes: list[int],
                 unstamped: int, digests: Sequence[str],
                 alike_bodies: Callable[[list[str]], dict[str, bytes]] | None = None,
                 forward: bool | None = None,
                 consumers: Callable[[], dict[str, list[str]]] | None = None,
                 reached: Callable[[Iterable[int]], bytes] | None = None):
        self.names = names
        self.ops = ops
        self.inputs = inputs      # the one view built from the table takes them (take_inputs)
        self.dtypes = dtypes
        self.unstamped = unstamped
        self.digests = frozenset(digests)
        # The shim's: {name: alike body} of named library functions (equal exactly when graph/alike.py
        # alike_body is), read in C++ from the library as it came while the NpuOptimizer call lasts;
        # None when read from protobuf.
        self.alike_bodies = alike_bodies
        # The shim's too: whether every edge runs forward in GraphDef order (NextIteration's back edges
        # aside), None when not known; and a callable giving {producer: [consumer per edge]} as
        # GraphView indexes the graph, worked out in C++ when asked (during the call).
        self.forward = forward
        self._consumers = consumers
        # The shim's too: given node positions, a byte per node, 1 for the nodes they reach through
        # data and control inputs (report/roles.py); None when read from protobuf.
        self.reached = reached

    def take_inputs(self) -> "list[str | tuple[str, ...]]":
        """The inputs per node (`held_inputs`), for the one view built from this table (the table no
        longer holds them)."""
        inputs, self.inputs = self.inputs, None
        if inputs is None:
            raise RuntimeError("the node table's inputs were taken already: one view per table")
        return inputs

    def take_consumers(self) -> dict[str, list[str]] | None:
        """The consumer index, for the one view built from this table (which edits it); None when the
        table cannot give it (the view works it out)."""
        consumers, self._consumers = self._consumers, None
        return consumers() if consumers is not None else None

    @classmethod
    def of(cls, graph_def: graph_pb2.GraphDef, stamp_attr: str = "", digest_attr: str = "") -> "NodeTable":
        """The columns read from the protobuf (what the shim hands over inside a Session). Without
        `stamp_attr`, every node counts as unstamped; without `digest_attr`, there are no digests."""
        nodes = graph_def.node
        unstamped = 0 if stamp_attr else len(nodes)
        digests = []
        for node in nodes if stamp_attr or digest_attr else ():
            attrs = node.attr
            if stamp_attr and stamp_attr not in attrs:
                unstamped += 1
            digest = attrs.get(digest_attr) if digest_attr else None
            if digest is not None:
                digests.append(digest.s.decode("ascii", "replace"))
        texts: dict[str, str] = {}
        names, inputs = names_and_inputs(graph_def, texts)
        ops = [texts.setdefault(op, op) for op in (node.op for node in nodes)]
        return cls(names, ops, inputs, [main_dtype(node) for node in nodes], unstamped, digests)

    @classmethod
    def from_columns(cls, columns: tuple, graph_def: graph_pb2.GraphDef) -> "NodeTable":
        """The shim's columns (names, ops, inputs, dtypes, unstamped, digests, alike_bodies, forward,
        consumers, reached) of `graph_def`."""
        table = cls(*columns)
        nodes = graph_def.node
        count = len(table.names)
        if not (len(nodes) == count == len(table.ops) == len(table.inputs) == len(table.dtypes)) or (
                count and (nodes[0].name != table.names[0] or nodes[-1].name != table.names[-1])):
            raise ValueError(f"the node columns ({count} names) do not describe this GraphDef "
                             f"({len(nodes)} nodes)")
        return table

    def let_go(self) -> None:
        """Drop the per-node columns (names, ops, dtypes) once the view and the report hold theirs: the
        table lives as long as the pipeline's context, and three lists by node were a twentieth of a
        rewrite's peak memory. Its length, counts, digests and the shim's callables stay."""
        self._count = len(self)
        self.names = self.ops = self.dtypes = None

    def __len__(self) -> int:
        return self._count if self.names is None else len(self.names)
