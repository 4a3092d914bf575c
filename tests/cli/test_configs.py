"""`strandline configs` against real brokers, with confluent-kafka's AdminClient and
ZooKeeper itself as second witnesses. The command runs in this process (CliRunner), and
a few times as users run it (a subprocess), which costs seconds per call here.

Topic configs: describe, alter, delete back to the broker's static value, and the
error lines. Broker configs: per-broker and cluster-default dynamic configs in
/config/brokers/<id> and /config/brokers/<default>, their sources in DescribeConfigs,
their live effect (segments roll at a new log.segment.bytes without a restart), and
INVALID_CONFIG for unknown, read-only and malformed ones.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from strandline.coordination.zk_client import ZkClient
from strandline.launcher.local_cluster import LocalCluster
from tests.cli.support import tool
from tests.cluster.support import create_topic, producer
from tests.conftest import ClusterFactory
from tests.waiting import wait_until

Row = tuple[str, str, bool]  # value, source, read-only


_run, _ok, _fails = tool("configs")


def ok(cluster: LocalCluster, *args: str) -> str:
    return _ok("--bootstrap-server", cluster.bootstrap, *args)


def fails(cluster: LocalCluster, *args: str) -> str:
    return _fails("--bootstrap-server", cluster.bootstrap, *args)


def run_as_user(cluster: LocalCluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "strandline", "configs", "--bootstrap-server", cluster.bootstrap]
        + list(args),
        capture_output=True,
        text=True,
        timeout=90,
        env={**os.environ, "COLUMNS": "250", "NO_COLOR": "1"},
    )


def rows(output: str) -> dict[str, Row]:
    """name -> (value, source, read-only) from the describe tables."""
    found = {}
    for line in output.splitlines():
        cells = [c.strip() for c in line.strip().strip("│┃").split("│")]
        if len(cells) != 5 or not cells[0] or cells[0] == "Name":
            continue  # a border, the header, or a wrapped synonyms line
        name, value, source, read_only, _synonyms = cells
        found[name] = (value, source, read_only == "yes")
    return found


def describe(cluster: LocalCluster, *args: str) -> dict[str, Row]:
    return rows(ok(cluster, "--describe", "--output", "table", *args))


KAFKA_LINE = re.compile(
    r"  (?P<name>[^=]+)=(?P<value>\S*) sensitive=(?P<s>true|false) synonyms=\{(?P<syn>.*)\}"
)


def kafka_describe(
    cluster: LocalCluster, *args: str
) -> tuple[str, dict[str, tuple[str, list[str]]]]:
    """kafka-configs.sh --describe's lines: the heading and name -> (value, synonyms);
    the first synonym is the config's own value with its source, as Kafka prints it."""
    heading, *lines = ok(cluster, "--describe", *args).splitlines()
    found = {}
    for line in lines:
        match = KAFKA_LINE.fullmatch(line)
        assert match is not None, f"not kafka-configs.sh's line: {line!r}"
        found[match["name"]] = (match["value"], match["syn"].split(", ") if match["syn"] else [])
    return heading, found


