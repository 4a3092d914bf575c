"""The holes a review of the secured cluster found, each against a running
cluster of real brokers.

- DescribeConfigs never returns a password-type value (null, is_sensitive=true), for
  every broker and topic, even to the super user; no file the cluster writes with a
  secret is readable by others (the scan tests);
- a client never writes to an internal topic nor deletes its records, whatever its ACLs
  (INVALID_TOPIC_EXCEPTION), and the partition is unchanged;
- Metadata auto-creates an internal topic only as its coordinator would (partitions,
  compaction), and the group coordinator maps groups over the partitions the offsets
  topic really has;
- before authentication a peer can make the broker hold at most
  sasl.server.max.receive.size per connection, and send no API but ApiVersions and the
  SASL ones (generated from the API registry);
- a Fetch is authorized before a session is opened: a client claiming a replica id
  without CLUSTER_ACTION gets no session and moves nothing; a consumer's session holds
  only the partitions it may read;
- ListOffsets needs DESCRIBE on the topic whatever replica id the request claims, and
  only a broker (CLUSTER_ACTION) is answered the log end offset;
"""

from __future__ import annotations

import asyncio
import socket
import stat
import struct
from contextlib import suppress
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode
from kio.schema.list_offsets.v7 import request as list_offsets_v7
from kio.schema.types import BrokerId, GroupId, TopicName
from kio.static.primitive import i8, i32, i64

from strandline.client.connection import KafkaConnection
from strandline.server.apis.registry import REGISTRY
from strandline.server.broker_configs import is_sensitive
from strandline.types import LATEST_TIMESTAMP
from tests.integration import wire
from tests.security.test_secured_cluster import (
    add_users,
    closed_within,
    frame,
    log_lines,
    produce,
    raw,
    read_response,
    security_for,
    tls_only,
)
from tests.waiting import wait_until

if TYPE_CHECKING:
    from strandline.launcher.local_cluster import LocalCluster
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
    """Each request's answer, sent on one connection logged in as `user` (name, password).
    A request may be a (request, response type) pair, for a response kio can not read."""

    async def run() -> list[Any]:
        async with await KafkaConnection.open(
            *cluster.broker_address(broker), timeout=10, security=security_for(cluster, *user)
        ) as conn:
            return [await conn.send(*(r if isinstance(r, tuple) else (r,)), timeout=10)
                    for r in requests]  # fmt: skip

    return asyncio.run(run())


def ask_plain(cluster: LocalCluster, *requests: Any) -> list[Any]:
    async def run() -> list[Any]:
        async with await KafkaConnection.open(*cluster.broker_address(1), timeout=10) as conn:
            return [await conn.send(r, timeout=10) for r in requests]

    return asyncio.run(run())


def admin_of(cluster: LocalCluster) -> tuple[str, str]:
    return cluster.client_config["sasl.username"], cluster.client_config["sasl.password"]


BOB = ("bob", "bob-secret")
ALICE = ("alice", "alice-secret")
ONE_OFFSETS_PARTITION = {
    "offsets.topic.num.partitions": "1",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
}


