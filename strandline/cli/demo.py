"""`strandline demo`: the example pipeline, end to end, on a local 3-broker cluster.

ZooKeeper + 3 brokers start; synthetic click events stream into `clicks` (6 partitions,
rf=3) while a PySpark Structured Streaming job counts clicks per page per minute (with
a watermark) into `page-counts` and Parquet. The job reads `clicks` read_committed and
writes `page-counts` with the exactly-once sink (one Kafka transaction per task and
micro-batch). Mid-run one broker is SIGKILLed and restarted. At the end the demo reads
`page-counts` read_committed and checks, per page and minute, that the final count is
the number of clicks produced there and that no micro-batch's update was written twice;
only then does it say "exactly once".

`--spark-master standalone` runs the job on a Spark standalone cluster started here (a
master and two workers, executors in JVMs of their own) instead of local[2].
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

PAGES = ["/", "/search", "/cart", "/checkout", "/product/1", "/product/2", "/product/3", "/help"]
CLICKS, PAGE_COUNTS = "clicks", "page-counts"
EVENT_SPACING_MS = 10  # event time advances 10 ms per click: 6,000 clicks per event-minute
# The exactly-once sink's transactional ids (and marker groups): `<prefix>-<task>`.
PAGE_COUNTS_TXN_PREFIX = "demo-page-counts"

console = Console()


@dataclass
class RunStats:
    produced: int = 0
    produce_errors: int = 0
    produce_seconds: float = 0.0
    killed_broker: int | None = None
    leaders_before: dict[int, int] = field(default_factory=dict)
    leaders_after: dict[int, int] = field(default_factory=dict)
    # Clicks produced per (event-time minute start in ms, page): what the counts must be.
    expected: Counter[tuple[int, str]] = field(default_factory=Counter)


def run_demo(
    events: int = typer.Option(60_000, help="click events to produce"),
    data_dir: Path = typer.Option(Path("data/demo"), help="cluster and output directory"),
    rate: int = typer.Option(1_500, help="events per second"),
    spark_master: str = typer.Option(
        "local",
        help="local (local[2]), standalone (a master and two workers started here), "
        "or a spark:// URL",
    ),
) -> None:
    """Run the example pipeline: cluster up, clicks -> Spark -> page-counts + Parquet."""
    from strandline.launcher.local_cluster import LocalCluster
    from strandline.spark.standalone import StandaloneCluster

    shutil.rmtree(data_dir, ignore_errors=True)
    data_dir.mkdir(parents=True)
    cluster = LocalCluster(data_dir / "cluster")
    spark = None
    spark_cluster: StandaloneCluster | None = None
    started = time.monotonic()
    try:
        with console.status("starting ZooKeeper and 3 brokers"):
            cluster.up(
                3,
                {
                    "zookeeper.session.timeout.ms": "3000",
                    "replica.lag.time.max.ms": "3000",
                    "min.insync.replicas": "2",
                    "offsets.topic.replication.factor": "3",
                    "transaction.state.log.replication.factor": "3",
                    "transaction.state.log.min.isr": "2",
                },
            )
            cluster.wait_for_full_metadata()
            _create_topics(cluster.bootstrap)
        console.print(f"cluster up: [bold]{cluster.bootstrap}[/bold]")
        master = spark_master
        if spark_master == "local":
            master = "local[2]"
        elif spark_master == "standalone":
            with console.status("starting a Spark standalone master and two workers"):
                spark_cluster = StandaloneCluster(data_dir / "spark-standalone").start()
            master = spark_cluster.master_url
        with console.status(f"starting Spark ({master})"):
            spark = _spark_session(data_dir, master)
            query = _start_query(spark, cluster.bootstrap, data_dir)
        stats = RunStats()
        _produce_with_failover(cluster, events, rate, stats)
        with console.status("waiting for Spark to process every event"):
            _await_caught_up(query, cluster.bootstrap, events, timeout_s=180)
            _stop_between_batches(query, timeout_s=30)
        total, windows = _verify_parquet(spark, data_dir)
        check = _check_topic(spark, cluster.bootstrap, stats.expected)
        _summary(stats, total, windows, check, time.monotonic() - started)
        if total != stats.produced:
            console.print(
                f"[red]counts add up to {total}, but {stats.produced} events were produced"
            )
            raise typer.Exit(1)
        if check.problems:
            for problem in check.problems[:10]:
                console.print(f"[red]{problem}")
            raise typer.Exit(1)
        _outputs(data_dir)
        console.print(
            f"[green]exactly once: read read_committed, `{PAGE_COUNTS}` holds every "
            f"micro-batch's update once and its final counts match the "
            f"{stats.produced:,} clicks produced, page by page and minute by minute[/green]"
        )
    finally:
        if spark is not None:
            _stop_spark(spark)
        if spark_cluster is not None:
            spark_cluster.stop()
        with console.status("stopping the cluster"):
            cluster.stop()


def _stop_spark(spark) -> None:  # type: ignore[no-untyped-def]
    """Stop Spark and wait for its JVM to exit, so that the demo leaves no process
    behind (the JVM otherwise exits only once it sees our stdin pipe close)."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    spark.stop()
    proc = getattr(gateway, "proc", None)
    if gateway is None or proc is None:
        return
    gateway.shutdown()
    if proc.stdin is not None:
        proc.stdin.close()  # PythonGatewayServer exits on EOF
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _create_topics(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
    futures = admin.create_topics(
        [
            NewTopic(CLICKS, 6, 3, config={"min.insync.replicas": "2"}),
            NewTopic(PAGE_COUNTS, 3, 3),
        ],
        operation_timeout=30,
    )
    for future in futures.values():
        future.result(60)


QUIET_LOG4J = """\
rootLogger.level = error
# PySpark's gateway is Spark's "shell": unless its logger is set, Spark prints which level
# it chose for the shell.
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = error
rootLogger.appenderRef.stderr.ref = stderr
appender.console.type = Console
appender.console.name = stderr
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
"""


def _spark_session(data_dir: Path, master: str):  # type: ignore[no-untyped-def]
    from strandline.spark import register
    from strandline.spark.session import session_builder

    # Spark's start-up WARN lines (native Hadoop, spark.local.dir) came before the demo's
    # own output; the driver logs errors only, from its first line.
    log4j = data_dir / "log4j2.properties"
    log4j.write_text(QUIET_LOG4J)
    spark = (
        session_builder(master, "strandline-demo")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log4j}")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.local.dir", str(data_dir / "spark-tmp"))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def _start_query(spark, bootstrap: str, data_dir: Path):  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    clicks = (
        spark.readStream.format("strandline")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", CLICKS)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "30000")
        .option("kafka.isolation.level", "read_committed")
        .option("kafka.log_level", "2")  # the broker kill is expected: keep librdkafka quiet
        .load()
    )
    schema = "page STRING, user STRING, event_ms LONG"
    events = clicks.select(F.from_json(F.col("value").cast("string"), schema).alias("e")).select(
        "e.page", (F.col("e.event_ms") / 1000).cast("timestamp").alias("event_time")
    )
    counts = (
        events.withWatermark("event_time", "2 minutes")
        .groupBy(F.window("event_time", "1 minute"), "page")
        .count()
    )
    parquet_dir = str(data_dir / "page-counts.parquet")

    def write_batch(batch, batch_id: int) -> None:  # type: ignore[no-untyped-def]
        # `update` mode: every micro-batch carries the windows that changed, with
        # their running totals; the newest batch id per window is the final count.
        rows = batch.select(
            F.col("window.start").alias("window_start"),
            "page",
            "count",
            F.lit(batch_id).alias("batch_id"),
        )
        rows.write.mode("append").parquet(parquet_dir)
        # Exactly once: each task's rows go in one Kafka transaction that also records
        # "batch done" for that task; a replayed batch skips what was committed. The
        # micro-batch id comes from Spark (a local property of foreachBatch's jobs).
        (
            rows.select(
                F.col("page").cast("binary").alias("key"),
                F.to_json(
                    F.struct(
                        (F.col("window_start").cast("long") * 1000).alias("window_ms"),
                        "page",
                        "count",
                        "batch_id",
                    )
                )
                .cast("binary")
                .alias("value"),
            )
            .write.format("strandline")
            .option("bootstrap.servers", bootstrap)
            .option("topic", PAGE_COUNTS)
            .option("exactlyOnce", "true")
            .option("transactionalIdPrefix", PAGE_COUNTS_TXN_PREFIX)
            .option("kafka.log_level", "2")
            .mode("append")
            .save()
        )

    return (
        counts.writeStream.outputMode("update")
        .foreachBatch(write_batch)
        .option("checkpointLocation", str(data_dir / "checkpoint"))
        .trigger(processingTime="2 seconds")
        .start()
    )


