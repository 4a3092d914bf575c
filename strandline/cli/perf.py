"""`strandline perf produce|consume`: kafka-producer-perf-test.sh and
kafka-consumer-perf-test.sh, with a live progress bar.

Both use confluent-kafka, so they measure any Kafka-compatible cluster, and print
Kafka's summary line (or one JSON object with --json). Produce latency is Kafka's: from
`produce()` to the delivery report, per record.
"""

from __future__ import annotations

import datetime
import json
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)

from strandline.cli import rdkafka, tool_console
from strandline.cli.topics import TopicToolError, parse_configs, read_command_config

app = typer.Typer(
    help="Producer and consumer performance tests (kafka-*-perf-test.sh).",
    no_args_is_help=True,
)
console = tool_console(stderr=True)

METADATA_TIMEOUT_S = 10.0
JOIN_TIMEOUT_S = 60.0
MB = 1024 * 1024  # Kafka's perf tools report MB as 2^20 bytes

BootstrapOption = Annotated[
    str, typer.Option("--bootstrap-server", help="host:port[,host:port] of any broker")
]
CommandConfigOption = Annotated[
    Path | None,
    typer.Option("--command-config", help="Client properties file (security settings)"),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object")]


class PerfError(RuntimeError):
    """Reported as one line, exit code 1."""


def _fail(message: str) -> typer.Exit:
    console.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)
    return typer.Exit(code=1)


def _client_config(bootstrap: str, command_config: Path | None, extra: list[str]) -> dict[str, Any]:
    try:
        config: dict[str, Any] = {"bootstrap.servers": bootstrap}
        config.update(read_command_config(command_config))
        config.update(parse_configs(extra))
    except TopicToolError as e:
        raise PerfError(str(e)) from e
    return config


def _partitions(config: dict[str, Any], topic: str, client: type[Any] = Producer) -> int:
    """The topic's partition count; a missing topic or an unreachable cluster is an error.
    Where the brokers auto-create topics (Kafka's default) the metadata request creates
    it, as producing would, and its leaders are waited for. The settings are checked by
    the client they are for before anything connects."""
    watch = rdkafka.Watch(str(config["bootstrap.servers"]))
    flag = "--producer-props" if client is Producer else "--consumer-props"
    given = {k: v for k, v in config.items() if k != "bootstrap.servers"}
    ours = ("acks", "group.id", "auto.offset.reset", "enable.auto.commit")
    shown = " ".join(f"{k}={v}" for k, v in given.items() if "password" not in k and k not in ours)
    probe = rdkafka.create(client, watch.config(config), f"{flag} {shown}".strip())
    probe_close = getattr(probe, "close", None)
    deadline = time.monotonic() + METADATA_TIMEOUT_S
    try:
        while True:
            try:
                meta = watch.call(
                    probe, lambda t: probe.list_topics(topic, timeout=t), METADATA_TIMEOUT_S
                )
            except rdkafka.ClientError as e:
                raise PerfError(str(e)) from e
            except KafkaException as e:
                raise PerfError(
                    f"cannot reach {config['bootstrap.servers']}: {e.args[0].str()}"
                ) from e
            info = meta.topics.get(topic)
            error = None if info is None else info.error
            if info is not None and error is None:
                return len(info.partitions)
            if error is not None and error.code() == KafkaError.LEADER_NOT_AVAILABLE:
                if time.monotonic() < deadline:
                    time.sleep(0.2)
                    continue
            if error is not None and error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise PerfError(f"topic {topic!r}: {error.str()}")
            raise PerfError(
                f"topic {topic!r} does not exist (create it with `strandline topics --create`)"
            )
    finally:
        if probe_close is not None:
            probe_close()
        elif hasattr(probe, "flush"):
            probe.flush(0)


@dataclass
class Latencies:
    """Per-record produce latencies in ms, and the first delivery error."""

    values: list[float] = field(default_factory=list)
    bytes: int = 0
    failed: int = 0
    first_error: str | None = None

    def percentile(self, pct: float) -> float:
        ordered = sorted(self.values)
        if not ordered:
            return 0.0
        return ordered[min(len(ordered) - 1, int(len(ordered) * pct / 100))]


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TaskProgressColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )


