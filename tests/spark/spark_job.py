"""Spark jobs the tests run as separate driver processes (`python spark_job.py ...`):
a driver that can be SIGKILLed, or that starts without an activated venv.

    count  BOOTSTRAP TOPIC MASTER             prints "count=<records>"
    copy   BOOTSTRAP SOURCE TARGET CHECKPOINT MASTER [SLOW_PARTITION SLOW_MS SINK_MS]
           a streaming copy (exactly-once sink, read_committed source) in micro-batches
           of at most 40 records, until everything available is copied; rows of source
           partition SLOW_PARTITION take SLOW_MS each to compute, and the sink waits
           SINK_MS after producing each row (so a batch can be caught in flight).
"""

from __future__ import annotations

import sys

from strandline.spark import register
from strandline.spark.session import session_builder


def count(bootstrap: str, topic: str, master: str) -> None:
    spark = session_builder(master, "strandline-count").getOrCreate()
    register(spark)
    n = (
        spark.read.format("strandline")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .load()
        .count()
    )
    print(f"count={n}", flush=True)
    spark.stop()


def copy(
    bootstrap: str,
    source: str,
    target: str,
    checkpoint: str,
    master: str,
    slow_partition: int = -1,
    slow_ms: int = 0,
    sink_ms: int = 0,
) -> None:
    from pyspark.sql import functions as F

    spark = (
        session_builder(master, "strandline-copy")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)

    @F.udf("binary")
    def slowly(value: bytes, partition: int) -> bytes:
        if partition == slow_partition:
            import time

            time.sleep(slow_ms / 1000)
        return value

    writer = (
        spark.readStream.format("strandline")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "40")
        .load()
        .select("key", slowly("value", "partition").alias("value"))
        .writeStream.format("strandline")
        .option("bootstrap.servers", bootstrap)
        .option("topic", target)
        .option("exactlyOnce", "true")
        .option("checkpointLocation", checkpoint)
    )
    if sink_ms:
        writer = writer.option("testDelayPerRowMs", str(sink_ms))
    query = writer.trigger(availableNow=True).start()
    query.awaitTermination()
    print("copied", flush=True)
    spark.stop()


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    if command == "count":
        count(*args)
    else:
        copy(*args[:5], *(int(a) for a in args[5:]))
