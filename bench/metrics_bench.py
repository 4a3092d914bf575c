"""What the broker's Prometheus metrics cost (docs/metrics.md), measured on real brokers.

    .venv/bin/python bench/metrics_bench.py [--quick]

1. produce 1 KiB acks=1 with metrics on (and scraped every second, harsher than
   Prometheus' usual 15 s) ÷ metrics off (`metrics.port=0`): one broker each, rounds
   alternating on/off so a busy machine weighs on both alike; the median of each;
2. the time to scrape `/metrics` of a broker hosting 1,000 partitions (median, p99 and
   the body size), scraped from another process over TCP as Prometheus would;
3. the web console's page load times against that same broker (`strandline console
   --data-dir`, each page fetched whole over HTTP, median of 10).

Prints a rich table and one `BENCH_JSON {...}` line. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# Run as a script (`python bench/metrics_bench.py`): make the repo root importable.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from bench.targets import STRANDLINE_BENCH_OVERRIDES  # noqa: E402
from bench.workloads import create_topic, produce_throughput  # noqa: E402
from strandline.launcher.local_cluster import LocalCluster  # noqa: E402


@contextmanager
def broker(metrics: bool) -> Iterator[LocalCluster]:
    overrides = dict(STRANDLINE_BENCH_OVERRIDES)
    if not metrics:
        overrides["metrics.port"] = "0"
    with tempfile.TemporaryDirectory(prefix="strandline-metrics-bench-") as data_dir:
        cluster = LocalCluster(Path(data_dir))
        try:
            cluster.up(1, overrides)
            yield cluster
        finally:
            cluster.stop()


def _fetch(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as answer:
        body: bytes = answer.read()
    return body


def produce_mb_s(metrics: bool, count: int, topic: str) -> float:
    with broker(metrics) as cluster:
        create_topic(cluster.bootstrap, topic)
        url = cluster.brokers[1].metrics_url
        stop = threading.Event()

        def scrape_every_second() -> None:
            while url is not None and not stop.wait(1.0):
                _fetch(url)

        scraper = threading.Thread(target=scrape_every_second, daemon=True)
        scraper.start()
        try:
            result = produce_throughput(cluster.bootstrap, topic, 1024, count, "1", 60)
        finally:
            stop.set()
            scraper.join()
        return result.mb_per_s


def scrape_times(partitions: int, scrapes: int) -> dict[str, float]:
    with broker(metrics=True) as cluster:
        create_topic(cluster.bootstrap, "wide", partitions=partitions)
        url = cluster.brokers[1].metrics_url
        assert url is not None
        body = _fetch(url)
        times = []
        for _ in range(scrapes):
            started = time.perf_counter()
            body = _fetch(url)
            times.append((time.perf_counter() - started) * 1000)
        times.sort()
        pages = console_page_times(cluster)
        return {
            **pages,
            "partitions": partitions,
            "scrape_ms_median": round(statistics.median(times), 1),
            "scrape_ms_p99": round(times[min(len(times) - 1, int(len(times) * 0.99))], 1),
            "body_kib": round(len(body) / 1024, 1),
            "log_size_series": body.count(b"\nkafka_log_log_size{"),
        }


def console_page_times(cluster: LocalCluster, loads: int = 10) -> dict[str, float]:
    console = subprocess.Popen(
        [sys.executable, "-m", "strandline", "console", "--data-dir", str(cluster.data_dir),
         "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert console.stdout is not None
        banner = console.stdout.readline()  # "Strandline console on http://host:port/ (...)"
        base = banner.split(" on ", 1)[1].split(" ", 1)[0].rstrip("/")
        out = {}
        for name, path in (
            ("cluster", "/"),
            ("topics", "/topics"),
            ("partition", "/topics/wide/0"),
        ):
            times = []
            for _ in range(loads):
                started = time.perf_counter()
                _fetch(base + path)
                times.append((time.perf_counter() - started) * 1000)
            out[f"console_{name}_page_ms_median"] = round(statistics.median(times), 1)
        return out
    finally:
        console.terminate()
        console.wait(10)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="short run")
    args = parser.parse_args(argv)
    rounds, count, scrapes = (2, 50_000, 10) if args.quick else (5, 200_000, 50)

    on: list[float] = []
    off: list[float] = []
    for i in range(rounds):
        # Alternate which goes first, so neither always meets a warmer (or busier) machine.
        order = (True, False) if i % 2 == 0 else (False, True)
        for metrics in order:
            mb_s = produce_mb_s(metrics, count, f"m{i}")
            (on if metrics else off).append(mb_s)
    scrape = scrape_times(1000, scrapes)
    results = {
        "produce_1k_acks1_mb_s_metrics_on": [round(x, 1) for x in on],
        "produce_1k_acks1_mb_s_metrics_off": [round(x, 1) for x in off],
        "ratio_on_over_off": round(statistics.median(on) / statistics.median(off), 3),
        **scrape,
    }

    table = Table(title="metrics cost (1 broker)")
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_row("produce 1 KiB acks=1, metrics on (MB/s, median)", f"{statistics.median(on):.1f}")
    table.add_row(
        "produce 1 KiB acks=1, metrics off (MB/s, median)", f"{statistics.median(off):.1f}"
    )
    table.add_row("on ÷ off (target >= 0.97)", f"{results['ratio_on_over_off']:.3f}")
    table.add_row("scrape, 1,000 partitions: median ms", f"{scrape['scrape_ms_median']}")
    table.add_row("scrape, 1,000 partitions: p99 ms", f"{scrape['scrape_ms_p99']}")
    table.add_row("scrape body KiB", f"{scrape['body_kib']}")
    for page in ("cluster", "topics", "partition"):
        table.add_row(
            f"console {page} page, 1,000 partitions: median ms",
            f"{scrape[f'console_{page}_page_ms_median']}",
        )
    Console().print(table)
    print("BENCH_JSON " + json.dumps({"rounds": rounds, "count": count, "results": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
