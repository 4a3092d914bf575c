"""Debian's kcat (librdkafka 2.0.2, strict about response encodings) as a balanced
consumer: joins the group, reads every record, commits on exit; a second run resumes."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from .support import GROUP_BROKER_SETTINGS, create_topic, produce
from .wire_groups import coordinator_address, fetch_offsets

ClusterFactory = Callable[..., Any]


def _kcat_group(kcat: str, bootstrap: str, group: str, topic: str) -> list[tuple[int, int]]:
    result = subprocess.run(
        [
            kcat,
            "-b",
            bootstrap,
            "-G",
            group,
            "-X",
            "auto.offset.reset=earliest",
            "-e",
            "-q",
            "-X",
            "session.timeout.ms=6000",
            "-f",
            "%p %o\\n",
            topic,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return [(int(p), int(o)) for p, o in (line.split() for line in result.stdout.splitlines())]


@pytest.mark.timeout(120)
def test_kcat_balanced_consumer_commits_and_resumes(
    cluster_factory: ClusterFactory, kcat: str
) -> None:
    cluster = cluster_factory(
        brokers=1, offsets_topic_replication_factor=1, **GROUP_BROKER_SETTINGS
    )
    bootstrap = cluster.bootstrap
    topic = create_topic(bootstrap, partitions=3, prefix="kcat")
    produce(bootstrap, topic, 5, partitions=3)
    group = "kcat-group"
    first = _kcat_group(kcat, bootstrap, group, topic)
    assert sorted(first) == [(p, o) for p in range(3) for o in range(5)]
    host, port = bootstrap.rsplit(":", 1)
    _, address = coordinator_address((host, int(port)), group)
    error, offsets = fetch_offsets(address, group, version=7)
    assert error == ErrorCode.none
    assert {p: o for (_, p), (o, _) in offsets.items()} == {0: 5, 1: 5, 2: 5}
    produce(bootstrap, topic, 2, partitions=3)
    second = _kcat_group(kcat, bootstrap, group, topic)
    assert sorted(second) == [(p, o) for p in range(3) for o in (5, 6)]
