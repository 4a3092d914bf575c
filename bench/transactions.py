"""Figures of Kafka transactions on Strandline, measured on 3 local brokers with
confluent-kafka, topics replicated 3 ways (min.insync.replicas=2), 1 KiB records.

    .venv/bin/python bench/transactions.py [--quick] [--keep DIR]

1. transactional produce throughput / idempotent produce throughput, same cluster, same
   run, with 100 records per transaction and with 10,000 per transaction;
2. commit latency p50/p99 (100-record transactions): `commit_transaction()` after the
   transaction's records were flushed, i.e. EndTxn, the coordinator's PrepareCommit
   write, the markers to every partition leader and the CompleteCommit write;
3. read_committed consume throughput / read_uncommitted consume throughput, over the topic
   the 100-record transactions wrote (one commit marker per partition per transaction):
   one read lasts well under a second, so the full plan alternates 7 reads of each and
   reports the medians.

Prints a rich table and one `BENCH_JSON {...}` line. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# Run as a script (`python bench/transactions.py`): make the repo root importable.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Producer  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from bench.workloads import (  # noqa: E402
    PARTITIONS,
    Throughput,
    consume_throughput,
    create_topic,
    finish_report,
    local_cluster,
    percentile,
)
from strandline.launcher.local_cluster import LocalCluster  # noqa: E402

BROKERS = 3
RECORD_SIZE = 1024
# Kafka's defaults except: fewer internal-topic partitions (they are created on first use,
# inside the measured run otherwise) and no leader rebalancing between rounds.
CLUSTER_OVERRIDES: dict[str, str] = {
    "num.partitions": str(PARTITIONS),
    "auto.leader.rebalance.enable": "false",
    "transaction.state.log.num.partitions": "10",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "offsets.topic.num.partitions": "10",
    "offsets.topic.replication.factor": "3",
    "min.insync.replicas": "2",
}
# Both producers: acks=all (idempotence requires it) and librdkafka's defaults otherwise.
PRODUCER_BASE: dict[str, object] = {"acks": "all", "linger.ms": 5}


@dataclass(frozen=True)
class Plan:
    records: int  # per produce case and round
    rounds: int
    consume_rounds: int


FULL = Plan(records=100_000, rounds=2, consume_rounds=7)
QUICK = Plan(records=20_000, rounds=1, consume_rounds=1)


@dataclass(frozen=True)
class ProduceRun:
    throughput: Throughput
    commit_ms: list[float]


def _produce_one(producer: Producer, topic: str, value: bytes, partition: int) -> None:
    while True:
        try:
            producer.produce(topic, value=value, partition=partition)
            return
        except BufferError:
            producer.poll(0.005)


def _warm(producer: Producer, topic: str, value: bytes) -> None:
    for partition in range(PARTITIONS):
        _produce_one(producer, topic, value, partition)


def idempotent_produce(bootstrap: str, topic: str, count: int) -> ProduceRun:
    producer = Producer(
        {"bootstrap.servers": bootstrap, **PRODUCER_BASE, "enable.idempotence": True}
    )
    value = b"i" * RECORD_SIZE
    _warm(producer, topic, value)
    if producer.flush(30):
        raise RuntimeError("idempotent warm-up not delivered")
    failures: list[object] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            failures.append(err)

    start = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(
                    topic, value=value, partition=i % PARTITIONS, on_delivery=on_delivery
                )
                break
            except BufferError:
                producer.poll(0.005)
        if i % 1000 == 0:
            producer.poll(0)
    remaining = producer.flush(120)
    seconds = time.perf_counter() - start
    if remaining or failures:
        raise RuntimeError(f"idempotent produce failed: {failures[:1]}, {remaining} undelivered")
    return ProduceRun(Throughput(count, count * RECORD_SIZE, seconds), [])


def transactional_produce(bootstrap: str, topic: str, count: int, per_txn: int) -> ProduceRun:
    """`count` records in transactions of `per_txn`; the clock runs from the first
    begin_transaction() to the last commit, so it includes every commit."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            **PRODUCER_BASE,
            "transactional.id": f"bench-{topic}",
        }
    )
    value = b"t" * RECORD_SIZE
    producer.init_transactions(60)
    producer.begin_transaction()  # warm-up: coordinator, partitions, connections
    _warm(producer, topic, value)
    producer.commit_transaction(60)
    commit_ms: list[float] = []
    start = time.perf_counter()
    sent = 0
    while sent < count:
        producer.begin_transaction()
        for _ in range(min(per_txn, count - sent)):
            _produce_one(producer, topic, value, sent % PARTITIONS)
            sent += 1
            if sent % 1000 == 0:
                producer.poll(0)
        # commit_transaction() flushes first; flushing here separates the commit itself.
        if producer.flush(120):
            raise RuntimeError("transactional records left undelivered")
        began = time.perf_counter()
        producer.commit_transaction(60)
        commit_ms.append((time.perf_counter() - began) * 1000)
    seconds = time.perf_counter() - start
    return ProduceRun(Throughput(count, count * RECORD_SIZE, seconds), commit_ms)


