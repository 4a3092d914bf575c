"""Produce and consume throughput and idle CPU versus partition count (docs/scaling.md).

    .venv/bin/python bench/partitions.py [--quick] [--partitions 3,100,1000,5000]
        [--records N] [--png bench/partitions.png] [--keep DIR]
    .venv/bin/python bench/partitions.py --scaling [--create-partitions 1000,5000]
        [--large-partitions 10000] [--keep DIR]

`--scaling` measures controller and start-up work instead (docs/scaling.md), rf=3 on 3 brokers:

- create: a fresh cluster per count; time from CreateTopics until Metadata shows a
  leader for every partition (and, separately, a full ISR); target <= 1 s at 1,000;
- restart: one cluster with a `--large-partitions` topic; stop a broker that is not the
  controller (SIGTERM: controlled shutdown, clean), start it again, time until it answers
  Metadata (registered, logs loaded) and until Metadata shows it back in the ISR of every
  partition it hosts (target <= 10 s); then the same after SIGKILL (unclean: recovery);
- failover: SIGTERM the controller broker; time until ZooKeeper names a new controller
  and until Metadata (from a surviving broker) shows a live leader for every partition
  (target <= 5 s); then SIGKILL the new controller (its session must expire first: the
  ZooKeeper session timeout is part of that figure, reported separately).

Series, each measured at every partition count in the same run:

- strandline rf=3: 3 local brokers (LocalCluster), one topic of N partitions replicated 3 ways;
- strandline rf=1: the same 3-broker shape, topic not replicated (leaders spread over the
  3 brokers), so the rf=3 / rf=1 ratio compares equal hardware;
- tansu rf=1: one Tansu broker with in-memory storage, as `bench/targets.py` starts it.

Every (series, N) case gets a fresh cluster (or Tansu), so the idle CPU of a case is that
of its one topic and nothing left over from earlier cases. Per case:

1. create the topic and time it until every partition has a leader and a full ISR;
2. let the cluster settle (at least the plan's settle time, then until every broker is
   under 5% of a core over a second, at most 60 s), then sample each broker process's CPU
   time (utime + stime from /proc/<pid>/stat) over a window with no client connected: % of
   one core, max and mean over brokers;
3. produce `records` 100 B records with confluent-kafka, acks=all, linger.ms=5, round-robin
   over all N partitions (`bench.workloads.produce_throughput`);
4. consume them all back from the start of every partition (`consume_throughput`).

Records are not keyed: `produce_throughput` names the partition of every record
(round-robin), which spreads the load over all N partitions exactly; a key would only choose
the partition. Prints a rich table, one `BENCH_JSON {...}` line, and draws produce msgs/s
and idle CPU against N (log x) to a PNG. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import statistics
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Run as a script (`python bench/partitions.py`): make the repo root importable.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import KafkaException  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from bench.targets import TANSU_STORAGE  # noqa: E402
from bench.workloads import (  # noqa: E402
    consume_throughput,
    create_topic,
    finish_report,
    local_cluster,
    produce_throughput,
)
from strandline.coordination.zk_client import ZkClient  # noqa: E402
from strandline.launcher.local_cluster import LocalCluster  # noqa: E402
from strandline.testing.tansu import tansu_broker  # noqa: E402

BROKERS = 3
RECORD_SIZE = 100
CLIENT: dict[str, str] = {"linger.ms": "5"}
# Kafka's defaults except: small internal topics (created on first use otherwise, inside the
# measured run) and no leader rebalancing during a case.
CLUSTER_OVERRIDES: dict[str, str] = {
    "num.partitions": "3",
    "auto.leader.rebalance.enable": "false",
    "offsets.topic.num.partitions": "10",
    "offsets.topic.replication.factor": "3",
}
DEFAULT_PARTITIONS = (3, 100, 1000, 5000)
SERIES: tuple[tuple[str, int], ...] = (("strandline", 3), ("strandline", 1), ("tansu", 1))


@dataclass(frozen=True)
class Plan:
    records: int  # per case
    settle_s: float  # after the topic exists, before the idle window
    idle_s: float  # idle CPU window
    max_s: float  # cap on one produce or consume


SETTLED_CPU_PCT = 5.0
SETTLE_MAX_S = 60.0
FULL = Plan(records=200_000, settle_s=5.0, idle_s=10.0, max_s=60.0)
QUICK = Plan(records=100_000, settle_s=3.0, idle_s=5.0, max_s=30.0)


@dataclass
class Running:
    """A started target: where clients connect and which processes are its brokers."""

    bootstrap: str
    pids: list[int]
    metrics_urls: list[str | None] = field(default_factory=list)


def series_name(target: str, rf: int) -> str:
    return f"{target} rf={rf}"


def cpu_seconds(pid: int) -> float:
    """utime + stime of one process (brokers are single processes); NaN if it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def idle_cpu_percent(pids: list[int], seconds: float) -> list[float]:
    """% of one core each process used over `seconds` of wall time."""
    before = [cpu_seconds(pid) for pid in pids]
    start = time.monotonic()
    time.sleep(seconds)
    after = [cpu_seconds(pid) for pid in pids]
    wall = time.monotonic() - start
    return [(a - b) / wall * 100 for a, b in zip(after, before, strict=True)]


