"""A clean restart keeps records and configs; a SIGKILL in the middle of a produce
stream loses no acknowledged record, leaves offsets dense, and serves nothing past a torn tail."""

from __future__ import annotations

import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)

from .cluster_support import BROKER, new_cluster, restart, segment_files, wait_until_serving
from .roundtrip_support import (
    PARTITIONS,
    Received,
    all_records,
    assert_roundtrip,
    consume_confluent,
    create_topic_confluent,
)

ClusterFactory = Callable[..., Any]


def _topic() -> str:
    return f"dur-{uuid.uuid4().hex[:8]}"


def test_clean_restart_keeps_records_and_configs(cluster_factory: ClusterFactory) -> None:
    cluster = new_cluster(cluster_factory)
    topic = _topic()
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for f in admin.create_topics(
        [
            NewTopic(
                topic,
                num_partitions=PARTITIONS,
                replication_factor=1,
                config={"retention.ms": "987654321"},
            )
        ]
    ).values():
        f.result(timeout=15)
    wait_until_serving(cluster.bootstrap, topic, PARTITIONS)
    sent = all_records(int(time.time() * 1000))["gzip"]
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap, "acks": "all", "compression.type": "gzip"}
    )
    for s in sent:
        producer.produce(
            topic, key=s.key, value=s.value, headers=list(s.headers), timestamp=s.timestamp_ms
        )
    assert producer.flush(20) == 0

    cluster.kill(BROKER, "TERM")
    restart(cluster, topic, PARTITIONS)

    assert_roundtrip(sent, consume_confluent(cluster.bootstrap, topic, len(sent)))
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    (future,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
    entry = future.result(timeout=15)["retention.ms"]
    assert (entry.value, entry.source) == ("987654321", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)


def _value(partition: int, seq: int) -> bytes:
    return f"p{partition}-s{seq:07d}-".encode() + b"d" * 200


def test_sigkill_during_produce_keeps_every_acked_record(cluster_factory: ClusterFactory) -> None:
    cluster = new_cluster(cluster_factory)
    topic = _topic()
    create_topic_confluent(cluster.bootstrap, topic)
    wait_until_serving(cluster.bootstrap, topic, PARTITIONS)

    acked: dict[tuple[int, int], bytes] = {}  # (partition, offset) -> value
    lock = threading.Lock()
    stop = threading.Event()

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            with lock:
                acked[(msg.partition(), msg.offset())] = msg.value()

    def produce_stream() -> None:
        producer = Producer(
            {
                "bootstrap.servers": cluster.bootstrap,
                "acks": "all",
                "linger.ms": 1,
                "message.timeout.ms": 3000,
                "enable.idempotence": False,
            }
        )
        seq = 0
        while not stop.is_set():
            partition = seq % PARTITIONS
            try:
                producer.produce(
                    topic,
                    value=_value(partition, seq),
                    partition=partition,
                    on_delivery=on_delivery,
                )
            except BufferError:
                producer.poll(0.01)
                continue
            seq += 1
            if seq % 100 == 0:
                producer.poll(0)
                time.sleep(0.002)  # a steady stream, not a burst that ends before the kill
        producer.flush(5)

    stream = threading.Thread(target=produce_stream, daemon=True)
    stream.start()
    deadline = time.monotonic() + 20
    while len(acked) < 3000 and time.monotonic() < deadline:
        time.sleep(0.02)
    cluster.kill(BROKER, "KILL")
    stop.set()
    stream.join(15)
    assert len(acked) >= 3000, "the stream was running when the broker died"

    # A torn tail: half a batch header the dying process might have left behind.
    active_segment = segment_files(cluster, topic, 0)[-1]
    size_before_tear = active_segment.stat().st_size
    with active_segment.open("ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x10\x00\x00\x00\x01\x00\x00\x00\x00\x02\xde\xad")

    restart(cluster, topic, PARTITIONS)
    assert active_segment.stat().st_size <= size_before_tear, "recovery truncates the torn tail"

    # Read to the log end: records written but never acknowledged may be there too.
    received = consume_confluent(
        cluster.bootstrap, topic, _log_end_total(cluster.bootstrap, topic), timeout_s=20
    )
    by_partition: dict[int, list[Received]] = defaultdict(list)
    for r in received:
        by_partition[r.partition].append(r)
    served = {(r.partition, r.offset): r.value for r in received}
    for (partition, offset), value in acked.items():
        assert served.get((partition, offset)) == value, f"acked {partition}@{offset} lost"
    for partition, records in by_partition.items():
        assert [r.offset for r in records] == list(range(len(records))), "offsets not dense"
        seqs = [int((r.value or b"").split(b"-")[1][1:]) for r in records]
        assert seqs == sorted(seqs), "records out of produce order"
        assert all(r.value == _value(partition, s) for r, s in zip(records, seqs, strict=True))

    # After recovery, new records land right after the last valid one and are readable.
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    new_offsets: list[int] = []
    producer.produce(
        topic,
        value=b"after-restart",
        partition=0,
        on_delivery=lambda err, msg: new_offsets.append(msg.offset() or 0),
    )
    assert producer.flush(15) == 0
    assert new_offsets == [len(by_partition[0])]


def _log_end_total(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "it-durability"})
    try:
        return sum(
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(PARTITIONS)
        )
    finally:
        consumer.close()
