"""The broker shell's one clock. The pure cores take `now` as an argument; every
reading of time in the shell comes from here, so a test (or a simulator) has one place
to replace it.

- `now_ms`: wall-clock milliseconds, the `now` of the replication and group cores
  (timestamps, lag windows, session timeouts);
- `monotonic_s`: seconds that never go back, for backoffs and deadlines;
- `perf_s`: the finest monotonic clock, for request timings in the metrics.
"""

from __future__ import annotations

import time


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def monotonic_s() -> float:
    return time.monotonic()


def perf_s() -> float:
    return time.perf_counter()
