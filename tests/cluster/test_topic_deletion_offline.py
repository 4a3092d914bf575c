"""Topic deletion with a broker offline, as Kafka does it. The deletion stays
pending (znodes kept, the name refused) until the offline broker is back and has
deleted its replicas; a new topic of the same name then starts empty."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from strandline.coordination.zk_client import ZkClient
from strandline.launcher.local_cluster import LocalCluster
from tests.waiting import wait_until

from .support import consume_all, create_topic, producer, state_change_events

TOPIC = "doomed"
PARTITIONS = 2


def partition_dirs(cluster: LocalCluster, broker_id: int, topic: str) -> list[Path]:
    """The topic's partition dirs on a broker, `-delete` leftovers included."""
    data = cluster.broker_dir(broker_id) / "data"
    return sorted(p for p in data.iterdir() if p.is_dir() and p.name.startswith(f"{topic}-"))


def zk_view(cluster: LocalCluster, topic: str) -> tuple[bool, bool]:
    """(marked in /admin/delete_topics, /brokers/topics/<topic> present)."""
    assert cluster.zk_connect is not None
    with ZkClient(cluster.zk_connect).connect() as zk:
        return (
            topic in zk.get_topics_marked_for_deletion(),
            zk.get_topic_assignment(topic) is not None,
        )


def produce_values(cluster: LocalCluster, topic: str, values: list[bytes]) -> None:
    p = producer(cluster)
    for i, value in enumerate(values):
        p.produce(topic, value=value, partition=i % PARTITIONS)
    assert p.flush(30) == 0


def watermarks(cluster: LocalCluster, topic: str) -> list[tuple[int, int]]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "watermarks"})
    try:
        return [
            consumer.get_watermark_offsets(CkTopicPartition(topic, p), timeout=10)
            for p in range(PARTITIONS)
        ]
    finally:
        consumer.close()


def test_deletion_waits_for_the_offline_broker_and_the_name_starts_fresh(
    cluster_factory,
) -> None:
    cluster = cluster_factory(brokers=3)
    create_topic(cluster, TOPIC, PARTITIONS, 3)
    produce_values(cluster, TOPIC, [b"old-%d" % i for i in range(40)])
    controller = cluster.status().controller
    assert controller is not None
    victim = next(b for b in (1, 2, 3) if b != controller)
    assert len(partition_dirs(cluster, victim, TOPIC)) == PARTITIONS

    cluster.kill(victim, "KILL")
    wait_until(
        "the victim's session to expire", lambda: victim not in cluster.status().live_brokers
    )
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    # DeleteTopics answers once the brokers dropped the topic from their metadata.
    admin.delete_topics([TOPIC], operation_timeout=20)[TOPIC].result(30)
    live = [b for b in (1, 2, 3) if b != victim]
    wait_until(
        "the live brokers' replicas deleted",
        lambda: not any(partition_dirs(cluster, b, TOPIC) for b in live),
    )
    pending = wait_until(
        "topic-deletion-pending in the controller's state-change log",
        lambda: [
            e
            for e in state_change_events(cluster, controller)
            if e["event"] == "topic-deletion-pending" and e.get("topic") == TOPIC
        ],
    )
    assert pending[-1]["offline_replicas"] == {str(victim): list(range(PARTITIONS))}
    # Pending: both znodes stay while the victim's copies are on its disk.
    assert zk_view(cluster, TOPIC) == (True, True)
    assert len(partition_dirs(cluster, victim, TOPIC)) == PARTITIONS
    assert TOPIC not in admin.list_topics(timeout=5).topics
    # rf 2 fits the live brokers (a larger one is refused for that first, as in Kafka).
    refused = admin.create_topics([NewTopic(TOPIC, 1, 2)], operation_timeout=20)[TOPIC]
    with pytest.raises(KafkaException) as raised:
        refused.result(30)
    error = raised.value.args[0]
    assert error.name() == "TOPIC_ALREADY_EXISTS"
    assert "marked for deletion" in error.str()
    assert zk_view(cluster, TOPIC) == (True, True)

    cluster.start(victim)
    wait_until("the deletion to complete", lambda: zk_view(cluster, TOPIC) == (False, False))
    assert partition_dirs(cluster, victim, TOPIC) == []
    events = [e["event"] for e in state_change_events(cluster, victim)]
    assert "stop-replica" in events
    controller_events = [
        e["event"] for e in state_change_events(cluster, controller) if e.get("topic") == TOPIC
    ]
    assert controller_events.index("topic-deletion-pending") < controller_events.index(
        "topic-deleted"
    )

    # The name is free again, and the new topic has none of the old records.
    create_topic(cluster, TOPIC, PARTITIONS, 3)
    assert watermarks(cluster, TOPIC) == [(0, 0)] * PARTITIONS
    produce_values(cluster, TOPIC, [b"new-0", b"new-1"])
    assert watermarks(cluster, TOPIC) == [(0, 1)] * PARTITIONS
    assert consume_all(cluster, TOPIC, PARTITIONS) == {(0, 0): b"new-0", (1, 0): b"new-1"}
    for broker_id in (1, 2, 3):
        for d in partition_dirs(cluster, broker_id, TOPIC):
            segments = b"".join(f.read_bytes() for f in sorted(d.glob("*.log")))
            assert b"old-" not in segments


def test_a_broker_restarting_with_a_stray_replica_deletes_it(cluster_factory) -> None:
    """The topic's znodes vanished while the broker was down (not through the controller,
    which would have waited): the broker drops the stray copy before it registers."""
    cluster = cluster_factory(brokers=1)
    create_topic(cluster, "stray", PARTITIONS, 1)
    produce_values(cluster, "stray", [b"old-%d" % i for i in range(10)])
    cluster.kill(1, "KILL")
    assert cluster.zk_connect is not None
    with ZkClient(cluster.zk_connect).connect() as zk:
        zk.delete_topic_znodes("stray")
    assert len(partition_dirs(cluster, 1, "stray")) == PARTITIONS

    cluster.start(1)
    assert partition_dirs(cluster, 1, "stray") == []
    deleted = [
        (e["topic"], e["partition"])
        for e in state_change_events(cluster, 1)
        if e["event"] == "stray-replica-deleted"
    ]
    assert deleted == [("stray", p) for p in range(PARTITIONS)]
    create_topic(cluster, "stray", PARTITIONS, 1)
    assert watermarks(cluster, "stray") == [(0, 0)] * PARTITIONS