@contextlib.contextmanager
def strandline_cluster(keep: Path | None, label: str) -> Iterator[Running]:
    data_dir = keep / label if keep is not None else None
    with local_cluster(BROKERS, CLUSTER_OVERRIDES, data_dir, "strandline-parts-bench-") as cluster:
        brokers = [b for _, b in sorted(cluster.brokers.items()) if b.pid is not None]
        yield Running(
            cluster.bootstrap,
            [b.pid for b in brokers if b.pid is not None],
            [b.metrics_url for b in brokers],
        )
        if deaths := cluster.unexpected_deaths():
            raise RuntimeError(f"brokers died unexpectedly: {sorted(deaths)}")


@contextlib.contextmanager
def tansu_target() -> Iterator[Running]:
    with tansu_broker(storage=TANSU_STORAGE) as broker:
        yield Running(broker.bootstrap, [broker.pid])


def settle(pids: list[int], min_s: float) -> float:
    """Wait out the work a new topic leaves behind (followers' first epoch round trips and
    full fetches, leader-epoch checkpoints): at least `min_s`, then until every broker
    spends under SETTLED_CPU_PCT of a core over a second, at most SETTLE_MAX_S. Returns
    how long it took: the idle window that follows measures the steady state."""
    began = time.monotonic()
    time.sleep(min_s)
    while time.monotonic() - began < SETTLE_MAX_S:
        if max(idle_cpu_percent(pids, 1.0), default=0.0) < SETTLED_CPU_PCT:
            break
    return time.monotonic() - began


def run_case(running: Running, n: int, rf: int, plan: Plan, console: Console) -> dict[str, object]:
    topic = f"parts-{n}-rf{rf}-{int(time.time() * 1000)}"
    began = time.perf_counter()
    create_topic(running.bootstrap, topic, n, rf)
    create_s = time.perf_counter() - began
    console.log(f"  created {topic} ({n} partitions, rf={rf}) in {create_s:.2f} s")
    settled_s = settle(running.pids, plan.settle_s)
    idle = idle_cpu_percent(running.pids, plan.idle_s)
    console.log(
        f"  idle CPU per broker (after settling {settled_s:.1f} s): "
        + ", ".join(f"{v:.1f}%" for v in idle)
    )
    produced = produce_throughput(
        running.bootstrap,
        topic,
        RECORD_SIZE,
        plan.records,
        "all",
        plan.max_s,
        client=CLIENT,
        partitions=n,
    )
    console.log(
        f"  produce: {produced.msgs_per_s:,.0f} msgs/s "
        f"({produced.records} records in {produced.seconds:.2f} s)"
    )
    # The topic holds the warm-up (one record per partition) and the timed records.
    consumed = consume_throughput(
        running.bootstrap,
        topic,
        n + produced.records,
        plan.max_s,
        group=f"bench-{topic}",
        partitions=n,
    )
    console.log(f"  consume: {consumed.msgs_per_s:,.0f} msgs/s")
    return {
        "partitions": n,
        "rf": rf,
        "create_s": round(create_s, 3),
        "idle_cpu_pct": [round(v, 2) for v in idle],
        "idle_cpu_max_pct": round(max(idle), 2),
        "idle_cpu_mean_pct": round(statistics.mean(idle), 2),
        "produce_msgs_s": round(produced.msgs_per_s),
        "produce_records": produced.records,
        "consume_msgs_s": round(consumed.msgs_per_s),
        "consume_records": consumed.records,
    }


# --- small batches (`--steady`) ----------------------------------------------------------

STEADY_PARTITIONS = (100, 1000, 5000)
STEADY_SERIES: tuple[tuple[str, int], ...] = (("strandline", 3), ("strandline", 1), ("tansu", 1))
MODES = ("new topic", "steady")
STEADY_PNG = "partitions_steady.png"


@dataclass(frozen=True)
class BrokerCounters:
    """One broker's counters at one moment: CPU seconds, Produce requests answered, and
    its replica fetchers' rounds (count, total ms)."""

    cpu_s: float
    produce_requests: float
    rounds: float
    round_ms: float


def broker_counters(pid: int, metrics_url: str | None) -> BrokerCounters:
    produce = rounds = round_ms = 0.0
    if metrics_url is not None:
        from urllib.request import urlopen

        from prometheus_client.parser import text_string_to_metric_families

        with urlopen(metrics_url, timeout=10) as answer:  # noqa: S310 - our own broker
            text = answer.read().decode()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if (
                    sample.name == "kafka_network_requestmetrics_requests_total"
                    and sample.labels.get("request") == "Produce"
                ):
                    produce += sample.value
                elif sample.name == "kafka_server_replicafetchermanager_roundtimems_count":
                    rounds += sample.value
                elif sample.name == "kafka_server_replicafetchermanager_roundtimems_sum":
                    round_ms += sample.value
    return BrokerCounters(cpu_seconds(pid), produce, rounds, round_ms)


