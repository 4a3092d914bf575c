"""`strandline log-dirs describe` and DescribeLogDirs (API 35) against a real 3-broker
cluster, with kafka-python's admin describe_log_dirs as a second client (confluent-kafka
2.16 has no describe_log_dirs).

One cluster serves every step: replicas listed exactly on the brokers the assignment
names, sizes that grow with produced data until every replica holds the same bytes,
the --broker-list and --topic-list filters, and the error lines.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient

from strandline.launcher.local_cluster import LocalCluster
from tests.cli.support import tool
from tests.cluster.support import create_topic, producer
from tests.conftest import ClusterFactory
from tests.waiting import wait_until

Replicas = dict[tuple[int, str], dict[str, Any]]  # (broker, "topic-p") -> Kafka's entry


_run, _ok, _fails = tool("log-dirs", "describe")


def ok(cluster: LocalCluster, *args: str) -> str:
    return _ok("--bootstrap-server", cluster.bootstrap, *args)


def fails(cluster: LocalCluster, *args: str) -> str:
    return _fails("--bootstrap-server", cluster.bootstrap, *args)


def described(cluster: LocalCluster, *args: str) -> tuple[dict[str, Any], Replicas]:
    """Kafka's JSON, and its replicas by (broker, partition name)."""
    shape = json.loads(ok(cluster, "--json", *args))
    replicas = {
        (broker["broker"], p["partition"]): p
        for broker in shape["brokers"]
        for log_dir in broker["logDirs"]
        for p in log_dir["partitions"]
    }
    return shape, replicas


def assignment(cluster: LocalCluster, topic: str) -> set[tuple[int, str]]:
    """(broker, "topic-p") for every replica the cluster's metadata assigns."""
    metadata = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(timeout=10)
    return {
        (broker, f"{topic}-{p.id}")
        for p in metadata.topics[topic].partitions.values()
        for broker in p.replicas
    }


def table_rows(output: str) -> list[list[str]]:
    found = []
    for line in output.splitlines():
        cells = [c.strip() for c in line.strip().strip("│┃").split("│")]
        if len(cells) == 6 and cells[0].isdigit():
            found.append(cells)
    return found


def test_log_dirs_sizes_replicas_and_filters(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(brokers=3)
    create_topic(cluster, "sizes", 3, 2)
    create_topic(cluster, "other", 1, 1)
    expected = assignment(cluster, "sizes")
    # rf 2 on 3 brokers: each partition is missing from one broker, which must not list it.
    assert len(expected) == 6

    shape, before = described(cluster, "--topic-list", "sizes")
    assert shape["version"] == 1
    assert [b["broker"] for b in shape["brokers"]] == [1, 2, 3]
    for broker in shape["brokers"]:
        (log_dir,) = broker["logDirs"]
        assert log_dir["logDir"] == str(cluster.log_dir(broker["broker"]).resolve())
        assert log_dir["error"] is None
    assert set(before) == expected
    assert all(p["isFuture"] is False and p["offsetLag"] == 0 for p in before.values())

    p = producer(cluster)
    for i in range(300):
        p.produce("sizes", b"v" * 1000, key=str(i).encode(), partition=i % 3)
    assert p.flush(30) == 0
    del p  # now, while its brokers still run

    def grown() -> Replicas | None:
        _shape, after = described(cluster, "--topic-list", "sizes")
        by_partition: dict[str, set[int]] = {}
        for (_broker, name), entry in after.items():
            by_partition.setdefault(name, set()).add(entry["size"])
        settled = all(len(sizes) == 1 for sizes in by_partition.values())
        everywhere = all(after[k]["size"] > before[k]["size"] for k in expected if k in after)
        return after if settled and everywhere and set(after) == expected else None

    # Followers catch up by fetching: poll until every replica holds its leader's bytes.
    after = wait_until("every replica of sizes to grow to its leader's size", grown, 30)
    assert all(entry["size"] > 100 * 1000 for entry in after.values())
    assert all(entry["offsetLag"] == 0 for entry in after.values())

    # Without --topic-list every topic is there; with it, only the named ones.
    _shape, everything = described(cluster)
    assert expected | assignment(cluster, "other") <= set(everything)
    assert not any(name.startswith("other-") for _b, name in after)

    # --broker-list asks only those brokers.
    shape, filtered = described(cluster, "--broker-list", "1,3", "--topic-list", "sizes")
    assert [b["broker"] for b in shape["brokers"]] == [1, 3]
    assert set(filtered) == {k for k in expected if k[0] in (1, 3)}

    # The table shows the same replicas and sizes.
    rows = table_rows(ok(cluster, "--topic-list", "sizes"))
    assert {(int(r[0]), r[2]): int(r[3]) for r in rows} == {k: v["size"] for k, v in after.items()}
    assert all(r[5] == "no" for r in rows)

    # A second client: kafka-python's admin, every broker, then one partition on one.
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, client_id="log-dirs-test")
    try:
        answers = admin.describe_log_dirs()
        seen = {
            (answer["broker"], f"{t['name']}-{part['partition_index']}"): part["partition_size"]
            for answer in answers
            for log_dir in answer["log_dirs"]
            for t in log_dir["topics"]
            for part in t["partitions"]
            if t["name"] == "sizes"
        }
        assert seen == {k: v["size"] for k, v in after.items()}
        broker, name = min(expected)
        (one,) = admin.describe_log_dirs(
            topic_partitions={"sizes": [int(name.rsplit("-", 1)[1])]}, brokers=[broker]
        )
        (log_dir,) = one["log_dirs"]
        assert log_dir["error_code"] == 0
        assert [
            (t["name"], [q["partition_index"] for q in t["partitions"]]) for t in log_dir["topics"]
        ] == [("sizes", [int(name.rsplit("-", 1)[1])])]
    finally:
        admin.close()

    # Errors: one clear line, exit 1.
    assert "broker 9 is not in the cluster" in fails(cluster, "--broker-list", "9")
    assert "'x' is not a broker id" in fails(cluster, "--broker-list", "1,x")
    assert "topic 'nope' does not exist" in fails(cluster, "--topic-list", "nope")
    done = subprocess.run(
        [sys.executable, "-m", "strandline", "log-dirs", "describe", "--bootstrap-server"]
        + ["127.0.0.1:1", "--json"],
        capture_output=True,
        text=True,
        timeout=90,
        env={**os.environ, "COLUMNS": "250", "NO_COLOR": "1"},
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().startswith("error: cannot reach 127.0.0.1:1"), done.stderr
