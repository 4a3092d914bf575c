"""A streaming query keeps going through a leader SIGKILL.

Needs the replicated Strandline cluster (tests/conftest.py's `cluster_factory`).
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Message, Producer
from pyspark.sql import SparkSession

from tests.waiting import wait_until

from .kafka_helpers import create_topic, unique_topic

RECORDS = 3000


def _produce_steadily(bootstrap: str, topic: str, acked: set[bytes], done: threading.Event) -> None:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "message.timeout.ms": 120_000,
        }
    )

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        if err is None:
            acked.add(msg.value())  # type: ignore[arg-type]

    for i in range(RECORDS):
        producer.produce(topic, value=f"event-{i}".encode(), on_delivery=on_delivery)
        producer.poll(0)
        time.sleep(0.003)
    producer.flush(120)
    done.set()


def _leader_of(bootstrap: str, topic: str, partition: int) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "leader-probe"})
    try:
        return int(
            consumer.list_topics(topic, timeout=10).topics[topic].partitions[partition].leader
        )
    finally:
        consumer.close()


def test_stream_survives_leader_sigkill(
    spark: SparkSession, cluster_factory: Any, tmp_path: Path
) -> None:
    cluster = cluster_factory(brokers=3)
    bootstrap = str(cluster.bootstrap)
    topic = unique_topic("failover")
    create_topic(bootstrap, topic, partitions=3, replication=3)
    out = tmp_path / "out"

    query = (
        spark.readStream.format("strandline")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("kafkaConsumer.pollTimeoutMs", "60000")
        .load()
        .select("partition", "offset", "value")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    acked: set[bytes] = set()
    done = threading.Event()
    producer = threading.Thread(target=_produce_steadily, args=(bootstrap, topic, acked, done))
    producer.start()
    wait_until("a third of the records acknowledged", lambda: len(acked) >= RECORDS // 3, 60)
    victim = _leader_of(bootstrap, topic, 0)
    cluster.kill(victim, signal.SIGKILL)
    # The stream must read on through a leader that moved, not wait for the old one.
    wait_until(
        f"partition 0 to move off broker {victim}",
        lambda: any(
            p.tp.topic == topic and p.tp.partition == 0 and p.leader not in (None, victim)
            for p in cluster.status().partitions
        ),
    )
    cluster.start(victim)
    producer.join(180)
    assert done.is_set()
    query.processAllAvailable()
    assert query.exception() is None
    query.stop()

    rows = spark.read.parquet(str(out)).collect()
    assert acked <= {bytes(r.value) for r in rows}, "an acknowledged record was not read"
    for p in range(3):
        offsets = sorted(r.offset for r in rows if r.partition == p)
        assert offsets == list(range(len(offsets))), f"partition {p}: gap or duplicate"
