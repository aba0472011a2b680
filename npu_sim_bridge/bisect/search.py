"""The search: a smallest set of candidates whose fix makes the model good, in about k·(log2 n + 1) trials.

Candidates come ordered most suspect first (the dump compare's first divergent op, overflow flags).
Adaptive group testing: while the fix found so far is not enough, find the shortest prefix of the
remaining candidates that, added to it, is enough (binary search; the first candidate alone, then the
flagged suspects together are tried first, so right guesses cost a trial each); that prefix's last
candidate is needed; the rest of the
prefix stays in play. Then a candidate found early that later ones made unneeded is dropped (one
trial each, only when more than one was found). `fixes` is called once per distinct set.
"""

from __future__ import annotations

from typing import Callable, Hashable, Sequence


class Oracle:
    """Calls `test(set) -> bool` once per distinct candidate set and remembers the answers."""

    def __init__(self, test: Callable[[tuple], bool]):
        self._test = test
        self._known: dict[frozenset, bool] = {}
        self.calls = 0

    def __call__(self, items: Sequence[Hashable]) -> bool:
        key = frozenset(items)
        if key not in self._known:
            self.calls += 1
            self._known[key] = bool(self._test(tuple(items)))
        return self._known[key]

    def remember(self, items: Sequence[Hashable], good: bool) -> None:
        self._known[frozenset(items)] = good


def smallest_fix(candidates: Sequence[Hashable], fixes: Oracle, suspects: int = 1) -> list:
    """A 1-minimal subset of `candidates` with fixes(subset) True, given fixes(candidates) is True.

    fixes([]) is taken as False (the model is broken without a fix). `suspects`: how many leading
    candidates the guidance flags (e.g. overflowed); after the first alone, those together are tried.
    """
    needed: list = []
    pool = list(candidates)
    fixes.remember([], False)
    while pool and not fixes(needed):
        low, high = 0, len(pool)  # fixes(needed + pool[:low]) is False, fixes(needed + pool[:high]) is True
        for guess in sorted({1, min(suspects, high)}):
            if low < guess < high:
                if fixes(needed + pool[:guess]):
                    high = guess
                    break
                low = guess
        while high - low > 1:
            middle = (low + high) // 2
            if fixes(needed + pool[:middle]):
                high = middle
            else:
                low = middle
        needed.append(pool[high - 1])
        pool = pool[:high - 1]
    if len(needed) > 1:
        for item in list(needed):
            rest = [other for other in needed if other != item]
            if fixes(rest):
                needed = rest
    return needed
