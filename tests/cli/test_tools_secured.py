"""Issue 26: the tools against a `--security sasl_ssl` cluster, with the client.properties
`cluster up` writes as `--command-config` (the super user), as an operator runs them.

groups, configs (topics, brokers) and log-dirs speak TLS + SASL; reassign, elect and
verify-replicas still refuse a secured --command-config in one line (PLAINTEXT only).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strandline.cli.local_cluster import CLIENT_PROPERTIES
from tests.cli.support import tool
from tests.security.test_secured_cluster import create_topic, produce

if TYPE_CHECKING:
    from tests.conftest import ClusterFactory

_groups = tool("groups")
_configs = tool("configs")
_log_dirs = tool("log-dirs", "describe")
_reassign = tool("reassign")


def test_tools_with_command_config_on_a_sasl_ssl_cluster(cluster_factory: ClusterFactory) -> None:
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as Tp

    cluster = cluster_factory(1, security="sasl_ssl")
    config = str(cluster.data_dir / CLIENT_PROPERTIES)
    common = ("--bootstrap-server", cluster.bootstrap, "--command-config", config)
    create_topic(cluster, "sec-t", [[1], [1]])
    produce(cluster, "sec-t", 4)
    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap, **cluster.client_config, "group.id": "sec-g"}
    )
    try:
        consumer.commit(offsets=[Tp("sec-t", 0, 1)], asynchronous=False)
    finally:
        consumer.close()

    # groups
    assert "sec-g" in _groups[1]("--list", *common).split()
    described = _groups[1]("--describe", "--group", "sec-g", *common)
    assert "sec-t" in described
    # configs: a topic's and a broker's, and an alteration
    assert "Completed updating config for topic sec-t." in _configs[1](
        *common, "--topic", "sec-t", "--alter", "--add-config", "retention.ms=3600000"
    )
    assert "3600000" in _configs[1](*common, "--describe", "--topic", "sec-t")
    broker = _configs[1](
        *common, "--describe", "--entity-type", "brokers", "--entity-name", "1", "--all"
    )
    assert "sasl.jaas.config" in broker
    assert cluster.client_config["sasl.password"] not in broker
    # log-dirs
    assert "sec-t" in _log_dirs[1](*common)

    # Without --command-config the tools fail in one line, never hang.
    assert _groups[2]("--list", "--bootstrap-server", cluster.bootstrap)
    # Still plaintext-only tools say so.
    assert "PLAINTEXT only" in _reassign[2]("--list", *common)