def produce_figures(cluster: LocalCluster, plan: Plan, console: Console) -> dict[str, object]:
    stamp = int(time.time() * 1000)
    cases: dict[str, Callable[[str], ProduceRun]] = {
        "idempotent": lambda t: idempotent_produce(cluster.bootstrap, t, plan.records),
        "txn_100": lambda t: transactional_produce(cluster.bootstrap, t, plan.records, 100),
        "txn_10000": lambda t: transactional_produce(cluster.bootstrap, t, plan.records, 10_000),
    }
    mb_s: dict[str, list[float]] = {name: [] for name in cases}
    commits: dict[str, list[float]] = {name: [] for name in cases}
    topics: dict[str, str] = {}
    for round_no in range(plan.rounds):
        for name, run in cases.items():
            topic = f"tx-bench-{name}-{round_no}-{stamp}"
            create_topic(cluster.bootstrap, topic, PARTITIONS, 3)
            result = run(topic)
            topics[name] = topic
            mb_s[name].append(result.throughput.mb_per_s)
            commits[name].extend(result.commit_ms)
            console.log(
                f"round {round_no} {name}: {result.throughput.mb_per_s:.1f} MB/s "
                f"({result.throughput.records} records in {result.throughput.seconds:.2f} s)"
                + (
                    f", commit p50 {statistics.median(result.commit_ms):.1f} ms"
                    if result.commit_ms
                    else ""
                )
            )
    idem = statistics.mean(mb_s["idempotent"])
    txn100 = statistics.mean(mb_s["txn_100"])
    txn10k = statistics.mean(mb_s["txn_10000"])
    latencies = sorted(commits["txn_100"])
    return {
        "idempotent_mb_s": round(idem, 2),
        "txn_100_mb_s": round(txn100, 2),
        "txn_10000_mb_s": round(txn10k, 2),
        "ratio_txn_100": round(txn100 / idem, 3),
        "ratio_txn_10000": round(txn10k / idem, 3),
        "rounds_mb_s": {k: [round(v, 2) for v in vs] for k, vs in mb_s.items()},
        "commit_p50_ms": round(percentile(latencies, 50), 2),
        "commit_p99_ms": round(percentile(latencies, 99), 2),
        "commit_max_ms": round(latencies[-1], 2),
        "commits_timed": len(latencies),
        "commit_10000_p50_ms": round(statistics.median(commits["txn_10000"]), 2),
        "consume_topic": topics["txn_100"],
    }


