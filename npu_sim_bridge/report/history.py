"""The reports of the most recent rewrites in this process, for scripts and tests to inspect."""

from __future__ import annotations

import collections
import threading

from npu_sim_bridge.report.model import Report

_MAX_KEPT = 64
_lock = threading.Lock()
_reports: collections.deque[Report] = collections.deque(maxlen=_MAX_KEPT)


def remember(report: Report) -> None:
    with _lock:
        _reports.append(report)


def recent_reports() -> list[Report]:
    """The last reports, oldest first (at most 64 are kept)."""
    with _lock:
        return list(_reports)


def last_report() -> Report | None:
    with _lock:
        return _reports[-1] if _reports else None


def clear_reports() -> None:
    with _lock:
        _reports.clear()
