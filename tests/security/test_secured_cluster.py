"""A secured cluster under hostile or careless peers (docs/security.md).

Three SASL_SSL brokers from `cluster_factory(3, security="sasl_ssl")`, inter-broker
traffic as the super user `admin` (SCRAM-SHA-512), ACL authorizer with
`allow.everyone.if.no.acl.found=false`:

- a broker started with a wrong inter-broker password registers in ZooKeeper and hears
  the controller (whose own login is good), but cannot fetch: it never gets a byte of a
  partition assigned to it nor (re)joins its ISR; made controller, it cannot tell the
  other brokers anything (a topic it creates stays unknown to them);
- clients that send LeaderAndIsr / UpdateMetadata / StopReplica / ControlledShutdown
  themselves (bob without any ACL; alice with every right but ClusterAction) are told
  CLUSTER_AUTHORIZATION_FAILED and nothing changes on the broker;
- a SCRAM user added while the cluster runs logs in on every broker at once, and cannot
  once the credential is deleted, with no restart;
- bad bytes (TLS to a PLAINTEXT listener, plaintext to SASL_SSL, garbage and oversized
  SASL tokens and frames, 50 wrong passwords) get Kafka's error or a closed connection,
  one log line each naming the peer, while a good client is served throughout;
- connection limits: 200 sockets that never finish their TLS handshake hold at most
  `max.connections.per.ip` (50) slots, only until the authentication bound, and leave
  no descriptor behind; a client from another address is served all along.
"""

from __future__ import annotations

import asyncio
import os
import re
import select
import socket
import ssl
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate import v1 as sasl_authenticate_v1
from kio.schema.sasl_handshake import v1 as sasl_handshake_v1

from strandline.client.connection import KafkaConnection, SaslError
from strandline.client.security import ClientSecurity
from strandline.coordination.zk_client import ZkClient
from strandline.coordination.zookeeper_server import free_port
from strandline.launcher.local_cluster import BrokerProcess, answers_metadata
from strandline.protocol import controller_messages as cm
from strandline.protocol.codec import encode_request
from strandline.protocol.controller_requests import (
    BrokerInfo,
    LeaderAndIsrRequest,
    PartitionState,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from strandline.security.scram import SCRAM_MECHANISMS, make_credential
from strandline.types import TopicPartition
from tests.cli.support import tool
from tests.waiting import wait_until

if TYPE_CHECKING:
    from strandline.launcher.local_cluster import LocalCluster
    from tests.conftest import ClusterFactory

SASL_SSL_PROTOCOL_ID = cm.SECURITY_PROTOCOL_IDS["SASL_SSL"]
_configs_ok = tool("configs")[1]


# --- helpers ------------------------------------------------------------------------------


def config_for(cluster: LocalCluster, user: str, password: str) -> dict[str, str]:
    return {**cluster.client_config, "sasl.username": user, "sasl.password": password}


def security_for(cluster: LocalCluster, user: str, password: str) -> ClientSecurity:
    security = ClientSecurity.from_config(config_for(cluster, user, password))
    assert security is not None
    return security


def tls_only(cluster: LocalCluster) -> ClientSecurity:
    """TLS to the SASL_SSL listener without logging in: for hand-made SASL exchanges."""
    security = ClientSecurity.from_config(
        {"security.protocol": "SSL", "ssl.ca.location": cluster.client_config["ssl.ca.location"]}
    )
    assert security is not None
    return security


def login_error(cluster: LocalCluster, broker_id: int, user: str, password: str) -> str | None:
    """None when `user` logs in on the broker, else why not."""

    async def attempt() -> str | None:
        try:
            conn = await KafkaConnection.open(
                *cluster.broker_address(broker_id),
                timeout=5,
                security=security_for(cluster, user, password),
            )
        except SaslError as e:
            return f"SaslError: {e}"
        except (OSError, TimeoutError) as e:
            return f"{type(e).__name__}: {e}"
        await conn.close()
        return None

    return asyncio.run(attempt())


def logs_in(cluster: LocalCluster, broker_id: int, user: str, password: str) -> bool:
    return login_error(cluster, broker_id, user, password) is None


def refused_login(cluster: LocalCluster, broker_id: int, user: str, password: str) -> bool:
    """The broker answered the login with SASL_AUTHENTICATION_FAILED."""
    return "SaslError" in str(login_error(cluster, broker_id, user, password))


def add_users(cluster: LocalCluster, users: dict[str, str]) -> None:
    assert cluster.zk_connect is not None
    with ZkClient(cluster.zk_connect).connect() as zk:
        for name, password in users.items():
            credentials: dict[str, str | None] = {
                m: make_credential(SCRAM_MECHANISMS[m], password).format() for m in SCRAM_MECHANISMS
            }
            zk.alter_user_scram_credentials(name, credentials)
    for broker_id in cluster.brokers:
        for name, password in users.items():
            wait_until(
                f"{name} logs in on broker {broker_id}",
                partial(logs_in, cluster, broker_id, name, password),
                30,
            )


def admin_client(cluster: LocalCluster) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient(
        {"bootstrap.servers": cluster.bootstrap, **cluster.client_config, "log_level": 0}
    )


def create_topic(cluster: LocalCluster, name: str, assignment: list[list[int]]) -> None:
    from confluent_kafka.admin import NewTopic

    admin = admin_client(cluster)  # kept: its futures fail once the handle is gone
    futures = admin.create_topics(
        [NewTopic(name, len(assignment), replica_assignment=assignment)], operation_timeout=30
    )
    futures[name].result(60)


def produce(cluster: LocalCluster, topic: str, count: int, acks: str = "all") -> None:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            **cluster.client_config,
            "acks": acks,
            "log_level": 0,
        }
    )
    for i in range(count):
        producer.produce(topic, f"record-{i}".encode())
    assert producer.flush(30) == 0


