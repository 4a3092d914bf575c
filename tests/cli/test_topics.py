"""`strandline topics` against a real 3-broker cluster, run as users run it (a subprocess),
and the UnderReplicatedPartitions metric beside it (docs/tools.md, docs/metrics.md).

One cluster serves every step, since starting one costs more than all the steps together:
create/list/describe/alter/delete and the error paths while all brokers are up, then a
SIGKILL so the describe filters have something to find.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from strandline.launcher.local_cluster import LocalCluster
from tests.cluster.support import metric, scrape
from tests.conftest import ClusterFactory
from tests.waiting import wait_until

Row = tuple[str, int, str, tuple[int, ...], tuple[int, ...]]


def run(cluster: LocalCluster, *args: str) -> subprocess.CompletedProcess[str]:
    # Wide columns so rich never wraps or truncates a table cell we parse.
    env = {**os.environ, "COLUMNS": "250", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "strandline", "topics", "--bootstrap-server", cluster.bootstrap]
        + list(args),
        capture_output=True,
        text=True,
        timeout=90,
        env=env,
    )


def ok(cluster: LocalCluster, *args: str) -> str:
    done = run(cluster, *args)
    assert done.returncode == 0, f"{args}: {done.stdout}{done.stderr}"
    return done.stdout


def fails(cluster: LocalCluster, *args: str) -> str:
    """The one-line error of a call that must exit 1 without a traceback."""
    done = run(cluster, *args)
    assert done.returncode == 1, f"{args} exited {done.returncode}: {done.stdout}{done.stderr}"
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    return lines[0]


def rows(output: str) -> list[Row]:
    """The describe's partition lines, as kafka-topics.sh prints them:
    `\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1,2`."""
    found = []
    for line in output.splitlines():
        fields = dict(cell.split(": ", 1) for cell in line.strip().split("\t") if ": " in cell)
        if "Partition" not in fields:
            continue
        found.append(
            (
                fields["Topic"],
                int(fields["Partition"]),
                fields["Leader"],
                tuple(int(r) for r in fields["Replicas"].split(",") if r),
                tuple(int(r) for r in fields["Isr"].split(",") if r),
            )
        )
    return found


def settled(cluster: LocalCluster, *args: str) -> str | None:
    """Output of a call made while the cluster may still be electing a controller:
    None (poll again) instead of a failure."""
    done = run(cluster, *args)
    return done.stdout if done.returncode == 0 else None


def describe(cluster: LocalCluster, *args: str) -> set[tuple[str, int]]:
    return {(r[0], r[1]) for r in rows(ok(cluster, "--describe", *args))}


@pytest.mark.timeout(600)  # some forty CLI process starts, on a shared machine
def test_topics_lifecycle_and_describe_filters(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(brokers=3, replica_lag_time_max_ms=1000)

    assert "Created topic orders." in ok(
        cluster,
        "--create",
        "--topic",
        "orders",
        "--partitions",
        "3",
        "--replication-factor",
        "3",
        "--config",
        "min.insync.replicas=3",
    )
    ok(cluster, "--create", "--topic", "events", "--partitions", "4", "--replication-factor", "2")
    ok(cluster, "--create", "--topic", "scratch", "--partitions", "1", "--replication-factor", "1")
    # Kafka's defaults: no --partitions or --replication-factor takes the broker's.
    long_name = "a-topic-name-longer-than-any-terminal-line-" + "x" * 80
    assert f"Created topic {long_name}." in ok(cluster, "--create", "--topic", long_name)
    assert "Created topic" not in ok(cluster, "--create", "--topic", long_name, "--if-not-exists")
    # Piped output is whole: no wrapping or "…" at 80 columns, even in a table.
    piped = subprocess.run(
        [sys.executable, "-m", "strandline", "topics", "--bootstrap-server",
         cluster.bootstrap, "--describe", "--topic", "a-topic-name-.*", "--output", "table"],
        capture_output=True, text=True, timeout=90,
        env={k: v for k, v in os.environ.items() if k != "COLUMNS"},
    )  # fmt: skip
    assert piped.returncode == 0, piped.stderr
    assert "…" not in piped.stdout, piped.stdout
    [row] = [line.split("│") for line in piped.stdout.splitlines() if long_name in line]
    assert row[1].strip() == long_name
    assert len(row[4].strip().split(",")) == 1  # the broker's default.replication.factor
    # An rf=1 topic would go offline with the broker killed below.
    ok(cluster, "--delete", "--topic", long_name)
    listed = ok(cluster, "--list").split()
    assert {"orders", "events", "scratch"} <= set(listed)

    full = ok(cluster, "--describe", "--topic", "orders")
    assert "PartitionCount: 3" in full and "ReplicationFactor: 3" in full
    assert "min.insync.replicas=3" in full
    orders = rows(full)
    assert [r[1] for r in orders] == [0, 1, 2]
    for _topic, _p, _leader, replicas, _isr in orders:
        assert sorted(replicas) == [1, 2, 3]

    # Errors: one clear line, exit 1.
    assert "already exists" in fails(
        cluster, "--create", "--topic", "orders", "--partitions", "1", "--replication-factor", "1"
    )
    assert "replication factor" in fails(
        cluster, "--create", "--topic", "toomany", "--partitions", "1", "--replication-factor", "5"
    )
    assert "does not exist" in fails(cluster, "--describe", "--topic", "nope")
    assert "exactly one of" in fails(cluster, "--list", "--delete")

    ok(cluster, "--alter", "--topic", "events", "--partitions", "6")
    events = wait_until(
        "events to have 6 partitions with leaders",
        lambda: (
            (r := rows(ok(cluster, "--describe", "--topic", "events")))
            and len(r) == 6
            and all(x[2] != "none" for x in r)
            and r
        ),
        timeout_s=60,  # each poll is a CLI process start: seconds on a busy machine
    )
    assert all(len(r[3]) == 2 for r in events)

    ok(cluster, "--delete", "--topic", "scratch")
    wait_until(
        "scratch (and the long-named topic) to leave the list",
        lambda: not {"scratch", long_name} & set(ok(cluster, "--list").split()),
        timeout_s=60,
    )

    # Every orders partition and the events partitions with a replica on the victim lose
    # it from the ISR; only orders (min.insync.replicas=3) drops under its minimum.
    victim = 3
    both = [r for r in orders + events if victim in r[3]]
    affected = {(r[0], r[1]) for r in both}
    assert affected >= {("orders", p) for p in range(3)}
    cluster.kill(victim, "KILL")
    under = wait_until(
        f"exactly {sorted(affected)} to be under-replicated",
        lambda: (
            (out := settled(cluster, "--describe", "--under-replicated-partitions"))
            and (r := rows(out))
            and {(x[0], x[1]) for x in r} == affected
            and r
        ),
        timeout_s=60,
    )
    # The survivors took over every partition the victim led.
    for _topic, _p, leader, _replicas, isr in under:
        assert leader != str(victim) and victim not in isr
    assert describe(cluster, "--unavailable-partitions") == set()
    assert describe(cluster, "--under-min-isr-partitions") == {("orders", p) for p in range(3)}

    # Kafka's metric counts, on each broker, the under-replicated partitions it leads:
    # each survivor reports exactly those of the listed ones it now leads.
    urp = "kafka_server_replicamanager_underreplicatedpartitions"
    led_by = {b: sum(1 for r in under if r[2] == str(b)) for b in (1, 2)}
    assert sum(led_by.values()) == len(affected)
    wait_until(
        f"UnderReplicatedPartitions to read {led_by}",
        lambda: all(metric(scrape(cluster, b), urp) == n for b, n in led_by.items()),
        timeout_s=30,
    )

    cluster.start(victim)
    wait_until(
        "no partition under-replicated after the restart",
        lambda: (
            (out := settled(cluster, "--describe", "--under-replicated-partitions")) is not None
            and rows(out) == []
        ),
        timeout_s=60,
    )
    for b in (1, 2, 3):
        assert metric(scrape(cluster, b), urp) == 0, f"broker {b} still reports {urp}"
