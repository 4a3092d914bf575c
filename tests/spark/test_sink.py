"""The sink writes a DataFrame that a confluent-kafka consumer reads back;
keyed rows land on the partition Kafka's default (murmur2) partitioner chooses."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from .kafka_helpers import consume_all, create_topic, produce, unique_topic
from .murmur2 import java_partition, murmur2


def test_batch_write_is_read_back_fully(spark: SparkSession, bootstrap: str) -> None:
    topic = unique_topic("sink")
    create_topic(bootstrap, topic, partitions=3)
    df = spark.range(300).select(
        F.concat(F.lit("k"), F.col("id").cast("string")).alias("key"),
        F.concat(F.lit("v"), F.col("id").cast("string")).cast("binary").alias("value"),
        (F.col("id") % 3).cast("int").alias("partition"),
        F.array(
            F.struct(
                F.lit("id").alias("key"), F.col("id").cast("string").cast("binary").alias("value")
            )
        ).alias("headers"),
    )

    df.write.format("strandline").option("bootstrap.servers", bootstrap).option(
        "topic", topic
    ).mode("append").save()

    got = consume_all(bootstrap, topic, partitions=3)
    assert sorted(value for _, _, _, value, _ in got) == sorted(
        f"v{i}".encode() for i in range(300)
    )
    for partition, _, key, value, headers in got:
        assert value is not None
        n = value[1:]
        assert int(n) % 3 == partition  # the partition column was honoured
        assert key == b"k" + n
        assert headers == [("id", n)]


def test_stream_write_copies_a_topic(spark: SparkSession, bootstrap: str, tmp_path: Path) -> None:
    source, target = unique_topic("copy-in"), unique_topic("copy-out")
    create_topic(bootstrap, source, partitions=2)
    create_topic(bootstrap, target, partitions=2)
    produce(bootstrap, source, partitions=2, count=40)

    query = (
        spark.readStream.format("strandline")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .select("key", "value", "partition")
        .withColumn("topic", F.lit(target))
        .writeStream.format("strandline")
        .option("bootstrap.servers", bootstrap)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120)

    got = consume_all(bootstrap, target, partitions=2)
    assert sorted(v for _, _, _, v, _ in got) == sorted(f"value-{i}".encode() for i in range(40))


def test_murmur2_matches_kafka_utils_test_vectors() -> None:
    # org.apache.kafka.common.utils.UtilsTest.testMurmur2
    vectors = {
        b"21": -973932308,
        b"foobar": -790332482,
        b"a-little-bit-long-string": -985981536,
        b"a-little-bit-longer-string": -1486304829,
        b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
        b"abc": 479470107,
    }
    assert {key: murmur2(key) for key in vectors} == vectors


def test_keyed_rows_land_where_a_java_producer_puts_them(
    spark: SparkSession, bootstrap: str
) -> None:
    topic = unique_topic("murmur2")
    create_topic(bootstrap, topic, partitions=7)
    keys = [f"user-{i}".encode() for i in range(200)]
    df = spark.createDataFrame([(k, b"v" + k) for k in keys], "key binary, value binary")

    df.write.format("strandline").option("bootstrap.servers", bootstrap).option(
        "topic", topic
    ).mode("append").save()

    got = consume_all(bootstrap, topic, partitions=7)
    assert sorted(key for _, _, key, _, _ in got) == sorted(keys)
    placed = {key: partition for partition, _, key, _, _ in got}
    assert placed == {key: java_partition(key, 7) for key in keys}
    # librdkafka's old default (CRC32) would disagree on most of these keys.
    assert len(set(placed.values())) == 7
