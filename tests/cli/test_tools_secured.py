"""Every tool of docs/tools.md (and reassign, elect, verify-replicas,
transactions) and the console against one `--security sasl_ssl` cluster, with the
client.properties `cluster up` writes as `--command-config` (the super user), as an
operator runs them. They all go through the one admin client (strandline.client.admin).
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING

from strandline.launcher.local_cluster import CLIENT_PROPERTIES
from tests.cli.support import tool
from tests.console.support import console_process
from tests.security.test_secured_cluster import create_topic, produce
from tests.waiting import wait_until

if TYPE_CHECKING:
    from tests.conftest import ClusterFactory

_groups = tool("groups")
_configs = tool("configs")
_log_dirs = tool("log-dirs", "describe")
_reassign = tool("reassign")
_elect = tool("elect")
_verify = tool("verify-replicas")
_transactions = tool("transactions")


def _page(url: str) -> str:
    with urllib.request.urlopen(url, timeout=15) as answer:
        assert answer.status == 200, url
        return str(answer.read().decode())


def test_every_tool_and_the_console_on_a_sasl_ssl_cluster(
    cluster_factory: ClusterFactory, tmp_path: Path
) -> None:
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as Tp

    cluster = cluster_factory(2, security="sasl_ssl")
    config = str(cluster.data_dir / CLIENT_PROPERTIES)
    common = ("--bootstrap-server", cluster.bootstrap, "--command-config", config)
    create_topic(cluster, "sec-t", [[1], [2]])
    produce(cluster, "sec-t", 4)
    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap, **cluster.client_config, "group.id": "sec-g"}
    )
    try:
        consumer.commit(offsets=[Tp("sec-t", 0, 1)], asynchronous=False)
    finally:
        consumer.close()

    # groups: list, describe, and a reset (OffsetCommit at the coordinator)
    assert "sec-g" in _groups[1]("--list", *common).split()
    assert "sec-t" in _groups[1]("--describe", "--group", "sec-g", *common)
    _groups[1](
        "--reset-offsets", "--group", "sec-g", "--topic", "sec-t:0", "--to-earliest",
        "--execute", *common,
    )  # fmt: skip
    described = _groups[1]("--describe", "--group", "sec-g", *common)
    # kafka-consumer-groups.sh's lines: GROUP TOPIC PARTITION CURRENT-OFFSET ...
    assert ["sec-g", "sec-t", "0", "0"] in [line.split()[:4] for line in described.splitlines()]

    # configs: a topic's and a broker's, an alteration, and users (SCRAM credentials)
    assert "Completed updating config for topic sec-t." in _configs[1](
        *common, "--topic", "sec-t", "--alter", "--add-config", "retention.ms=3600000"
    )
    assert "3600000" in _configs[1](*common, "--describe", "--topic", "sec-t")
    broker = _configs[1](
        *common, "--describe", "--entity-type", "brokers", "--entity-name", "1", "--all"
    )
    assert "sasl.jaas.config" in broker
    assert cluster.client_config["sasl.password"] not in broker
    users = _configs[1](*common, "--describe", "--entity-type", "users", "--entity-name", "admin")
    assert "SCRAM-SHA-512" in users

    # log-dirs
    assert "sec-t" in _log_dirs[1](*common)

    # reassign: move sec-t-0 from broker 1 to 2 with a throttle, verify it (which clears
    # the throttle: IncrementalAlterConfigs to each broker), list, cancel
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {"version": 1, "partitions": [{"topic": "sec-t", "partition": 0, "replicas": [2]}]}
        )
    )
    moved = _reassign[1](*common, "--execute", "--reassignment-json-file", str(plan),
                         "--throttle", "10000000")  # fmt: skip
    assert "Successfully started partition reassignment for sec-t-0" in moved
    verified = wait_until(
        "the reassignment completed",
        lambda: (
            (
                out := _reassign[0](*common, "--verify", "--reassignment-json-file", str(plan))
            ).exit_code
            == 0
            and "is completed" in out.stdout
            and out.stdout
        ),
        30,
    )
    assert "Clearing broker-level throttles on brokers 1,2" in verified
    assert "leader.replication.throttled.rate" not in _configs[1](
        *common, "--describe", "--entity-type", "brokers", "--entity-name", "2"
    )
    assert "No partition reassignments found." in _reassign[1](*common, "--list")
    assert "NO_REASSIGNMENT_IN_PROGRESS" in _reassign[2](
        *common, "--cancel", "--reassignment-json-file", str(plan)
    )

    # elect: sec-t-0's only replica is now 2, its leader already
    elected = _elect[1](*common, "--election-type", "preferred", "--all-topic-partitions")
    assert "Valid replica already elected" in elected

    # verify-replicas over the network: Fetch as the debugging replica, TLS + SASL
    verified_replicas = _verify[1](*common, "--topic", "sec-t")
    assert "sec-t-0" in verified_replicas and "sec-t-1" in verified_replicas
    assert "NO" not in verified_replicas

    # transactions (none here): ListTransactions on every broker
    listed = _transactions[1](*common, "list")
    assert listed.split() == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]

    # the console: its pages come from the same admin client
    with console_process(*common) as url:
        assert "sec-t" in _page(url + "api/topics")
        assert "sec-g" in _page(url + "api/groups")
        partitions = json.loads(_page(url + "api/topics/sec-t"))
        assert sorted(p["partition"] for p in partitions) == [0, 1]
        # the message browser's consumer (kafka-python) takes the same TLS/SASL settings
        read = [json.loads(_page(url + f"api/topics/sec-t/{p}/messages?offset=0")) for p in (0, 1)]
        assert sum(len(r["messages"]) for r in read) == 4, read
        acls = json.loads(_page(url + "api/acls"))
        assert acls["unavailable"] is None and acls["acls"] is not None

    # Without --command-config a tool fails in one line, saying what is likely missing.
    refused = _groups[2]("--list", "--bootstrap-server", cluster.bootstrap)
    assert "--command-config" in refused