def produce_costs(
    before: list[BrokerCounters], after: list[BrokerCounters], records: int
) -> dict[str, object]:
    """Per broker: CPU us per record and per produce request over the timed window; the
    replication round's mean over every follower fetch in it."""
    cpu = [a.cpu_s - b.cpu_s for a, b in zip(after, before, strict=True)]
    requests = [a.produce_requests - b.produce_requests for a, b in zip(after, before, strict=True)]
    rounds = sum(a.rounds - b.rounds for a, b in zip(after, before, strict=True))
    round_ms = sum(a.round_ms - b.round_ms for a, b in zip(after, before, strict=True))
    return {
        "cpu_s": [round(c, 3) for c in cpu],
        "cpu_us_per_record": [round(c / max(records, 1) * 1e6, 2) for c in cpu],
        "cpu_us_per_record_total": round(sum(cpu) / max(records, 1) * 1e6, 2),
        "produce_requests": [int(r) for r in requests],
        "cpu_us_per_produce_request": [
            round(c / r * 1e6, 1) if r else None for c, r in zip(cpu, requests, strict=True)
        ],
        "replication_round_ms": round(round_ms / rounds, 3) if rounds else None,
    }


def steady_case(
    running: Running,
    urls: list[str | None],
    n: int,
    rf: int,
    mode: str,
    plan: Plan,
    console: Console,
) -> dict[str, object]:
    """Keyed 100 B records, acks=all, into a topic of `n` partitions: just created (`new
    topic`: each partition's first append is timed), or after one record per partition
    and a settle (`steady`)."""
    topic = f"{'new' if mode == 'new topic' else 'steady'}-{n}-rf{rf}-{int(time.time() * 1000)}"
    create_topic(running.bootstrap, topic, n, rf)
    steady = mode == "steady"
    samples: list[list[BrokerCounters]] = []

    def sample() -> None:
        samples.append(
            [
                broker_counters(pid, url)
                for pid, url in zip(running.pids, urls or [None] * len(running.pids), strict=True)
            ]
        )

    if steady:
        produce_throughput(
            running.bootstrap, topic, RECORD_SIZE, 0, "all", plan.max_s, client=CLIENT, partitions=n
        )
        settle(running.pids, 1.0)
    produced = produce_throughput(
        running.bootstrap,
        topic,
        RECORD_SIZE,
        plan.records,
        "all",
        plan.max_s,
        client=CLIENT,
        partitions=n,
        keyed=True,
        warm_every_partition=steady,
        on_start=sample,
    )
    sample()
    costs = produce_costs(samples[0], samples[1], produced.records)
    console.log(
        f"  {mode}: {produced.msgs_per_s:,.0f} msgs/s; broker CPU us/record "
        f"{costs['cpu_us_per_record']} (total {costs['cpu_us_per_record_total']}), "
        f"us/produce request {costs['cpu_us_per_produce_request']}, "
        f"replication round {costs['replication_round_ms']} ms"
    )
    return {"produce_msgs_s": round(produced.msgs_per_s), "records": produced.records, **costs}


def steady_main(args: argparse.Namespace, plan: Plan, partitions: list[int]) -> int:
    keep = Path(args.keep).resolve() if args.keep else None
    console = Console(stderr=True)
    results: dict[str, dict[str, dict[int, dict[str, object]]]] = {}
    errors: dict[str, str] = {}
    began = time.monotonic()
    for target, rf in STEADY_SERIES:
        name = series_name(target, rf)
        results[name] = {mode: {} for mode in MODES}
        for n in partitions:
            console.rule(f"{name}, {n} partitions")
            try:
                started: contextlib.AbstractContextManager[Running] = (
                    strandline_cluster(keep, f"steady-rf{rf}-p{n}")
                    if target == "strandline"
                    else tansu_target()
                )
                with started as running:
                    for mode in MODES:
                        results[name][mode][n] = steady_case(
                            running, running.metrics_urls, n, rf, mode, plan, console
                        )
            except Exception as exc:  # one broken case must not hide the others
                errors[f"{name} p={n}"] = f"{type(exc).__name__}: {exc}"
                console.log(traceback.format_exc())
    png = Path(args.png)
    try:
        draw_steady(results, png)
        console.log(f"wrote {png}")
    except Exception as exc:
        errors["png"] = f"{type(exc).__name__}: {exc}"
    summary: dict[str, object] = {
        "mode": "steady",
        "plan": "quick" if args.quick else "full",
        "records": plan.records,
        "partitions": partitions,
        "results": {
            name: {mode: {str(n): c for n, c in cases.items()} for mode, cases in by_mode.items()}
            for name, by_mode in results.items()
        },
        "ratios": steady_ratios(results, partitions),
        "png": str(png),
    }
    return finish_report(
        lambda: render_steady(results, partitions, errors, Console(width=200)),
        summary,
        errors,
        began,
    )