def server_log(cluster: LocalCluster, broker_id: int) -> Path:
    return cluster.broker_dir(broker_id) / "logs" / "server.log"


def log_lines(cluster: LocalCluster, broker_id: int) -> list[str]:
    return server_log(cluster, broker_id).read_text(errors="replace").splitlines()


def partition_state(cluster: LocalCluster, tp: TopicPartition) -> Any:
    assert cluster.zk_connect is not None
    with ZkClient(cluster.zk_connect).connect() as zk:
        return zk.get_partition_state(tp)


def isr(cluster: LocalCluster, tp: TopicPartition) -> tuple[int, ...] | None:
    state = partition_state(cluster, tp)
    return None if state is None else tuple(state[0].isr)


def metadata(cluster: LocalCluster, broker_id: int) -> Any:
    return answers_metadata(
        *cluster.broker_address(broker_id), timeout=5, security=cluster.client_security
    )


def metadata_view(cluster: LocalCluster, broker_id: int) -> dict[str, Any]:
    """What a broker tells clients: brokers, controller, each partition's leader, epoch,
    replicas and ISR."""
    answer = metadata(cluster, broker_id)
    return {
        "brokers": sorted((int(b.node_id), b.host, int(b.port)) for b in answer.brokers),
        "controller": int(answer.controller_id),
        "partitions": sorted(
            (
                str(t.name),
                int(p.partition_index),
                int(p.leader_id),
                int(p.leader_epoch),
                tuple(int(r) for r in p.replica_nodes),
                tuple(int(r) for r in p.isr_nodes),
            )
            for t in answer.topics
            for p in t.partitions
        ),
    }


def log_bytes(cluster: LocalCluster, broker_id: int, tp: TopicPartition) -> int:
    directory = cluster.log_dir(broker_id) / f"{tp.topic}-{tp.partition}"
    return sum(f.stat().st_size for f in directory.glob("*.log"))


# --- a broker without the inter-broker credentials --------------------------------------------


def start_rogue_broker(cluster: LocalCluster, broker_id: int) -> None:
    """Broker `broker_id` with broker 1's settings but a wrong password in its
    sasl.jaas.config, started with LocalCluster's own spawning; it shares broker 1's
    certificate (same host)."""
    settings = {}
    for line in cluster.config_path(1).read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and not line.startswith("#"):
            settings[key] = value
    port = free_port()
    broker_dir = cluster.broker_dir(broker_id)
    for sub in ("data", "logs"):
        (broker_dir / sub).mkdir(parents=True, exist_ok=True)
    jaas = settings["sasl.jaas.config"]
    assert 'password="' in jaas
    settings.update(
        {
            "broker.id": str(broker_id),
            "listeners": f"SASL_SSL://127.0.0.1:{port}",
            "advertised.listeners": f"SASL_SSL://127.0.0.1:{port}",
            "log.dirs": str(broker_dir / "data"),
            "strandline.logs.dir": str(broker_dir / "logs"),
            "metrics.port": "0",
            "sasl.jaas.config": jaas.split('password="')[0] + 'password="not-the-password";',
        }
    )
    cluster.config_path(broker_id).write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    cluster.brokers[broker_id] = BrokerProcess(broker_id, port, metrics_port=None)
    cluster._spawn(broker_id)
    cluster._save()


