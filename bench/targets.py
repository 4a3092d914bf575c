"""The brokers the bench runs against, each started as a context manager yielding a bootstrap.

A target is a name plus a function `() -> ContextManager[str]`; adding a broker to the bench
is adding one such function to `TARGETS`.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

from strandline.testing.tansu import tansu_broker

Target = Callable[[], AbstractContextManager[str]]


TANSU_STORAGE = "memory://bench/"


@contextlib.contextmanager
def tansu() -> Iterator[str]:
    """Tansu with in-memory storage: the peer the issue measures against."""
    with tansu_broker(storage=TANSU_STORAGE) as broker:
        yield broker.bootstrap


# Broker settings for the bench: Kafka's defaults (no fsync per message) on a fresh data dir.
STRANDLINE_BENCH_OVERRIDES: dict[str, str] = {
    "num.partitions": "3",
    "auto.create.topics.enable": "true",
}


@contextlib.contextmanager
def strandline() -> Iterator[str]:
    """One Strandline broker (plus its embedded ZooKeeper) via the project's LocalCluster."""
    from strandline.launcher.local_cluster import LocalCluster

    with tempfile.TemporaryDirectory(prefix="strandline-bench-") as data_dir:
        cluster = LocalCluster(Path(data_dir))
        try:
            # up() returns once the broker answers Metadata; it cleans up after itself on failure.
            cluster.up(1, dict(STRANDLINE_BENCH_OVERRIDES))
            yield cluster.bootstrap
        finally:
            cluster.stop()


TARGETS: dict[str, Target] = {"strandline": strandline, "tansu": tansu}
