"""The measured workloads: produce and consume throughput, end-to-end latency (confluent-kafka).

Each workload takes a bootstrap string (and, for a secured cluster, the client settings
it needs: `client={"security.protocol": ...}`) and returns plain numbers; nothing here
knows which broker it talks to.
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from strandline.launcher.local_cluster import LocalCluster

PARTITIONS = 3


@dataclass(frozen=True)
class Throughput:
    records: int
    payload_bytes: int
    seconds: float

    @property
    def mb_per_s(self) -> float:
        return self.payload_bytes / 1e6 / self.seconds

    @property
    def msgs_per_s(self) -> float:
        return self.records / self.seconds


@dataclass(frozen=True)
class Latency:
    samples: int
    p50_ms: float
    p99_ms: float
    max_ms: float


def create_topic(
    bootstrap: str,
    topic: str,
    partitions: int = PARTITIONS,
    replication_factor: int = 1,
    client: Mapping[str, str] | None = None,
) -> None:
    """Create the topic and wait until every partition has a leader and a full ISR."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **(client or {})})
    for future in admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=replication_factor)],
        operation_timeout=30,
    ).values():
        future.result(timeout=60)
    # Creation is acknowledged before every partition has a leader on some brokers.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        meta = admin.list_topics(topic, timeout=5).topics.get(topic)
        if meta is not None and meta.error is None and len(meta.partitions) == partitions:
            if all(
                p.leader >= 0 and len(p.isrs) == replication_factor
                for p in meta.partitions.values()
            ):
                return
        time.sleep(0.05)
    raise TimeoutError(f"topic {topic} has no leaders after creation")


class _DeliveryTally:
    """Counts delivery reports; a failed delivery fails the run rather than flattering it."""

    def __init__(self) -> None:
        self.delivered = 0
        self.first_error: KafkaError | None = None

    def __call__(self, err: KafkaError | None, _msg: object) -> None:
        if err is None:
            self.delivered += 1
        elif self.first_error is None:
            self.first_error = err


def _produce_blocking(
    producer: Producer,
    topic: str,
    value: bytes,
    partition: int,
    on_delivery: _DeliveryTally,
    key: bytes | None = None,
) -> None:
    while True:
        try:
            if partition < 0:  # the client's partitioner places the record by its key
                producer.produce(topic, value=value, key=key, on_delivery=on_delivery)
            else:
                producer.produce(
                    topic, value=value, key=key, partition=partition, on_delivery=on_delivery
                )
            return
        except BufferError:
            producer.poll(0.005)


def produce_throughput(
    bootstrap: str,
    topic: str,
    record_size: int,
    count: int,
    acks: str,
    max_seconds: float,
    client: Mapping[str, str] | None = None,
    partitions: int = PARTITIONS,
    keyed: bool = False,
    warm_every_partition: bool = True,
    on_start: Callable[[], None] | None = None,
) -> Throughput:
    """Produce `count` records round-robin over the partitions (or fewer if time runs out).

    `keyed`: each record gets a distinct key and the client's partitioner places it, as
    an application's keyed records are. `warm_every_partition=False` warms up only the
    metadata and connections, so the first append to each partition is timed (a new
    topic); otherwise one record per partition goes first (the steady state). `on_start`
    runs just before the clock starts (a bench samples its counters there)."""
    producer = Producer({"bootstrap.servers": bootstrap, **(client or {}), "acks": acks})
    tally = _DeliveryTally()
    value = b"v" * record_size
    # Warm-up: metadata and connections exist before the clock starts.
    for partition in range(partitions if warm_every_partition else 1):
        _produce_blocking(producer, topic, value, partition, tally)
    producer.flush(15)
    warm = tally.delivered
    if on_start is not None:
        on_start()
    start = time.perf_counter()
    deadline = start + max_seconds
    produced = 0
    while produced < count:
        if keyed:
            _produce_blocking(producer, topic, value, -1, tally, key=b"%d" % produced)
        else:
            _produce_blocking(producer, topic, value, produced % partitions, tally)
        produced += 1
        if produced % 1000 == 0:
            producer.poll(0)
            if time.perf_counter() > deadline:
                break
    remaining = producer.flush(max(30.0, max_seconds))
    seconds = time.perf_counter() - start
    if tally.first_error is not None or remaining:
        raise RuntimeError(f"produce failed: {tally.first_error}, {remaining} undelivered")
    records = tally.delivered - warm
    return Throughput(records, records * record_size, seconds)


