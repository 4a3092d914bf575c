"""The one way a test waits: poll a probe until it answers, or fail saying for what.

Tests never sleep a fixed time; they wait for the state they need (a leader elected, an
ISR seen by the controller, a transaction open) and fail with what they were waiting for
and the probe's last answer."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    what: str, probe: Callable[[], T | None], timeout_s: float = 20.0, interval_s: float = 0.05
) -> T:
    """Poll `probe` until it returns something truthy and return that; fail naming `what`
    (and the last answer) after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what} (last: {last!r})")
