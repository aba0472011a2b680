"""One int object per number for the dicts that number nodes.

CPython makes a new 28-byte object for each int above 256, so a dict that numbers every node pays one
per node on top of its own entry. Numbers taken from here are the same objects in every dict that
holds them. Most such indexes are graph.name_index's now, which hold no int object where the native
index is loaded; its Python twin, and partition's frame units, take their numbers from here. The
pipeline releases the pool when a rewrite ends (indexes that outlive it keep their numbers).
"""

from __future__ import annotations

import threading

__all__ = ["counting", "number", "release"]

_POOL: list[int] = []  # _POOL[i] is i, always: it grows and empties under _LOCK
_LOCK = threading.Lock()  # rewrites may run on several threads


def counting(start: int, stop: int) -> list[int]:
    """The numbers start, start + 1, ..., stop - 1 (non-negative), as the shared objects."""
    with _LOCK:
        if stop > len(_POOL):
            _POOL.extend(range(len(_POOL), stop))
        return _POOL[start:stop]


def number(value: int) -> int:
    """`value` (non-negative) as the shared object."""
    try:
        return _POOL[value]
    except IndexError:
        return counting(value, value + 1)[0]


def release() -> None:
    """Drop the pool (the numbers an index still holds stay with it)."""
    with _LOCK:
        _POOL.clear()
