"""KIP-227 fetch sessions on a real broker, over the wire."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from tests.cluster.support import metric, scrape

from . import wire
from .cluster_support import new_cluster
from .roundtrip_support import create_topic_confluent
from .wire import WireClient

PARTITIONS = 4


def session_fetch(
    topic: str,
    offsets: dict[int, int],
    session_id: int,
    epoch: int,
    forgotten: tuple[int, ...] = (),
    max_wait_ms: int = 0,
) -> Any:
    return wire.fetch_many(
        topic,
        offsets,
        max_wait_ms=max_wait_ms,
        session_id=session_id,
        session_epoch=epoch,
        forgotten=forgotten,
    )


def named(response: Any) -> dict[int, Any]:
    return {p.partition_index: p for t in response.responses for p in t.partitions}


def test_incremental_fetches_name_only_what_changed(cluster_factory: Callable[..., Any]) -> None:
    bootstrap = str(new_cluster(cluster_factory).bootstrap)
    topic = f"sessions-{uuid.uuid4().hex[:8]}"
    create_topic_confluent(bootstrap, topic, partitions=PARTITIONS)
    with WireClient(bootstrap) as client:
        full = client.request(session_fetch(topic, dict.fromkeys(range(PARTITIONS), 0), 0, 0))
        assert full.error_code == ErrorCode.none
        session_id = full.session_id
        assert session_id > 0, "epoch 0 opens a session"
        assert sorted(named(full)) == list(range(PARTITIONS))

        idle = client.request(session_fetch(topic, {}, session_id, 1))
        assert (idle.error_code, idle.session_id, named(idle)) == (ErrorCode.none, session_id, {})

        produced = client.request(wire.produce(topic, 2, wire.batch([b"a", b"b"])))
        assert wire.produce_error(produced) == ErrorCode.none
        # Partition 2 is not named in the request: the session knows its position (0).
        changed = named(client.request(session_fetch(topic, {}, session_id, 2)))
        assert list(changed) == [2]
        assert changed[2].high_watermark == 2 and changed[2].records

        # Our position moved to 2: nothing new there, and nothing anywhere else.
        moved = client.request(session_fetch(topic, {2: 2}, session_id, 3))
        assert named(moved) == {}

        # A forgotten partition is no longer answered, even when it changes.
        client.request(session_fetch(topic, {}, session_id, 4, forgotten=(2,)))
        client.request(wire.produce(topic, 2, wire.batch([b"c"])))
        assert named(client.request(session_fetch(topic, {}, session_id, 5))) == {}

        stale = client.request(session_fetch(topic, {}, session_id, 5))
        assert stale.error_code == ErrorCode.invalid_fetch_session_epoch
        unknown = client.request(session_fetch(topic, {}, session_id + 1000, 1))
        assert unknown.error_code == ErrorCode.fetch_session_id_not_found

        # A parked incremental fetch wakes on an append to a session partition, long
        # before its max wait.
        def produce_later() -> None:
            time.sleep(0.5)
            with WireClient(bootstrap) as producer:
                producer.request(wire.produce(topic, 1, wire.batch([b"d"])))

        thread = threading.Thread(target=produce_later)
        thread.start()
        started = time.monotonic()
        client.sock.settimeout(30)
        woke = client.request(session_fetch(topic, {}, session_id, 6, max_wait_ms=20_000))
        waited = time.monotonic() - started
        thread.join()
        assert list(named(woke)) == [1]
        assert waited < 15, f"the fetch waited {waited:.1f} s: the append did not wake it"


def test_kafka_python_consumes_through_an_incremental_session(
    cluster_factory: Callable[..., Any],
) -> None:
    """kafka-python opens a KIP-227 session and keeps it while it reads every record of
    several partitions; the broker shows the session in its FetchSessionCache gauges."""
    from kafka import KafkaConsumer, KafkaProducer

    cluster = new_cluster(cluster_factory)
    bootstrap = str(cluster.bootstrap)
    topic = f"sessions-kp-{uuid.uuid4().hex[:8]}"
    create_topic_confluent(bootstrap, topic, partitions=PARTITIONS)
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(200):
        producer.send(topic, value=b"v%d" % i, partition=i % PARTITIONS)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=10_000,
        fetch_max_wait_ms=100,
    )
    try:
        seen = set()
        for message in consumer:
            seen.add(message.value)
            if len(seen) == 200:
                break
        assert seen == {b"v%d" % i for i in range(200)}
        gauges = scrape(cluster, 1)
        assert metric(gauges, "kafka_server_fetchsessioncache_numincrementalfetchsessions") >= 1
        assert (
            metric(gauges, "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached")
            >= PARTITIONS
        )
    finally:
        consumer.close()
