"""Helpers around `cluster_factory` clusters: waiting for a restarted broker, finding files."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient

# LocalCluster numbers brokers from 1.
BROKER = 1


def wait_until_serving(bootstrap: str, topic: str, partitions: int, timeout_s: float = 30) -> None:
    """Until Metadata shows `topic` with a leader for every partition."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout_s
    last: object = None
    while time.monotonic() < deadline:
        try:
            meta = admin.list_topics(topic, timeout=2).topics.get(topic)
            last = meta
            if (
                meta is not None
                and meta.error is None
                and len(meta.partitions) == partitions
                and all(p.leader >= 0 and p.error is None for p in meta.partitions.values())
            ):
                return
        except Exception as exc:  # the broker may still be starting
            last = exc
        time.sleep(0.1)
    raise TimeoutError(f"{topic} not served after {timeout_s}s: {last}")


def restart(cluster: Any, topic: str, partitions: int) -> None:
    cluster.start(BROKER)
    wait_until_serving(cluster.bootstrap, topic, partitions)


def segment_files(cluster: Any, topic: str, partition: int) -> list[Path]:
    """The partition's `.log` segments, wherever log.dirs put them under the broker's dir."""
    return sorted(cluster.broker_dir(BROKER).rglob(f"{topic}-{partition}/*.log"))


def wait_until_registered(bootstrap: str, timeout_s: float = 20) -> None:
    """Until Metadata lists a broker and a controller.

    LocalCluster.up() returns once the broker *answers* Metadata, which it may do with an
    empty broker list while it is still registering in ZooKeeper; the tests start from a
    broker that is fully up.
    """
    from . import wire

    deadline = time.monotonic() + timeout_s
    while True:
        with wire.WireClient(bootstrap) as client:
            meta = client.request(wire.metadata())
        if meta.brokers and meta.controller_id >= 0:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"broker at {bootstrap} never listed itself in Metadata")
        time.sleep(0.05)


def new_cluster(cluster_factory: Any, **kwargs: Any) -> Any:
    """`cluster_factory(brokers=1, **kwargs)`, returned once its broker is registered."""
    cluster = cluster_factory(brokers=1, **kwargs)
    wait_until_registered(cluster.bootstrap)
    return cluster