def test_broker_without_inter_broker_credentials_cannot_join(
    cluster_factory: ClusterFactory,
) -> None:
    cluster = cluster_factory(3, security="sasl_ssl", replica_lag_time_max_ms=3000)
    rogue = 4
    start_rogue_broker(cluster, rogue)
    # It registers, and the controller's requests reach it (the controller logs in
    # with the right password): it answers Metadata listing itself.
    wait_until("broker 4 registers", lambda: rogue in cluster.status().live_brokers, 30)
    wait_until(
        "broker 4 hears the controller",
        lambda: rogue in [b[0] for b in metadata_view(cluster, rogue)["brokers"]],
        30,
    )

    # A partition led by broker 1 with broker 4 as its follower.
    tp = TopicPartition("rogue", 0)
    create_topic(cluster, tp.topic, [[1, rogue]])
    produce(cluster, tp.topic, 20, acks="1")
    # Created with both replicas in its ISR, as Kafka does; broker 4 cannot fetch, so
    # the leader drops it after replica.lag.time.max.ms ...
    wait_until("ISR shrinks to [1]", lambda: isr(cluster, tp) == (1,), 30)
    # ... and it never comes back, however long records keep coming.
    for round_ in range(10):
        produce(cluster, tp.topic, 5, acks="1")
        state = partition_state(cluster, tp)[0]
        assert state.leader == 1 and rogue not in state.isr, (round_, state)
        time.sleep(0.5)
    assert log_bytes(cluster, 1, tp) > 0
    assert log_bytes(cluster, rogue, tp) == 0, "broker 4 got records it cannot have fetched"
    fetcher_failures = [
        line
        for line in log_lines(cluster, rogue)
        if "fetcher to broker 1" in line and "SASL" in line
    ]
    assert fetcher_failures, "broker 4's log shows no failed fetcher login"
    assert any(
        re.search(
            r"SASL authentication of 127\.0\.0\.1:\d+ on listener SASL_SSL failed: "
            r"invalid client proof",
            line,
        )
        for line in log_lines(cluster, 1)
    )

    # Made controller (brokers 1-3 paused until their ZooKeeper sessions end), it
    # cannot send them anything: a topic it puts on them stays unknown to them.
    for broker_id in (1, 2, 3):
        cluster.kill(broker_id, "STOP")
    try:
        wait_until(
            "broker 4 alone, and controller",
            lambda: (
                set(cluster.status().live_brokers) == {rogue}
                and cluster.status().controller == rogue
            ),
            30,
        )
    finally:
        for broker_id in (1, 2, 3):
            cluster.kill(broker_id, "CONT")
    wait_until(
        "brokers 1-3 register again",
        lambda: set(cluster.status().live_brokers) == {1, 2, 3, rogue},
        30,
    )
    assert cluster.status().controller == rogue
    orphan = TopicPartition("orphan", 0)
    assert cluster.zk_connect is not None
    with ZkClient(cluster.zk_connect).connect() as zk:
        zk.create_topic(orphan.topic, {0: [1, 2, 3]})
    # The controller does its part in ZooKeeper: a leader among 1-3 ...
    state = wait_until("orphan-0 gets a leader", lambda: partition_state(cluster, orphan), 30)
    assert state[0].leader in (1, 2, 3)
    # ... but no LeaderAndIsr or UpdateMetadata gets through to them.
    for _ in range(10):
        for broker_id in (1, 2, 3):
            topics = {p[0] for p in metadata_view(cluster, broker_id)["partitions"]}
            assert orphan.topic not in topics, f"broker {broker_id} learned of {orphan.topic}"
            assert not (cluster.log_dir(broker_id) / "orphan-0").exists()
        time.sleep(0.5)


# --- controller requests from clients ---------------------------------------------------------


@dataclass
class Probe:
    """The controller's requests, made up with the cluster's current epochs: without
    the authorization check they would be applied."""

    requests: list[tuple[str, int, Any]] = field(default_factory=list)  # (name, broker, wire)


def forged_requests(cluster: LocalCluster, target: int, tp: TopicPartition) -> Probe:
    status = cluster.status()
    assert status.controller is not None and status.controller_epoch is not None
    controller, epoch = status.controller, status.controller_epoch
    broker_epoch = status.broker_epochs[target]
    state, zk_version = partition_state(cluster, tp)
    host, port = cluster.broker_address(target)
    me = BrokerInfo(target, host, port, None)
    leader_and_isr = LeaderAndIsrRequest(
        controller_id=controller,
        controller_epoch=epoch,
        broker_epoch=broker_epoch,
        partitions=(
            PartitionState(
                tp=tp,
                controller_epoch=epoch,
                leader=target,
                leader_epoch=state.leader_epoch + 10,
                isr=(target,),
                zk_version=zk_version + 1,
                replicas=(1, 2, 3),
            ),
        ),
        live_leaders=(me,),
    )
    update_metadata = UpdateMetadataRequest(
        controller_id=controller,
        controller_epoch=epoch,
        broker_epoch=broker_epoch,
        partitions=(),
        live_brokers=(me,),
        deleted_topics=(tp.topic,),
    )
    stop = StopReplicaRequest(controller, epoch, broker_epoch, (tp,), delete_partitions=True)
    empty_stop = StopReplicaRequest(controller, epoch, broker_epoch, (), delete_partitions=True)
    shutdown = cm.ControlledShutdownRequest(broker_id=target, broker_epoch=broker_epoch)
    return Probe(
        [
            ("LeaderAndIsr", target, cm.leader_and_isr_request_to_wire(leader_and_isr)),
            (
                "UpdateMetadata",
                target,
                cm.update_metadata_request_to_wire(
                    update_metadata,
                    deleted_topic_partitions={tp.topic: [tp.partition]},
                    listener="SASL_SSL",
                    security_protocol=SASL_SSL_PROTOCOL_ID,
                ),
            ),
            ("StopReplica (delete)", target, cm.stop_replica_request_to_wire(stop)),
            ("StopReplica (empty)", target, cm.stop_replica_request_to_wire(empty_stop)),
            (
                "ControlledShutdown",
                controller,
                cm.controlled_shutdown_request_to_wire(shutdown),
            ),
        ]
    )


