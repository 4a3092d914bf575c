"""Rows/s through the `strandline` Spark source vs a raw confluent-kafka consumer.

Both read the same topic in the same run: N records of S bytes, the range [0, HW) of
every partition. Without --bootstrap the --target broker (default: one Strandline broker with its
embedded ZooKeeper; or Tansu) is started on a free local port. Both readers get the same
treatment: the same fetch settings (FETCH_CONFIG, given to the source as `kafka.<key>`
options; the raw consumer also gets fetch.queue.backoff.ms=10, as in every other
benchmark here), one warm-up read each that is printed but not counted, then --repeat
timed full reads each. Both figures are medians, and the ratio is the ratio of medians.

    .venv/bin/python bench/spark_source.py --records 1000000 --size 100
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

# Run as a script (`python bench/spark_source.py`): make the repo root importable.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.targets import TARGETS  # noqa: E402


def fill_topic(bootstrap: str, topic: str, partitions: int, records: int, size: int) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(timeout=30)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "batch.num.messages": 100_000,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    value = b"x" * size
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value=value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)
    # One lone last record per partition: some brokers (Tansu) report the HW as the last
    # batch's base offset + 1, which is exact only when that batch holds one record.
    for p in range(partitions):
        producer.produce(topic, value=value, partition=p)
        producer.flush(30)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-hw"})
    total = sum(
        consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1]
        for p in range(partitions)
    )
    consumer.close()
    return total


# Fetch settings for both readers: the raw consumer gets them in its config, the source as
# `kafka.<key>` options (its executors' Fetch requests and its driver's consumer read them).
# These are the source's defaults, stated so that neither side has an edge.
FETCH_CONFIG: dict[str, object] = {
    "fetch.max.bytes": 64 * 1024 * 1024,
    "max.partition.fetch.bytes": 16 * 1024 * 1024,
    "fetch.wait.max.ms": 100,
    "isolation.level": "read_committed",
}

# The raw consumer also gets the tuning a range reader would want: no group, a large
# queue, and no 1 s pause when that queue fills (librdkafka's fetch.queue.backoff.ms,
# which every other benchmark here switches off too).
RAW_CONSUMER_CONFIG: dict[str, object] = {
    **FETCH_CONFIG,
    "group.id": "bench-raw",
    "enable.auto.commit": False,
    "auto.offset.reset": "error",
    "queued.max.messages.kbytes": 256 * 1024,
    "fetch.queue.backoff.ms": 10,
}


def raw_consumer_rows_per_s(
    bootstrap: str, topic: str, partitions: int, total: int, repeat: int
) -> float:
    """Median rows/s of `repeat` full reads, each by a new consumer (as each Spark
    action opens its own connections), after one warm-up read (as the source gets)."""
    cold = _raw_read(bootstrap, topic, partitions, total)
    print(f"  raw confluent-kafka consumer, warm-up: {total / cold:,.0f} rows/s ({cold:.2f} s)")
    runs = [_raw_read(bootstrap, topic, partitions, total) for _ in range(repeat)]
    each = ", ".join(f"{total / r / 1e6:.2f}M" for r in runs)
    median = statistics.median(runs)
    print(f"  raw confluent-kafka consumer: median {total / median:,.0f} rows/s (runs: {each})")
    return total / median


def _raw_read(bootstrap: str, topic: str, partitions: int, total: int) -> float:
    consumer = Consumer({**RAW_CONSUMER_CONFIG, "bootstrap.servers": bootstrap})
    started = time.perf_counter()
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen = 0
    payload = 0
    while seen < total:
        for m in consumer.consume(num_messages=20_000, timeout=0.5):
            if m.error() is None:
                seen += 1
                payload += len(m.value() or b"")  # touch every record, as any reader must
    elapsed = time.perf_counter() - started
    consumer.close()
    return elapsed


def spark_rows_per_s(
    bootstrap: str, topic: str, min_partitions: int | None, repeat: int
) -> tuple[float, int]:
    """Median rows/s of `repeat` warm count() runs after one warm-up run (the same
    number of reads as the raw consumer gets); a noop write is timed too, for
    information only."""
    from strandline.spark import register
    from strandline.spark.session import session_builder

    spark = session_builder("local[2]", "bench-spark-source").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    reader = (
        spark.read.format("strandline")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", topic)
    )
    for key, value in FETCH_CONFIG.items():
        reader = reader.option(f"kafka.{key}", str(value))
    if min_partitions:
        reader = reader.option("minPartitions", str(min_partitions))
    df = reader.load()
    # The first full read also starts both Python workers (imports, numba's cached
    # decoder) and the JVM is still warming up for a few runs: report it apart.
    started = time.perf_counter()
    rows = df.count()
    cold = time.perf_counter() - started
    print(f"  spark count(), warm-up (cold workers): {rows / cold:,.0f} rows/s ({cold:.2f} s)")
    actions = {
        "count()": lambda: df.count(),
        "noop write": lambda: df.write.format("noop").mode("overwrite").save(),
    }
    medians: list[float] = []
    for name, action in actions.items():
        runs: list[float] = []
        for _ in range(repeat):
            started = time.perf_counter()
            action()
            runs.append(time.perf_counter() - started)
        each = ", ".join(f"{rows / r / 1e6:.2f}M" for r in runs)
        median = statistics.median(runs)
        print(f"  spark {name}, warm: median {rows / median:,.0f} rows/s (runs: {each})")
        medians.append(median)
    spark.stop()
    return rows / medians[0], rows  # count(): the read alone, like the raw consumer's


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--min-partitions", type=int, default=None)
    parser.add_argument(
        "--target",
        choices=sorted(TARGETS),
        default="strandline",
        help="the broker to start for the run (default: one Strandline broker)",
    )
    parser.add_argument("--bootstrap", default=None, help="an existing cluster instead")
    parser.add_argument(
        "--repeat", type=int, default=5, help="full reads per reader (medians reported)"
    )
    args = parser.parse_args()

    with contextlib.ExitStack() as stack:
        bootstrap = args.bootstrap or stack.enter_context(TARGETS[args.target]())
        topic = f"bench-{uuid.uuid4().hex[:8]}"
        started = time.perf_counter()
        total = fill_topic(bootstrap, topic, args.partitions, args.records, args.size)
        print(
            f"produced {total:,} records of {args.size} B in {time.perf_counter() - started:.1f} s"
        )
        raw = raw_consumer_rows_per_s(bootstrap, topic, args.partitions, total, args.repeat)
        source, rows = spark_rows_per_s(bootstrap, topic, args.min_partitions, args.repeat)
        assert rows == total, f"source read {rows} rows, topic holds {total}"
        print(
            f"medians: raw {raw:,.0f} rows/s, source {source:,.0f} rows/s; "
            f"source/raw = {source / raw:.2f}x  (target >= 0.8x, >= 1M rows/s on local[2])"
        )


if __name__ == "__main__":
    main()
