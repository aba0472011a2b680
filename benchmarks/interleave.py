"""Step-time ratios of several Sessions, measured interleaved.

Each Session takes one step in turn, so load on the machine hits them alike; each round's figure is a
median over its steps."""

from __future__ import annotations

import statistics
import time


def interleaved_ratios(sessions: dict, rounds: int, steps: int, base: str = "plain") -> dict[str, list[float]]:
    """`sessions`: kind -> (Session, fetches, feed dict). Per round: each other kind's median step time
    over `base`'s, and under "<base>_ms" `base`'s median step in milliseconds. Closes the Sessions."""
    ratios: dict[str, list[float]] = {kind: [] for kind in sessions if kind != base}
    ratios[f"{base}_ms"] = []
    for _ in range(rounds):
        times: dict[str, list[float]] = {kind: [] for kind in sessions}
        for _ in range(steps):
            for kind, (sess, fetch, feed) in sessions.items():
                started = time.perf_counter()
                sess.run(fetch, feed)
                times[kind].append(time.perf_counter() - started)
        reference = statistics.median(times[base])
        ratios[f"{base}_ms"].append(reference * 1000)
        for kind in sessions:
            if kind != base:
                ratios[kind].append(statistics.median(times[kind]) / reference)
    for sess, _, _ in sessions.values():
        sess.close()
    return ratios