def send_all(
    cluster: LocalCluster, probe: Probe, user: str, password: str
) -> dict[str, tuple[ErrorCode, list[ErrorCode]]]:
    """name -> (top-level error, per-partition errors)."""

    async def run() -> dict[str, tuple[ErrorCode, list[ErrorCode]]]:
        answers = {}
        for name, broker_id, wire in probe.requests:
            async with await KafkaConnection.open(
                *cluster.broker_address(broker_id),
                timeout=10,
                security=security_for(cluster, user, password),
            ) as conn:
                response = await conn.send(wire, timeout=10)
            partitions: list[ErrorCode] = []
            for topic in getattr(response, "topics", ()):
                partitions += [p.error_code for p in topic.partition_errors]
            partitions += [p.error_code for p in getattr(response, "partition_errors", ())]
            answers[name] = (response.error_code, partitions)
        return answers

    return asyncio.run(run())


def test_controller_requests_from_clients_are_refused(cluster_factory: ClusterFactory) -> None:
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    cluster = cluster_factory(3, security="sasl_ssl")
    add_users(cluster, {"bob": "bob-pw", "alice": "alice-pw"})
    tp = TopicPartition("victim", 0)
    create_topic(cluster, tp.topic, [[1, 2, 3]])
    produce(cluster, tp.topic, 5)
    # alice: everything on the topic, and every cluster right but ClusterAction.
    operations = [("topic", tp.topic, AclOperation.ALL)]
    operations += [
        ("cluster", "kafka-cluster", op)
        for op in (
            AclOperation.ALTER,
            AclOperation.ALTER_CONFIGS,
            AclOperation.CREATE,
            AclOperation.DESCRIBE,
            AclOperation.DESCRIBE_CONFIGS,
            AclOperation.IDEMPOTENT_WRITE,
        )
    ]
    bindings = [
        AclBinding(
            ResourceType.TOPIC if kind == "topic" else ResourceType.BROKER,
            name,
            ResourcePatternType.LITERAL,
            "User:alice",
            "*",
            op,
            AclPermissionType.ALLOW,
        )
        for kind, name, op in operations
    ]
    admin = admin_client(cluster)
    for future in admin.create_acls(bindings, request_timeout=30).values():
        future.result(30)
    cluster.wait_for_full_metadata()
    target = 2
    wait_until("victim-0 fully in sync", lambda: isr(cluster, tp) == (1, 2, 3), 30)
    before = {b: metadata_view(cluster, b) for b in cluster.brokers}
    zk_before = partition_state(cluster, tp)
    status_before = cluster.status()
    state_change_log = cluster.broker_dir(target) / "logs" / "state-change.log"
    state_changes_before = len(state_change_log.read_text().splitlines())
    data_before = log_bytes(cluster, target, tp)
    assert data_before > 0

    probe = forged_requests(cluster, target, tp)
    refused = ErrorCode.cluster_authorization_failed
    for user, password in (("bob", "bob-pw"), ("alice", "alice-pw")):
        answers = send_all(cluster, probe, user, password)
        print(f"\n{user}: " + ", ".join(f"{n}={e.name}" for n, (e, _) in answers.items()))
        for name, (error, partitions) in answers.items():
            assert error == refused, f"{user} {name}: {error!r}"
            assert all(p == refused for p in partitions), f"{user} {name}: {partitions}"

    # The same requests are well-formed: the super user gets past the authorizer and
    # is fenced by the epoch check instead (a stale controller epoch: harmless).
    stale = forged_requests(cluster, target, tp)
    stale.requests = [
        ("LeaderAndIsr", target, _with_controller_epoch(r, -1))
        for name, _, r in stale.requests
        if name == "LeaderAndIsr"
    ]
    admin_answers = send_all(cluster, stale, "admin", cluster.client_config["sasl.password"])
    assert admin_answers["LeaderAndIsr"][0] == ErrorCode.stale_controller_epoch, admin_answers

    # Nothing changed: what every broker tells clients, ZooKeeper, the replica's data,
    # and the target's state-change log (no request was applied, only the stale one
    # recorded as rejected).
    assert {b: metadata_view(cluster, b) for b in cluster.brokers} == before
    assert partition_state(cluster, tp) == zk_before
    status_after = cluster.status()
    assert status_after.controller == status_before.controller
    assert status_after.broker_epochs == status_before.broker_epochs
    assert log_bytes(cluster, target, tp) == data_before
    new_changes = state_change_log.read_text().splitlines()[state_changes_before:]
    assert all('"rejected-stale-controller"' in line for line in new_changes), new_changes