def _msgs(
    results: dict[str, dict[str, dict[int, dict[str, object]]]], name: str, mode: str, n: int
) -> float | None:
    case = results.get(name, {}).get(mode, {}).get(n)
    return None if case is None else float(str(case["produce_msgs_s"]))


def steady_ratios(
    results: dict[str, dict[str, dict[int, dict[str, object]]]], partitions: list[int]
) -> dict[str, float | None]:
    """The issue's targets, from this run: each count against 100 partitions rf=3 (same
    mode), CPU per record against 100's, and rf=1 against Tansu."""
    ratios: dict[str, float | None] = {}
    base_n = min(partitions)
    for mode in MODES:
        base = _msgs(results, "strandline rf=3", mode, base_n)
        for n in partitions:
            if n == base_n:
                continue
            got = _msgs(results, "strandline rf=3", mode, n)
            ratios[f"rf3 {mode} {n}/{base_n}"] = (
                round(got / base, 3) if got is not None and base else None
            )
    steady = results.get("strandline rf=3", {}).get("steady", {})
    if base_n in steady:
        base_cpu = float(str(steady[base_n]["cpu_us_per_record_total"]))
        for n in partitions:
            if n != base_n and n in steady:
                ratios[f"rf3 steady cpu/record {n}/{base_n}"] = round(
                    float(str(steady[n]["cpu_us_per_record_total"])) / base_cpu, 3
                )
    for mode in MODES:
        for n in partitions:
            ours = _msgs(results, "strandline rf=1", mode, n)
            tansu = _msgs(results, "tansu rf=1", mode, n)
            if ours is not None and tansu:
                ratios[f"rf1/tansu {mode} {n}"] = round(ours / tansu, 3)
    return ratios


def render_steady(
    results: dict[str, dict[str, dict[int, dict[str, object]]]],
    partitions: list[int],
    errors: dict[str, str],
    console: Console,
) -> None:
    table = Table(
        title="Small batches: keyed 100 B records, acks=all, linger.ms=5, confluent-kafka "
        f"({BROKERS} local brokers; tansu: 1 broker, memory)"
    )
    for column in (
        "series",
        "mode",
        "partitions",
        "produce msgs/s",
        "CPU us/record per broker",
        "CPU us/record, all",
        "CPU us/produce request per broker",
        "replication round ms",
    ):
        table.add_column(column, justify="left" if column in ("series", "mode") else "right")
    for name, by_mode in results.items():
        for mode, cases in by_mode.items():
            for n in partitions:
                case = cases.get(n)
                if case is None:
                    table.add_row(name, mode, f"{n:,}", *["failed"] * 5)
                    continue
                table.add_row(
                    name,
                    mode,
                    f"{n:,}",
                    f"{case['produce_msgs_s']:,}",
                    " / ".join(str(v) for v in case["cpu_us_per_record"]),  # type: ignore[attr-defined]
                    f"{case['cpu_us_per_record_total']}",
                    " / ".join(str(v) for v in case["cpu_us_per_produce_request"]),  # type: ignore[attr-defined]
                    f"{case['replication_round_ms']}",
                )
    console.print(table)
    for key, value in steady_ratios(results, partitions).items():
        console.print(f"{key}: {value}")
    for name, error in errors.items():
        console.print(f"[red]{name} failed:[/red] {error}")


def draw_steady(results: dict[str, dict[str, dict[int, dict[str, object]]]], png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_produce, ax_cpu) = plt.subplots(1, 2, figsize=(11, 4.5))
    for name, by_mode in results.items():
        for mode, cases in by_mode.items():
            ns = sorted(cases)
            if not ns:
                continue
            label = f"{name}, {mode}"
            style = "-" if mode == "steady" else "--"
            ax_produce.plot(
                ns,
                [float(str(cases[n]["produce_msgs_s"])) for n in ns],
                style,
                marker="o",
                label=label,
            )
            if name.startswith("strandline"):
                ax_cpu.plot(
                    ns,
                    [float(str(cases[n]["cpu_us_per_record_total"])) for n in ns],
                    style,
                    marker="o",
                    label=label,
                )
    ax_produce.set_ylabel("produce msgs/s (keyed 100 B, acks=all, linger.ms=5)")
    ax_produce.set_title("Produce throughput: new topic and steady state")
    ax_cpu.set_ylabel("brokers' CPU us per record (all brokers)")
    ax_cpu.set_title("Broker CPU per record")
    for ax in (ax_produce, ax_cpu):
        ax.set_xscale("log")
        ax.set_xlabel("partitions")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=110)
    plt.close(fig)


# --- controller and start-up scaling (`--scaling`) ---------------------------------------

