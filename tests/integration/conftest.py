"""Fixtures local to the integration tests.

`cluster_factory` (real Strandline brokers + real ZooKeeper) comes from tests/conftest.py.
`bootstrap` is one single-broker Strandline cluster; with STRANDLINE_IT_PEER=tansu it is a
Tansu broker instead, which is how the client-side logic of the roundtrip tests was checked
against a known Kafka-compatible peer before the broker existed (kcat's librdkafka 2.0.2
rejects Tansu's ApiVersions answer, so that one case only runs against Strandline).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from strandline.testing.tansu import TansuUnavailableError, tansu_broker


def _tansu() -> Iterator[str]:
    try:
        with tansu_broker(storage="memory://it/") as broker:
            yield broker.bootstrap
    except TansuUnavailableError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture
def peer_name() -> str:
    return os.environ.get("STRANDLINE_IT_PEER", "strandline")


@pytest.fixture
def bootstrap(request: pytest.FixtureRequest, peer_name: str) -> Iterator[str]:
    """A fresh single broker for one test (function scope, as `cluster_factory` may be)."""
    if peer_name == "tansu":
        yield from _tansu()
        return
    from .cluster_support import new_cluster

    yield new_cluster(request.getfixturevalue("cluster_factory")).bootstrap
