"""Idempotent producers (confluent-kafka and kafka-python) send
50,000 records while partition leaders are SIGKILLed in turn: every record is in the
log exactly once, in send order per partition."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from strandline.launcher.local_cluster import LocalCluster

from .support import consume_all, create_topic, kill_leaders_in_turn

RECORDS = 50_000
PARTITIONS = 3


def _confluent(cluster: LocalCluster, topic: str, errors: list[str]) -> None:
    from confluent_kafka import Producer

    p = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.timeout.ms": 120_000,
            "log_level": 2,
        }
    )

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(str(err))

    for i in range(RECORDS):
        p.produce(topic, key=b"k%d" % (i % 31), value=b"%06d" % i, on_delivery=on_delivery)
        if i % 500 == 0:
            p.poll(0)
            time.sleep(0.1)  # spread the stream over the kills
    if p.flush(120) != 0:
        errors.append("flush left records undelivered")


def _kafka_python(cluster: LocalCluster, topic: str, errors: list[str]) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(
        bootstrap_servers=cluster.bootstrap,
        enable_idempotence=True,
        linger_ms=5,
        delivery_timeout_ms=120_000,
        request_timeout_ms=5_000,
    )
    futures = []
    for i in range(RECORDS):
        futures.append(p.send(topic, key=b"k%d" % (i % 31), value=b"%06d" % i))
        if i % 500 == 0:
            time.sleep(0.1)
    p.flush(120)
    for future in futures:
        try:
            future.get(timeout=1)
        except Exception as e:  # noqa: BLE001 - collected and asserted below
            errors.append(repr(e))
    p.close(5)


@pytest.mark.parametrize("client", [_confluent, _kafka_python], ids=["confluent", "kafka-python"])
def test_idempotent_producer_exactly_once_through_leader_kills(
    cluster_factory, client: Callable[[LocalCluster, str, list[str]], None]
) -> None:
    cluster = cluster_factory(brokers=3, min_insync_replicas=2, replica_lag_time_max_ms=2000)
    create_topic(cluster, "idem", PARTITIONS, 3)
    errors: list[str] = []
    thread = threading.Thread(target=client, args=(cluster, "idem", errors))
    thread.start()
    killed = kill_leaders_in_turn(cluster, "idem", PARTITIONS)
    thread.join(240)
    assert not thread.is_alive(), "the producer did not finish"
    assert len(killed) == PARTITIONS
    assert not errors, errors[:3]

    consumed = consume_all(cluster, "idem", PARTITIONS, timeout_s=60)
    values = [int(v) for v in consumed.values()]
    assert len(values) == RECORDS, f"{len(values)} records in the log for {RECORDS} sent"
    assert sorted(values) == list(range(RECORDS)), "a record is missing or duplicated"
    for partition in range(PARTITIONS):
        in_log = [int(v) for (p, _o), v in sorted(consumed.items()) if p == partition]
        assert in_log == sorted(in_log), f"partition {partition} is not in send order"
