"""Strandline vs Tansu with confluent-kafka: throughput and end-to-end latency, one run.

    .venv/bin/python bench/run.py [--quick] [--targets strandline,tansu]

Prints a rich table and one JSON line (`BENCH_JSON {...}`); see bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from dataclasses import dataclass
from functools import partial
from pathlib import Path

# Run as a script (`python bench/run.py`): make the repo root importable for `bench.*`.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from bench.targets import TARGETS  # noqa: E402
from bench.workloads import (  # noqa: E402
    consume_throughput,
    create_topic,
    end_to_end_latency,
    produce_throughput,
)


@dataclass(frozen=True)
class Plan:
    """Bounded counts and durations; a case stops early at `max_seconds` of producing."""

    records_1k: int
    records_100b: int
    max_seconds: float
    latency_seconds: float
    latency_rate: int = 1000
    # A consume case reads for about a second; on a shared 2-core machine one reading
    # swings by +-25%, so the topic is read this many times (a new consumer each) and
    # the median reported.
    consume_repeats: int = 1


FULL = Plan(
    records_1k=300_000,
    records_100b=1_000_000,
    max_seconds=20.0,
    latency_seconds=10.0,
    consume_repeats=3,
)
QUICK = Plan(records_1k=20_000, records_100b=50_000, max_seconds=5.0, latency_seconds=2.0)

# Higher is better for every metric except the latency and CPU ones.
LOWER_IS_BETTER = ("latency", "CPU")


def _descendants(root: int) -> list[int]:
    """Pids of every process below `root` (brokers run as our children or grandchildren)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def broker_cpu_s() -> float:
    """CPU seconds (user + system) of the broker processes below this one: Strandline's
    `strandline broker` and Tansu's `tansu broker`, not ZooKeeper nor the client."""
    total = 0.0
    for pid in _descendants(os.getpid()):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if b"broker" not in argv or not any(
                b"strandline" in a or a.endswith(b"tansu") for a in argv
            ):
                continue
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _sample_into(samples: list[float]) -> None:
    samples.append(broker_cpu_s())


def run_target(bootstrap: str, plan: Plan, console: Console) -> dict[str, float]:
    figures: dict[str, float] = {}
    stamp = int(time.time() * 1000)
    for size, label, count in ((1024, "1KiB", plan.records_1k), (100, "100B", plan.records_100b)):
        consume_topic = ""
        for acks, acks_label in (("1", "acks=1"), ("all", "acks=all")):
            topic = f"bench-{label}-{acks}-{stamp}"
            create_topic(bootstrap, topic)
            cpu: list[float] = []
            result = produce_throughput(
                bootstrap,
                topic,
                size,
                count,
                acks,
                plan.max_seconds,
                on_start=partial(_sample_into, cpu),
            )
            # The broker's CPU for the timed records (the client is the bound at 100 B:
            # it takes more than a core while the broker idles; this shows the broker's
            # own cost per record).
            per_million = (broker_cpu_s() - cpu[0]) / max(result.records, 1) * 1e6
            console.log(
                f"produce {label} {acks_label}: {result.records} records, "
                f"{result.mb_per_s:.1f} MB/s, broker CPU {per_million:.2f} s per M records"
            )
            figures[f"produce {label} {acks_label} broker CPU s per M records"] = per_million
            figures[f"produce {label} {acks_label} MB/s"] = result.mb_per_s
            figures[f"produce {label} {acks_label} msgs/s"] = result.msgs_per_s
            if acks == "1":
                consume_topic, consume_count = topic, result.records + 3  # + warm-up records
        reads = sorted(
            (
                consume_throughput(bootstrap, consume_topic, consume_count, plan.max_seconds)
                for _ in range(plan.consume_repeats)
            ),
            key=lambda r: r.mb_per_s,
        )
        result = reads[len(reads) // 2]
        console.log(
            f"consume {label}: {result.records} records, {result.mb_per_s:.1f} MB/s "
            f"(median of {', '.join(f'{r.mb_per_s:.1f}' for r in reads)})"
        )
        figures[f"consume {label} MB/s"] = result.mb_per_s
        figures[f"consume {label} msgs/s"] = result.msgs_per_s
    topic = f"bench-latency-{stamp}"
    create_topic(bootstrap, topic)
    latency = end_to_end_latency(bootstrap, topic, plan.latency_rate, plan.latency_seconds)
    console.log(
        f"e2e latency: p50 {latency.p50_ms:.2f} ms, p99 {latency.p99_ms:.2f} ms "
        f"({latency.samples} samples)"
    )
    figures["e2e latency p50 ms"] = latency.p50_ms
    figures["e2e latency p99 ms"] = latency.p99_ms
    figures["e2e latency max ms"] = latency.max_ms
    figures["e2e latency samples"] = float(latency.samples)
    return figures


def ratios(results: dict[str, dict[str, float]]) -> dict[str, float]:
    """strandline / tansu per metric (for latency, < 1 means Strandline is faster)."""
    ours, peer = results.get("strandline"), results.get("tansu")
    if not ours or not peer:
        return {}
    return {k: ours[k] / peer[k] for k in ours if k in peer and peer[k] and "samples" not in k}


def render(results: dict[str, dict[str, float]], errors: dict[str, str], console: Console) -> None:
    table = Table(title="Strandline bench (confluent-kafka, 3 partitions, one broker)")
    table.add_column("metric")
    names = list(results)
    for name in names:
        table.add_column(name, justify="right")
    ratio = ratios(results)
    if ratio:
        table.add_column("strandline / tansu", justify="right")
    metrics = list(dict.fromkeys(k for figures in results.values() for k in figures))
    for metric in metrics:
        cells = [f"{results[n][metric]:,.2f}" if metric in results[n] else "-" for n in names]
        if ratio:
            cells.append(f"{ratio[metric]:.2f}x" if metric in ratio else "-")
        table.add_row(metric, *cells)
    console.print(table)
    for name, error in errors.items():
        console.print(f"[red]{name} failed:[/red] {error}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="short run (seconds, not minutes)")
    parser.add_argument(
        "--targets", default="strandline,tansu", help=f"comma-separated, from: {', '.join(TARGETS)}"
    )
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    console = Console(stderr=True)
    results: dict[str, dict[str, float]] = {}
    errors: dict[str, str] = {}
    for name in args.targets.split(","):
        console.rule(name)
        try:
            with TARGETS[name]() as bootstrap:
                console.log(f"{name} at {bootstrap}")
                results[name] = run_target(bootstrap, plan, console)
        except Exception as exc:  # a broken target must not hide the other's figures
            errors[name] = f"{type(exc).__name__}: {exc}"
            console.log(traceback.format_exc())
    load = os.getloadavg()
    render(results, errors, Console())
    # Client and broker share this machine's cores: the load says how far to trust a figure.
    Console().print(f"load average during the run: {load[0]:.2f} (1 min), {load[1]:.2f} (5 min)")
    print(
        "BENCH_JSON "
        + json.dumps(
            {
                "plan": "quick" if args.quick else "full",
                "loadavg_1m": round(load[0], 2),
                "results": results,
                "ratios": ratios(results),
                "errors": errors,
            },
            sort_keys=True,
        )
    )
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
