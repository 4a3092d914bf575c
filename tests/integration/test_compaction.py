"""Log compaction in a running broker: a compacted topic keeps the latest value of every
key at the offset it was acknowledged at, and `__consumer_offsets` stays bounded while
committed offsets survive a restart."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .cluster_support import BROKER, new_cluster, restart, wait_until_serving

ClusterFactory = Callable[..., Any]

CLEANER = {"log.cleaner.backoff.ms": "200"}


def read_partition(bootstrap: str, topic: str, partition: int) -> list[Message]:
    """Every record of one partition, from its start to its high watermark."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
        }
    )
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        consumer.assign([TopicPartition(topic, partition, low)])
        out: list[Message] = []
        deadline = time.monotonic() + 30
        while (not out or out[-1].offset() < high - 1) and time.monotonic() < deadline:
            for message in consumer.consume(500, timeout=0.5):
                assert message.error() is None, message.error()
                out.append(message)
        return out
    finally:
        consumer.close()


def test_compacted_topic_keeps_the_latest_value_of_each_key_at_its_offset(
    cluster_factory: ClusterFactory,
) -> None:
    cluster = new_cluster(cluster_factory, config=CLEANER)
    topic = f"profiles-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    config = {
        "cleanup.policy": "compact",
        "segment.bytes": "4096",
        "min.cleanable.dirty.ratio": "0.01",
    }
    for future in admin.create_topics([NewTopic(topic, 1, 1, config=config)]).values():
        future.result(timeout=15)
    wait_until_serving(cluster.bootstrap, topic, 1)

    acked: dict[int, tuple[bytes, bytes]] = {}

    def on_delivery(err: Any, msg: Message) -> None:
        assert err is None, err
        acked[msg.offset()] = (msg.key(), msg.value())

    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "acks": "all",
            "linger.ms": 0,
            "compression.type": "lz4",
        }
    )
    for i in range(600):
        producer.produce(
            topic, key=b"user-%d" % (i % 25), value=b"v%d" % i, on_delivery=on_delivery
        )
        if i % 20 == 19:
            producer.flush(10)
    producer.flush(10)
    assert len(acked) == 600

    deadline = time.monotonic() + 30
    while True:
        records = read_partition(cluster.bootstrap, topic, 0)
        if len(records) < 300 or time.monotonic() > deadline:
            break
        time.sleep(0.5)

    assert len(records) < 300, "the cleaner never compacted the topic"
    for message in records:  # every survivor is what was acknowledged at its offset
        assert acked[message.offset()] == (message.key(), message.value())
    latest: dict[bytes, bytes] = {}
    for offset in sorted(acked):
        key, value = acked[offset]
        latest[key] = value
    assert {m.key(): m.value() for m in records} == latest
    assert len({m.key() for m in records}) == 25


def test_consumer_offsets_are_compacted_and_survive_a_restart(
    cluster_factory: ClusterFactory,
) -> None:
    cluster = new_cluster(
        cluster_factory,
        config={
            **CLEANER,
            "offsets.topic.num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.segment.bytes": "8192",
        },
    )
    topic = f"clicks-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(timeout=15)
    wait_until_serving(cluster.bootstrap, topic, 1)
    group = f"g-{uuid.uuid4().hex[:6]}"
    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    commits = 400
    for offset in range(1, commits + 1):
        consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    consumer.close()

    deadline = time.monotonic() + 30
    while True:
        stored = read_partition(cluster.bootstrap, "__consumer_offsets", 0)
        if len(stored) < commits // 2 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert len(stored) < commits // 2, "__consumer_offsets was never compacted"

    cluster.kill(BROKER, "KILL")  # the compacted segments must also survive a crash
    restart(cluster, topic, 1)
    reader = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                [committed] = reader.committed([TopicPartition(topic, 0)], timeout=5)
                break
            except Exception:  # noqa: BLE001 - the coordinator may still be loading
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    finally:
        reader.close()
    assert committed.offset == commits