def consume_throughput(
    bootstrap: str,
    topic: str,
    expected: int,
    max_seconds: float,
    group: str = "bench",
    client: Mapping[str, str] | None = None,
    partitions: int = PARTITIONS,
) -> Throughput:
    """Read `expected` records from the start of every partition with default fetch settings."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            **(client or {}),
            "group.id": group,
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            # librdkafka stops fetching while its local queue holds queued.max.messages.kbytes
            # (64 MiB) and then waits fetch.queue.backoff.ms (1 s) before fetching again: a
            # broker that answers faster than the Python loop drains the queue would be timed
            # on that client-side pause. The same short backoff for every target.
            "fetch.queue.backoff.ms": 10,
        }
    )
    # Clock from assign(), after a metadata round trip: starting it at the first record would
    # miss whatever librdkafka prefetched meanwhile and flatter small runs.
    consumer.list_topics(topic, timeout=10)
    start = time.perf_counter()
    consumer.assign([KafkaTopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    received = 0
    payload = 0
    give_up = time.perf_counter() + max_seconds + 15
    try:
        while received < expected and time.perf_counter() < give_up:
            # Never ask for more than is left: consume() waits for a full batch or the timeout,
            # which would add up to `timeout` to the measured time on the last call.
            wanted = min(10_000, expected - received)
            for msg in consumer.consume(num_messages=wanted, timeout=0.5):
                if msg.error() is not None:
                    raise RuntimeError(f"consume failed: {msg.error()}")
                received += 1
                payload += len(msg.value() or b"")
        seconds = time.perf_counter() - start
    finally:
        consumer.close()
    if received < expected:
        raise RuntimeError(f"consumed {received} of {expected} records")
    return Throughput(received, payload, max(seconds, 1e-9))


_STAMP = struct.Struct(">q")


def percentile(sorted_values: list[float], pct: float) -> float:
    # Nearest-rank percentile: a value that was actually observed.
    rank = max(0, min(len(sorted_values) - 1, round(pct / 100 * len(sorted_values) + 0.5) - 1))
    return sorted_values[rank]


def end_to_end_latency(
    bootstrap: str,
    topic: str,
    rate_per_s: int,
    seconds: float,
    record_size: int = 100,
    consumer_overrides: dict[str, object] | None = None,
) -> Latency:
    """Paced produce (acks=1, linger.ms=0) against a consumer left at librdkafka's defaults.

    The consumer's only settings are the ones librdkafka requires (bootstrap, group.id for
    assign) and no offset commits; fetch.wait.max.ms / fetch.min.bytes stay default, so a
    broker that does not wake parked fetches shows it here. `consumer_overrides` exists for
    diagnosis (e.g. a short fetch.wait.max.ms isolates the broker's wake-up from the rest).
    """
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-latency",
            "enable.auto.commit": False,
            **(consumer_overrides or {}),
        }
    )
    consumer.assign([KafkaTopicPartition(topic, p, OFFSET_END) for p in range(PARTITIONS)])
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0})
    tally = _DeliveryTally()
    padding = b"p" * max(0, record_size - _STAMP.size)
    latencies_ns: list[int] = []
    stop = threading.Event()
    measuring = threading.Event()
    warm_seen = threading.Event()

    def consume_loop() -> None:
        while not stop.is_set():
            # poll(), not consume(n): consume() holds messages back until it has n of them or
            # its timeout passes, which would be measured as broker latency.
            msg = consumer.poll(0.05)
            arrived = time.monotonic_ns()
            if msg is None or msg.error() is not None:
                continue
            value = msg.value()
            if value is None:
                continue
            if msg.key() == b"warm":
                warm_seen.set()
            elif measuring.is_set():
                latencies_ns.append(arrived - _STAMP.unpack_from(value)[0])

    reader = threading.Thread(target=consume_loop, name="latency-consumer", daemon=True)
    reader.start()
    try:
        # Keep poking until the consumer has its fetch position: OFFSET_END resolves lazily.
        warm_deadline = time.monotonic() + 20
        while not warm_seen.is_set():
            if time.monotonic() > warm_deadline:
                raise TimeoutError("latency consumer never saw the warm-up records")
            for partition in range(PARTITIONS):
                _produce_blocking(producer, topic, b"warm", partition, tally, key=b"warm")
            producer.flush(5)
            warm_seen.wait(0.5)
        measuring.set()
        total = int(rate_per_s * seconds)
        interval_ns = 1_000_000_000 // rate_per_s
        begin = time.monotonic_ns()
        for i in range(total):
            due = begin + i * interval_ns
            while (now := time.monotonic_ns()) < due:
                remaining = due - now
                if remaining > 1_500_000:
                    time.sleep((remaining - 1_000_000) / 1e9)
                producer.poll(0)
            _produce_blocking(
                producer, topic, _STAMP.pack(time.monotonic_ns()) + padding, i % PARTITIONS, tally
            )
            producer.poll(0)
        producer.flush(10)
        drain_deadline = time.monotonic() + 5
        while len(latencies_ns) < total and time.monotonic() < drain_deadline:
            time.sleep(0.01)
    finally:
        stop.set()
        reader.join(5)
        consumer.close()
    if not latencies_ns:
        raise RuntimeError("no latency samples")
    values_ms = sorted(ns / 1e6 for ns in latencies_ns)
    return Latency(
        len(values_ms), percentile(values_ms, 50), percentile(values_ms, 99), values_ms[-1]
    )


def finish_report(
    render: Callable[[], None], summary: dict[str, object], errors: dict[str, str], began: float
) -> int:
    """Print the table (`render`), the load the figures were measured under and the
    `BENCH_JSON` line; the exit status says whether a figure failed. Client, ZooKeeper
    and brokers share this machine's cores: the load says how far to trust a figure."""
    load = os.getloadavg()
    render()
    print(
        f"load average at the end: {load[0]:.2f} (1 min), {load[1]:.2f} (5 min); "
        f"run took {time.monotonic() - began:.0f} s"
    )
    doc = {**summary, "loadavg_1m": round(load[0], 2), "errors": errors}
    print("BENCH_JSON " + json.dumps(doc, sort_keys=True, default=str))
    return 1 if errors else 0


@contextlib.contextmanager
def local_cluster(
    brokers: int, overrides: Mapping[str, str], keep: Path | None, prefix: str
) -> Iterator[LocalCluster]:
    """A running LocalCluster whose metadata is complete, stopped afterwards; its data in
    `keep` (kept, for the logs) or in a temporary directory named `prefix`..."""
    with contextlib.ExitStack() as stack:
        data_dir = keep or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=prefix)))
        cluster = LocalCluster(data_dir)
        try:
            cluster.up(brokers, dict(overrides))
            cluster.wait_for_full_metadata()
            yield cluster
        finally:
            cluster.stop()
