"""`strandline perf produce|consume` against real brokers, run as users run it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from strandline.launcher.local_cluster import LocalCluster
from tests.cluster.support import consume_all, create_topic
from tests.conftest import ClusterFactory


def perf(cluster: LocalCluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "strandline",
            "perf",
            *args,
            "--bootstrap-server",
            cluster.bootstrap,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode != 0, done.stdout
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_perf_produce_then_consume(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(brokers=3, auto_create_topics_enable="false")
    create_topic(cluster, "perf", partitions=3, rf=3)

    done = perf(
        cluster, "produce", "--topic", "perf", "--num-records", "3000", "--record-size", "200",
        "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    produced = json.loads(done.stdout)
    assert produced["records"] == 3000
    assert 0 < produced["p50_ms"] <= produced["p99_ms"] <= produced["max_latency_ms"]
    assert produced["mb_per_s"] > 0
    # The records are really there: every one acknowledged, readable, of the asked size.
    read = consume_all(cluster, "perf", partitions=3)
    assert len(read) == 3000
    assert all(len(value) == 200 for value in read.values())

    # Kafka's summary line by default; a rate cap holds the run to about its length.
    done = perf(
        cluster, "produce", "--topic", "perf", "--num-records", "200", "--record-size", "10",
        "--throughput", "100", "--acks", "1",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("200 records sent, ")
    rate = float(done.stdout.split(" records/sec")[0].split(", ")[-1])
    assert 50 < rate <= 110, done.stdout

    # Latency is each record's own, from its delivery report: at a steady 300 records/s
    # the median is a round trip to the brokers, not the time until the tool next polled
    # (polling every 1,000 records made it half a second, in every run). A loaded machine
    # can stall one run's round trips as long, so the best of three runs is judged.
    runs = []
    for _ in range(3):
        done = perf(
            cluster, "produce", "--topic", "perf", "--num-records", "300", "--record-size", "10",
            "--throughput", "300", "--json",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        runs.append(json.loads(done.stdout))
        if runs[-1]["p50_ms"] < 250:
            break
    assert min(run["p50_ms"] for run in runs) < 250, runs
    total = 3000 + 200 + 300 * len(runs)

    done = perf(cluster, "consume", "--topic", "perf", "--messages", str(total), "--json")
    assert done.returncode == 0, done.stderr
    consumed = json.loads(done.stdout)
    assert consumed["records"] == total
    assert consumed["mb"] > 3000 * 200 / 2**20
    assert consumed["rebalance_time_ms"] > 0
    # kafka-consumer-perf-test.sh's header and comma-separated line by default.
    done = perf(cluster, "consume", "--topic", "perf", "--messages", str(total))
    assert done.returncode == 0, done.stderr
    header, line = done.stdout.splitlines()
    assert header == (
        "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
        "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
    )
    start, end, mb, _mb_s, records, *_rest = line.split(", ")
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}", start) and start <= end
    assert (mb, records) == (f"{consumed['mb']:.4f}", str(total))
    assert len(line.split(", ")) == 10

    # More than the topic holds: a clear line once no record came for --timeout.
    line = one_line_error(
        perf(cluster, "consume", "--topic", "perf", "--messages", "9999", "--timeout", "2000")
    )
    assert f"only {total} of 9999" in line

    assert "does not exist" in one_line_error(
        perf(cluster, "produce", "--topic", "nope", "--num-records", "1")
    )
    assert "key=value" in one_line_error(
        perf(cluster, "produce", "--topic", "perf", "--num-records", "1", "--producer-props", "x")
    )
