"""failOnDataLoss=true fails with a clear message when offsets the query
still needs are gone; false skips ahead and goes on."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from .kafka_helpers import create_topic, produce, unique_topic


def _batch_read(
    spark: SparkSession, bootstrap: str, topic: str, fail: str
) -> list[tuple[int, int]]:
    rows = (
        spark.read.format("strandline")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", f'{{"{topic}": {{"0": 50, "1": -2}}}}')
        .option("failOnDataLoss", fail)
        .load()
        .select("partition", "offset")
        .collect()
    )
    return sorted((r.partition, r.offset) for r in rows)


def test_offsets_missing_from_the_log_fail_or_are_skipped(
    spark: SparkSession, bootstrap: str
) -> None:
    topic = unique_topic("loss")
    create_topic(bootstrap, topic, partitions=2)
    produce(bootstrap, topic, partitions=2, count=10)

    with pytest.raises(Exception, match="failOnDataLoss") as failure:
        _batch_read(spark, bootstrap, topic, "true")
    assert f"{topic}-0: offset went back from 50 to 5" in str(failure.value)

    assert _batch_read(spark, bootstrap, topic, "false") == [(1, o) for o in range(5)]


def _stream_once(
    spark: SparkSession, bootstrap: str, topic: str, tmp_path: Path, fail: str
) -> None:
    query = (
        spark.readStream.format("strandline")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("failOnDataLoss", fail)
        .load()
        .select("partition", "offset")
        .writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)


@pytest.mark.parametrize("fail", ["true", "false"])
def test_delete_records_under_a_stream(
    spark: SparkSession, project_cluster_bootstrap: str, tmp_path: Path, fail: str
) -> None:
    bootstrap = project_cluster_bootstrap
    topic = unique_topic("deleted")
    create_topic(bootstrap, topic, partitions=1)
    produce(bootstrap, topic, partitions=1, count=10)
    _stream_once(spark, bootstrap, topic, tmp_path, fail)  # checkpoint now at offset 10

    produce(bootstrap, topic, partitions=1, count=10, first=10)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_records([TopicPartition(topic, 0, 15)]).values():
        future.result(timeout=30)

    if fail == "true":
        with pytest.raises(PySparkException, match="failOnDataLoss") as failure:
            _stream_once(spark, bootstrap, topic, tmp_path, fail)
        assert "offsets [10, 15) were removed" in str(failure.value)
    else:
        _stream_once(spark, bootstrap, topic, tmp_path, fail)
        offsets = sorted(r.offset for r in spark.read.parquet(str(tmp_path / "out")).collect())
        assert offsets == list(range(10)) + list(range(15, 20))