def grant(cluster: LocalCluster, user: str, topic: str, *operations: str) -> None:
    """ALLOW `user` the operations on TOPIC `topic` (LITERAL), as the super user."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    bindings = [
        AclBinding(
            ResourceType.TOPIC,
            topic,
            ResourcePatternType.LITERAL,
            f"User:{user}",
            "*",
            AclOperation[op],
            AclPermissionType.ALLOW,
        )
        for op in operations
    ]
    admin = admin_client(cluster)  # kept: its futures fail once the handle is gone
    for future in admin.create_acls(bindings, request_timeout=30).values():
        future.result(30)


def keyed_batch(key: bytes, value: bytes) -> bytes:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 30)
    builder.append(0, timestamp=1_700_000_000_000, key=key, value=value, headers=[])
    return bytes(builder.build())


def delete_records(topic: str, offset: int) -> Any:
    from datetime import timedelta

    from kio.schema.delete_records.v2 import request as dr
    from kio.static.primitive import i32Timedelta

    return dr.DeleteRecordsRequest(
        topics=(
            dr.DeleteRecordsTopic(
                name=TopicName(topic),
                partitions=(dr.DeleteRecordsPartition(partition_index=i32(0), offset=i64(offset)),),
            ),
        ),
        timeout=i32Timedelta.parse(timedelta(seconds=5)),
    )


def latest_offset(cluster: LocalCluster, topic: str) -> int:
    (answer,) = ask(cluster, admin_of(cluster), list_latest(topic, -1))
    assert answer.topics[0].partitions[0].error_code == ErrorCode.none
    return int(answer.topics[0].partitions[0].offset)


def commit(cluster: LocalCluster, group: str, topic: str, offset: int) -> None:
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as Tp

    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            **cluster.client_config,
            "group.id": group,
            "log_level": 0,
        }
    )
    try:
        consumer.commit(offsets=[Tp(topic, 0, offset)], asynchronous=False)
    finally:
        consumer.close()


def secrets_of(cluster: LocalCluster) -> list[str]:
    return [cluster.client_config["sasl.password"], PLAIN_SECRET, "listener-jaas-secret"]


# --- secrets ------------------------------------------------------------------------------------


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


# --- ListOffsets with a replica id -------------------------------------------------------------


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


# --- internal topics ---------------------------------------------------------------------------


def test_clients_never_write_internal_topics_whatever_their_acls(
    cluster_factory: ClusterFactory,
) -> None:
    cluster = cluster_factory(1, security="sasl_ssl", config=ONE_OFFSETS_PARTITION)
    add_users(cluster, dict([ALICE, BOB]))
    produce(cluster, "it-t", 3)
    commit(cluster, "g", "it-t", 2)
    offsets_end = latest_offset(cluster, "__consumer_offsets")
    assert offsets_end >= 1
    grant(cluster, ALICE[0], "*", "WRITE", "DELETE", "DESCRIBE")
    # Alice's ACLs are in force: she writes and deletes on an ordinary topic.
    wait_until(
        "alice's WRITE on * in force",
        lambda: (
            wire.produce_error(ask(cluster, ALICE, wire.produce("it-t", 0, wire.batch([b"x"])))[0])
            == ErrorCode.none
        ),
        20,
    )
    (deleted,) = ask(cluster, ALICE, delete_records("it-t", 1))
    assert deleted.topics[0].partitions[0].error_code == ErrorCode.none

    # A key of version 7: what used to leave the partition loading for good.
    forged = keyed_batch(b"\x00\x07forged", b"value")
    for user, expected in (
        (ALICE, ErrorCode.invalid_topic_exception),
        (BOB, ErrorCode.topic_authorization_failed),
    ):
        answer, gone = ask(
            cluster,
            user,
            wire.produce("__consumer_offsets", 0, forged),
            delete_records("__consumer_offsets", -1),
        )
        assert wire.produce_error(answer) == expected, user
        assert gone.topics[0].partitions[0].error_code == expected, user
    assert latest_offset(cluster, "__consumer_offsets") == offsets_end
    # The group's commit is still there, from the start of the partition.
    from kio.schema.offset_fetch.v7 import request as of

    (fetched,) = ask(
        cluster,
        admin_of(cluster),
        of.OffsetFetchRequest(
            group_id=GroupId("g"),
            topics=(
                of.OffsetFetchRequestTopic(name=TopicName("it-t"), partition_indexes=(i32(0),)),
            ),
            require_stable=False,
        ),
    )
    assert fetched.error_code == ErrorCode.none
    assert fetched.topics[0].partitions[0].committed_offset == 2


# --- internal topics auto-created wrong --------------------------------------------------------


def test_metadata_auto_creates_internal_topics_with_their_own_settings(
    cluster_factory: ClusterFactory,
) -> None:
    from confluent_kafka.admin import ConfigResource, ResourceType

    cluster = cluster_factory(1, offsets_topic_num_partitions=3, num_partitions=1)

    def offsets_partitions() -> int:
        (answer,) = ask_plain(cluster, wire.metadata("__consumer_offsets", auto_create=True))
        topic = answer.topics[0]
        return len(topic.partitions) if topic.error_code == ErrorCode.none else 0

    assert wait_until("__consumer_offsets created", offsets_partitions, 20) == 3
    (answer,) = ask_plain(cluster, wire.metadata("__consumer_offsets"))
    assert answer.topics[0].is_internal
    admin = admin_client(cluster)
    resource = ConfigResource(ResourceType.TOPIC, "__consumer_offsets")
    configs = admin.describe_configs([resource])[resource].result(30)
    assert configs["cleanup.policy"].value == "compact"
    # An ordinary topic whose name starts with __ is not internal.
    (answer,) = ask_plain(cluster, wire.metadata("__mine", auto_create=True))
    (answer,) = wait_until(
        "__mine created",
        lambda: [a for a in ask_plain(cluster, wire.metadata("__mine")) if a.topics[0].partitions],
        20,
    )
    assert not answer.topics[0].is_internal


def test_group_coordinator_uses_the_real_offsets_partition_count(
    cluster_factory: ClusterFactory,
) -> None:
    """__consumer_offsets made with 1 partition (by a tool, or an older broker) while the
    config says 3: every group still finds its coordinator and commits."""
    from confluent_kafka.admin import NewTopic

    from strandline.group.partitioning import partition_for

    cluster = cluster_factory(1, offsets_topic_num_partitions=3)
    admin = admin_client(cluster)
    new = NewTopic("__consumer_offsets", 1, 1, config={"cleanup.policy": "compact"})
    admin.create_topics([new])["__consumer_offsets"].result(30)
    produce(cluster, "rc-t", 3)
    groups = [g for g in (f"g{i}" for i in range(20)) if partition_for(g, 3) != 0][:3]
    for group in groups:
        commit(cluster, group, "rc-t", 2)
        from kio.schema.offset_fetch.v7 import request as of

        (fetched,) = ask_plain(
            cluster,
            of.OffsetFetchRequest(
                group_id=GroupId(group),
                topics=(
                    of.OffsetFetchRequestTopic(name=TopicName("rc-t"), partition_indexes=(i32(0),)),
                ),
                require_stable=False,
            ),
        )
        assert fetched.error_code == ErrorCode.none, group
        assert fetched.topics[0].partitions[0].committed_offset == 2, group


# --- before authentication ---------------------------------------------------------------------

PRE_AUTH_APIS = {18, 17, 36}  # ApiVersions, SaslHandshake, SaslAuthenticate


def rss_bytes(pid: int) -> int:
    for line in open(f"/proc/{pid}/status").read().splitlines():  # noqa: SIM115
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def test_before_authentication_only_sasl_apis_and_small_frames(
    cluster_factory: ClusterFactory,
) -> None:
    import kio.schema.api_versions.v3.request as av

    import strandline.server.apis  # noqa: F401 - fills REGISTRY

    cluster = cluster_factory(1, security="sasl_ssl")
    host, port = cluster.broker_address(1)
    tls = tls_only(cluster).ssl_context
    assert tls is not None
    pid = cluster.brokers[1].pid
    assert pid is not None
    start = len(log_lines(cluster, 1))

    # ApiVersions is answered; every other API the broker serves but the SASL ones
    # closes the connection unanswered, before the request is decoded.
    with raw(host, port, tls) as sock:
        request = av.ApiVersionsRequest(client_software_name="x", client_software_version="1")
        sock.sendall(frame(0, request))
        answer = read_response(sock, request)
        assert {int(k.api_key) for k in answer.api_keys} == set(REGISTRY)
    refused = sorted(set(REGISTRY) - PRE_AUTH_APIS)
    assert len(refused) > 30
    for key in refused:
        with raw(host, port, tls) as sock:
            header = struct.pack(">hhih", key, REGISTRY[key].max_version, 7, 0) + b"\0"
            sock.sendall(struct.pack(">i", len(header)) + header)
            assert closed_within(sock, 5) == (True, b""), key
    lines = wait_until(
        "one log line per refused API",
        lambda: (
            [x for x in log_lines(cluster, 1)[start:] if "before SASL authentication" in x]
            if sum("before SASL authentication" in x for x in log_lines(cluster, 1)[start:])
            >= len(refused)
            else None
        ),
        10,
    )
    for key in refused:
        assert any(f"API key {key} before SASL authentication" in x for x in lines), key

    # Frames larger than sasl.server.max.receive.size are never read: three peers that
    # announce 50 MB and send 16 MB each are closed at the size prefix, and the broker
    # does not grow by what they sent (it grew by ~190 MB for three 100 MB frames).
    before = rss_bytes(pid)
    socks = []
    try:
        for _ in range(3):
            sock = tls.wrap_socket(
                socket.create_connection((host, port), timeout=10),
                server_hostname=host,
            )
            socks.append(sock)
            sock.sendall(struct.pack(">i", 50_000_000))
            with suppress(OSError):
                for _ in range(16):
                    sock.sendall(b"\0" * (1 << 20))
        grown = rss_bytes(pid) - before
        assert grown < 12 * (1 << 20), f"broker grew {grown} bytes"
        for sock in socks:
            assert closed_within(sock, 5)[0]
    finally:
        for sock in socks:
            sock.close()
    # One line each, naming the bound.
    wait_until(
        "each oversized frame logged",
        lambda: (
            sum("exceeds sasl.server.max.receive.size" in x for x in log_lines(cluster, 1)[start:])
            >= 3
        ),
        10,
    )


# --- fetch sessions ----------------------------------------------------------------------------


def metric(cluster: LocalCluster, name: str) -> float:
    import urllib.request

    url = cluster.brokers[1].metrics_url
    assert url is not None
    with urllib.request.urlopen(url, timeout=5) as answer:  # noqa: S310 - our own broker
        for line in answer.read().decode().splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no metric {name}")


SESSIONS = "kafka_server_fetchsessioncache_numincrementalfetchsessions"
CACHED = "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached"


def test_fetch_is_authorized_before_any_session(cluster_factory: ClusterFactory) -> None:
    from dataclasses import replace

    cluster = cluster_factory(1, security="sasl_ssl")
    add_users(cluster, dict([ALICE, BOB]))
    produce(cluster, "fs-a", 2)
    produce(cluster, "fs-b", 2)
    grant(cluster, ALICE[0], "fs-a", "READ")
    sessions, cached = metric(cluster, SESSIONS), metric(cluster, CACHED)

    # Bob claims to be replica 1 and opens a session: refused, no session, no position.
    claim = replace(wire.fetch_many("fs-a", {0: 0}, session_epoch=0), replica_id=BrokerId(1))
    (answer,) = ask(cluster, BOB, claim)
    assert answer.session_id == 0
    assert wire.fetch_partition(answer).error_code == ErrorCode.topic_authorization_failed
    assert (metric(cluster, SESSIONS), metric(cluster, CACHED)) == (sessions, cached)

    # Alice may read fs-a, not fs-b: her session holds fs-a only; fs-b is refused.
    both = replace(
        wire.fetch_many("fs-a", {0: 0}, session_epoch=0),
        topics=wire.fetch_many("fs-a", {0: 0}).topics + wire.fetch_many("fs-b", {0: 0}).topics,
    )

    def alice_reads() -> Any:
        (answer,) = ask(cluster, ALICE, both)
        errors = {t.topic: t.partitions[0].error_code for t in answer.responses}
        return answer if errors.get("fs-a") == ErrorCode.none else None

    answer = wait_until("alice's READ on fs-a in force", alice_reads, 20)
    errors = {t.topic: t.partitions[0].error_code for t in answer.responses}
    assert errors == {"fs-a": ErrorCode.none, "fs-b": ErrorCode.topic_authorization_failed}
    assert answer.session_id != 0
    # One partition per session opened (each try was a new session): fs-a alone.
    assert metric(cluster, CACHED) - cached == metric(cluster, SESSIONS) - sessions > 0