def test_topic_configs_describe_alter_and_delete(cluster_factory: ClusterFactory) -> None:
    # A static broker value, so "back to the default" is visibly server.properties'.
    cluster = cluster_factory(brokers=1, log_retention_ms=7200000)
    create_topic(cluster, "orders", 1, 1)

    # Once as users run it: the installed entry point, its output and its error line.
    done = run_as_user(cluster, "--entity-type", "topics", "--entity-name", "orders", "--describe")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Dynamic configs for topic orders are:\n"
    done = run_as_user(cluster, "--topic", "nope", "--describe")
    assert (done.returncode, done.stderr.strip()) == (1, "error: topic 'nope' does not exist")
    everything = describe(cluster, "--topic", "orders", "--all")
    assert everything["retention.ms"] == ("7200000", "STATIC_BROKER_CONFIG", False)
    assert everything["cleanup.policy"] == ("delete", "DEFAULT_CONFIG", False)
    assert len(everything) >= 15

    assert "Completed updating config for topic orders." in ok(
        cluster,
        "--entity-type",
        "topics",
        "--entity-name",
        "orders",
        "--alter",
        "--add-config",
        "retention.ms=60000,cleanup.policy=[delete,compact]",
    )
    assert describe(cluster, "--topic", "orders") == {
        "retention.ms": ("60000", "DYNAMIC_TOPIC_CONFIG", False),
        "cleanup.policy": ("delete,compact", "DYNAMIC_TOPIC_CONFIG", False),
    }
    # kafka-configs.sh's lines by default, sorted by name, the synonyms down to the default.
    heading, lines = kafka_describe(cluster, "--topic", "orders")
    assert heading == "Dynamic configs for topic orders are:"
    assert list(lines) == ["cleanup.policy", "retention.ms"]
    value, synonyms = lines["retention.ms"]
    assert value == "60000" and synonyms == [
        "DYNAMIC_TOPIC_CONFIG:retention.ms=60000",
        "STATIC_BROKER_CONFIG:log.retention.ms=7200000",
        *synonyms[2:],
    ]
    assert synonyms[-1].startswith("DEFAULT_CONFIG:")
    heading, every = kafka_describe(cluster, "--topic", "orders", "--all")
    assert heading == "All configs for topic orders are:" and len(every) >= 15
    assert every["cleanup.policy"][1][0] == "DYNAMIC_TOPIC_CONFIG:cleanup.policy=delete,compact"
    [as_json] = json.loads(ok(cluster, "--describe", "--topic", "orders", "--output", "json"))
    assert as_json["entity_type"] == "topics" and as_json["entity_name"] == "orders"
    assert {c["name"]: (c["value"], c["source"]) for c in as_json["configs"]} == {
        "retention.ms": ("60000", "DYNAMIC_TOPIC_CONFIG"),
        "cleanup.policy": ("delete,compact", "DYNAMIC_TOPIC_CONFIG"),
    }
    assert "--output must be kafka, table or json" in fails(
        cluster, "--topic", "orders", "--describe", "--output", "xml"
    )
    # The same answer through librdkafka.
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    (future,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, "orders")]).values()
    entry = future.result(30)["retention.ms"]
    assert (entry.value, entry.source) == ("60000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)

    ok(cluster, "--topic", "orders", "--alter", "--delete-config", "retention.ms")
    after = describe(cluster, "--topic", "orders", "--all")
    assert after["retention.ms"] == ("7200000", "STATIC_BROKER_CONFIG", False)
    assert after["cleanup.policy"] == ("delete,compact", "DYNAMIC_TOPIC_CONFIG", False)

    # Errors: one clear line, exit 1.
    assert "topic 'nope' does not exist" in fails(
        cluster, "--topic", "nope", "--alter", "--add-config", "retention.ms=1"
    )
    assert "unknown topic config 'no.such.config'" in fails(
        cluster, "--topic", "orders", "--alter", "--add-config", "no.such.config=1"
    )
    assert "invalid config for topic 'orders'" in fails(
        cluster, "--topic", "orders", "--alter", "--add-config", "retention.ms=soon"
    )
    assert "exactly one of --describe, --alter" in fails(
        cluster, "--topic", "orders", "--describe", "--alter"
    )
    assert "topics, brokers or users" in fails(cluster, "--entity-type", "clients", "--describe")
    assert "--add-config" in fails(cluster, "--topic", "orders", "--alter")
    assert "--add-config expects k1=v1" in fails(
        cluster, "--topic", "orders", "--alter", "--add-config", "retention.ms"
    )
    assert "only goes with --entity-type brokers" in fails(
        cluster, "--entity-type", "topics", "--entity-default", "--describe"
    )
    # A rejected alter changed nothing.
    assert describe(cluster, "--topic", "orders") == {
        "cleanup.policy": ("delete,compact", "DYNAMIC_TOPIC_CONFIG", False)
    }


def _znode_json(zk: ZkClient, path: str) -> object:
    data, _ = zk.kazoo.get(path)
    return json.loads(data)


def _segments(directory: Path) -> int:
    return len(list(directory.glob("*.log")))


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")
def test_broker_dynamic_configs_round_trip_and_apply_live(
    cluster_factory: ClusterFactory,
) -> None:
    cluster = cluster_factory(brokers=2)
    create_topic(cluster, "live", 1, 2)

    # Per broker: stored in /config/brokers/1, visible on broker 1 only.
    assert "Completed updating config for broker 1." in ok(
        cluster,
        "--entity-type",
        "brokers",
        "--entity-name",
        "1",
        "--alter",
        "--add-config",
        "log.retention.ms=3600000,follower.replication.throttled.rate=1048576",
    )
    assert describe(cluster, "--entity-type", "brokers", "--entity-name", "1") == {
        "log.retention.ms": ("3600000", "DYNAMIC_BROKER_CONFIG", False),
        "follower.replication.throttled.rate": ("1048576", "DYNAMIC_BROKER_CONFIG", False),
    }
    assert describe(cluster, "--broker", "2") == {}
    # Every broker, then the cluster default, as kafka-configs.sh lists them.
    headings = [
        line
        for line in ok(cluster, "--entity-type", "brokers", "--describe").splitlines()
        if not line.startswith("  ")
    ]
    assert headings == [
        "Dynamic configs for broker 1 are:",
        "Dynamic configs for broker 2 are:",
        "Default configs for brokers in the cluster are:",
    ]
    assert kafka_describe(cluster, "--broker", "1")[1]["log.retention.ms"] == (
        "3600000",
        [
            "DYNAMIC_BROKER_CONFIG:log.retention.ms=3600000",
            "DEFAULT_CONFIG:log.retention.hours=168",
        ],
    )
    static = describe(cluster, "--broker", "2", "--all")
    assert static["broker.id"] == ("2", "STATIC_BROKER_CONFIG", True)
    assert static["log.retention.ms"] == ("null", "DEFAULT_CONFIG", False)

    # The cluster default: /config/brokers/<default>, seen by every broker.
    assert "Completed updating default config for brokers in the cluster." in ok(
        cluster,
        "--entity-type",
        "brokers",
        "--entity-default",
        "--alter",
        "--add-config",
        "log.segment.bytes=4096,leader.replication.throttled.rate=2000000",
    )
    assert describe(cluster, "--entity-type", "brokers", "--entity-default") == {
        "log.segment.bytes": ("4096", "DYNAMIC_DEFAULT_BROKER_CONFIG", False),
        "leader.replication.throttled.rate": ("2000000", "DYNAMIC_DEFAULT_BROKER_CONFIG", False),
    }
    for broker_id in (1, 2):
        seen = describe(cluster, "--broker", str(broker_id), "--all")
        assert seen["log.segment.bytes"] == ("4096", "DYNAMIC_DEFAULT_BROKER_CONFIG", False)
    # A topic without its own override inherits it, and says from where.
    assert describe(cluster, "--topic", "live", "--all")["segment.bytes"] == (
        "4096",
        "DYNAMIC_DEFAULT_BROKER_CONFIG",
        False,
    )

    # ZooKeeper holds what Kafka itself would write, with a change notification each.
    assert cluster.zk_connect is not None
    with ZkClient(cluster.zk_connect).connect() as zk:
        assert _znode_json(zk, "/config/brokers/1") == {
            "version": 1,
            "config": {
                "follower.replication.throttled.rate": "1048576",
                "log.retention.ms": "3600000",
            },
        }
        assert _znode_json(zk, "/config/brokers/<default>") == {
            "version": 1,
            "config": {
                "leader.replication.throttled.rate": "2000000",
                "log.segment.bytes": "4096",
            },
        }
        announced = set(zk.get_config_changes().values())
        assert {"brokers/1", "brokers/<default>"} <= announced

    # Applied without a restart: the existing replicas roll 4 KiB segments now.
    p = producer(cluster, **{"linger.ms": 0})
    for i in range(60):
        p.produce("live", b"x" * 500, key=str(i).encode(), partition=0)
        p.flush(30)
    del p  # now, while its brokers still run
    for broker_id in (1, 2):
        directory = cluster.log_dir(broker_id) / "live-0"

        def rolled(d: Path = directory) -> bool:
            return _segments(d) >= 4

        wait_until(f"broker {broker_id} to roll small segments", rolled, timeout_s=30)

    # Deleting a per-broker config returns it to the default.
    ok(cluster, "--broker", "1", "--alter", "--delete-config", "log.retention.ms")
    back = describe(cluster, "--broker", "1", "--all")
    assert back["log.retention.ms"] == ("null", "DEFAULT_CONFIG", False)
    assert back["follower.replication.throttled.rate"][1] == "DYNAMIC_BROKER_CONFIG"

    # confluent-kafka's AdminClient: describe, incremental alter and (legacy) alter.
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    (future,) = admin.describe_configs([ConfigResource(ResourceType.BROKER, "1")]).values()
    entries = future.result(30)
    assert entries["follower.replication.throttled.rate"].source == (
        ConfigSource.DYNAMIC_BROKER_CONFIG.value
    )
    assert entries["log.segment.bytes"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    assert entries["log.dirs"].is_read_only and not entries["log.segment.bytes"].is_read_only
    incremental = ConfigResource(
        ResourceType.BROKER,
        "2",
        incremental_configs=[
            ConfigEntry(
                "log.cleaner.delete.retention.ms",
                "1000",
                incremental_operation=AlterConfigOpType.SET,
            )
        ],
    )
    for f in admin.incremental_alter_configs([incremental]).values():
        f.result(30)
    assert describe(cluster, "--broker", "2") == {
        "log.cleaner.delete.retention.ms": ("1000", "DYNAMIC_BROKER_CONFIG", False)
    }
    replace = ConfigResource(ResourceType.BROKER, "2", set_config={"log.roll.ms": "3600000"})
    for f in admin.alter_configs([replace]).values():
        f.result(30)
    # AlterConfigs replaces the broker's whole dynamic set.
    assert describe(cluster, "--broker", "2") == {
        "log.roll.ms": ("3600000", "DYNAMIC_BROKER_CONFIG", False)
    }
    unknown = ConfigResource(
        ResourceType.BROKER,
        "2",
        incremental_configs=[
            ConfigEntry("no.such.config", "1", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    (failed,) = admin.incremental_alter_configs([unknown]).values()
    with pytest.raises(KafkaException) as raised:
        failed.result(30)
    assert raised.value.args[0].code() == KafkaError.INVALID_CONFIG

    # Errors: one clear line, exit 1, nothing stored.
    assert "unknown broker config 'no.such.config'" in fails(
        cluster, "--broker", "1", "--alter", "--add-config", "no.such.config=1"
    )
    assert "cannot be updated dynamically" in fails(
        cluster, "--broker-defaults", "--alter", "--add-config", "log.dirs=/elsewhere"
    )
    assert "invalid config for broker 1" in fails(
        cluster, "--broker", "1", "--alter", "--add-config", "log.segment.bytes=big"
    )
    assert "invalid config for the broker default" in fails(
        cluster,
        "--broker-defaults",
        "--alter",
        "--add-config",
        "leader.replication.throttled.rate=-5",
    )
    assert "broker 9 is not in the cluster" in fails(cluster, "--broker", "9", "--describe")
    assert "named by its id" in fails(
        cluster, "--entity-type", "brokers", "--entity-name", "one", "--describe"
    )
    assert "not both" in fails(
        cluster, "--entity-type", "brokers", "--entity-name", "1", "--entity-default", "--describe"
    )
    assert "--all only goes with --describe" in fails(
        cluster, "--broker", "1", "--alter", "--add-config", "log.retention.ms=1", "--all"
    )
    assert describe(cluster, "--broker", "1") == {
        "follower.replication.throttled.rate": ("1048576", "DYNAMIC_BROKER_CONFIG", False)
    }
