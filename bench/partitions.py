"""Produce and consume throughput and idle CPU versus partition count (issue 14).

    .venv/bin/python bench/partitions.py [--quick] [--partitions 3,100,1000,5000]
        [--records N] [--png bench/partitions.png] [--keep DIR]

Series, each measured at every partition count in the same run:

- strandline rf=3: 3 local brokers (LocalCluster), one topic of N partitions replicated 3 ways;
- strandline rf=1: the same 3-broker shape, topic not replicated (leaders spread over the
  3 brokers), so the rf=3 / rf=1 ratio compares equal hardware;
- tansu rf=1: one Tansu broker with in-memory storage, as `bench/targets.py` starts it.

Every (series, N) case gets a fresh cluster (or Tansu), so the idle CPU of a case is that
of its one topic and nothing left over from earlier cases. Per case:

1. create the topic and time it until every partition has a leader and a full ISR;
2. let the cluster settle, then sample each broker process's CPU time (utime + stime from
   /proc/<pid>/stat) over a window with no client connected: % of one core, max and mean
   over brokers;
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
import statistics
import sys
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# Run as a script (`python bench/partitions.py`): make the repo root importable.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from bench.targets import TARGETS  # noqa: E402
from bench.workloads import (  # noqa: E402
    consume_throughput,
    create_topic,
    finish_report,
    local_cluster,
    produce_throughput,
)
from strandline.testing.tansu import tansu_binary  # noqa: E402

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


FULL = Plan(records=200_000, settle_s=5.0, idle_s=10.0, max_s=60.0)
QUICK = Plan(records=100_000, settle_s=3.0, idle_s=5.0, max_s=30.0)


@dataclass
class Running:
    """A started target: where clients connect and which processes are its brokers."""

    bootstrap: str
    pids: list[int]


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


def _children_running(binary: Path) -> list[int]:
    """Pids of this process's children that run `binary` (Tansu does not expose its pid)."""
    me = os.getpid()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if ppid == me and Path(os.readlink(entry / "exe")) == binary.resolve():
                found.append(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


@contextlib.contextmanager
def strandline_cluster(keep: Path | None, label: str) -> Iterator[Running]:
    data_dir = keep / label if keep is not None else None
    with local_cluster(BROKERS, CLUSTER_OVERRIDES, data_dir, "strandline-parts-bench-") as cluster:
        pids = [b.pid for _, b in sorted(cluster.brokers.items()) if b.pid is not None]
        yield Running(cluster.bootstrap, pids)
        if deaths := cluster.unexpected_deaths():
            raise RuntimeError(f"brokers died unexpectedly: {sorted(deaths)}")


@contextlib.contextmanager
def tansu_target() -> Iterator[Running]:
    with TARGETS["tansu"]() as bootstrap:
        yield Running(bootstrap, _children_running(tansu_binary()))


def run_case(running: Running, n: int, rf: int, plan: Plan, console: Console) -> dict[str, object]:
    topic = f"parts-{n}-rf{rf}-{int(time.time() * 1000)}"
    began = time.perf_counter()
    create_topic(running.bootstrap, topic, n, rf)
    create_s = time.perf_counter() - began
    console.log(f"  created {topic} ({n} partitions, rf={rf}) in {create_s:.2f} s")
    time.sleep(plan.settle_s)
    idle = idle_cpu_percent(running.pids, plan.idle_s)
    console.log("  idle CPU per broker: " + ", ".join(f"{v:.1f}%" for v in idle))
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer records, shorter windows")
    parser.add_argument(
        "--partitions",
        default=",".join(str(n) for n in DEFAULT_PARTITIONS),
        help="comma-separated partition counts (default %(default)s)",
    )
    parser.add_argument("--records", type=int, help="records per case (overrides the plan)")
    parser.add_argument("--png", default=str(Path(__file__).with_name("partitions.png")))
    parser.add_argument("--keep", metavar="DIR", help="run clusters under DIR and keep them")
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    if args.records is not None:
        plan = Plan(args.records, plan.settle_s, plan.idle_s, plan.max_s)
    partitions = [int(p) for p in args.partitions.split(",") if p.strip()]
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


if __name__ == "__main__":
    sys.exit(main())