DEFAULT_CREATE_PARTITIONS = (1000, 5000)
DEFAULT_LARGE_PARTITIONS = 10_000
SCALING_POLL_S = 0.05
SCALING_TIMEOUT_S = 180.0


def _admin(bootstrap: str) -> AdminClient:
    # log_level 2: no connection-refused chatter while brokers stop on purpose.
    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})


def _topic_partitions(admin: AdminClient, topic: str) -> dict[int, Any] | None:
    """partition -> librdkafka PartitionMetadata, or None if Metadata has no usable view."""
    found = _metadata(admin, topic)
    return None if found is None else found[1]


def _metadata(admin: AdminClient, topic: str) -> tuple[int, dict[int, Any]] | None:
    """(controller id, partition -> PartitionMetadata) as one broker's Metadata says."""
    try:
        cluster = admin.list_topics(topic, timeout=10)
    except KafkaException:  # a broker starting or stopping: ask again
        return None
    meta = cluster.topics.get(topic)
    if meta is None or meta.error is not None:
        return None
    return int(cluster.controller_id), dict(meta.partitions)


def _poll_s(partitions: int) -> float:
    """How long to wait between Metadata polls: a broker spends ~20 us per partition
    answering one, so polling a 10,000-partition topic every 50 ms would load the very
    brokers being timed (measured: a third of one broker's CPU). The figures are as
    precise as this interval."""
    return max(SCALING_POLL_S, partitions / 20_000)


def _wait(what: str, check: Callable[[], bool], began: float, poll_s: float) -> float:
    """Poll `check` until true; seconds since `began` (perf_counter)."""
    deadline = time.perf_counter() + SCALING_TIMEOUT_S
    while not check():
        if time.perf_counter() > deadline:
            raise TimeoutError(f"{what}: not reached within {SCALING_TIMEOUT_S:.0f} s")
        time.sleep(poll_s)
    return time.perf_counter() - began


def create_and_time(bootstrap: str, topic: str, n: int, rf: int) -> tuple[float, float, float]:
    """CreateTopics -> (answered s, every leader known s, every ISR full s)."""
    admin = _admin(bootstrap)
    admin.list_topics(timeout=10)  # connections up before the clock starts
    began = time.perf_counter()
    for future in admin.create_topics(
        [NewTopic(topic, num_partitions=n, replication_factor=rf)], operation_timeout=60
    ).values():
        future.result(timeout=120)
    answered = time.perf_counter() - began

    def leaders() -> bool:
        parts = _topic_partitions(admin, topic)
        return parts is not None and len(parts) == n and all(p.leader >= 0 for p in parts.values())

    def isrs() -> bool:
        parts = _topic_partitions(admin, topic)
        return (
            parts is not None
            and len(parts) == n
            and all(p.leader >= 0 and len(p.isrs) == rf for p in parts.values())
        )

    led = _wait(f"leaders of {topic}", leaders, began, _poll_s(n))
    full = _wait(f"full ISRs of {topic}", isrs, began, _poll_s(n))
    return answered, led, full


def _controller(cluster: LocalCluster) -> int | None:
    assert cluster.zk_connect is not None
    with ZkClient(cluster.zk_connect) as zk:
        return zk.get_controller()


def _live_bootstrap(cluster: LocalCluster, exclude: set[int]) -> str:
    return ",".join(
        f"{b.host}:{b.port}"
        for bid, b in sorted(cluster.brokers.items())
        if bid not in exclude and cluster.is_running(bid)
    )


def time_restart(
    cluster: LocalCluster, topic: str, n: int, broker_id: int, sig: str, console: Console
) -> dict[str, object]:
    """Stop `broker_id` with `sig`, wait until every partition has a leader elsewhere,
    start it again: seconds to Metadata (registered, logs loaded) and to back in every ISR."""
    stop_began = time.perf_counter()
    cluster.kill(broker_id, sig)
    admin = _admin(_live_bootstrap(cluster, {broker_id}))

    def led_elsewhere() -> bool:
        parts = _topic_partitions(admin, topic)
        return (
            parts is not None
            and len(parts) == n
            and all(p.leader >= 0 and p.leader != broker_id for p in parts.values())
        )

    moved = _wait("leaders away from the stopped broker", led_elsewhere, stop_began, _poll_s(n))
    console.log(f"  SIG{sig} broker {broker_id}: every partition led elsewhere after {moved:.2f} s")
    began = time.perf_counter()
    cluster.start(broker_id)  # returns once it answers Metadata listing itself
    ready = time.perf_counter() - began
    admin = _admin(cluster.bootstrap)

    def in_every_isr() -> bool:
        parts = _topic_partitions(admin, topic)
        return (
            parts is not None
            and len(parts) == n
            and all(broker_id in p.isrs for p in parts.values() if broker_id in p.replicas)
        )

    back = _wait("restarted broker back in every ISR", in_every_isr, began, _poll_s(n))
    console.log(f"  broker {broker_id} ready after {ready:.2f} s, in every ISR after {back:.2f} s")
    return {
        "broker": broker_id,
        "signal": sig,
        "leaders_moved_s": round(moved, 3),
        "ready_s": round(ready, 3),
        "in_isr_s": round(back, 3),
    }


