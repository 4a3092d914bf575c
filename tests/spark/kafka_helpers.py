"""Producing, consuming and topic admin for the Spark tests, with confluent-kafka."""

from __future__ import annotations

import uuid
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def unique_topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, topic: str, partitions: int, replication: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, replication)]).values():
        future.result(timeout=30)


def produce(
    bootstrap: str,
    topic: str,
    partitions: int,
    count: int,
    *,
    first: int = 0,
    headers: bool = False,
) -> list[tuple[int, bytes, bytes]]:
    """Produce records key-i/value-i round-robin; returns (partition, key, value) in order.

    Each record is flushed on its own, so each is a batch of one: Tansu reports its
    high watermark as the last batch's base offset + 1, which is then exact.
    """
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    sent = []
    for i in range(first, first + count):
        partition = i % partitions
        key, value = f"key-{i}".encode(), f"value-{i}".encode()
        producer.produce(
            topic,
            key=key,
            value=value,
            partition=partition,
            headers=[("n", str(i).encode())] if headers else None,
        )
        assert producer.flush(10) == 0
        sent.append((partition, key, value))
    return sent


# (partition, offset, key, value, headers) as confluent-kafka returns them.
Record = tuple[Any, Any, Any, Any, Any]


def consume_all(
    bootstrap: str, topic: str, partitions: int, isolation: str = "read_committed"
) -> list[Record]:
    """Every record up to the end of each partition: (partition, offset, key, value, headers).

    Reads to partition EOF rather than to the listed high watermark, so it does not
    depend on the broker's ListOffsets answer, only on what Fetch returns.
    """
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "verify",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
        }
    )
    out: list[Record] = []
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        at_eof: set[int] = set()
        while len(at_eof) < partitions:
            for m in consumer.consume(1000, timeout=0.2):
                err = m.error()
                if err is not None and err.code() == KafkaError._PARTITION_EOF:
                    at_eof.add(int(m.partition() or 0))
                    continue
                assert err is None, err
                out.append((m.partition(), m.offset(), m.key(), m.value(), m.headers()))
    finally:
        consumer.close()
    return out
