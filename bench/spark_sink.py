"""Rows/s through the `strandline` Spark sink: exactly-once ÷ at-least-once, same run.

One broker (--target, default one Strandline broker; or --bootstrap) and one local[2]
session. Each case writes a DataFrame of N rows (key `k<i>`, S-byte values, 2 Spark
partitions, so 2 tasks) to a fresh 2-partition topic: at-least-once (idempotent
producer, acks=all) and exactly-once (`exactlyOnce=true`: one transaction per task,
plus the init_transactions / OffsetFetch / send_offsets / commit of each). Medians of
--repeat writes each, alternated. Two sizes: a large write (throughput) and a small one
(--small, the size of a typical micro-batch: the transactions' fixed cost shows).

    .venv/bin/python bench/spark_sink.py --records 1000000 --size 100
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
import uuid
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.targets import TARGETS  # noqa: E402


def _topic(bootstrap: str) -> str:
    topic = f"bench-sink-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        future.result(timeout=30)
    return topic


def measure(spark, bootstrap: str, records: int, size: int, repeat: int) -> dict[str, float]:  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    df = (
        spark.range(0, records, numPartitions=2)
        .select(
            F.concat(F.lit("k"), F.col("id").cast("string")).alias("key"),
            F.expr(f"repeat('x', {size})").alias("value"),
        )
        .cache()
    )
    df.count()  # materialize the cache: the writes time the sink, not the generation
    runs: dict[str, list[float]] = {"at-least-once": [], "exactly-once": []}
    for i in range(repeat + 1):  # the first round warms the workers up: not counted
        for mode in runs:
            writer = (
                df.write.format("strandline")
                .option("bootstrap.servers", bootstrap)
                .option("topic", _topic(bootstrap))
                .mode("append")
            )
            if mode == "exactly-once":
                writer = (
                    writer.option("exactlyOnce", "true")
                    .option("transactionalIdPrefix", f"bench-{uuid.uuid4().hex[:8]}")
                    .option("batchId", "0")
                )
            started = time.perf_counter()
            writer.save()
            if i > 0:
                runs[mode].append(time.perf_counter() - started)
    df.unpersist()
    rates = {}
    for mode, times in runs.items():
        each = ", ".join(f"{records / t:,.0f}" for t in times)
        rates[mode] = records / statistics.median(times)
        print(f"  {records:,} rows, {mode}: median {rates[mode]:,.0f} rows/s (runs: {each})")
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--target", choices=sorted(TARGETS), default="strandline")
    parser.add_argument("--bootstrap", default=None, help="an existing cluster instead")
    args = parser.parse_args()

    from strandline.spark import register
    from strandline.spark.session import session_builder

    with contextlib.ExitStack() as stack:
        bootstrap = args.bootstrap or stack.enter_context(TARGETS[args.target]())
        spark = (
            session_builder("local[2]", "bench-spark-sink")
            .config("spark.ui.showConsoleProgress", "false")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        register(spark)
        try:
            ratios = []
            for records in (args.records, args.small):
                rates = measure(spark, bootstrap, records, args.size, args.repeat)
                ratio = rates["exactly-once"] / rates["at-least-once"]
                ratios.append((records, ratio))
            for records, ratio in ratios:
                print(f"exactly-once / at-least-once, {records:,} rows per write: {ratio:.2f}x")
        finally:
            spark.stop()


if __name__ == "__main__":
    main()