def time_failover(
    cluster: LocalCluster, topic: str, n: int, sig: str, console: Console
) -> dict[str, object]:
    """Stop the controller broker with `sig`: seconds until its /controller znode is
    gone, until another broker holds it, and until it has taken over: Metadata from a
    surviving broker names it and shows a live leader for every partition. The broker
    is started again afterwards (not timed)."""
    old = _controller(cluster)
    assert old is not None, "no controller"
    live = {b for b in cluster.brokers if b != old and cluster.is_running(b)}
    assert cluster.zk_connect is not None
    zk = ZkClient(cluster.zk_connect).connect()
    try:
        began = time.perf_counter()
        if sig == "TERM":
            # cluster.kill(TERM) returns only once the process is gone; the new
            # controller may be elected before that: signal, then poll.
            os.killpg(cluster.brokers[old].pid or 0, signal.SIGTERM)
        else:
            cluster.kill(old, sig)
        gone = _wait(
            "/controller released", lambda: zk.get_controller() != old, began, SCALING_POLL_S
        )
        elected = _wait(
            "a new controller",
            lambda: zk.get_controller() not in (None, old),
            began,
            SCALING_POLL_S,
        )
        new = zk.get_controller()
        admin = _admin(_live_bootstrap(cluster, {old}))

        def taken_over() -> bool:
            found = _metadata(admin, topic)
            if found is None:
                return False
            controller_id, parts = found
            return (
                controller_id == new
                and len(parts) == n
                and all(p.leader in live for p in parts.values())
            )

        led = _wait(
            "the new controller's Metadata, every leader live", taken_over, began, _poll_s(n)
        )
    finally:
        zk.close()
    if sig == "TERM":
        cluster.kill(old, "TERM")  # reaps it (and escalates if it hangs)
    console.log(
        f"  SIG{sig} controller {old}: /controller free after {gone:.2f} s, broker {new} "
        f"elected after {elected:.2f} s, in charge with every leader live after {led:.2f} s"
    )
    cluster.start(old)
    return {
        "old_controller": old,
        "new_controller": new,
        "signal": sig,
        "controller_released_s": round(gone, 3),
        "controller_elected_s": round(elected, 3),
        "all_leaders_live_s": round(led, 3),
        "after_release_s": round(led - gone, 3),
    }


def run_scaling(
    create_counts: list[int], large: int, keep: Path | None, console: Console
) -> tuple[dict[str, object], dict[str, str]]:
    results: dict[str, object] = {"create": {}, "restart": [], "failover": []}
    errors: dict[str, str] = {}
    creates: dict[str, object] = {}
    for n in create_counts:
        console.rule(f"create: {n} partitions, rf=3")
        try:
            data_dir = keep / f"create-p{n}" if keep is not None else None
            with local_cluster(BROKERS, CLUSTER_OVERRIDES, data_dir, "strandline-scale-") as c:
                answered, led, full = create_and_time(c.bootstrap, f"scale-{n}", n, 3)
                if deaths := c.unexpected_deaths():
                    raise RuntimeError(f"brokers died unexpectedly: {sorted(deaths)}")
            console.log(
                f"  answered {answered:.2f} s, every leader {led:.2f} s, full ISRs {full:.2f} s"
            )
            creates[str(n)] = {
                "answered_s": round(answered, 3),
                "leaders_s": round(led, 3),
                "full_isr_s": round(full, 3),
            }
        except Exception as exc:  # one broken case must not hide the others
            errors[f"create p={n}"] = f"{type(exc).__name__}: {exc}"
            console.log(traceback.format_exc())
    results["create"] = creates
    if large > 0:
        console.rule(f"restart and failover: {large} partitions, rf=3")
        try:
            data_dir = keep / f"large-p{large}" if keep is not None else None
            with local_cluster(BROKERS, CLUSTER_OVERRIDES, data_dir, "strandline-scale-") as c:
                # A clean stop of a broker with 10,000 partitions (controlled shutdown,
                # then a flush of every log) outlasts the default 10 s before SIGKILL.
                c.stop_grace_s = 90.0
                topic = f"scale-{large}"
                answered, led, full = create_and_time(c.bootstrap, topic, large, 3)
                console.log(f"  created: every leader {led:.2f} s, full ISRs {full:.2f} s")
                results["large_create"] = {
                    "partitions": large,
                    "answered_s": round(answered, 3),
                    "leaders_s": round(led, 3),
                    "full_isr_s": round(full, 3),
                }
                restarts: list[dict[str, object]] = []
                failovers: list[dict[str, object]] = []
                for sig in ("TERM", "KILL"):
                    controller = _controller(c)
                    victim = max(b for b in c.brokers if b != controller)
                    try:
                        restarts.append(time_restart(c, topic, large, victim, sig, console))
                    except Exception as exc:  # noqa: BLE001
                        errors[f"restart SIG{sig}"] = f"{type(exc).__name__}: {exc}"
                        console.log(traceback.format_exc())
                for sig in ("TERM", "KILL"):
                    try:
                        failovers.append(time_failover(c, topic, large, sig, console))
                    except Exception as exc:  # noqa: BLE001
                        errors[f"failover SIG{sig}"] = f"{type(exc).__name__}: {exc}"
                        console.log(traceback.format_exc())
                results["restart"] = restarts
                results["failover"] = failovers
                if deaths := c.unexpected_deaths():
                    raise RuntimeError(f"brokers died unexpectedly: {sorted(deaths)}")
        except Exception as exc:
            errors[f"large p={large}"] = f"{type(exc).__name__}: {exc}"
            console.log(traceback.format_exc())
    return results, errors