def _with_controller_epoch(wire: Any, delta: int) -> Any:
    plain = cm.leader_and_isr_request_from_wire(wire)
    stale_epoch = plain.controller_epoch + delta
    partitions = tuple(
        PartitionState(
            p.tp,
            stale_epoch,
            p.leader,
            p.leader_epoch,
            p.isr,
            p.zk_version,
            p.replicas,
            p.is_new,
        )
        for p in plain.partitions
    )
    return cm.leader_and_isr_request_to_wire(
        LeaderAndIsrRequest(
            plain.controller_id, stale_epoch, plain.broker_epoch, partitions, plain.live_leaders
        )
    )


# --- SCRAM users come and go while the cluster runs -------------------------------------------


def test_scram_user_added_and_removed_without_restart(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(3, security="sasl_ssl")
    pids = {b: p.pid for b, p in cluster.brokers.items()}
    command_config = str(cluster.data_dir / "client.properties")
    brokers = sorted(cluster.brokers)

    def configs(*args: str) -> str:
        return _configs_ok(
            "--bootstrap-server",
            cluster.bootstrap,
            "--command-config",
            command_config,
            "--entity-type",
            "users",
            "--entity-name",
            "carol",
            "--alter",
            *args,
        )

    for broker_id in brokers:
        assert "SaslError" in str(login_error(cluster, broker_id, "carol", "carol-pw"))

    added = time.monotonic()
    configs("--add-config", "SCRAM-SHA-512=[password=carol-pw]")
    took = {}
    for broker_id in brokers:
        wait_until(
            f"carol logs in on broker {broker_id}",
            partial(logs_in, cluster, broker_id, "carol", "carol-pw"),
            5,
        )
        took[broker_id] = time.monotonic() - added
    assert login_error(cluster, 1, "carol", "wrong") is not None

    removed = time.monotonic()
    configs("--delete-config", "SCRAM-SHA-512")
    gone = {}
    for broker_id in brokers:
        wait_until(
            f"carol is refused by broker {broker_id}",
            partial(refused_login, cluster, broker_id, "carol", "carol-pw"),
            5,
        )
        gone[broker_id] = time.monotonic() - removed
    print(
        f"\ncarol logs in after {', '.join(f'broker {b}: {t:.2f} s' for b, t in took.items())}; "
        f"refused after {', '.join(f'broker {b}: {t:.2f} s' for b, t in gone.items())}"
    )
    assert {b: p.pid for b, p in cluster.brokers.items()} == pids
    assert all(cluster.is_running(b) for b in brokers)


# --- bad input ------------------------------------------------------------------------------


class GoodClient:
    """A logged-in client asking for Metadata every 20 ms in its own thread; records
    failures and the slowest answer."""

    def __init__(self, cluster: LocalCluster, broker_id: int, local_host: str | None = None):
        self.cluster = cluster
        self.broker_id = broker_id
        self.local_host = local_host
        self.answers = 0
        self.failures: list[str] = []
        self.slowest_s = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)

    async def _run(self) -> None:
        from kio.index import load_request_schema

        request: Any = load_request_schema(3, 12)(
            topics=None,  # type: ignore[call-arg]
            allow_auto_topic_creation=False,  # type: ignore[call-arg]
            include_topic_authorized_operations=False,  # type: ignore[call-arg]
        )
        conn = await open_from(self.cluster, self.broker_id, "admin", self.local_host)
        try:
            while not self._stop.is_set():
                start = time.monotonic()
                try:
                    await conn.send(request, timeout=10)
                    self.answers += 1
                except Exception as e:  # noqa: BLE001 - recorded, the test fails on it
                    self.failures.append(f"{type(e).__name__}: {e}")
                    await conn.close()
                    conn = await open_from(self.cluster, self.broker_id, "admin", self.local_host)
                self.slowest_s = max(self.slowest_s, time.monotonic() - start)
                await asyncio.sleep(0.02)
        finally:
            await conn.close()

    def __enter__(self) -> GoodClient:
        self._thread.start()
        wait_until("the good client starts", lambda: self.answers > 0 or self.failures, 15)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(15)


