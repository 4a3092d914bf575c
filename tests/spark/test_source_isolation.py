"""The source on a topic with transactions: read_committed (the default) sees committed
transactions and plain records only and stops at an open transaction (the LSO);
read_uncommitted sees everything up to the high watermark."""

from __future__ import annotations

import uuid

from confluent_kafka import Producer
from pyspark.sql import SparkSession

from .kafka_helpers import create_topic, unique_topic


def _values(spark: SparkSession, bootstrap: str, topic: str, **options: str) -> list[bytes]:
    reader = (
        spark.read.format("strandline")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", topic)
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    return sorted(bytes(r.value) for r in reader.load().select("value").collect())


def _transaction(bootstrap: str, topic: str, values: list[bytes], commit: bool) -> Producer:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"t-{uuid.uuid4().hex[:8]}"}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    for value in values:
        producer.produce(topic, value=value, partition=0)
    producer.flush(30)
    if commit:
        producer.commit_transaction(30)
    else:
        producer.abort_transaction(30)
    return producer


def test_read_committed_drops_aborted_and_stops_at_open_transactions(
    spark: SparkSession, bootstrap: str
) -> None:
    topic = unique_topic("isolation")
    create_topic(bootstrap, topic, partitions=1)
    plain = Producer({"bootstrap.servers": bootstrap})
    plain.produce(topic, value=b"plain-0", partition=0)
    plain.flush(30)
    _transaction(bootstrap, topic, [b"committed-1", b"committed-2"], commit=True)
    _transaction(bootstrap, topic, [b"aborted-1", b"aborted-2"], commit=False)
    plain.produce(topic, value=b"plain-1", partition=0)
    plain.flush(30)
    _transaction(bootstrap, topic, [b"committed-3"], commit=True)

    expected = [b"committed-1", b"committed-2", b"committed-3", b"plain-0", b"plain-1"]
    assert _values(spark, bootstrap, topic) == expected
    everything = sorted([*expected, b"aborted-1", b"aborted-2"])
    assert _values(spark, bootstrap, topic, **{"kafka.isolation.level": "read_uncommitted"}) == (
        everything
    )

    # An open transaction holds the LSO back: read_committed ends before it, even for the
    # plain record written after it; read_uncommitted reads to the HW.
    open_txn = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"t-{uuid.uuid4().hex[:8]}"}
    )
    open_txn.init_transactions(30)
    open_txn.begin_transaction()
    open_txn.produce(topic, value=b"open-1", partition=0)
    open_txn.flush(30)
    plain.produce(topic, value=b"plain-2", partition=0)
    plain.flush(30)
    assert _values(spark, bootstrap, topic) == expected
    assert b"open-1" in _values(
        spark, bootstrap, topic, **{"kafka.isolation.level": "read_uncommitted"}
    )
    open_txn.commit_transaction(30)
    assert _values(spark, bootstrap, topic) == sorted([*expected, b"open-1", b"plain-2"])
