"""A checkpointed stream, stopped and restarted while data arrives, sees
every record exactly once; plus admission control, Trigger.AvailableNow, and topics and
partitions that appear while a pattern subscription runs."""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewPartitions
from pyspark.sql import DataFrame, SparkSession

from tests.integration.cluster_support import wait_until_serving

from .kafka_helpers import create_topic, produce, unique_topic


def _stream(spark: SparkSession, bootstrap: str, topic: str, **options: str) -> DataFrame:
    reader = (
        spark.readStream.format("strandline")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load().select("partition", "offset", "value")


def _assert_exactly_once(spark: SparkSession, path: Path, partitions: int, total: int) -> None:
    rows = spark.read.parquet(str(path)).collect()
    assert len(rows) == total, "duplicates or gaps"
    for p in range(partitions):
        offsets = sorted(r.offset for r in rows if r.partition == p)
        assert offsets == list(range(len(offsets))), f"partition {p}: gap or duplicate"


def test_restarted_stream_sees_every_record_once(
    spark: SparkSession, bootstrap: str, tmp_path: Path
) -> None:
    topic = unique_topic("stream")
    create_topic(bootstrap, topic, partitions=2)
    produce(bootstrap, topic, partitions=2, count=20)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    def start() -> object:
        return (
            _stream(spark, bootstrap, topic, maxOffsetsPerTrigger="7")
            .writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(checkpoint))
            .trigger(processingTime="100 milliseconds")
            .start()
        )

    producer = threading.Thread(
        target=produce, args=(bootstrap, topic, 2, 40), kwargs={"first": 20}
    )
    query = start()
    producer.start()
    query.processAllAvailable()  # type: ignore[attr-defined]
    query.stop()  # type: ignore[attr-defined]
    produce(bootstrap, topic, partitions=2, count=20, first=60)  # while stopped
    query = start()
    producer.join()
    query.processAllAvailable()  # type: ignore[attr-defined]
    query.stop()  # type: ignore[attr-defined]

    _assert_exactly_once(spark, out, partitions=2, total=80)
    # The checkpoint holds Kafka-style offsets: {"topic": {"partition": next_offset}}.
    offsets_dir = checkpoint / "offsets"
    last = max(offsets_dir.iterdir(), key=lambda f: int(f.name) if f.name.isdigit() else -1)
    assert json.loads(last.read_text().splitlines()[-1]) == {topic: {"0": 40, "1": 40}}


def test_available_now_reads_everything_in_limited_batches(
    spark: SparkSession, bootstrap: str, tmp_path: Path
) -> None:
    topic = unique_topic("avail")
    create_topic(bootstrap, topic, partitions=2)
    produce(bootstrap, topic, partitions=2, count=30)

    query = (
        _stream(spark, bootstrap, topic, maxOffsetsPerTrigger="10")
        .writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120)
    batches = [p for p in query.recentProgress if p["numInputRows"] > 0]
    assert [p["numInputRows"] for p in batches] == [10, 10, 10]
    _assert_exactly_once(spark, tmp_path / "out", partitions=2, total=30)


def test_pattern_stream_picks_up_new_partitions_and_topics(
    spark: SparkSession, bootstrap: str, tmp_path: Path
) -> None:
    prefix = unique_topic("pattern")
    first, second = f"{prefix}-a", f"{prefix}-b"
    create_topic(bootstrap, first, partitions=2)
    produce(bootstrap, first, partitions=2, count=10)
    out = tmp_path / "out"
    query = (
        spark.readStream.format("strandline")
        .option("bootstrap.servers", bootstrap)
        .option("subscribePattern", f"{re.escape(prefix)}-.*")
        .option("startingOffsets", "latest")  # new partitions are read from their start anyway
        .load()
        .select("topic", "partition", "offset")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="100 milliseconds")
        .start()
    )
    query.processAllAvailable()

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_partitions([NewPartitions(first, 3)]).values():
        future.result(timeout=30)
    wait_until_serving(bootstrap, first, 3)
    create_topic(bootstrap, second, partitions=1)
    produce(bootstrap, first, partitions=3, count=9, first=10)  # 3 to each of 0, 1, 2
    produce(bootstrap, second, partitions=1, count=5)
    query.processAllAvailable()
    query.stop()

    rows = spark.read.parquet(str(out)).collect()
    # Partitions 0 and 1 were subscribed at "latest" (offset 5); the new ones from 0.
    assert Counter((r.topic, r.partition) for r in rows) == {
        (first, 0): 3,
        (first, 1): 3,
        (first, 2): 3,
        (second, 0): 5,
    }
    for (topic, partition), start in {(first, 0): 5, (first, 1): 5, (first, 2): 0}.items():
        offsets = sorted(r.offset for r in rows if (r.topic, r.partition) == (topic, partition))
        assert offsets == list(range(start, start + 3)), f"{topic}-{partition}"
    assert sorted(r.offset for r in rows if r.topic == second) == list(range(5))