async def open_from(
    cluster: LocalCluster, broker_id: int, user: str, local_host: str | None = None
) -> KafkaConnection:
    """A logged-in connection, from `local_host` (127.0.0.2: another client IP) if given."""
    password = cluster.client_config["sasl.password"] if user == "admin" else f"{user}-pw"
    security = security_for(cluster, user, password)
    if local_host is None:
        return await KafkaConnection.open(
            *cluster.broker_address(broker_id), timeout=10, security=security
        )
    host, port = cluster.broker_address(broker_id)
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection(
            host,
            port,
            ssl=security.ssl_context,
            server_hostname=host,
            local_addr=(local_host, 0),
        ),
        10,
    )
    conn = KafkaConnection(reader, writer)
    await asyncio.wait_for(conn._authenticate(security), 10)
    return conn


def client_hello() -> bytes:
    """The first flight of a real TLS client, made in memory."""
    context = ssl.create_default_context()
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname="127.0.0.1")
    try:
        tls.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


def closed_within(sock: socket.socket | ssl.SSLSocket, timeout_s: float) -> tuple[bool, bytes]:
    """(whether the peer closed the connection within the time, what it sent first)."""
    sock.settimeout(timeout_s)
    received = b""
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            chunk = sock.recv(65536)
            if not chunk:
                return True, received
            received += chunk
    except (ConnectionResetError, BrokenPipeError, ssl.SSLError, ssl.SSLEOFError):
        return True, received
    except TimeoutError:
        return False, received
    return False, received


@contextmanager
def raw(host: str, port: int, tls: ssl.SSLContext | None = None) -> Iterator[Any]:
    sock = socket.create_connection((host, port), timeout=10)
    if tls is not None:
        sock = tls.wrap_socket(sock, server_hostname=host)
    try:
        yield sock
    finally:
        sock.close()


def frame(correlation_id: int, request: Any) -> bytes:
    return encode_request(correlation_id, "bad-input", request)


def read_response(sock: Any, request: Any) -> Any:
    from strandline.client.connection import decode_response, response_type_for

    sock.settimeout(10)
    head = _recv_exactly(sock, 4)
    (size,) = struct.unpack(">i", head)
    return decode_response(_recv_exactly(sock, size), response_type_for(request))[1]


def _recv_exactly(sock: Any, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} of {n} bytes")
        data += chunk
    return data


def new_lines(cluster: LocalCluster, broker_id: int, before: int) -> list[str]:
    return log_lines(cluster, broker_id)[before:]


