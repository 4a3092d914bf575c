"""A throttled reassignment (KIP-73) on real brokers: a 40 MB partition gains a replica
at the set rate, and `--verify` removes the throttle once it completes
(docs/tools.md). The same cluster then serves `reassign --generate` and
`verify-replicas --bootstrap-server`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from strandline.launcher.local_cluster import LocalCluster
from tests.conftest import ClusterFactory
from tests.waiting import wait_until

# Well under what a loaded 2-core machine moves unthrottled (14 MB/s with the suite's
# other workers running), so the throttle, not the machine, sets the pace.
RATE = 5_000_000  # bytes/s
RECORD = 100_000
RECORDS = 400  # 40 MB


def strandline(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "strandline", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "250"},
    )


def ok(*args: str) -> str:
    done = strandline(*args)
    assert done.returncode == 0, f"{args}: {done.stdout}{done.stderr}"
    return done.stdout


def configs(cluster: LocalCluster, kind: ResourceType, name: str) -> dict[str, tuple[str, int]]:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    [future] = admin.describe_configs([ConfigResource(kind, name)]).values()
    return {k: (e.value, int(e.source)) for k, e in future.result(timeout=30).items()}


def copy_rate(replica_dir: Path, size: int) -> float:
    """The rate at which the new replica's log grew, from the first bytes seen to the
    last: read off the follower's own files, so neither the tool's start-up nor the
    time it takes to see the ISR change is counted (both grow on a loaded machine).
    Over the whole copy, not a stretch of it: the throttle holds a rate averaged over
    a window of seconds, so after a stall (a starved process) it lets a burst through."""
    first: tuple[float, int] | None = None
    deadline = time.monotonic() + 60
    while True:
        assert time.monotonic() < deadline, f"the new replica holds {first} after 60 s"
        now = time.monotonic()
        logs = replica_dir.glob("*.log") if replica_dir.exists() else []
        have = sum(f.stat().st_size for f in logs)
        if first is None and have > 0:
            first = (now, have)
        if first is not None and have >= size:
            return (have - first[1]) / (now - first[0])
        time.sleep(0.02)


def test_a_throttled_reassignment_moves_at_the_rate(
    cluster_factory: ClusterFactory, tmp_path: Path
) -> None:
    cluster = cluster_factory(brokers=2, replica_lag_time_max_ms=2000)
    boot = cluster.bootstrap
    admin = AdminClient({"bootstrap.servers": boot})
    [created] = admin.create_topics(
        [NewTopic("big", num_partitions=1, replica_assignment=[[1]])]
    ).values()
    created.result(timeout=30)
    producer = Producer({"bootstrap.servers": boot, "acks": "1", "linger.ms": 20})
    value = os.urandom(RECORD)
    for _ in range(RECORDS):
        while True:
            try:
                producer.produce("big", value, partition=0)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(120) == 0
    size = sum(f.stat().st_size for f in (cluster.broker_dir(1) / "data" / "big-0").glob("*.log"))
    assert size >= RECORD * RECORDS

    plan = tmp_path / "move.json"
    plan.write_text(
        json.dumps(
            {"version": 1, "partitions": [{"topic": "big", "partition": 0, "replicas": [1, 2]}]}
        )
    )
    out = ok("reassign", "--bootstrap-server", boot, "--reassignment-json-file", str(plan),
             "--execute", "--throttle", str(RATE))  # fmt: skip
    # Measured first: the copy runs while the checks below talk to the brokers.
    rate = copy_rate(cluster.broker_dir(2) / "data" / "big-0", size)
    print(f"broker 2 copied {size / 1e6:.0f} MB at {rate / 1e6:.2f} MB/s "
          f"(set {RATE / 1e6})")  # fmt: skip
    assert 0.8 * RATE <= rate <= 1.2 * RATE, f"{rate / 1e6:.2f} MB/s, set {RATE / 1e6} MB/s"
    # kafka-reassign-partitions.sh's lines: the rollback plan, the warning, the limit.
    assert out.startswith(
        "Current partition replica assignment\n\n"
        '{"version":1,"partitions":[{"topic":"big","partition":0,"replicas":[1],'
        '"log_dirs":["any"]}]}\n\n'
        "Save this to use as the --reassignment-json-file option during rollback\n"
        "Warning: You must run --verify periodically, until the reassignment completes, "
        "to ensure the throttle is removed.\n"
    ), out
    assert f"The inter-broker throttle limit was set to {RATE} B/s (brokers 1,2)\n" in out
    assert out.endswith("Successfully started partition reassignment for big-0\n")
    topic = configs(cluster, ResourceType.TOPIC, "big")
    assert topic["leader.replication.throttled.replicas"][0] == "0:1"
    assert topic["follower.replication.throttled.replicas"][0] == "0:2"
    assert configs(cluster, ResourceType.BROKER, "2")["follower.replication.throttled.rate"][0] == (
        str(RATE)
    )

    def caught_up() -> bool:
        status = cluster.status()
        [p] = [p for p in status.partitions if p.tp.topic == "big"]
        return sorted(p.isr) == [1, 2]

    wait_until("broker 2 to join the ISR", caught_up, timeout_s=60)

    out = ok("reassign", "--bootstrap-server", boot, "--reassignment-json-file", str(plan),
             "--verify")  # fmt: skip
    assert out == (
        "Status of partition reassignment:\n"
        "Reassignment of partition big-0 is completed.\n"
        "Clearing broker-level throttles on brokers 1,2\n"
        "Clearing topic-level throttles on topic big\n"
    )
    topic = configs(cluster, ResourceType.TOPIC, "big")
    assert topic["leader.replication.throttled.replicas"][0] in ("", None)
    assert topic["follower.replication.throttled.replicas"][0] in ("", None)
    for broker in ("1", "2"):
        rates = configs(cluster, ResourceType.BROKER, broker)
        for key in ("leader.replication.throttled.rate", "follower.replication.throttled.rate"):
            # Back to the default (unlimited): no dynamic value left behind.
            assert rates[key][1] not in (2, 3), (broker, key, rates[key])

    # The moved replica holds the same bytes: fetched from both brokers and compared.
    out = ok("verify-replicas", "--bootstrap-server", boot, "--topic", "big")
    assert "big-0" in out and "yes" in out

    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": "big"}]}))
    out = ok("reassign", "--bootstrap-server", boot, "--generate",
             "--topics-to-move-json-file", str(topics), "--broker-list", "1,2")  # fmt: skip
    proposed = json.loads(out.split("Proposed partition reassignment configuration")[1])
    [entry] = proposed["partitions"]
    assert (entry["topic"], entry["partition"], sorted(entry["replicas"])) == ("big", 0, [1, 2])

    for bad, says in (
        (("--verify", "--throttle", "5"), "--throttle only goes with --execute"),
        (("--generate", "--broker-list", "1"), "--generate needs"),
        (
            ("--generate", "--broker-list", "2", "--topics-to-move-json-file", str(topics)),
            "Replication factor: 2 larger than available brokers: 1",
        ),
    ):
        done = strandline("reassign", "--bootstrap-server", boot, *bad)
        assert done.returncode == 1 and "Traceback" not in done.stderr
        assert says in done.stderr, done.stderr
