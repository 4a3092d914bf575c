"""Records the roundtrip tests send, and the check that what came back is what went in."""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass
from typing import cast

from confluent_kafka import OFFSET_BEGINNING, Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
# 10,000 records per client: 2,000 under each codec, all into one topic, so the consumer
# reads one stream whose batches rotate through every codec.
PER_CODEC = 2_000
PARTITIONS = 3


@dataclass(frozen=True)
class Sent:
    index: int
    key: bytes
    value: bytes
    headers: tuple[tuple[str, bytes], ...]
    timestamp_ms: int


@dataclass(frozen=True)
class Received:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp_ms: int


def records_for(codec: str, first_index: int, base_timestamp_ms: int) -> list[Sent]:
    out = []
    for i in range(first_index, first_index + PER_CODEC):
        # Repeating keys: the partitioner must send a key to the same partition every time.
        key = f"key-{i % 97}".encode()
        value = (f"value-{i}-" + "x" * (i % 300)).encode()
        headers = (("idx", str(i).encode()), ("codec", codec.encode()), ("empty", b""))
        out.append(Sent(i, key, value, headers, base_timestamp_ms + i))
    return out


def all_records(base_timestamp_ms: int) -> dict[str, list[Sent]]:
    return {
        codec: records_for(codec, n * PER_CODEC, base_timestamp_ms)
        for n, codec in enumerate(CODECS)
    }


def index_of(received: Received) -> int:
    assert received.value is not None
    return int(received.value.split(b"-")[1])


def assert_roundtrip(
    sent: list[Sent],
    received: list[Received],
    acked_partition: dict[int, int] | None = None,
    check_timestamps: bool = True,
) -> None:
    """Every record back exactly once, per partition in produce order at dense offsets."""
    assert len(received) == len(sent), f"got {len(received)} records, sent {len(sent)}"
    by_index = {s.index: s for s in sent}
    by_partition: dict[int, list[Received]] = defaultdict(list)
    for r in received:
        by_partition[r.partition].append(r)
    key_partition: dict[bytes | None, int] = {}
    for partition, records in by_partition.items():
        assert [r.offset for r in records] == list(range(len(records))), (
            f"partition {partition}: offsets not dense from 0"
        )
        indices = [index_of(r) for r in records]
        assert indices == sorted(indices), f"partition {partition}: out of produce order"
        for r in records:
            s = by_index[index_of(r)]
            assert r.key == s.key and r.value == s.value, f"record {s.index} differs"
            assert r.headers == s.headers, f"record {s.index}: headers {r.headers}"
            if check_timestamps:
                assert r.timestamp_ms == s.timestamp_ms, f"record {s.index}: timestamp"
            assert key_partition.setdefault(r.key, partition) == partition
            if acked_partition is not None:
                assert acked_partition[s.index] == partition
    assert sorted(index_of(r) for r in received) == sorted(by_index)


def create_topic_confluent(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)], operation_timeout=10
    )
    for future in futures.values():
        future.result(timeout=15)
    # Kafka acknowledges creation before every broker's metadata has the new leaders.
    from .cluster_support import wait_until_serving

    wait_until_serving(bootstrap, topic, partitions)


def consume_confluent(
    bootstrap: str, topic: str, expected: int, partitions: int = PARTITIONS, timeout_s: float = 30.0
) -> list[Received]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "it-roundtrip", "enable.auto.commit": False}
    )
    consumer.assign([KafkaTopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    out: list[Received] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(out) < expected and time.monotonic() < deadline:
            for m in consumer.consume(num_messages=5_000, timeout=0.5):
                assert m.error() is None, m.error()
                raw_headers = cast(list[tuple[str, bytes | None]], m.headers() or [])
                headers = tuple((name, value or b"") for name, value in raw_headers)
                out.append(
                    Received(
                        m.partition() or 0,
                        m.offset() or 0,
                        m.key(),
                        m.value(),
                        headers,
                        m.timestamp()[1],
                    )
                )  # type: ignore[arg-type]
    finally:
        consumer.close()
    return out