def consume_figures(
    cluster: LocalCluster, plan: Plan, console: Console, topic: str, records: int
) -> dict[str, object]:
    # The topic holds the warm-up transaction (3 records) and `records` committed records.
    expected = records + PARTITIONS
    mb_s: dict[str, list[float]] = {"read_committed": [], "read_uncommitted": []}
    for round_no in range(plan.consume_rounds):
        for isolation in mb_s:
            result = consume_throughput(
                cluster.bootstrap,
                topic,
                expected,
                60,
                group=f"bench-{isolation}-{round_no}",
                client={"isolation.level": isolation},
            )
            mb_s[isolation].append(result.mb_per_s)
            console.log(f"round {round_no} {isolation}: {result.mb_per_s:.1f} MB/s")
    committed = statistics.median(mb_s["read_committed"])
    uncommitted = statistics.median(mb_s["read_uncommitted"])
    return {
        "read_committed_mb_s": round(committed, 2),
        "read_uncommitted_mb_s": round(uncommitted, 2),
        "ratio": round(committed / uncommitted, 3),
        "rounds_mb_s": {k: [round(v, 2) for v in vs] for k, vs in mb_s.items()},
    }


def _fmt(value: object, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}{unit}"
    return f"{value}{unit}"


def render(results: dict[str, dict[str, object]], errors: dict[str, str], console: Console) -> None:
    table = Table(
        title=f"Strandline transactions ({BROKERS} local brokers, rf=3, 1 KiB, confluent-kafka)"
    )
    table.add_column("figure")
    table.add_column("measured", justify="right")
    table.add_column("notes")
    if (p := results.get("produce")) is not None:
        table.add_row(
            "transactional / idempotent produce, 100 records per txn",
            _fmt(p["ratio_txn_100"]),
            f"{p['txn_100_mb_s']} vs {p['idempotent_mb_s']} MB/s",
        )
        table.add_row(
            "transactional / idempotent produce, 10,000 records per txn",
            _fmt(p["ratio_txn_10000"]),
            f"{p['txn_10000_mb_s']} vs {p['idempotent_mb_s']} MB/s",
        )
        table.add_row(
            "commit latency p50 / p99 (100-record txns, records already flushed)",
            f"{p['commit_p50_ms']} / {p['commit_p99_ms']} ms",
            f"max {p['commit_max_ms']} ms over {p['commits_timed']} commits; "
            f"10,000-record txns p50 {p['commit_10000_p50_ms']} ms",
        )
    if (c := results.get("consume")) is not None:
        table.add_row(
            "read_committed / read_uncommitted consume",
            _fmt(c["ratio"]),
            f"{c['read_committed_mb_s']} vs {c['read_uncommitted_mb_s']} MB/s (median), "
            "topic of 100-record transactions",
        )
    console.print(table)
    for name, error in errors.items():
        console.print(f"[red]{name} failed:[/red] {error}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer records and rounds")
    parser.add_argument("--keep", metavar="DIR", help="run in DIR and keep it (logs) afterwards")
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    console = Console(stderr=True)
    results: dict[str, dict[str, object]] = {}
    errors: dict[str, str] = {}
    began = time.monotonic()
    keep = Path(args.keep) if args.keep else None
    with local_cluster(BROKERS, CLUSTER_OVERRIDES, keep, "strandline-txn-bench-") as cluster:
        console.log(f"cluster up at {cluster.bootstrap} in {time.monotonic() - began:.1f} s")
        try:
            console.rule("produce")
            results["produce"] = produce_figures(cluster, plan, console)
        except Exception as exc:  # one broken figure must not hide the others
            errors["produce"] = f"{type(exc).__name__}: {exc}"
            console.log(traceback.format_exc())
        if "produce" in results:
            try:
                console.rule("consume")
                results["consume"] = consume_figures(
                    cluster,
                    plan,
                    console,
                    str(results["produce"]["consume_topic"]),
                    plan.records,
                )
            except Exception as exc:
                errors["consume"] = f"{type(exc).__name__}: {exc}"
                console.log(traceback.format_exc())
        if deaths := cluster.unexpected_deaths():
            errors["brokers"] = f"brokers died unexpectedly: {sorted(deaths)}"
    return finish_report(
        lambda: render(results, errors, Console()),
        {"plan": "quick" if args.quick else "full", "results": results},
        errors,
        began,
    )


if __name__ == "__main__":
    sys.exit(main())
