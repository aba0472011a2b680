"""Read-only indexes over a GraphView's per-place arrays, read by node name.

The view keeps per node only what it must (its place, op and inputs, in lists by place). Validation's
ranks and the consumer index are arrays by place too, not dicts by name; these classes read them by
name for the code that asks that way.
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping
from typing import Iterator

import numpy

UNRANKED = float("-inf")  # the rank of a node added since validation last ranked the graph


class Ranks:
    """Validation's topological ranks, by node name: the view's place index over one array of ranks by
    place (see graph.places' design note). Loops that read many take `place` and `values` and index them directly."""

    __slots__ = ("place", "values")

    def __init__(self, place: "dict[str, int]", values: array):
        self.place, self.values = place, values

    def __getitem__(self, name: str) -> float:
        return self.values[self.place[name]]

    def __setitem__(self, name: str, rank: float) -> None:
        self.values[self.place[name]] = rank

    def complete(self) -> bool:
        """Whether every live node has a rank."""
        return UNRANKED not in map(self.values.__getitem__, self.place.values())

    def sorted(self, names: list[str]) -> list[str]:
        """`names` by rank, ties by place: as `topological_order` lists them in the whole graph when it
        orders by these ranks (see `validate.ranks_in_force`). Only nodes added since the last complete
        check tie (each a fraction above its highest input; the others' ranks are distinct integers),
        and those the view lists in the order of their places. Sorted as arrays of places."""
        count = len(names)
        places = numpy.fromiter(map(self.place.__getitem__, names), dtype=numpy.int64, count=count)
        keys = numpy.frombuffer(self.values, dtype=numpy.float64)[places]
        order = numpy.lexsort((places, keys))  # the last key first
        del places, keys  # each array goes as soon as it is used
        return list(map(names.__getitem__, order))


class Positions:
    """Each live node's position in an order of them all (say a topological one), by name: the view's
    place index over one array of positions by place (see `GraphView.positions`)."""

    __slots__ = ("_place", "_where")

    def __init__(self, place: "Mapping[str, int]", where: array):
        self._place, self._where = place, where

    def __call__(self, name: str) -> int:
        return self._where[self._place[name]]

    def sorted(self, names: list[str]) -> list[str]:
        """`names` in the order's order (sorted as arrays of places)."""
        return _sorted_by(numpy.frombuffer(self._where, dtype=numpy.int64), self._place, names)


def _sorted_by(by_place: numpy.ndarray, place: "Mapping[str, int]", names: list[str]) -> list[str]:
    """`names` by the value `by_place` holds at each one's place (ties keep their order)."""
    count = len(names)
    keys = by_place[numpy.fromiter(map(place.__getitem__, names), dtype=numpy.int64, count=count)]
    order = numpy.argsort(keys, kind="stable")
    del keys  # each array goes as soon as it is used
    # Straight into the list (no object array of the names).
    return list(map(names.__getitem__, order))


class ConsumerIndex(Mapping):
    """The view's consumer index, read as a mapping (see `GraphView.consumer_index`): the view holds the
    consumers by the producer's place, and the producers not in the graph by name."""

    __slots__ = ("_view",)

    def __init__(self, view):  # the GraphView (view.py imports this module)
        self._view = view

    def get(self, name: str, default=None):
        held = self._view.users_of(name)
        return held if held else default

    def __getitem__(self, name: str) -> "str | list[str]":
        held = self.get(name)
        if held is None:
            raise KeyError(name)
        return held

    def __contains__(self, name: object) -> bool:
        return self.get(name) is not None

    def items(self) -> "Iterator[tuple[str, str | list[str]]]":  # type: ignore[override]
        """(producer, consumers) of the producers in the graph, in GraphDef order, then of the others."""
        yield from self._view.producers_with_users()
        yield from self._view.missing_producers().items()

    def __iter__(self) -> Iterator[str]:
        return (name for name, _ in self.items())

    def __len__(self) -> int:
        return sum(1 for _ in self.items())