def render_scaling(results: dict[str, object], errors: dict[str, str], console: Console) -> None:
    table = Table(
        title=f"Controller and start-up scaling: rf=3, {BROKERS} local brokers "
        "(targets: create 1,000 <= 1 s; failover 10,000 <= 5 s; restart 10,000 <= 10 s)"
    )
    for column in ("case", "partitions", "figure", "seconds"):
        table.add_column(column, justify="left" if column in ("case", "figure") else "right")
    creates = results.get("create", {})
    assert isinstance(creates, dict)
    for n, case in creates.items():
        for key, label in (
            ("answered_s", "CreateTopics answered"),
            ("leaders_s", "every leader in Metadata"),
            ("full_isr_s", "every ISR full"),
        ):
            table.add_row("create", f"{int(n):,}", label, f"{case[key]:.2f}")
    large = results.get("large_create")
    if isinstance(large, dict):
        n_large = f"{large['partitions']:,}"
        table.add_row("create", n_large, "every leader in Metadata", f"{large['leaders_s']:.2f}")
    else:
        n_large = "-"
    for case in results.get("restart", []):  # type: ignore[attr-defined]
        name = f"restart (SIG{case['signal']})"
        table.add_row(name, n_large, "leaders moved away", f"{case['leaders_moved_s']:.2f}")
        table.add_row(name, n_large, "start -> answers Metadata", f"{case['ready_s']:.2f}")
        table.add_row(name, n_large, "start -> in every ISR", f"{case['in_isr_s']:.2f}")
    for case in results.get("failover", []):  # type: ignore[attr-defined]
        name = f"failover (SIG{case['signal']})"
        table.add_row(name, n_large, "/controller released", f"{case['controller_released_s']:.2f}")
        table.add_row(
            name, n_large, "new controller elected", f"{case['controller_elected_s']:.2f}"
        )
        table.add_row(
            name, n_large, "in charge, every leader live", f"{case['all_leaders_live_s']:.2f}"
        )
        table.add_row(name, n_large, "  of which after release", f"{case['after_release_s']:.2f}")
    console.print(table)
    for name, error in errors.items():
        console.print(f"[red]{name} failed:[/red] {error}")


def draw(results: dict[str, dict[int, dict[str, object]]], png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_produce, ax_idle) = plt.subplots(1, 2, figsize=(11, 4.5))
    for name, cases in results.items():
        ns = sorted(cases)
        if not ns:
            continue
        produce = [float(str(cases[n]["produce_msgs_s"])) for n in ns]
        idle = [float(str(cases[n]["idle_cpu_max_pct"])) for n in ns]
        ax_produce.plot(ns, produce, marker="o", label=name)
        ax_idle.plot(ns, idle, marker="o", label=name)
    ax_produce.set_xscale("log")
    ax_produce.set_xlabel("partitions")
    ax_produce.set_ylabel("produce msgs/s (100 B, acks=all, linger.ms=5)")
    ax_produce.set_title("Produce throughput")
    ax_idle.set_xscale("log")
    ax_idle.set_xlabel("partitions")
    ax_idle.set_ylabel("idle CPU, busiest broker (% of one core)")
    ax_idle.set_title("Idle CPU")
    for ax in (ax_produce, ax_idle):
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=110)
    plt.close(fig)


def render(
    results: dict[str, dict[int, dict[str, object]]],
    partitions: list[int],
    errors: dict[str, str],
    console: Console,
) -> None:
    table = Table(
        title="Partitions: 100 B records, acks=all, linger.ms=5, confluent-kafka "
        f"(strandline: {BROKERS} local brokers for rf=1 and rf=3; tansu: 1 broker, memory)"
    )
    for column in (
        "series",
        "partitions",
        "create s",
        "produce msgs/s",
        "consume msgs/s",
        "idle CPU max %",
        "idle CPU mean %",
    ):
        table.add_column(column, justify="left" if column == "series" else "right")
    for name, cases in results.items():
        for n in partitions:
            case = cases.get(n)
            if case is None:
                table.add_row(name, f"{n:,}", *["failed"] * 5)
                continue
            table.add_row(
                name,
                f"{n:,}",
                f"{case['create_s']}",
                f"{case['produce_msgs_s']:,}",
                f"{case['consume_msgs_s']:,}",
                f"{case['idle_cpu_max_pct']}",
                f"{case['idle_cpu_mean_pct']}",
            )
    console.print(table)
    for name, error in errors.items():
        console.print(f"[red]{name} failed:[/red] {error}")