@app.command("produce")
def produce(
    bootstrap_server: BootstrapOption,
    topic: Annotated[str, typer.Option("--topic", help="Topic to produce to")],
    num_records: Annotated[int, typer.Option("--num-records", min=1)],
    record_size: Annotated[int, typer.Option("--record-size", min=0, help="Bytes")] = 100,
    throughput: Annotated[
        float, typer.Option("--throughput", help="Records/s cap; -1 for none (Kafka's flag)")
    ] = -1,
    acks: Annotated[str, typer.Option("--acks", help="all, 1 or 0")] = "all",
    producer_props: Annotated[
        list[str] | None,
        typer.Option("--producer-props", help="key=value client settings (repeatable)"),
    ] = None,
    command_config: CommandConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Produce --num-records records of --record-size bytes and report throughput and
    per-record latency percentiles (kafka-producer-perf-test.sh)."""
    try:
        config = _client_config(bootstrap_server, command_config, producer_props or [])
        config.setdefault("acks", acks)
        _partitions(config, topic)
        summary = _produce(config, topic, num_records, record_size, throughput)
    except (PerfError, rdkafka.ClientError) as e:
        raise _fail(str(e)) from e
    _report(summary, as_json, _produce_line)


def _produce(
    config: dict[str, Any], topic: str, count: int, size: int, rate: float
) -> dict[str, Any]:
    watch = rdkafka.Watch(str(config["bootstrap.servers"]))
    producer = rdkafka.create(Producer, watch.config(config), "--producer-props")
    lat = Latencies()
    value = uuid.uuid4().bytes * (size // 16 + 1)
    value = value[:size]

    def delivered(err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            lat.failed += 1
            lat.first_error = lat.first_error or err.str()
            return
        # librdkafka's own clock from produce() to the broker's acknowledgement, so the
        # figure does not depend on when this callback gets served.
        lat.values.append(msg.latency() * 1000)
        lat.bytes += len(msg.value() or b"")

    def serve(timeout: float) -> None:
        producer.poll(timeout)
        if watch.fatal is not None:
            raise PerfError(watch.reason() or watch.fatal.str())

    started = time.perf_counter()
    shown = started
    with _progress() as progress:
        task = progress.add_task("producing", total=count, rate="")
        for i in range(count):
            if rate > 0:
                # Kafka's throttler: wait until record i is due at the asked rate, serving
                # delivery reports meanwhile.
                due = started + i / rate
                while (pause := due - time.perf_counter()) > 0:
                    serve(pause)
            while True:
                try:
                    producer.produce(topic, value, on_delivery=delivered)
                    break
                except BufferError:
                    serve(0.05)  # local queue full: let deliveries drain it
            serve(0)
            now = time.perf_counter()
            if now - shown > 0.2:
                shown = now
                progress.update(
                    task,
                    completed=len(lat.values),
                    rate=f"{len(lat.values) / (now - started):,.0f} rec/s",
                )
        while producer.flush(0.2) > 0:
            serve(0)
            progress.update(task, completed=len(lat.values) + lat.failed)
        progress.update(task, completed=count)
    seconds = time.perf_counter() - started
    if lat.failed:
        raise PerfError(f"{lat.failed} of {count} records failed: {lat.first_error}")
    return {
        "records": count,
        "seconds": round(seconds, 3),
        "records_per_s": round(count / seconds, 1),
        "mb_per_s": round(lat.bytes / MB / seconds, 2),
        "avg_latency_ms": round(sum(lat.values) / len(lat.values), 2),
        "max_latency_ms": round(max(lat.values), 2),
        **{f"p{p}_ms".replace(".", "_"): round(lat.percentile(p), 2) for p in (50, 95, 99, 99.9)},
    }


def _produce_line(s: dict[str, Any]) -> str:
    return (
        f"{s['records']} records sent, {s['records_per_s']:.1f} records/sec "
        f"({s['mb_per_s']:.2f} MB/sec), {s['avg_latency_ms']:.2f} ms avg latency, "
        f"{s['max_latency_ms']:.2f} ms max latency, {s['p50_ms']:.0f} ms 50th, "
        f"{s['p95_ms']:.0f} ms 95th, {s['p99_ms']:.0f} ms 99th, {s['p99_9_ms']:.0f} ms 99.9th."
    )


@app.command("consume")
def consume(
    bootstrap_server: BootstrapOption,
    topic: Annotated[str, typer.Option("--topic", help="Topic to read")],
    messages: Annotated[int, typer.Option("--messages", min=1, help="Records to consume")],
    group: Annotated[
        str | None, typer.Option("--group", help="Consumer group (default: a fresh one)")
    ] = None,
    timeout_ms: Annotated[
        int, typer.Option("--timeout", help="Give up after this long without a record (ms)")
    ] = 10_000,
    consumer_props: Annotated[
        list[str] | None,
        typer.Option("--consumer-props", help="key=value client settings (repeatable)"),
    ] = None,
    command_config: CommandConfigOption = None,
    as_json: JsonOption = False,
    hide_header: Annotated[
        bool, typer.Option("--hide-header", help="No header line before the stats")
    ] = False,
) -> None:
    """Consume --messages records from the beginning in a consumer group and report
    throughput, the time to join the group and the fetch rate
    (kafka-consumer-perf-test.sh: its header and comma-separated line by default)."""
    try:
        config = _client_config(bootstrap_server, command_config, consumer_props or [])
        config.setdefault("group.id", group or f"perf-consumer-{uuid.uuid4().hex[:8]}")
        _partitions(config, topic, Consumer)
        config.setdefault("auto.offset.reset", "earliest")
        config.setdefault("enable.auto.commit", False)
        summary = _consume(config, topic, messages, timeout_ms / 1000)
    except (PerfError, rdkafka.ClientError) as e:
        raise _fail(str(e)) from e
    if not as_json and not hide_header:
        print(CONSUME_HEADER)
    _report(summary, as_json, _consume_line)


def _consume(config: dict[str, Any], topic: str, wanted: int, idle_s: float) -> dict[str, Any]:
    joined: list[float] = []

    def on_assign(consumer: Consumer, partitions: list[CkTopicPartition]) -> None:
        joined.append(time.perf_counter())

    watch = rdkafka.Watch(str(config["bootstrap.servers"]))
    consumer = rdkafka.create(Consumer, watch.config(config), "--consumer-props")
    started = time.perf_counter()
    started_wall = time.time()
    consumer.subscribe([topic], on_assign=on_assign)
    count = size = 0
    last_record = started
    try:
        with _progress() as progress:
            task = progress.add_task("consuming", total=wanted, rate="")
            while count < wanted:
                batch = consumer.consume(min(10_000, wanted - count), timeout=0.2)
                if watch.fatal is not None:
                    raise PerfError(watch.reason() or watch.fatal.str())
                now = time.perf_counter()
                if not batch:
                    # The idle clock starts once the group assigned us partitions: joining
                    # waits out group.initial.rebalance.delay.ms, which is no idleness.
                    if joined and now - max(last_record, joined[0]) > idle_s:
                        break
                    if not joined and now - started > max(idle_s, JOIN_TIMEOUT_S):
                        raise PerfError(f"no partitions assigned within {now - started:.0f} s")
                    continue
                for msg in batch:
                    error = msg.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            continue
                        raise PerfError(f"consume failed: {error.str()}")
                    count += 1
                    size += len(msg.value() or b"")
                last_record = now
                progress.update(task, completed=count, rate=f"{count / (now - started):,.0f} rec/s")
    finally:
        consumer.close()
    if count < wanted:
        raise PerfError(
            f"only {count} of {wanted} records within --timeout {idle_s * 1000:.0f} ms of the last"
        )
    seconds = last_record - started
    rebalance = (joined[0] - started) if joined else 0.0
    fetch_seconds = max(seconds - rebalance, 1e-9)
    return {
        "records": count,
        "seconds": round(seconds, 3),
        "start_time_ms": int(started_wall * 1000),
        "end_time_ms": int((started_wall + seconds) * 1000),
        "mb": round(size / MB, 4),
        "mb_per_s": round(size / MB / seconds, 4),
        "records_per_s": round(count / seconds, 4),
        "rebalance_time_ms": round(rebalance * 1000, 1),
        "fetch_time_ms": round(fetch_seconds * 1000, 1),
        "fetch_mb_per_s": round(size / MB / fetch_seconds, 4),
        "fetch_records_per_s": round(count / fetch_seconds, 4),
    }


CONSUME_HEADER = (
    "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
    "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
)


def _kafka_time(ms: int) -> str:
    """Kafka's default --date-format, yyyy-MM-dd HH:mm:ss:SSS, in local time."""
    when = datetime.datetime.fromtimestamp(ms / 1000)
    return f"{when:%Y-%m-%d %H:%M:%S}:{ms % 1000:03d}"


def _consume_line(s: dict[str, Any]) -> str:
    """kafka-consumer-perf-test.sh's line: "%s, %s, %.4f, %.4f, %d, %.4f, %d, %d, %.4f, %.4f"."""
    return (
        f"{_kafka_time(s['start_time_ms'])}, {_kafka_time(s['end_time_ms'])}, "
        f"{s['mb']:.4f}, {s['mb_per_s']:.4f}, {s['records']}, {s['records_per_s']:.4f}, "
        f"{s['rebalance_time_ms']:.0f}, {s['fetch_time_ms']:.0f}, "
        f"{s['fetch_mb_per_s']:.4f}, {s['fetch_records_per_s']:.4f}"
    )


def _report(summary: dict[str, Any], as_json: bool, line: Any) -> None:
    if as_json:
        print(json.dumps(summary))
    else:
        print(line(summary))
