"""Recent values for the console's small charts: per series, (time, value) points over
the last WINDOW_S seconds, recorded whenever a page gathers (the pages poll every
second or so while open, so the charts cover the time the console was watched)."""

from __future__ import annotations

import threading
from collections import deque

WINDOW_S = 600.0
MIN_SPACING_S = 0.5  # several tabs polling at once do not crowd the series


class History:
    def __init__(self, window_s: float = WINDOW_S) -> None:
        self.window_s = window_s
        self._series: dict[str, deque[tuple[float, float]]] = {}
        self._lock = threading.Lock()

    def add(self, name: str, at: float, value: float) -> None:
        with self._lock:
            points = self._series.setdefault(name, deque())
            if points and at - points[-1][0] < MIN_SPACING_S:
                return
            if points and at < points[-1][0]:
                return  # a slower gather of an earlier moment: keep time order
            points.append((at, value))
            while points and points[0][0] < at - self.window_s:
                points.popleft()

    def points(self, name: str, since: float | None = None) -> list[tuple[float, float]]:
        with self._lock:
            found = list(self._series.get(name, ()))
        return [p for p in found if since is None or p[0] >= since]


def rates(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Per-second increase between consecutive points of a growing counter (an offset);
    a drop (a new leader with a shorter log) is not a negative throughput: skipped."""
    out = []
    for (t0, v0), (t1, v1) in zip(points, points[1:], strict=False):
        if t1 > t0 and v1 >= v0:
            out.append((t1, (v1 - v0) / (t1 - t0)))
    return out