DEFAULT_CSV = ",".join(str(n) for n in DEFAULT_PARTITIONS)
STEADY_DEFAULT = ",".join(str(n) for n in STEADY_PARTITIONS)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer records, shorter windows")
    parser.add_argument(
        "--partitions",
        help=f"comma-separated partition counts (default {DEFAULT_CSV}; --steady {STEADY_DEFAULT})",
    )
    parser.add_argument(
        "--steady",
        action="store_true",
        help="keyed small batches: a new topic and the steady state, CPU per record and "
        "per produce request, replication round time",
    )
    parser.add_argument("--records", type=int, help="records per case (overrides the plan)")
    parser.add_argument(
        "--png",
        help="where to draw (default bench/partitions.png; --steady bench/partitions_steady.png)",
    )
    parser.add_argument("--keep", metavar="DIR", help="run clusters under DIR and keep them")
    parser.add_argument(
        "--scaling", action="store_true", help="controller and start-up timings instead"
    )
    parser.add_argument(
        "--create-partitions",
        default=",".join(str(n) for n in DEFAULT_CREATE_PARTITIONS),
        help="--scaling: partition counts to time topic creation at (default %(default)s)",
    )
    parser.add_argument(
        "--large-partitions",
        type=int,
        default=DEFAULT_LARGE_PARTITIONS,
        help="--scaling: partitions for the restart and failover cases, 0 skips them "
        "(default %(default)s)",
    )
    args = parser.parse_args(argv)
    if args.scaling:
        return scaling_main(args)
    plan = QUICK if args.quick else FULL
    if args.records is not None:
        plan = Plan(args.records, plan.settle_s, plan.idle_s, plan.max_s)
    if args.png is None:
        args.png = str(Path(__file__).with_name(STEADY_PNG if args.steady else "partitions.png"))
    if args.steady:
        partitions = [int(p) for p in (args.partitions or STEADY_DEFAULT).split(",") if p.strip()]
        return steady_main(args, plan, partitions)
    partitions = [int(p) for p in (args.partitions or DEFAULT_CSV).split(",") if p.strip()]
    keep = Path(args.keep).resolve() if args.keep else None
    console = Console(stderr=True)
    results: dict[str, dict[int, dict[str, object]]] = {}
    errors: dict[str, str] = {}
    began = time.monotonic()
    for target, rf in SERIES:
        name = series_name(target, rf)
        results[name] = {}
        for n in partitions:
            console.rule(f"{name}, {n} partitions")
            case_began = time.monotonic()
            try:
                started: contextlib.AbstractContextManager[Running] = (
                    strandline_cluster(keep, f"rf{rf}-p{n}")
                    if target == "strandline"
                    else tansu_target()
                )
                with started as running:
                    results[name][n] = run_case(running, n, rf, plan, console)
            except Exception as exc:  # one broken case must not hide the others
                errors[f"{name} p={n}"] = f"{type(exc).__name__}: {exc}"
                console.log(traceback.format_exc())
            console.log(f"  case took {time.monotonic() - case_began:.1f} s")
    png = Path(args.png)
    try:
        draw(results, png)
        console.log(f"wrote {png}")
    except Exception as exc:
        errors["png"] = f"{type(exc).__name__}: {exc}"
    summary: dict[str, object] = {
        "plan": "quick" if args.quick else "full",
        "records": plan.records,
        "idle_window_s": plan.idle_s,
        "partitions": partitions,
        "strandline_brokers": BROKERS,
        "results": {name: {str(n): c for n, c in cases.items()} for name, cases in results.items()},
        "png": str(png),
    }
    return finish_report(
        lambda: render(results, partitions, errors, Console(width=160)), summary, errors, began
    )


def scaling_main(args: argparse.Namespace) -> int:
    keep = Path(args.keep).resolve() if args.keep else None
    create_counts = [int(p) for p in args.create_partitions.split(",") if p.strip()]
    console = Console(stderr=True)
    began = time.monotonic()
    results, errors = run_scaling(create_counts, args.large_partitions, keep, console)
    summary: dict[str, object] = {
        "mode": "scaling",
        "strandline_brokers": BROKERS,
        "rf": 3,
        **results,
    }
    return finish_report(
        lambda: render_scaling(results, errors, Console(width=160)), summary, errors, began
    )


if __name__ == "__main__":
    sys.exit(main())
