"""Delta debugging of a failing schedule: the smallest sub-schedule that still fails."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def shrink(
    schedule: Sequence[T], still_fails: Callable[[list[T]], object], pairs_up_to: int = 0
) -> list[T]:
    """Drop chunks, halving their size down to single events, while `still_fails`; then,
    for schedules of at most `pairs_up_to` events, try dropping every pair (a failure
    often needs two events together, e.g. a crash and its restart)."""
    current = list(schedule)
    chunk = max(1, len(current) // 2)
    while True:
        start = 0
        while start < len(current):
            candidate = current[:start] + current[start + chunk :]
            if candidate and still_fails(candidate):
                current = candidate
            else:
                start += chunk
        if chunk == 1:
            break
        chunk = max(1, chunk // 2)
    changed = len(current) <= pairs_up_to
    while changed:
        changed = False
        for i in range(len(current)):
            for j in range(i + 1, len(current)):
                candidate = current[:i] + current[i + 1 : j] + current[j + 1 :]
                if candidate and still_fails(candidate):
                    current, changed = candidate, True
                    break
            if changed:
                break
    return current
