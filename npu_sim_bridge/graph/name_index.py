"""Node names to their places: the index the view (its places), the report (its rows) and partition
(its units) number nodes by.

A place is the position a name was appended at; `pop` leaves its place empty and `renumber` closes
the gaps, the live names keeping their order. Read an index as a dict of name -> place: `[]`, `get`,
`in`, `len`, iteration in place order, `items()` and `values()`.

Where this process loaded the native library (native/name_index.cc, loaded with the shim) an index
holds a name in 16 bytes or so: a dict and an int object a number were, with the names, most of a
rewrite's peak memory on a graph of small nodes. Elsewhere its Python twin (`_Twin`, a dict over
graph.shared_ints' numbers) behaves the same.
"""

from __future__ import annotations

import copyreg
from typing import Iterable

from npu_sim_bridge.graph import shared_ints
from npu_sim_bridge.native.loader import name_index_type

__all__ = ["new_index", "is_native"]


class _Twin(dict):
    """The native NameIndex's Python twin: the same methods, over a dict of shared numbers (and a list
    of the names by place, made when `name` is first asked)."""

    __slots__ = ("_places", "_by_place")

    def __init__(self, names: Iterable[str] = ()):
        names = names if isinstance(names, list) else list(names)
        super().__init__(zip(names, shared_ints.counting(0, len(names))))
        self._places = len(names)
        self._by_place: list | None = None

    def append(self, name: str) -> int:
        """Append `name` at the next place; returns it (ValueError if the index holds it already)."""
        if name.__class__ is not str:
            raise TypeError(f"NameIndex holds node names (str), not {type(name).__name__}")
        if name in self:
            raise ValueError(f"the name {name!r} is held already")
        place = self[name] = shared_ints.number(self._places)
        self._places += 1
        if self._by_place is not None:
            self._by_place.append(name)
        return place

    def extend(self, names: Iterable[str]) -> None:
        """Append each of `names` (ValueError when one is held already, or repeats)."""
        names = names if isinstance(names, list) else list(names)
        start, count = self._places, len(self)
        self.update(zip(names, shared_ints.counting(start, start + len(names))))
        self._places += len(names)
        if self._by_place is not None:
            self._by_place.extend(names)
        if len(self) != count + len(names):
            raise ValueError("the names repeat, or one is held already")

    def pop(self, name: str) -> int:
        place = dict.pop(self, name)
        if self._by_place is not None:
            self._by_place[place] = None
        return place

    def renumber(self) -> None:
        """The live names take places 0, 1, ... in their order."""
        names = list(self)
        self.clear()
        self.update(zip(names, shared_ints.counting(0, len(names))))
        self._places = len(names)
        self._by_place = None

    def name(self, place: int) -> str:
        """The name at `place` (IndexError if none)."""
        if self._by_place is None:
            self._by_place = [None] * self._places
            for name, at in self.items():
                self._by_place[at] = name
        name = self._by_place[place] if 0 <= place < self._places else None
        if name is None:
            raise IndexError(f"no name at place {place}")
        return name


def is_native() -> bool:
    """Whether `new_index` gives the native index in this process."""
    return name_index_type() is not None


def new_index(names: Iterable[str] = ()):
    """An index of `names`, numbered 0, 1, ... in their order (a name that repeats is held once, and
    the index is shorter than `names`)."""
    native = name_index_type()
    if native is None:
        return _Twin(names)
    if native not in copyreg.dispatch_table:  # a report is copied and pickled with its index
        copyreg.pickle(native, _reduce)
    return native(names)


def _reduce(index):
    """How pickle and copy make a native index again: its names by place, None for an empty place."""
    by_place: list = []
    for name, place in index.items():
        by_place.extend([None] * (place - len(by_place)))
        by_place.append(name)
    return _rebuilt, (by_place,)


def _rebuilt(by_place: list):
    index = new_index()
    for place, name in enumerate(by_place):
        if name is None:  # an empty place: taken, then given up, as pop leaves it
            name = f"\0place {place}"
            index.append(name)
            index.pop(name)
        else:
            index.append(name)
    return index
