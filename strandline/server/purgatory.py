"""Kafka's purgatory: requests that wait for a condition (DelayedFetch, DelayedProduce).

A waiting request registers a check under the partitions it depends on. Whoever
changes a partition (an append, a high-watermark move) calls `notify(tp)`, which
re-runs the checks parked there and completes those now satisfied. Nothing polls:
a parked fetch answers as soon as the data it waits for arrives.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Iterable
from contextvars import ContextVar

from strandline.server import clock

# Where the request being handled collects its time spent parked here (Kafka's
# RemoteTimeMs); set by the socket server for each request, unset elsewhere.
REMOTE_WAITS: ContextVar[list[float] | None] = ContextVar("remote_waits", default=None)


# A parked request's condition: given the notified key, or None for "look at everything".
Check = Callable[[Hashable | None], bool]


class _Waiter:
    __slots__ = ("check", "future")

    def __init__(self, check: Check, future: asyncio.Future[bool]) -> None:
        self.check = check
        self.future = future


class Purgatory:
    def __init__(self, name: str, on_notify: Callable[[Hashable], None] | None = None) -> None:
        self.name = name
        self._watchers: dict[Hashable, set[_Waiter]] = {}
        # Told of every notified key before the waiters are checked: the fetch session
        # cache marks the partition dirty in its sessions and wakes their fetches.
        self._on_notify = on_notify

    def watched(self) -> int:
        return sum(len(w) for w in self._watchers.values())

    async def wait(self, keys: Iterable[Hashable], check: Check, timeout_s: float) -> bool:
        """Return True once `check` holds, or its value when the timeout expires.

        `check(None)` looks at everything the request waits on (first and last);
        `check(key)` after a notify of `key` need only look at what `key` changed, so a
        request waiting on a thousand partitions pays for one per wake-up, not all."""
        if check(None):
            return True
        if timeout_s <= 0:
            return False
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        waiter = _Waiter(check, future)
        keys = list(keys)
        for key in keys:
            self._watchers.setdefault(key, set()).add(waiter)
        timer = loop.call_later(timeout_s, _expire, future)
        parked = clock.perf_s()
        try:
            completed = await future
        finally:
            timer.cancel()
            waits = REMOTE_WAITS.get()
            if waits is not None:
                waits.append(clock.perf_s() - parked)
            for key in keys:
                watchers = self._watchers.get(key)
                if watchers is not None:
                    watchers.discard(waiter)
                    if not watchers:
                        del self._watchers[key]
        return completed or check(None)

    def notify(self, key: Hashable) -> None:
        if self._on_notify is not None:
            self._on_notify(key)
        watchers = self._watchers.get(key)
        if not watchers:
            return
        for waiter in list(watchers):
            if not waiter.future.done() and waiter.check(key):
                waiter.future.set_result(True)

    def notify_all(self) -> None:
        for key in list(self._watchers):
            self.notify(key)


def _expire(future: asyncio.Future[bool]) -> None:
    if not future.done():
        future.set_result(False)
