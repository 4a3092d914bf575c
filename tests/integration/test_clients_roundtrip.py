"""Four unmodified Kafka clients create a 3-partition topic, produce 10,000 keyed
records with headers under every codec, and read them back identical and in order."""

from __future__ import annotations

import asyncio
import subprocess
import time
import uuid

from confluent_kafka import Producer

from .roundtrip_support import (
    PARTITIONS,
    Received,
    Sent,
    all_records,
    assert_roundtrip,
    consume_confluent,
    create_topic_confluent,
)


def _topic(client: str) -> str:
    return f"rt-{client}-{uuid.uuid4().hex[:8]}"


def test_confluent_kafka_roundtrip(bootstrap: str) -> None:
    topic = _topic("confluent")
    create_topic_confluent(bootstrap, topic)
    plan = all_records(int(time.time() * 1000) - 60_000)
    acked: dict[int, int] = {}
    errors: list[object] = []

    for codec, records in plan.items():
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "compression.type": codec,
                "acks": "all",
                "linger.ms": 5,
            }
        )
        for s in records:

            def on_delivery(err: object, msg: object, index: int = s.index) -> None:
                if err is not None:
                    errors.append(err)
                else:
                    acked[index] = msg.partition()  # type: ignore[attr-defined]

            producer.produce(
                topic,
                key=s.key,
                value=s.value,
                headers=list(s.headers),
                timestamp=s.timestamp_ms,
                on_delivery=on_delivery,
            )
            producer.poll(0)
        assert producer.flush(30) == 0
    assert not errors
    sent = [s for records in plan.values() for s in records]
    received = consume_confluent(bootstrap, topic, len(sent))
    assert_roundtrip(sent, received, acked)


def test_kafka_python_roundtrip(bootstrap: str) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KPTopicPartition
    from kafka.admin import NewTopic

    topic = _topic("kafkapython")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])
    finally:
        admin.close()
    plan = all_records(int(time.time() * 1000) - 60_000)
    acked: dict[int, int] = {}
    for codec, records in plan.items():
        producer = KafkaProducer(
            bootstrap_servers=bootstrap,
            acks="all",
            linger_ms=5,
            compression_type=None if codec == "none" else codec,
        )
        futures = [
            (
                s.index,
                producer.send(
                    topic,
                    key=s.key,
                    value=s.value,
                    headers=list(s.headers),
                    timestamp_ms=s.timestamp_ms,
                ),
            )
            for s in records
        ]
        producer.flush(30)
        for index, future in futures:
            acked[index] = future.get(timeout=10).partition
        producer.close(5)

    sent = [s for records in plan.values() for s in records]
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    partitions = [KPTopicPartition(topic, p) for p in range(PARTITIONS)]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    received: list[Received] = []
    deadline = time.monotonic() + 30
    try:
        while len(received) < len(sent) and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500, max_records=5_000).values():
                received.extend(
                    Received(r.partition, r.offset, r.key, r.value, tuple(r.headers), r.timestamp)
                    for r in batch
                )
    finally:
        consumer.close()
    assert_roundtrip(sent, received, acked)


def test_aiokafka_roundtrip(bootstrap: str) -> None:
    asyncio.run(_aiokafka_roundtrip(bootstrap))


async def _aiokafka_roundtrip(bootstrap: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka import TopicPartition as AIOTopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    topic = _topic("aiokafka")
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics(
            [NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)]
        )
    finally:
        await admin.close()
    plan = all_records(int(time.time() * 1000) - 60_000)
    acked: dict[int, int] = {}
    for codec, records in plan.items():
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            acks="all",
            linger_ms=5,
            compression_type=None if codec == "none" else codec,
        )
        await producer.start()
        try:
            futures = [
                (
                    s.index,
                    await producer.send(
                        topic,
                        key=s.key,
                        value=s.value,
                        headers=list(s.headers),
                        timestamp_ms=s.timestamp_ms,
                    ),
                )
                for s in records
            ]
            for index, future in futures:
                acked[index] = (await asyncio.wait_for(future, 30)).partition
        finally:
            await producer.stop()

    sent = [s for records in plan.values() for s in records]
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    received: list[Received] = []
    try:
        partitions = [AIOTopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        deadline = time.monotonic() + 30
        while len(received) < len(sent) and time.monotonic() < deadline:
            for batch in (await consumer.getmany(timeout_ms=500, max_records=5_000)).values():
                received.extend(
                    Received(r.partition, r.offset, r.key, r.value, tuple(r.headers), r.timestamp)
                    for r in batch
                )
    finally:
        await consumer.stop()
    assert_roundtrip(sent, received, acked)


def _kcat_headers(text: str) -> tuple[tuple[str, bytes], ...]:
    if not text:
        return ()
    pairs = (item.split("=", 1) for item in text.split(","))
    return tuple((name, value.encode()) for name, value in pairs)


def test_kcat_roundtrip(bootstrap: str, kcat: str) -> None:
    """Debian's stock kcat (librdkafka 2.0.2) produces and consumes; confluent's admin creates.

    kcat takes one set of headers (-H) for all records and stamps its own timestamps, so the
    sent headers are per codec, and timestamps are checked against a second reader
    (confluent-kafka) and the produce window instead of against chosen values.
    """
    topic = _topic("kcat")
    create_topic_confluent(bootstrap, topic)
    plan = all_records(0)
    sent: list[Sent] = []
    started_ms = int(time.time() * 1000)
    for codec, records in plan.items():
        headers = (("codec", codec.encode()), ("client", b"kcat"))
        lines = "".join(f"{s.key.decode()}:{s.value.decode()}\n" for s in records)
        subprocess.run(
            [
                kcat,
                "-P",
                "-b",
                bootstrap,
                "-t",
                topic,
                "-K",
                ":",
                "-z",
                codec,
                "-H",
                "codec=" + codec,
                "-H",
                "client=kcat",
                "-X",
                "acks=all",
            ],
            input=lines.encode(),
            check=True,
            timeout=60,
            capture_output=True,
        )
        sent.extend(Sent(s.index, s.key, s.value, headers, 0) for s in records)
    finished_ms = int(time.time() * 1000)

    out = subprocess.run(
        [
            kcat,
            "-C",
            "-b",
            bootstrap,
            "-t",
            topic,
            "-e",
            "-o",
            "beginning",
            "-Z",
            "-f",
            "%p|%o|%T|%k|%s|%h\n",
        ],
        check=True,
        timeout=60,
        capture_output=True,
    ).stdout.decode()
    received = []
    for line in out.splitlines():
        partition, offset, ts, key, value, header_text = line.split("|", 5)
        received.append(
            Received(
                int(partition),
                int(offset),
                key.encode(),
                value.encode(),
                _kcat_headers(header_text),
                int(ts),
            )
        )
    assert_roundtrip(sent, received, check_timestamps=False)
    assert all(started_ms - 1000 <= r.timestamp_ms <= finished_ms + 1000 for r in received)
    second_reader = {
        (r.partition, r.offset): r.timestamp_ms
        for r in consume_confluent(bootstrap, topic, len(sent))
    }
    assert {(r.partition, r.offset): r.timestamp_ms for r in received} == second_reader