def _leaders(cluster) -> dict[int, int]:  # type: ignore[no-untyped-def]
    return {p.tp.partition: p.leader for p in cluster.status().partitions if p.tp.topic == CLICKS}


def _produce_with_failover(cluster, events: int, rate: int, stats: RunStats) -> None:  # type: ignore[no-untyped-def]
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 20,
            "message.timeout.ms": 120000,
            "log_level": 2,  # the broker kill below is expected: keep librdkafka quiet
        }
    )
    errors: list[str] = []

    def on_delivery(err, _msg) -> None:  # type: ignore[no-untyped-def]
        if err is not None:
            errors.append(str(err))

    rng = random.Random(7)
    base_ms = int(time.time() * 1000) - events * EVENT_SPACING_MS
    kill_at, restart_at = int(events * 0.35), int(events * 0.55)
    restarter: threading.Thread | None = None
    started = time.monotonic()
    with Progress(
        TextColumn("[bold]producing clicks"),
        BarColumn(),
        TextColumn("{task.completed:,}/{task.total:,}"),
        TextColumn("{task.fields[note]}"),
        TimeElapsedColumn(),
        console=console,
    ) as progress:
        task = progress.add_task("produce", total=events, note="")
        for i in range(events):
            event_ms = base_ms + i * EVENT_SPACING_MS + rng.randint(0, 500)
            user = f"u{rng.randint(1, 500)}"
            page = rng.choice(PAGES)
            value = {"page": page, "user": user, "event_ms": event_ms}
            stats.expected[(event_ms - event_ms % 60_000, page)] += 1
            producer.produce(
                CLICKS,
                key=user.encode(),
                value=json.dumps(value).encode(),
                timestamp=event_ms,
                on_delivery=on_delivery,
            )
            if i % 500 == 0:
                producer.poll(0)
                progress.update(task, completed=i)
                ahead = i / rate - (time.monotonic() - started)
                if ahead > 0:
                    time.sleep(ahead)
            if i == kill_at:
                stats.leaders_before = _leaders(cluster)
                stats.killed_broker = stats.leaders_before[0]
                cluster.kill(stats.killed_broker, "KILL")
                progress.update(task, note=f"SIGKILLed broker {stats.killed_broker}")
            if i == restart_at and stats.killed_broker is not None:
                restarter = threading.Thread(target=cluster.start, args=(stats.killed_broker,))
                restarter.start()
                progress.update(task, note=f"restarting broker {stats.killed_broker}")
        progress.update(task, completed=events, note="flushing")
        producer.flush(120)
    if restarter is not None:
        restarter.join(120)
    stats.leaders_after = _leaders(cluster)
    stats.produced = events
    stats.produce_errors = len(errors)
    stats.produce_seconds = time.monotonic() - started
    if errors:
        console.print(f"[red]{len(errors)} produce errors, first: {errors[0]}")
        raise typer.Exit(1)