def test_tls_client_hello_to_a_plaintext_listener(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(1)
    host, port = cluster.broker_address(1)
    start = len(log_lines(cluster, 1))
    hello = client_hello()
    assert hello[0] == 0x16  # a TLS handshake record: as a Kafka size, ~369 MB
    with raw(host, port) as sock:
        local_port = sock.getsockname()[1]
        sock.sendall(hello)
        closed, answer = closed_within(sock, 5)
    assert closed and answer == b"", answer  # Kafka: InvalidReceiveException, closed
    peer = f"127.0.0.1:{local_port}"
    lines = wait_until(
        "a log line naming the peer",
        lambda: [line for line in new_lines(cluster, 1, start) if peer in line],
        5,
    )
    assert len(lines) == 1 and "exceeds socket.request.max.bytes" in lines[0], lines
    assert metadata(cluster, 1).brokers  # still serving


def test_bad_input_on_the_sasl_ssl_listener(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(3, security="sasl_ssl")
    host, port = cluster.broker_address(1)
    tls = tls_only(cluster).ssl_context
    assert tls is not None
    start = len(log_lines(cluster, 1))
    by_port: dict[int, str] = {}  # our local port -> what the log line must say
    sasl_failures = 0

    def sasl_exchange(tokens: list[bytes], handshake: bool = True) -> list[Any]:
        """Hand-made SaslHandshake + SaslAuthenticate over TLS; the answers, then
        checks that the broker closed the connection."""
        answers = []
        with raw(host, port, tls) as sock:
            correlation = 0
            if handshake:
                request: Any = sasl_handshake_v1.SaslHandshakeRequest(mechanism="SCRAM-SHA-512")
                sock.sendall(frame(correlation, request))
                answers.append(read_response(sock, request))
            for token in tokens:
                correlation += 1
                request = sasl_authenticate_v1.SaslAuthenticateRequest(auth_bytes=token)
                sock.sendall(frame(correlation, request))
                answers.append(read_response(sock, request))
            closed, _ = closed_within(sock, 5)
            assert closed, "the broker kept the connection after a failed SASL exchange"
        return answers

    with GoodClient(cluster, 1) as good:
        # Plaintext Kafka bytes to the TLS listener: the handshake fails, closed.
        with raw(host, port) as sock:
            by_port[sock.getsockname()[1]] = "TLS handshake with"
            hello = ApiVersionsRequest(client_software_name="x", client_software_version="1")
            sock.sendall(frame(0, hello))
            assert closed_within(sock, 5)[0]

        # Garbage as the SCRAM client-first message; SaslAuthenticate before any
        # SaslHandshake. Each: Kafka's error, then the connection is closed.
        garbage = sasl_exchange([os.urandom(64)])
        assert garbage[0].error_code == ErrorCode.none
        assert garbage[1].error_code == ErrorCode.sasl_authentication_failed, garbage
        early = sasl_exchange([b"n,,n=admin,r=abc"], handshake=False)
        assert early[0].error_code == ErrorCode.illegal_sasl_state
        sasl_failures += 2
        # An oversized token (a frame > the 524288 bytes of sasl.server.max.receive.size):
        # as Kafka's authenticator, the frame is never read; the connection is closed.
        with raw(host, port, tls) as sock:
            by_port[sock.getsockname()[1]] = "exceeds sasl.server.max.receive.size"
            handshake = sasl_handshake_v1.SaslHandshakeRequest(mechanism="SCRAM-SHA-512")
            sock.sendall(frame(0, handshake))
            assert read_response(sock, handshake).error_code == ErrorCode.none
            big = sasl_authenticate_v1.SaslAuthenticateRequest(
                auth_bytes=b"n,,n=admin,r=" + b"x" * 600_000
            )
            with suppress(OSError):
                sock.sendall(frame(1, big))
            assert closed_within(sock, 5) == (True, b"")

        # Frames that are not requests: a size over what an unauthenticated peer may
        # send, an unknown API key, Metadata before logging in. Closed, one line each.
        with raw(host, port, tls) as sock:
            by_port[sock.getsockname()[1]] = "exceeds sasl.server.max.receive.size"
            sock.sendall(struct.pack(">i", 200_000_000) + b"\0" * 64)
            assert closed_within(sock, 5)[0]
        with raw(host, port, tls) as sock:
            by_port[sock.getsockname()[1]] = "unknown API key"
            sock.sendall(struct.pack(">ihhi", 10, 999, 0, 7) + b"\0\0")
            assert closed_within(sock, 5)[0]
        with raw(host, port, tls) as sock:
            by_port[sock.getsockname()[1]] = "API key 3 before SASL authentication"
            sock.sendall(struct.pack(">ihhih", 14, 3, 1, 8, -1) + struct.pack(">i", -1))
            assert closed_within(sock, 5)[0]

        # 50 wrong passwords in a row.
        refused = []
        for _ in range(50):
            refused.append(login_error(cluster, 1, "admin", "wrong-password"))
        assert all(r and "sasl_authentication_failed" in r.lower() for r in refused), {
            str(r) for r in refused
        }
        sasl_failures += 50
        answers_during = good.answers
    print(
        f"\ngood client: {answers_during} Metadata answers during the attack, "
        f"slowest {good.slowest_s * 1000:.0f} ms, failures {good.failures}"
    )
    assert not good.failures and answers_during > 10
    assert metadata(cluster, 1).brokers  # and after

    # One log line per failure, naming the peer by ip:port.
    def logged() -> bool:
        lines = new_lines(cluster, 1, start)
        sasl = [line for line in lines if "SASL authentication of 127.0.0.1" in line]
        return len(sasl) >= sasl_failures and all(
            any(f"127.0.0.1:{p}" in line for line in lines) for p in by_port
        )

    wait_until("the failures are logged", logged, 5)
    lines = new_lines(cluster, 1, start)
    for local_port, text in by_port.items():
        mine = [line for line in lines if f"127.0.0.1:{local_port} " in line]
        assert len(mine) == 1 and text in mine[0], (text, mine)
    sasl = [line for line in lines if "SASL authentication of 127.0.0.1" in line]
    assert len(sasl) == sasl_failures, sasl


# --- connection limits ------------------------------------------------------------------------


def open_descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def still_open(sock: socket.socket) -> bool:
    """Nothing but silence from the broker (whatever it sent before closing, a TLS
    alert say, is read and dropped)."""
    try:
        while sock.recv(65536, socket.MSG_DONTWAIT):
            pass
        return False
    except BlockingIOError:
        return True
    except OSError:
        return False


class DescriptorSampler:
    """The broker's open descriptors every 20 ms, in a thread."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.samples: list[tuple[float, int]] = []  # (monotonic time, descriptors)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.monotonic(), open_descriptors(self.pid)))
            time.sleep(0.02)

    def __enter__(self) -> DescriptorSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


def flood(host: str, port: int, count: int, first_bytes: bytes) -> list[socket.socket]:
    """`count` connections opened at once (non-blocking); every other one sends
    `first_bytes` (half a TLS ClientHello), the rest nothing."""
    socks = []
    for _ in range(count):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        sock.connect_ex((host, port))
        socks.append(sock)
    pending = set(socks)
    deadline = time.monotonic() + 10
    while pending and time.monotonic() < deadline:
        _, writable, _ = select.select([], list(pending), [], 0.5)
        pending -= set(writable)
    assert not pending, f"{len(pending)} connections never completed"
    for i, sock in enumerate(socks):
        if i % 2:
            with suppress(OSError):
                sock.send(first_bytes)
    return socks


def test_connection_limits_hold_against_a_flood(cluster_factory: ClusterFactory) -> None:
    bound_s = 2.0
    cluster = cluster_factory(
        1,
        security="sasl_ssl",
        config={
            "max.connections.per.ip": "50",
            "max.connections.per.ip.overrides": "127.0.0.2:100",
            "strandline.connections.max.authentication.ms": str(int(bound_s * 1000)),
        },
    )
    pid = cluster.brokers[1].pid
    assert pid is not None
    host, port = cluster.broker_address(1)
    baseline = open_descriptors(pid)
    start = len(log_lines(cluster, 1))

    socks: list[socket.socket] = []
    try:
        with DescriptorSampler(pid) as sampler:
            began = time.monotonic()
            socks = flood(host, port, 200, client_hello()[:100])
            opened = time.monotonic()
            ports = {s.getsockname()[1] for s in socks}
            # A client from another address (its own per-IP allowance) is served meanwhile.
            with GoodClient(cluster, 1, local_host="127.0.0.2") as good:
                time.sleep(0.5)
                held = sum(still_open(s) for s in socks)
            # Past the bound every flood connection is closed and its descriptor
            # released, within ~3 s.
            wait_until(
                f"flood closed and broker descriptors back near {baseline}",
                lambda: (
                    not any(still_open(s) for s in socks) and open_descriptors(pid) <= baseline + 3
                ),
                opened + bound_s + 3 - time.monotonic(),
            )
            released = time.monotonic() - opened
    finally:
        for sock in socks:
            sock.close()
    # asyncio accepts a batch of sockets (up to the listen backlog) before the per-IP
    # check runs on each: the refused ones exist for a moment. After that burst the
    # broker holds at most 50 (+1: the 127.0.0.2 client; +2: its own churn).
    limit = baseline + 50 + 3
    burst = [(at, n) for at, n in sampler.samples if n > limit]
    burst_s = (burst[-1][0] - burst[0][0]) if burst else 0.0
    settled = [n for at, n in sampler.samples if at > opened + 0.3]
    peak = max(n for _, n in sampler.samples)
    print(
        f"\n200 connections opened in {opened - began:.2f} s; {held} of them still open 0.5 s "
        f"later; broker descriptors: {baseline} before, peak {peak} (accept burst over the "
        f"limit for {burst_s * 1000:.0f} ms), at most {max(settled)} after the burst, back "
        f"to {open_descriptors(pid)} {released:.2f} s after the last connection was opened; "
        f"127.0.0.2 client: {good.answers} answers, slowest {good.slowest_s * 1000:.0f} ms, "
        f"failures {good.failures}"
    )
    assert not good.failures and good.answers > 0
    assert held <= 50, held
    assert max(settled) <= limit, (baseline, max(settled))
    # Over the limit only while the flood itself goes on (a loaded machine stretches it).
    assert burst_s < (opened - began) + 0.3, burst
    # The flooded address may connect again.
    assert login_error(cluster, 1, "admin", cluster.client_config["sasl.password"]) is None

    # Every flood connection is in the log by its address: refused at once, or
    # accepted and closed at the bound.
    def ports_in(lines: list[str], text: str) -> set[int]:
        found = set()
        for line in lines:
            if text in line:
                for word in line.replace('"', " ").split():
                    if word.startswith("127.0.0.1:") and word[10:].isdigit():
                        found.add(int(word[10:]))
        return found & ports

    lines = new_lines(cluster, 1, start)
    refused = ports_in(lines, "too many connections from 127.0.0.1 (max.connections.per.ip: 50)")
    closed = ports_in(lines, "TLS handshake with") | ports_in(lines, "not authenticated")
    print(f"log: {len(refused)} refused at once, {len(closed)} closed at the bound")
    assert not refused & closed
    assert refused | closed == ports, len(ports - refused - closed)
    assert len(refused) >= 200 - 2 * 50
