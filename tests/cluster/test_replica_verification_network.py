"""kafka-replica-verification over the network: each replica fetched from its own
broker (replica id -2) and compared, on a real cluster, including one whose follower's
committed bytes were altered on disk behind the broker's back."""

from __future__ import annotations

import pytest

from strandline.client.replica_verification import VerificationError, verify
from strandline.types import TopicPartition
from tests.cluster.support import create_topic, producer
from tests.conftest import ClusterFactory
from tests.waiting import wait_until


def test_replicas_compared_over_the_network(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(brokers=3)
    create_topic(cluster, "v", partitions=2, rf=3)
    p = producer(cluster)
    for i in range(400):
        p.produce("v", value=f"record-{i:04d}".encode() * 10, partition=i % 2)
    assert p.flush(30) == 0

    # Followers learn the final HW on their next fetch.
    results = wait_until(
        "every replica to reach the HW",
        lambda: (r := verify(cluster.bootstrap, ["v"])) and all(c.below == 200 for c in r) and r,
        timeout_s=20,
    )
    assert [c.tp for c in results] == [TopicPartition("v", 0), TopicPartition("v", 1)]
    for comparison in results:
        assert comparison.consistent, comparison
        assert set(comparison.sizes) == {1, 2, 3}
        assert len(set(comparison.sizes.values())) == 1 and comparison.sizes[1] > 200 * 100

    # Flip one byte inside a record value of partition 0 on broker 3: its replica now
    # serves other bytes below the HW, which the tool must name.
    tp = TopicPartition("v", 0)
    replica = cluster.broker_dir(3) / "data" / f"{tp.topic}-{tp.partition}"
    [segment] = sorted(replica.glob("*.log"))
    data = bytearray(segment.read_bytes())
    at = data.index(b"record-0000")
    data[at] ^= 0x20
    segment.write_bytes(bytes(data))
    broken = {c.tp: c for c in verify(cluster.bootstrap, ["v"])}
    assert broken[tp].mismatched == (3,)
    assert broken[TopicPartition("v", 1)].consistent

    with pytest.raises(VerificationError, match="unknown topic"):
        verify(cluster.bootstrap, ["nope"])