def _end_offsets(bootstrap: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "demo-probe", "log_level": 2})
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(CLICKS, p), timeout=10)[1]
            for p in range(6)
        }
    finally:
        consumer.close()


def _await_caught_up(query, bootstrap: str, events: int, timeout_s: float) -> None:  # type: ignore[no-untyped-def]
    ends = _end_offsets(bootstrap)
    if sum(ends.values()) < events:
        raise RuntimeError(
            f"the log holds {sum(ends.values())} clicks, fewer than {events} produced"
        )
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if query.exception() is not None:
            raise RuntimeError(f"the streaming query failed: {query.exception()}")
        progress = query.lastProgress
        if progress and progress["sources"]:
            done = json.loads(progress["sources"][0]["endOffset"] or "{}").get(CLICKS, {})
            if all(int(done.get(str(p), 0)) >= end for p, end in ends.items()):
                return
        time.sleep(1)
    raise TimeoutError("Spark did not reach the end of `clicks` in time")


def _stop_between_batches(query, timeout_s: float) -> None:  # type: ignore[no-untyped-def]
    """Stop the query while no micro-batch runs. After the data, Spark still runs a batch
    that only moves the watermark; stopping in the middle of it cancels its sink job,
    which is harmless (at-least-once) but fills the terminal with Spark's stack traces."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not query.status["isTriggerActive"]:
            break
        time.sleep(0.05)
    query.stop()


def _verify_parquet(spark, data_dir: Path) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    rows = spark.read.parquet(str(data_dir / "page-counts.parquet"))
    latest = rows.withColumn(
        "rank",
        F.row_number().over(
            Window.partitionBy("window_start", "page").orderBy(F.col("batch_id").desc())
        ),
    ).where("rank = 1")
    total = int(latest.agg(F.sum("count")).first()[0] or 0)
    windows = latest.select("window_start").distinct().count()
    return total, windows


@dataclass
class TopicCheck:
    records: int = 0
    aborted_or_uncommitted: int = 0
    problems: list[str] = field(default_factory=list)


def _check_topic(spark, bootstrap: str, expected: Counter[tuple[int, str]]) -> TopicCheck:  # type: ignore[no-untyped-def]
    """Read `page-counts` read_committed (with the strandline source) and check it
    against the clicks produced: every (minute, page, micro-batch) update once, and the
    last update of each (minute, page) equal to the clicks produced there."""
    check = TopicCheck()

    def read(isolation: str) -> list[tuple[bytes, bytes]]:
        rows = (
            spark.read.format("strandline")
            .option("bootstrap.servers", bootstrap)
            .option("subscribe", PAGE_COUNTS)
            .option("kafka.isolation.level", isolation)
            .load()
            .select("key", "value")
            .collect()
        )
        return [(bytes(r.key), bytes(r.value)) for r in rows]

    committed = read("read_committed")
    check.records = len(committed)
    check.aborted_or_uncommitted = len(read("read_uncommitted")) - len(committed)
    updates: Counter[tuple[int, str, int]] = Counter()
    final: dict[tuple[int, str], tuple[int, int]] = {}
    for key, value in committed:
        update = json.loads(value)
        window, page, batch = int(update["window_ms"]), update["page"], int(update["batch_id"])
        if key.decode() != page:
            check.problems.append(f"record keyed {key!r} holds page {page}")
        updates[(window, page, batch)] += 1
        if (window, page) not in final or final[(window, page)][0] < batch:
            final[(window, page)] = (batch, int(update["count"]))
    for (window, page, batch), n in sorted(updates.items()):
        if n > 1:
            check.problems.append(
                f"page {page}, minute {window}: micro-batch {batch}'s update written {n} times"
            )
    for (window, page), clicks in sorted(expected.items()):
        got = final.get((window, page), (0, 0))[1]
        if got != clicks:
            check.problems.append(
                f"page {page}, minute {window}: final count {got}, {clicks} clicks produced"
            )
    for window, page in sorted(set(final) - set(expected)):
        check.problems.append(f"page {page}, minute {window}: counted, but no click produced")
    return check


def _outputs(data_dir: Path) -> None:
    """Where the run left what it wrote (the next run of the demo starts it afresh)."""
    where = data_dir.resolve()
    console.print(f"output kept in {where}:")
    for name, what in (
        ("page-counts.parquet", "per-minute page counts, Parquet (spark.read.parquet)"),
        ("checkpoint", "the streaming query's checkpoint (offsets, commits, state)"),
        ("cluster", "the brokers' logs, state-change.log and data; ZooKeeper's data"),
    ):
        console.print(f"  {where / name}  {what}")


def _summary(stats: RunStats, total: int, windows: int, check: TopicCheck, seconds: float) -> None:
    moved = sorted(p for p, b in stats.leaders_before.items() if b == stats.killed_broker)
    table = Table(title="Strandline demo")
    table.add_column("what")
    table.add_column("value", justify="right")
    table.add_row("events produced (acks=all, idempotent)", f"{stats.produced:,}")
    table.add_row(
        "produce throughput", f"{stats.produced / max(stats.produce_seconds, 1e-9):,.0f} events/s"
    )
    table.add_row("sum of per-minute page counts (Parquet)", f"{total:,}")
    table.add_row("one-minute event-time windows", f"{windows:,}")
    table.add_row(f"{PAGE_COUNTS} records (read_committed)", f"{check.records:,}")
    table.add_row(
        f"{PAGE_COUNTS} records of aborted transactions",
        f"{check.aborted_or_uncommitted:,}",
    )
    table.add_row(
        f"(minute, page) counts checked in {PAGE_COUNTS}",
        f"{len(stats.expected):,}, {len(check.problems)} wrong",
    )
    table.add_row(
        "failover",
        f"broker {stats.killed_broker} SIGKILLed; clicks partitions {moved} moved leader"
        if stats.killed_broker is not None
        else "none",
    )
    table.add_row("leaders before / after", f"{stats.leaders_before} / {stats.leaders_after}")
    table.add_row("wall time", f"{seconds:.0f} s")
    console.print(table)
