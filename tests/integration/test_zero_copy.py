"""Zero-copy consume (docs/scaling.md): records sent from the segment files with sendfile reach
real clients intact, and the copying fallback (`strandline.zero.copy.enable=false`, TLS
listeners) answers the very same bytes."""

from __future__ import annotations

import random
import time
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from . import wire
from .cluster_support import new_cluster
from .roundtrip_support import create_topic_confluent
from .wire import WireClient

PARTITIONS = 3


def fetch_all(topic: str, offset: int) -> Any:
    """One v12 fetch of every partition from `offset`, 1 MiB each (big enough for sendfile)."""
    return wire.fetch_many(topic, dict.fromkeys(range(PARTITIONS), offset), max_bytes=50 << 20)


def raw_fetch_frames(bootstrap: str, topic: str, now_ms: int) -> list[bytes]:
    """The same batches (fixed timestamps) produced by hand, then the raw fetch answers.
    Timestamps are recent: an old one would roll a segment per batch (segment.ms), and a
    fetch reads from one segment."""
    rng = random.Random(14)
    with WireClient(bootstrap) as client:
        for n in range(30):
            for p in range(PARTITIONS):
                values = [rng.randbytes(rng.randint(1, 2000)) for _ in range(20)]
                answer = client.request(wire.produce(topic, p, wire.batch(values, now_ms + n)))
                assert wire.produce_error(answer) == 0
        frames = []
        for offset in (0, 7, 333):  # from a batch start, and from inside batches
            client.send_raw(wire.encode_request(fetch_all(topic, offset), 100 + offset))
            frame = client.read_frame()
            assert frame is not None
            frames.append(frame)
    return frames


def produce_and_consume(bootstrap: str, topic: str, security: dict[str, str]) -> None:
    rng = random.Random(7)
    sent = {p: [rng.randbytes(rng.randint(0, 3000)) for _ in range(600)] for p in range(PARTITIONS)}
    producer = Producer({"bootstrap.servers": bootstrap, **security, "linger.ms": 20})
    for i in range(600):
        for p in range(PARTITIONS):
            producer.produce(topic, sent[p][i], key=str(i).encode(), partition=p)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            **security,
            "group.id": "zero-copy",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([KafkaTopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    got: dict[int, list[tuple[int, bytes | None, bytes]]] = {p: [] for p in range(PARTITIONS)}
    deadline = time.monotonic() + 30
    try:
        while sum(map(len, got.values())) < 600 * PARTITIONS and time.monotonic() < deadline:
            for m in consumer.consume(num_messages=5_000, timeout=0.5):
                assert m.error() is None, m.error()
                got[m.partition() or 0].append((m.offset() or 0, m.key(), m.value() or b""))
    finally:
        consumer.close()
    for p in range(PARTITIONS):
        assert [o for o, _, _ in got[p]] == list(range(600)), f"partition {p} offsets"
        assert [k for _, k, _ in got[p]] == [str(i).encode() for i in range(600)]
        assert [v for _, _, v in got[p]] == sent[p], f"partition {p} values differ"


def test_sendfile_and_copy_answer_the_same_bytes_and_clients_read_them(
    cluster_factory: Any,
) -> None:
    zero_copy = new_cluster(cluster_factory)
    copying = new_cluster(cluster_factory, config={"strandline.zero.copy.enable": "false"})
    for cluster in (zero_copy, copying):
        create_topic_confluent(cluster.bootstrap, "raw", PARTITIONS)
    now_ms = int(time.time() * 1000)
    sent = raw_fetch_frames(zero_copy.bootstrap, "raw", now_ms)
    copied = raw_fetch_frames(copying.bootstrap, "raw", now_ms)
    assert all(len(frame) > 3 * 200_000 for frame in sent)  # regions far over the threshold
    assert sent == copied
    create_topic_confluent(zero_copy.bootstrap, "clients", PARTITIONS)
    produce_and_consume(zero_copy.bootstrap, "clients", {})


def test_tls_listener_copies_and_clients_read_the_same(cluster_factory: Any) -> None:
    cluster = cluster_factory(brokers=1, security="ssl")
    security = dict(cluster.client_config)
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, **security})
    admin.create_topics([NewTopic("tls", PARTITIONS, 1)])["tls"].result(30)
    produce_and_consume(cluster.bootstrap, "tls", security)
