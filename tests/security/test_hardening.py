"""Issue 26: the holes a review of the secured cluster found, each against a running
cluster of real brokers.

- DescribeConfigs never returns a password-type value (null, is_sensitive=true), for
  every broker and topic, even to the super user; no file the cluster writes with a
  secret is readable by others (the scan tests);
- ListOffsets needs DESCRIBE on the topic whatever replica id the request claims, and
  only a broker (CLUSTER_ACTION) is answered the log end offset;
"""

from __future__ import annotations

import asyncio
import stat
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode
from kio.schema.list_offsets.v7 import request as list_offsets_v7
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i32, i64

from strandline.client.connection import KafkaConnection
from strandline.server.broker_configs import is_sensitive
from strandline.types import LATEST_TIMESTAMP
from tests.security.test_secured_cluster import add_users, produce, security_for

if TYPE_CHECKING:
    from strandline.cli.local_cluster import LocalCluster
    from tests.conftest import ClusterFactory

PLAIN_SECRET = "carol-plain-secret"
LISTENER_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="lsnr" password="listener-jaas-secret";'
)
SECRET_SETTINGS = {
    "sasl.plain.users": f"carol:{PLAIN_SECRET}",
    "listener.name.sasl_ssl.plain.sasl.jaas.config": LISTENER_JAAS,
}


def admin_client(cluster: LocalCluster) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient(
        {"bootstrap.servers": cluster.bootstrap, **cluster.client_config, "log_level": 0}
    )


def ask(cluster: LocalCluster, user: tuple[str, str], *requests: Any, broker: int = 1) -> list[Any]:
    """Each request's answer, sent on one connection logged in as `user` (name, password)."""

    async def run() -> list[Any]:
        async with await KafkaConnection.open(
            *cluster.broker_address(broker), timeout=10, security=security_for(cluster, *user)
        ) as conn:
            return [await conn.send(r, timeout=10) for r in requests]

    return asyncio.run(run())


def admin_of(cluster: LocalCluster) -> tuple[str, str]:
    return cluster.client_config["sasl.username"], cluster.client_config["sasl.password"]


BOB = ("bob", "bob-secret")


def secrets_of(cluster: LocalCluster) -> list[str]:
    return [cluster.client_config["sasl.password"], PLAIN_SECRET, "listener-jaas-secret"]


# --- finding 1 and 8: secrets -------------------------------------------------------------------


def test_password_keys_are_null_and_sensitive_in_describe_configs() -> None:
    for name in (
        "sasl.jaas.config",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config",
        "listener.name.broker.ssl.key.password",
        "ssl.keystore.password",
        "ssl.truststore.password",
        "sasl.plain.users",
        "my.plugin.secret",
    ):
        assert is_sensitive(name), name
    for name in ("listeners", "ssl.keystore.location", "log.retention.ms", "super.users"):
        assert not is_sensitive(name), name


def test_scan_describe_configs_and_files_hold_no_readable_secret(
    cluster_factory: ClusterFactory,
) -> None:
    from confluent_kafka.admin import ConfigResource, NewTopic, ResourceType

    cluster = cluster_factory(2, security="sasl_ssl", config=SECRET_SETTINGS)
    admin = admin_client(cluster)
    admin.create_topics([NewTopic("scan-t", 2, 2)])["scan-t"].result(30)
    topics = [t for t in admin.list_topics(timeout=10).topics]
    resources = [ConfigResource(ResourceType.BROKER, str(b)) for b in cluster.brokers]
    resources += [ConfigResource(ResourceType.TOPIC, t) for t in topics]
    secrets = secrets_of(cluster)
    seen_sensitive = set()
    # librdkafka takes one BROKER resource per call.
    answers = [f for r in resources for f in admin.describe_configs([r]).items()]
    for resource, future in answers:
        entries = future.result(30)
        assert entries, resource
        for name, entry in entries.items():
            values = [entry.value] + [s.value for s in entry.synonyms.values()]
            for secret in secrets:
                assert not any(v is not None and secret in v for v in values), (resource, name)
            if is_sensitive(name):
                assert entry.value is None and entry.is_sensitive, (resource, name, entry.value)
                seen_sensitive.add(name)
    # The keys that hold this cluster's secrets were there, hidden.
    assert {"sasl.jaas.config", "sasl.plain.users"} <= seen_sensitive
    assert "listener.name.sasl_ssl.plain.sasl.jaas.config" in seen_sensitive

    # No file the cluster wrote that holds a secret is readable by group or others.
    exposed = []
    for path in cluster.data_dir.rglob("*"):
        if not path.is_file() or path.is_symlink():
            continue
        try:
            data = path.read_bytes()
        except OSError:
            continue
        holds = any(s.encode() in data for s in secrets) or b"PRIVATE KEY" in data
        if holds and path.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            exposed.append(f"{path.relative_to(cluster.data_dir)} {oct(path.stat().st_mode)}")
    assert not exposed, exposed
    for name in ("cluster.json", "client.properties"):
        assert stat.S_IMODE((cluster.data_dir / name).stat().st_mode) == 0o600


# --- finding 5: ListOffsets with a replica id --------------------------------------------------


def list_latest(topic: str, replica_id: int) -> Any:
    return list_offsets_v7.ListOffsetsRequest(
        replica_id=BrokerId(replica_id),
        isolation_level=i8(0),
        topics=(
            list_offsets_v7.ListOffsetsTopic(
                name=TopicName(topic),
                partitions=(
                    list_offsets_v7.ListOffsetsPartition(
                        partition_index=i32(0),
                        current_leader_epoch=i32(-1),
                        timestamp=i64(LATEST_TIMESTAMP),
                    ),
                ),
            ),
        ),
    )


def test_list_offsets_claiming_a_replica_id_is_still_authorized(
    cluster_factory: ClusterFactory,
) -> None:
    cluster = cluster_factory(1, security="sasl_ssl")
    add_users(cluster, dict([BOB]))
    produce(cluster, "lo-t", 3)
    for replica_id in (1, 0, 7, -1):
        (answer,) = ask(cluster, BOB, list_latest("lo-t", replica_id))
        part = answer.topics[0].partitions[0]
        assert part.error_code == ErrorCode.topic_authorization_failed, replica_id
        assert part.offset == -1 and part.timestamp == -1, replica_id
    # The broker's own principal (here the super user) is answered as a replica.
    (answer,) = ask(cluster, admin_of(cluster), list_latest("lo-t", 1))
    assert answer.topics[0].partitions[0].error_code == ErrorCode.none
    assert answer.topics[0].partitions[0].offset == 3
