"""Fencing and timeout: a zombie producer (same transactional id, older epoch) is
fenced, and its open transaction is aborted by the newer producer's InitProducerId; a
transaction left open past `transaction.timeout.ms` is aborted by the coordinator, after
which the last stable offset moves on and later committed data becomes readable."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from tests.cluster.support import create_topic
from tests.waiting import wait_until

from .support import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    list_offset,
    read_confluent,
    txn_cluster,
    values,
)

PARTITIONS = 3
FENCING_ERRORS = {
    KafkaError._FENCED,
    KafkaError.PRODUCER_FENCED,
    KafkaError.INVALID_PRODUCER_EPOCH,
}
TXN_TIMEOUT_MS = 2000


def _producer(bootstrap: str, txn_id: str, **extra: object) -> Producer:
    config: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "transactional.id": txn_id,
        "linger.ms": 5,
        "transaction.timeout.ms": 30_000,
    }
    config.update(extra)
    p = Producer(config)
    p.init_transactions(30)
    return p


def _write(p: Producer, topic: str, tag: str, n: int = 6) -> list[bytes]:
    out = [f"{tag}-{i}".encode() for i in range(n)]
    for i, value in enumerate(out):
        p.produce(topic, value=value, partition=i % PARTITIONS)
    assert p.flush(30) == 0
    return out


def test_zombie_producer_is_fenced(cluster_factory) -> None:
    cluster = txn_cluster(cluster_factory)
    topic = f"zombie-{uuid.uuid4().hex[:6]}"
    txn_id = f"tx-{topic}"
    create_topic(cluster, topic, PARTITIONS, 3)

    zombie = _producer(cluster.bootstrap, txn_id)
    zombie.begin_transaction()
    zombie_records = _write(zombie, topic, "zombie")

    # The new instance takes over the transactional id: the zombie's open transaction is
    # aborted and its epoch is fenced.
    fresh = _producer(cluster.bootstrap, txn_id)
    fresh.begin_transaction()
    fresh_records = _write(fresh, topic, "fresh")
    fresh.commit_transaction(30)

    zombie.produce(topic, value=b"zombie-late", partition=0)
    with pytest.raises(KafkaException) as failure:
        zombie.commit_transaction(15)
    error: KafkaError = failure.value.args[0]
    assert error.code() in FENCING_ERRORS or error.fatal(), f"not a fencing error: {error}"

    seen = read_confluent(cluster.bootstrap, topic, PARTITIONS, READ_COMMITTED, set(fresh_records))
    assert values(seen) == sorted(fresh_records), "a fenced producer's records became visible"
    everything = read_confluent(
        cluster.bootstrap,
        topic,
        PARTITIONS,
        READ_UNCOMMITTED,
        set(fresh_records) | set(zombie_records),
    )
    assert b"zombie-late" not in values(everything), "the fenced producer could still append"
    assert set(zombie_records) <= set(values(everything))


def test_transaction_open_past_its_timeout_is_aborted(cluster_factory) -> None:
    cluster = txn_cluster(cluster_factory)
    topic = f"timeout-{uuid.uuid4().hex[:6]}"
    create_topic(cluster, topic, PARTITIONS, 3)

    # Started (and its coordinator's clock with it) before the other producer exists.
    stuck = _producer(
        cluster.bootstrap, f"stuck-{topic}", **{"transaction.timeout.ms": TXN_TIMEOUT_MS}
    )
    stuck.begin_transaction()
    began = time.monotonic()
    stuck_records = _write(stuck, topic, "stuck")
    assert [list_offset(cluster, topic, p, read_committed=True) for p in range(PARTITIONS)] == [
        0
    ] * PARTITIONS, "the LSO must stop at an open transaction's first record"

    later = _producer(cluster.bootstrap, f"later-{topic}")
    later.begin_transaction()
    later_records = _write(later, topic, "later")
    later.commit_transaction(30)
    if time.monotonic() - began < TXN_TIMEOUT_MS / 1000 - 0.3:
        assert list_offset(cluster, topic, 0, read_committed=True) == 0, (
            "the LSO moved past a transaction that is still open and not yet timed out"
        )

    # Two records + a marker per partition from each producer, once the coordinator has
    # aborted the stuck one.
    stable_at = wait_until(
        "the coordinator to abort the timed-out transaction (LSO at the high watermark)",
        lambda: (
            all(
                list_offset(cluster, topic, p, read_committed=True)
                == list_offset(cluster, topic, p, read_committed=False)
                for p in range(PARTITIONS)
            )
            and time.monotonic()
        ),
        timeout_s=TXN_TIMEOUT_MS / 1000 + 15,
    )
    assert stable_at - began >= TXN_TIMEOUT_MS / 1000 - 0.5, (
        f"aborted after {stable_at - began:.2f}s, before transaction.timeout.ms"
    )
    seen = read_confluent(cluster.bootstrap, topic, PARTITIONS, READ_COMMITTED, set(later_records))
    assert values(seen) == sorted(later_records), "aborted (timed-out) records were returned"
    high = [list_offset(cluster, topic, p, read_committed=False) for p in range(PARTITIONS)]
    assert high == [6] * PARTITIONS, f"expected 2 records + 1 marker per producer: {high}"

    # The timed-out producer finds out when it tries to finish.
    stuck.produce(topic, value=b"stuck-late", partition=0)
    with pytest.raises(KafkaException):
        stuck.commit_transaction(15)
    assert not set(stuck_records) & set(values(seen))
