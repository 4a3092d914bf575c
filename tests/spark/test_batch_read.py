"""A batch read of a topic equals what was produced."""

from __future__ import annotations

import datetime as dt
import time

from pyspark.sql import SparkSession

from .kafka_helpers import create_topic, produce, unique_topic


def test_batch_read_returns_every_produced_record(spark: SparkSession, bootstrap: str) -> None:
    topic = unique_topic("batch")
    create_topic(bootstrap, topic, partitions=3)
    sent = produce(bootstrap, topic, partitions=3, count=30, headers=True)

    rows = (
        spark.read.format("strandline")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .load()
        .collect()
    )

    assert len(rows) == 30
    by_partition: dict[int, list[bytes]] = {}
    for partition, key, _ in sent:
        by_partition.setdefault(partition, []).append(key)
    for row in rows:
        assert row.topic == topic
        # The i-th record of a partition sits at offset i, keys in produce order.
        assert bytes(row.key) == by_partition[row.partition][row.offset]
        assert bytes(row.value) == bytes(row.key).replace(b"key", b"value")
        assert row.timestampType == 0
        assert abs(row.timestamp - dt.datetime.now(dt.UTC).replace(tzinfo=None)) < dt.timedelta(
            minutes=5
        )
        index = bytes(row.key).decode().split("-")[1]
        assert [(h.key, bytes(h.value)) for h in row.headers] == [("n", index.encode())]
    offsets = sorted((r.partition, r.offset) for r in rows)
    assert offsets == [(p, o) for p in range(3) for o in range(10)]


def test_ranges_split_and_bounded_by_offsets_json(spark: SparkSession, bootstrap: str) -> None:
    topic = unique_topic("split")
    create_topic(bootstrap, topic, partitions=2)
    produce(bootstrap, topic, partitions=2, count=40)

    df = (
        spark.read.format("strandline")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", f'{{"{topic}": {{"0": 5, "1": -2}}}}')
        .option("endingOffsets", f'{{"{topic}": {{"0": 15, "1": -1}}}}')
        .option("minPartitions", "6")
        .load()
    )

    assert df.rdd.getNumPartitions() == 6
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert got == [(0, o) for o in range(5, 15)] + [(1, o) for o in range(20)]


def test_starting_offsets_by_timestamp(spark: SparkSession, bootstrap: str) -> None:
    topic = unique_topic("bytime")
    create_topic(bootstrap, topic, partitions=1)
    produce(bootstrap, topic, partitions=1, count=5)
    time.sleep(0.05)
    since_ms = int(time.time() * 1000)
    time.sleep(0.05)
    produce(bootstrap, topic, partitions=1, count=5, first=5)

    rows = (
        spark.read.format("strandline")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsetsByTimestamp", f'{{"{topic}": {{"0": {since_ms}}}}}')
        .load()
        .select("offset")
        .collect()
    )
    assert sorted(r.offset for r in rows) == [5, 6, 7, 8, 9]
