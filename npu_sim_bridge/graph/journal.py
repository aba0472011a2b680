"""The edit journal: what a GraphView's mutators did since it was opened (`GraphView.open_journal`), exactly.

A later pass asks what an earlier one changed: which nodes were added (`AddedNodes`, the view's places
from a mark on) and removed, and every edit to the inputs of a node that was there when the journal
opened, as (node, input slot, old value) records, so the inputs it had then are known exactly (no digest).

The journal is one of the view's place columns (graph/places.py): `compact` cuts it in step with the view's
own, through `drop_places`.
"""

from __future__ import annotations

from array import array
from typing import Iterator

__all__ = ["AddedNodes", "EditJournal"]


class AddedNodes:
    """The nodes added since a journal opened that are still in the graph, in the order they came: the
    view's places from a mark on, read through its place index (no set of their names). True once any
    node was added."""

    __slots__ = ("_view", "mark")

    def __init__(self, view):  # the GraphView (view.py imports this module)
        self._view = view
        self.mark = view.place_count()  # the first place a node added from now on takes (`compact` moves it)

    def __contains__(self, name: object) -> bool:
        at = self._view.place_or_none(name)
        return at is not None and at >= self.mark

    def __iter__(self) -> Iterator[str]:
        mark = self.mark
        return (name for name, at in self._view.names_with_places() if at >= mark)

    def __bool__(self) -> bool:
        return self._view.place_count() > self.mark


class EditJournal:
    """What the mutators did since the journal was opened: nodes added (`added`, in order) and removed
    (in order), and every edit to the inputs of a node that was there when it opened, as
    (node, input slot, old value) records (`edits`; `rewired` lists those nodes, in the order they
    were first edited). `inputs_before` undoes a node's edits on its inputs now, newest first, so the
    inputs it had when the journal opened are known exactly.

    The edits are kept in columns (see graph/places.py's design note): per edit its kind, slot, old
    input string (None for an insertion) and the previous edit of the same node; per rewired node its
    latest edit."""

    SET, INSERT, DELETE = 0, 1, 2  # an edit's kind: input `slot` replaced, inserted, deleted

    __slots__ = ("added", "removed", "_ordinal", "_rewired", "_last", "_kind", "_slot", "_previous", "_old",
                 "__weakref__")

    def __init__(self, view):  # the GraphView (view.py imports this module)
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

    def inputs_before(self, view, name: str) -> "tuple[str, ...]":
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

    def changed(self, view) -> bool:
        """Whether a node, or an edge of a node that was there when the journal opened, differs now."""
        return bool(self.added or self.removed) or any(
            tuple(view.input_texts(name)) != self.inputs_before(view, name)
            for name in self._rewired if name in view)

    def record(self, at: int, name: str, kind: int, slot: int, old: "str | None") -> None:
        """Node `name` (at place `at`) has its input `slot` edited (`old` its string before): the view's
        mutators call this."""
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

    def drop_places(self, start: int, end: int) -> None:
        """The view drops the places [start, end) (`compact`, last run first): the nodes added since the
        journal opened keep coming after the mark."""
        del self._ordinal[start:end]
        mark = self.added.mark
        if start < mark:
            self.added.mark = mark - (min(end, mark) - start)
