"""Step-time ratios of several Sessions, measured interleaved.

Each Session takes one step in turn, so load on the machine hits them alike; each round's figure is a
median over its steps. A round can be given a minimum length, in seconds of the base Session's steps: a
model whose step takes a millisecond then runs hundreds of steps per round instead of five, so that
its ratio is not decided by a handful of scheduler wake-ups."""

from __future__ import annotations

import math
import statistics
import time


def interleaved_ratios(sessions: dict, rounds: int, steps: int, base: str = "plain",
                       min_round_s: float = 0.0) -> dict[str, list[float]]:
    """`sessions`: kind -> (Session, fetches, feed dict). Per round: each other kind's median step time
    over `base`'s, and under "<base>_ms" `base`'s median step in milliseconds. Closes the Sessions.

    `steps` per kind and round, or more where `min_round_s` asks for it: as many as `base`'s median
    step, timed before the rounds, takes to fill that many seconds. The steps used are under "steps"."""
    ratios: dict[str, list[float]] = {kind: [] for kind in sessions if kind != base}
    ratios[f"{base}_ms"] = []
    if min_round_s > 0:
        steps = max(steps, math.ceil(min_round_s / max(_median_step(*sessions[base], min_round_s / 4), 1e-6)))
    ratios["steps"] = [steps]
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


def _median_step(sess, fetch, feed, budget_s: float, most: int = 15) -> float:
    """The median of up to `most` steps of one Session, fewer once they took `budget_s` seconds in all."""
    times: list[float] = []
    while len(times) < most and sum(times) < budget_s:
        started = time.perf_counter()
        sess.run(fetch, feed)
        times.append(time.perf_counter() - started)
    return statistics.median(times)
