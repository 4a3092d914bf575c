"""Who may do what on a secured broker, through four real clients (docs/security.md).

One SASL_SSL broker with the ACL authorizer (`allow.everyone.if.no.acl.found=false`,
`super.users=User:admin`). For confluent-kafka, kafka-python, aiokafka and kcat, each of
seven operations is tried as each of six principals:

- no SASL: TLS only (`security.protocol=SSL`); the broker answers ApiVersions and closes
  the connection at the first other request, as Kafka does: a failed connection;
- unknown user, wrong password (alice's name): SASL_AUTHENTICATION_FAILED;
- bob: a valid SCRAM user without any ACL: the denial of a resource the operation
  needs (`BOB_DENIALS`);
- alice: the same, with exactly the ACLs each operation needs (`alice_acls`): ALLOWED;
- admin: the super user: ALLOWED.

The matrix is printed (`pytest -s`), then every cell is compared with `expected`, and
the broker's state is checked as well: a denied create left no topic, a denied delete
left the topic, a denied commit left no offset (and an allowed one did its work).

A cell is ALLOWED, or the Kafka error the client reported for the operation: raised by
the call, or — where the client only logs it, or only times out because it never got a
connection — the error its error callback (librdkafka), its log (kafka-python,
aiokafka: "Topic x is not authorized", "Connection lost: SaslAuthenticationFailed") or
its stderr (kcat) gave during the operation. CONNECTION_CLOSED: the broker closed the
connection without a SASL answer.

kcat has no admin API: create/delete topic are "n/a"; its "describe configs" row is the
nearest thing it has, `kcat -L` (Metadata, which needs Describe on the topic; alice has
it implied by her Write on dm-produce).
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strandline.coordination.zk_client import ZkClient
from strandline.security.scram import SCRAM_MECHANISMS, make_credential

if TYPE_CHECKING:
    from strandline.launcher.local_cluster import LocalCluster
    from tests.conftest import ClusterFactory

CLIENTS = ("confluent-kafka", "kafka-python", "aiokafka", "kcat")
OPS = (
    "produce",
    "consume",
    "group join",
    "offset commit",
    "create topic",
    "delete topic",
    "describe configs",
)

TOPIC_PRODUCE = "dm-produce"
TOPIC_CONSUME = "dm-consume"
TOPIC_JOIN = "dm-join"
TOPIC_COMMIT = "dm-commit"
TOPIC_CONFIGS = "dm-configs"
DATA_TOPICS = (TOPIC_PRODUCE, TOPIC_CONSUME, TOPIC_JOIN, TOPIC_COMMIT, TOPIC_CONFIGS)
SEED = "seed"

ALLOWED = "ALLOWED"
NA = "n/a"
SASL_FAILED = "SASL_AUTHENTICATION_FAILED"
CLOSED = "CONNECTION_CLOSED"
TOPIC_DENIED = "TOPIC_AUTHORIZATION_FAILED"
GROUP_DENIED = "GROUP_AUTHORIZATION_FAILED"
CLUSTER_DENIED = "CLUSTER_AUTHORIZATION_FAILED"
AUTHZ_DENIALS = (TOPIC_DENIED, GROUP_DENIED, CLUSTER_DENIED)
CONNECTION_FAILURES = (SASL_FAILED, CLOSED)

# What bob may be told: the denial of a resource the operation needs. A group member
# needs Read on its group and Describe on the topics it subscribes to, a committer Read
# on the group and on the topic; librdkafka's consumer cannot exist without a group.id
# and asks for that group's coordinator even for assigned partitions.
BOB_DENIALS = {
    "produce": (TOPIC_DENIED,),
    "consume": (TOPIC_DENIED,),
    "group join": (GROUP_DENIED, TOPIC_DENIED),
    "offset commit": (GROUP_DENIED, TOPIC_DENIED),
    "create topic": (TOPIC_DENIED,),
    "delete topic": (TOPIC_DENIED,),
    "describe configs": (TOPIC_DENIED,),
}
BOB_DENIALS_CONFLUENT_CONSUME = (TOPIC_DENIED, GROUP_DENIED)

# Client-side time bounds: small, so that a cell that can never succeed ends quickly.
CLIENT_TIMEOUT_MS = 3000
OP_DEADLINE_S = 8.0
# After a failed connection, how long an operation is still given to answer.
GRACE_AFTER_CONNECTION_FAILURE_S = 3.0

BROKER_SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "offsets.topic.num.partitions": "1",
    "offsets.topic.replication.factor": "1",
    "auto.create.topics.enable": "false",
}


@dataclass(frozen=True)
class Login:
    key: str  # used in resource and thread names
    title: str  # the column header
    sasl: bool
    username: str = ""
    password: str = ""


def logins(admin_password: str) -> tuple[Login, ...]:
    return (
        Login("nosasl", "no SASL (TLS only)", sasl=False),
        Login("unknown", "unknown user", True, "mallory", "mallory-pw"),
        Login("wrongpw", "wrong password", True, "alice", "not-alice-pw"),
        Login("bob", "bob (no ACL)", True, "bob", "bob-pw"),
        Login("alice", "alice (ACLs)", True, "alice", "alice-pw"),
        Login("admin", "admin (super user)", True, "admin", admin_password),
    )


def client_key(client: str) -> str:
    return client.replace("-", "")


def group_name(op: str, client: str, login: Login) -> str:
    return f"dm-{op.split()[-1]}-{client_key(client)}-{login.key}"


def new_topic_name(client: str, login: Login) -> str:
    return f"dm-new-{client_key(client)}-{login.key}"


def delete_topic_name(client: str, login: Login) -> str:
    return f"dm-del-{client_key(client)}-{login.key}"


def expected(client: str, op: str, login: Login) -> tuple[str, ...]:
    """The values the cell may take."""
    if client == "kcat" and op in ("create topic", "delete topic"):
        return (NA,)
    if not login.sasl:
        return (CLOSED,)
    if login.key in ("unknown", "wrongpw"):
        return (SASL_FAILED,)
    if login.key in ("alice", "admin"):
        return (ALLOWED,)
    if client == "confluent-kafka" and op == "consume":
        return BOB_DENIALS_CONFLUENT_CONSUME
    return BOB_DENIALS[op]


def alice_acls() -> list[tuple[str, str, str]]:
    """(resource type, name, operation): exactly what each of alice's cells needs."""
    acls = [
        ("topic", TOPIC_PRODUCE, "WRITE"),  # produce (and kcat -L: Write implies Describe)
        ("topic", TOPIC_CONSUME, "READ"),  # consume (an assigned partition, no group)
        ("topic", TOPIC_JOIN, "DESCRIBE"),  # group join: the subscribed topic's metadata
        ("topic", TOPIC_COMMIT, "READ"),  # offset commit: Read on the topic and the group
        ("topic", TOPIC_CONFIGS, "DESCRIBE_CONFIGS"),
    ]
    alice = Login("alice", "", True)
    for client in CLIENTS:
        acls.append(("group", group_name("group join", client, alice), "READ"))
        acls.append(("group", group_name("offset commit", client, alice), "READ"))
        if client != "kcat":
            acls.append(("topic", new_topic_name(client, alice), "CREATE"))
            acls.append(("topic", delete_topic_name(client, alice), "DELETE"))
    # librdkafka's consumer needs a group.id and looks its coordinator up.
    acls.append(("group", group_name("consume", "confluent-kafka", alice), "READ"))
    return acls


# --- what a cell observed ---------------------------------------------------------------


@dataclass
class Observation:
    ok: bool = False
    errors: list[str] = field(default_factory=list)  # Kafka error names; "_x": local ones
    connection: list[str] = field(default_factory=list)  # SASL_AUTHENTICATION_FAILED/CLOSED
    note: str = ""
    na: bool = False  # the client cannot do this at all

    def cell(self, op: str) -> str:
        if self.na:
            return NA
        if self.ok:
            return ALLOWED
        broker_errors = [e for e in self.errors if not e.startswith("_")]
        for name in (*BOB_DENIALS[op], *AUTHZ_DENIALS, SASL_FAILED):
            if name in broker_errors:
                return name
        if broker_errors:
            return broker_errors[0]
        for name in CONNECTION_FAILURES:
            if name in self.connection:
                return name
        return self.errors[0] if self.errors else "NO ANSWER"

    def add(self, found: list[str]) -> None:
        self.errors += [n for n in found if n not in CONNECTION_FAILURES]
        self.connection += [n for n in found if n in CONNECTION_FAILURES]

    def denied(self) -> bool:
        return any(e in AUTHZ_DENIALS for e in self.errors)


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"ERROR_{code}"


def classify_text(text: str) -> list[str]:
    """The Kafka errors, and failed connections, that free text reports (kcat's
    output, the Python clients' log lines)."""
    lowered = text.lower()
    found = []
    for name, needles in (
        (
            TOPIC_DENIED,
            (
                "topic authorization failed",
                "topic_authorization_failed",
                "topicauthorizationfailed",
                "is not authorized for this client",  # kafka-python, aiokafka: topics
            ),
        ),
        (
            GROUP_DENIED,
            ("group authorization failed", "group_authorization_failed", "groupauthorization"),
        ),
        (
            CLUSTER_DENIED,
            ("cluster authorization failed", "cluster_authorization_failed", "clusterauth"),
        ),
        (
            SASL_FAILED,
            (
                "sasl authentication error",
                "saslauthenticationfailed",
                "authentication failed during authentication",
            ),
        ),
    ):
        if any(n in lowered for n in needles):
            found.append(name)
    closed = (
        "disconnected",
        "connection closed",
        "closed by peer",
        "connection lost",
        "transport failure",
        "brokers are down",
        "unable connect",
        "unable to request metadata",
    )
    if SASL_FAILED not in found and any(n in lowered for n in closed):
        found.append(CLOSED)
    return found


class ClientLog:
    """What the Python clients log about errors, by the thread that logged it (each
    cell's clients log from threads named after it: kafka-python from its I/O thread
    `kafka-io-<client id>`, aiokafka from the cell's own thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: list[tuple[float, str, list[str]]] = []

    def add(self, thread: str, message: str) -> None:
        found = classify_text(message)
        if found:
            with self._lock:
                self._records.append((time.monotonic(), thread, found))

    def since(self, tag: str, start: float) -> list[str]:
        with self._lock:
            return [n for at, t, found in self._records if at >= start and tag in t for n in found]


class _Handler(logging.Handler):
    def __init__(self, log: ClientLog) -> None:
        super().__init__(logging.WARNING)
        self.log = log

    def emit(self, record: logging.LogRecord) -> None:
        self.log.add(record.threadName or "", record.getMessage())


@contextmanager
def captured_client_logs() -> Iterator[ClientLog]:
    log = ClientLog()
    handler = _Handler(log)
    saved = []
    for name in ("kafka", "aiokafka"):
        logger = logging.getLogger(name)
        saved.append((logger, logger.level, logger.propagate))
        logger.addHandler(handler)
        logger.setLevel(logging.WARNING)
        logger.propagate = False
    try:
        yield log
    finally:
        for logger, level, propagate in saved:
            logger.removeHandler(handler)
            logger.setLevel(level)
            logger.propagate = propagate


@dataclass
class Env:
    bootstrap: str
    ca: str
    log: ClientLog
    kcat: str


class Deadline:
    """An operation's time: OP_DEADLINE_S, cut short once the client has reported a
    denial, or a failed connection followed by a grace period."""

    def __init__(self, reported: Callable[[], list[str]]) -> None:
        self.start = time.monotonic()
        self.reported = reported
        self._failed_at: float | None = None

    def over(self) -> bool:
        now = time.monotonic()
        found = self.reported()
        if any(n in AUTHZ_DENIALS for n in found):
            return True
        if self._failed_at is None and any(n in CONNECTION_FAILURES for n in found):
            self._failed_at = now
        if self._failed_at is not None and now - self._failed_at > GRACE_AFTER_CONNECTION_FAILURE_S:
            return True
        return now - self.start > OP_DEADLINE_S


# --- confluent-kafka ----------------------------------------------------------------------


def run_confluent(env: Env, login: Login, ops: dict[str, Observation]) -> None:
    from confluent_kafka import (
        OFFSET_BEGINNING,
        Consumer,
        KafkaError,
        KafkaException,
        Producer,
        TopicPartition,
    )
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    client = "confluent-kafka"
    reported: list[str] = []  # from error_cb and consumer error events, in order

    def on_error(err: KafkaError) -> None:
        if err.code() == KafkaError._AUTHENTICATION:
            reported.append(SASL_FAILED)
        elif err.code() in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN):
            reported.append(CLOSED)

    base: dict[str, Any] = {
        "bootstrap.servers": env.bootstrap,
        "security.protocol": "SASL_SSL" if login.sasl else "SSL",
        "ssl.ca.location": env.ca,
        "socket.timeout.ms": CLIENT_TIMEOUT_MS,
        "reconnect.backoff.ms": 2000,
        "reconnect.backoff.max.ms": 4000,
        "log_level": 0,
        "client.id": f"dm-{client}-{login.key}",
        "error_cb": on_error,
    }
    if login.sasl:
        base["sasl.mechanism"] = "SCRAM-SHA-512"
        base["sasl.username"] = login.username
        base["sasl.password"] = login.password

    def finish(obs: Observation, mark: int) -> None:
        obs.add(reported[mark:])

    # produce
    obs, mark = ops["produce"], len(reported)
    producer = Producer({**base, "acks": "all", "message.timeout.ms": CLIENT_TIMEOUT_MS})
    delivered: list[Any] = []
    producer.produce(TOPIC_PRODUCE, b"v", on_delivery=lambda err, msg: delivered.append(err))
    producer.flush(OP_DEADLINE_S)
    if delivered:
        obs.ok = delivered[0] is None
        if delivered[0] is not None:
            obs.errors.append(delivered[0].name())
    finish(obs, mark)
    del producer

    def poll_until(consumer: Any, mark: int, done: Callable[[], bool] | None) -> bool:
        """Poll until `done()` (None: a record arrives) or the deadline; True if done.
        Consumer error events are recorded as reported."""
        deadline = Deadline(lambda: reported[mark:])
        while not deadline.over():
            if done is not None and done():
                return True
            msg = consumer.poll(0.1)
            if msg is None:
                continue
            if msg.error():
                reported.append(msg.error().name())
            elif done is None:
                return True
        return done is not None and done()

    consumer_base = {
        **base,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500,
    }

    # consume: an assigned partition, from the beginning
    obs, mark = ops["consume"], len(reported)
    consumer = Consumer({**consumer_base, "group.id": group_name("consume", client, login)})
    consumer.assign([TopicPartition(TOPIC_CONSUME, 0, OFFSET_BEGINNING)])
    obs.ok = poll_until(consumer, mark, None)
    consumer.close()
    finish(obs, mark)

    # group join: subscribe, wait for the assignment
    obs, mark = ops["group join"], len(reported)
    assigned = threading.Event()
    consumer = Consumer({**consumer_base, "group.id": group_name("group join", client, login)})
    consumer.subscribe([TOPIC_JOIN], on_assign=lambda c, parts: assigned.set())
    obs.ok = poll_until(consumer, mark, assigned.is_set)
    consumer.close()
    finish(obs, mark)

    # offset commit: offset 1 of dm-commit/0, without joining
    obs, mark = ops["offset commit"], len(reported)
    commits: list[tuple[Any, Any]] = []
    consumer = Consumer(
        {
            **consumer_base,
            "group.id": group_name("offset commit", client, login),
            "on_commit": lambda err, parts: commits.append((err, parts)),
        }
    )
    with suppress(KafkaException):
        consumer.commit(offsets=[TopicPartition(TOPIC_COMMIT, 0, 1)], asynchronous=True)
    poll_until(consumer, mark, lambda: bool(commits))
    if commits:
        err, parts = commits[0]
        part_errors = [p.error.name() for p in parts or [] if p.error is not None]
        if err is not None:
            obs.errors.append(err.name())
        obs.errors += part_errors
        obs.ok = err is None and not part_errors
    consumer.close()
    finish(obs, mark)

    admin = AdminClient(base)
    timeouts = {"request_timeout": CLIENT_TIMEOUT_MS / 1000, "operation_timeout": 4}

    def admin_op(name: str, start: Callable[[], Any]) -> None:
        obs, mark = ops[name], len(reported)
        future = start()
        end = time.monotonic() + OP_DEADLINE_S
        while not future.done() and time.monotonic() < end:
            admin.poll(0.1)  # serves error_cb
        try:
            future.result(0)
            obs.ok = True
        except KafkaException as e:
            obs.errors.append(e.args[0].name())
        except Exception as e:  # noqa: BLE001 - a future that never finished, etc.
            obs.errors.append(f"_{type(e).__name__}")
        admin.poll(0)
        finish(obs, mark)

    new_name, del_name = new_topic_name(client, login), delete_topic_name(client, login)
    resource = ConfigResource("topic", TOPIC_CONFIGS)
    admin_op(
        "create topic",
        lambda: admin.create_topics([NewTopic(new_name, 1, 1)], **timeouts)[new_name],
    )
    admin_op("delete topic", lambda: admin.delete_topics([del_name], **timeouts)[del_name])
    admin_op(
        "describe configs",
        lambda: admin.describe_configs([resource], request_timeout=CLIENT_TIMEOUT_MS / 1000)[
            resource
        ],
    )


# --- kafka-python -------------------------------------------------------------------------


def _python_client_error(e: BaseException) -> str:
    errno = getattr(e, "errno", None)
    if isinstance(errno, int) and errno > 0:
        return error_name(errno)
    return f"_{type(e).__name__}"


def run_kafka_python(env: Env, login: Login, ops: dict[str, Observation]) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic
    from kafka.structs import OffsetAndMetadata

    client = "kafka-python"
    # Its I/O thread is named after the client id: that is how its log lines are found.
    tag = f"dm-{client}-{login.key}"
    kw: dict[str, Any] = {
        "bootstrap_servers": env.bootstrap,
        "security_protocol": "SASL_SSL" if login.sasl else "SSL",
        "ssl_cafile": env.ca,
        "client_id": tag,
        "request_timeout_ms": 7000,  # kafka-python wants it above session_timeout_ms
        "reconnect_backoff_ms": 2000,
        "reconnect_backoff_max_ms": 4000,
        "api_version": (2, 5),
    }
    if login.sasl:
        kw.update(
            sasl_mechanism="SCRAM-SHA-512",
            sasl_plain_username=login.username,
            sasl_plain_password=login.password,
        )
    consumer_kw = {
        **kw,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "session_timeout_ms": 6000,
        "heartbeat_interval_ms": 500,
    }

    def run(name: str, call: Callable[[Observation, Deadline], None]) -> None:
        obs = ops[name]
        deadline = Deadline(lambda: env.log.since(tag, deadline.start))
        try:
            call(obs, deadline)
        except Exception as e:  # noqa: BLE001 - the client's error is the cell
            obs.errors.append(_python_client_error(e))
        obs.add(env.log.since(tag, deadline.start))

    def poll_until(consumer: Any, deadline: Deadline, done: Callable[[], bool] | None) -> bool:
        """Poll until `done()` (None: a record arrives) or the deadline."""
        while not deadline.over():
            if done is not None and done():
                return True
            try:
                records = consumer.poll(timeout_ms=200)
            except Exception:
                # A member that got its assignment may be refused the fetch that follows
                # (alice may Describe dm-join, not Read it): not this cell's business.
                if done is not None and done():
                    return True
                raise
            if done is None and records:
                return True
        return done is not None and done()

    def produce(obs: Observation, deadline: Deadline) -> None:
        producer = KafkaProducer(acks="all", max_block_ms=CLIENT_TIMEOUT_MS, **kw)
        try:
            producer.send(TOPIC_PRODUCE, b"v").get(timeout=OP_DEADLINE_S)
            obs.ok = True
        finally:
            producer.close(timeout=1)

    def consume(obs: Observation, deadline: Deadline) -> None:
        consumer = KafkaConsumer(group_id=None, **consumer_kw)
        try:
            tp = TopicPartition(TOPIC_CONSUME, 0)
            consumer.assign([tp])
            consumer.seek_to_beginning(tp)
            obs.ok = poll_until(consumer, deadline, None)
        finally:
            consumer.close(autocommit=False)

    def join(obs: Observation, deadline: Deadline) -> None:
        consumer = KafkaConsumer(group_id=group_name("group join", client, login), **consumer_kw)
        try:
            consumer.subscribe([TOPIC_JOIN])
            obs.ok = poll_until(consumer, deadline, lambda: bool(consumer.assignment()))
        finally:
            consumer.close(autocommit=False)

    def commit(obs: Observation, deadline: Deadline) -> None:
        consumer = KafkaConsumer(group_id=group_name("offset commit", client, login), **consumer_kw)
        try:
            tp = TopicPartition(TOPIC_COMMIT, 0)
            consumer.assign([tp])
            consumer.commit({tp: OffsetAndMetadata(1, "", -1)})
            obs.ok = True
        finally:
            consumer.close(autocommit=False)

    run("produce", produce)
    run("consume", consume)
    run("group join", join)
    run("offset commit", commit)

    admin: list[Any] = []

    def with_admin(call: Callable[[Any, Observation], None]) -> Callable[..., None]:
        def op(obs: Observation, deadline: Deadline) -> None:
            if not admin:
                admin.append(KafkaAdminClient(bootstrap_timeout_ms=CLIENT_TIMEOUT_MS, **kw))
            call(admin[0], obs)

        return op

    def create(a: Any, obs: Observation) -> None:
        a.create_topics([NewTopic(new_topic_name(client, login), 1, 1)], timeout_ms=4000)
        obs.ok = True

    def delete(a: Any, obs: Observation) -> None:
        a.delete_topics([delete_topic_name(client, login)], timeout_ms=4000)
        obs.ok = True

    def describe(a: Any, obs: Observation) -> None:
        # kafka-python 3.0's describe_configs drops each resource's error code (an
        # unauthorized topic comes back as "no configs"), so read the raw response.
        request = a._describe_configs_request(
            [ConfigResource(ConfigResourceType.TOPIC, TOPIC_CONFIGS)]
        )

        async def send() -> Any:
            return await a._manager.send(request)

        response = a._manager.run(send)
        codes = [r.error_code for r in response.results]
        obs.errors += [error_name(c) for c in codes if c]
        obs.ok = not any(codes)

    try:
        run("create topic", with_admin(create))
        run("delete topic", with_admin(delete))
        run("describe configs", with_admin(describe))
    finally:
        if admin:
            admin[0].close()


# --- aiokafka -----------------------------------------------------------------------------


def run_aiokafka(env: Env, login: Login, ops: dict[str, Observation]) -> None:
    asyncio.run(_run_aiokafka(env, login, ops))


async def _run_aiokafka(env: Env, login: Login, ops: dict[str, Observation]) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
    from aiokafka.helpers import create_ssl_context

    client = "aiokafka"
    tag = threading.current_thread().name  # aiokafka logs from this thread's loop
    kw: dict[str, Any] = {
        "bootstrap_servers": env.bootstrap,
        "security_protocol": "SASL_SSL" if login.sasl else "SSL",
        "ssl_context": create_ssl_context(cafile=env.ca),
        "client_id": f"dm-{client}-{login.key}",
        "request_timeout_ms": CLIENT_TIMEOUT_MS,
    }
    if login.sasl:
        kw.update(
            sasl_mechanism="SCRAM-SHA-512",
            sasl_plain_username=login.username,
            sasl_plain_password=login.password,
        )
    consumer_kw = {
        **kw,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "session_timeout_ms": 6000,
        "heartbeat_interval_ms": 500,
    }

    async def run(name: str, call: Callable[[Observation, Deadline], Any]) -> None:
        obs = ops[name]
        deadline = Deadline(lambda: env.log.since(tag, deadline.start))
        try:
            await asyncio.wait_for(call(obs, deadline), OP_DEADLINE_S + 2)
        except Exception as e:  # noqa: BLE001 - the client's error is the cell
            obs.errors.append(_python_client_error(e))
        obs.add(env.log.since(tag, deadline.start))

    async def produce(obs: Observation, deadline: Deadline) -> None:
        producer = AIOKafkaProducer(acks="all", **kw)
        try:
            await producer.start()
            await producer.send_and_wait(TOPIC_PRODUCE, b"v")
            obs.ok = True
        finally:
            await producer.stop()

    async def consume(obs: Observation, deadline: Deadline) -> None:
        consumer = AIOKafkaConsumer(group_id=None, **consumer_kw)
        try:
            await consumer.start()
            tp = TopicPartition(TOPIC_CONSUME, 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            while not deadline.over():
                if await consumer.getmany(timeout_ms=200):
                    obs.ok = True
                    return
        finally:
            await consumer.stop()

    async def join(obs: Observation, deadline: Deadline) -> None:
        consumer = AIOKafkaConsumer(
            TOPIC_JOIN, group_id=group_name("group join", client, login), **consumer_kw
        )
        try:
            await consumer.start()
            while not consumer.assignment() and not deadline.over():
                # getmany surfaces the coordinator's errors (GroupAuthorizationFailed);
                # once assigned, a fetch refused for lack of Read is not this cell's.
                try:
                    await consumer.getmany(timeout_ms=200)
                except Exception:
                    if not consumer.assignment():
                        raise
            obs.ok = bool(consumer.assignment())
        finally:
            await consumer.stop()

    async def commit(obs: Observation, deadline: Deadline) -> None:
        consumer = AIOKafkaConsumer(
            group_id=group_name("offset commit", client, login), **consumer_kw
        )
        try:
            await consumer.start()
            tp = TopicPartition(TOPIC_COMMIT, 0)
            consumer.assign([tp])
            await consumer.commit({tp: 1})
            obs.ok = True
        finally:
            await consumer.stop()

    await run("produce", produce)
    await run("consume", consume)
    await run("group join", join)
    await run("offset commit", commit)

    admin = AIOKafkaAdminClient(**kw)
    started: list[bool] = []

    async def ensure_started() -> None:
        if not started:
            await admin.start()
            started.append(True)

    def record(obs: Observation, codes: list[int]) -> None:
        obs.errors += [error_name(c) for c in codes if c]
        obs.ok = not any(codes)

    async def create(obs: Observation, deadline: Deadline) -> None:
        await ensure_started()
        response = await admin.create_topics(
            [NewTopic(new_topic_name(client, login), 1, 1)], timeout_ms=4000
        )
        record(obs, [entry[1] for entry in response.topic_errors])

    async def delete(obs: Observation, deadline: Deadline) -> None:
        await ensure_started()
        response = await admin.delete_topics([delete_topic_name(client, login)], timeout_ms=4000)
        record(obs, [entry[1] for entry in response.topic_error_codes])

    async def describe(obs: Observation, deadline: Deadline) -> None:
        await ensure_started()
        responses = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, TOPIC_CONFIGS)]
        )
        record(obs, [r[0] for response in responses for r in response.resources])

    try:
        await run("create topic", create)
        await run("delete topic", delete)
        await run("describe configs", describe)
    finally:
        if started:
            await admin.close()


# --- kcat -----------------------------------------------------------------------------------


def run_kcat(env: Env, login: Login, ops: dict[str, Observation]) -> None:
    client = "kcat"
    args = [
        env.kcat,
        "-b",
        env.bootstrap,
        "-X",
        f"security.protocol={'SASL_SSL' if login.sasl else 'SSL'}",
        "-X",
        f"ssl.ca.location={env.ca}",
        "-X",
        f"socket.timeout.ms={CLIENT_TIMEOUT_MS}",
        "-X",
        "reconnect.backoff.ms=2000",
        "-X",
        "reconnect.backoff.max.ms=4000",
    ]
    if login.sasl:
        args += ["-X", "sasl.mechanisms=SCRAM-SHA-512"]
        args += ["-X", f"sasl.username={login.username}", "-X", f"sasl.password={login.password}"]

    def run(obs: Observation, extra: list[str], stdin: str = "") -> tuple[int | None, str]:
        """(exit status, None if stopped at the deadline; stdout); stderr is observed."""
        try:
            done = subprocess.run(
                [*args, *extra], input=stdin, capture_output=True, text=True, timeout=OP_DEADLINE_S
            )
            out, err, rc = done.stdout, done.stderr, done.returncode
        except subprocess.TimeoutExpired as e:
            out, err, rc = _text(e.stdout), _text(e.stderr), None
        obs.add(classify_text(err))
        return rc, out

    obs = ops["produce"]
    rc, _ = run(
        obs, ["-P", "-t", TOPIC_PRODUCE, "-X", "acks=all", "-X", "message.timeout.ms=3000"], "v\n"
    )
    obs.ok = rc == 0 and not (obs.errors or obs.connection)

    obs = ops["consume"]
    rc, out = run(obs, ["-C", "-t", TOPIC_CONSUME, "-p", "0", "-o", "beginning", "-c", "1", "-e"])
    obs.ok = rc == 0 and out.strip() == SEED

    # group join: the balanced consumer reports its assignment on stderr; stop there.
    obs = ops["group join"]
    group = group_name("group join", client, login)
    stderr = _run_until(
        [*args, "-G", group, TOPIC_JOIN, "-X", "auto.offset.reset=earliest"],
        lambda text: "assigned:" in text or bool(classify_text(text)),
    )
    obs.ok = "assigned:" in stderr
    if not obs.ok:
        obs.add(classify_text(stderr))

    # offset commit: one record in the group, auto-commit on close; the test reads the
    # committed offset back as admin.
    obs = ops["offset commit"]
    group = group_name("offset commit", client, login)
    commit_args = ["-G", group, TOPIC_COMMIT, "-c", "1", "-X", "auto.offset.reset=earliest"]
    rc, out = run(obs, [*commit_args, "-X", "enable.auto.commit=true"])
    obs.ok = rc == 0 and out.strip() == SEED
    obs.note = "-G, one record, auto-commit on close (the offset is read back as admin)"

    for op in ("create topic", "delete topic"):
        ops[op].na, ops[op].note = True, "kcat has no admin API"
    obs = ops["describe configs"]
    rc, out = run(obs, ["-L", "-t", TOPIC_PRODUCE, "-m", "4"])
    obs.add(classify_text(out))
    obs.ok = rc == 0 and f'topic "{TOPIC_PRODUCE}" with 1 partitions' in out
    obs.note = "kcat -L (Metadata) of dm-produce: kcat has no DescribeConfigs"


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data if isinstance(data, str) else data.decode(errors="replace")


def _run_until(command: list[str], done: Callable[[str], bool]) -> str:
    """Run until `done(stderr so far)` or the deadline, then stop it; its stderr."""
    process = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    lines: list[str] = []

    def read() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.append(line.decode(errors="replace"))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = time.monotonic() + OP_DEADLINE_S
    while time.monotonic() < deadline and process.poll() is None and not done("".join(lines)):
        time.sleep(0.05)
    process.terminate()
    try:
        process.wait(5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    reader.join(2)
    return "".join(lines)


RUNNERS: dict[str, Callable[[Env, Login, dict[str, Observation]], None]] = {
    "confluent-kafka": run_confluent,
    "kafka-python": run_kafka_python,
    "aiokafka": run_aiokafka,
    "kcat": run_kcat,
}


# --- set-up, the run, the table ---------------------------------------------------------------


def set_up(cluster: LocalCluster, everyone: tuple[Login, ...]) -> dict[str, Any]:
    """Users, topics (a seed record where a cell reads), alice's ACLs; returns the
    admin's librdkafka config."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )

    assert cluster.zk_connect is not None
    users = [("alice", "alice-pw"), ("bob", "bob-pw")]
    with ZkClient(cluster.zk_connect).connect() as zk:
        for name, password in users:
            credentials: dict[str, str | None] = {
                m: make_credential(SCRAM_MECHANISMS[m], password).format() for m in SCRAM_MECHANISMS
            }
            zk.alter_user_scram_credentials(name, credentials)
    wait_until_users_log_in(cluster, users)
    admin_config: dict[str, Any] = {
        "bootstrap.servers": cluster.bootstrap,
        **cluster.client_config,
        "log_level": 0,
    }
    admin = AdminClient(admin_config)
    topics = list(DATA_TOPICS)
    topics += [delete_topic_name(c, login) for c in CLIENTS if c != "kcat" for login in everyone]
    futures = admin.create_topics([NewTopic(t, 1, 1) for t in topics], operation_timeout=30)
    for future in futures.values():
        future.result(60)
    producer = Producer({**admin_config, "acks": "all"})
    for topic in (TOPIC_CONSUME, TOPIC_COMMIT, TOPIC_JOIN):
        producer.produce(topic, SEED.encode())
    assert producer.flush(30) == 0
    bindings = [
        AclBinding(
            ResourceType.TOPIC if kind == "topic" else ResourceType.GROUP,
            name,
            ResourcePatternType.LITERAL,
            "User:alice",
            "*",
            getattr(AclOperation, operation),
            AclPermissionType.ALLOW,
        )
        for kind, name, operation in alice_acls()
    ]
    for future in admin.create_acls(bindings, request_timeout=30).values():
        future.result(30)
    return admin_config


def wait_until_users_log_in(cluster: LocalCluster, users: list[tuple[str, str]]) -> None:
    """The broker learns of new credentials from a ZooKeeper notification: wait for it."""
    from strandline.client.connection import KafkaConnection
    from strandline.client.security import ClientSecurity

    async def try_all() -> bool:
        for name, password in users:
            config = {**cluster.client_config, "sasl.username": name, "sasl.password": password}
            security = ClientSecurity.from_config(config)
            try:
                conn = await KafkaConnection.open(*cluster.broker_address(1), security=security)
            except ConnectionError:
                return False
            await conn.close()
        return True

    deadline = time.monotonic() + 30
    while not asyncio.run(try_all()):
        assert time.monotonic() < deadline, "new SCRAM users could not log in within 30 s"
        time.sleep(0.2)


def run_matrix(env: Env, everyone: tuple[Login, ...]) -> dict[tuple[str, str, str], Observation]:
    """Every (client, principal) pair in its own thread, its operations one after the
    other (reusing the client's admin connection where it has one)."""
    results: dict[tuple[str, str, str], Observation] = {}
    threads = []
    for client in CLIENTS:
        for login in everyone:
            ops = {op: Observation() for op in OPS}
            results.update({(client, op, login.key): ops[op] for op in OPS})

            def work(
                client: str = client, login: Login = login, ops: dict[str, Observation] = ops
            ) -> None:
                try:
                    RUNNERS[client](env, login, ops)
                except Exception as e:  # noqa: BLE001 - shown in the table, not lost
                    for obs in ops.values():
                        if not (obs.ok or obs.errors or obs.connection or obs.na):
                            obs.errors.append(f"_CRASH {type(e).__name__}: {e}"[:80])

            threads.append(threading.Thread(target=work, name=f"dm-{client}-{login.key}"))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(240)
        assert not thread.is_alive(), f"{thread.name} still running after 240 s"
    return results


def render(table: dict[tuple[str, str, str], str], everyone: tuple[Login, ...]) -> str:
    header = ["client", "operation", *(login.title for login in everyone)]
    rows = [
        [client, op, *(table[(client, op, login.key)] for login in everyone)]
        for client in CLIENTS
        for op in OPS
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    out = [line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    for i, row in enumerate(rows):
        if i and i % len(OPS) == 0:
            out.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
        out.append(line(row))
    return "\n".join(out)


def check_broker_state(admin_config: dict[str, Any], everyone: tuple[Login, ...]) -> list[str]:
    """What the broker really did: topics created or deleted, offsets committed."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(admin_config)
    topics = set(admin.list_topics(timeout=10).topics)
    problems = []
    for client in CLIENTS:
        for login in everyone:
            allowed = {op: expected(client, op, login) == (ALLOWED,) for op in OPS}
            where = f"{client} / {login.title}"
            if client != "kcat":
                created = new_topic_name(client, login) in topics
                if created != allowed["create topic"]:
                    problems.append(f"{where}: topic {new_topic_name(client, login)} created")
                deleted = delete_topic_name(client, login) not in topics
                if deleted != allowed["delete topic"]:
                    problems.append(f"{where}: topic {delete_topic_name(client, login)} deleted")
            group = group_name("offset commit", client, login)
            request = [ConsumerGroupTopicPartitions(group, [TopicPartition(TOPIC_COMMIT, 0)])]
            answer = admin.list_consumer_group_offsets(request, request_timeout=10)[group]
            offset = answer.result(10).topic_partitions[0].offset
            if (offset == 1) != allowed["offset commit"]:
                problems.append(f"{where}: group {group} has committed offset {offset}")
    return problems


def test_deny_matrix(cluster_factory: ClusterFactory, kcat: str) -> None:
    started = time.monotonic()
    cluster = cluster_factory(1, config=BROKER_SETTINGS, security="sasl_ssl")
    everyone = logins(cluster.client_config["sasl.password"])
    admin_config = set_up(cluster, everyone)
    with captured_client_logs() as log:
        env = Env(cluster.bootstrap, cluster.client_config["ssl.ca.location"], log, kcat)
        results = run_matrix(env, everyone)
    table = {key: obs.cell(key[1]) for key, obs in results.items()}
    mismatches = []
    for client in CLIENTS:
        for op in OPS:
            for login in everyone:
                cell, want = table[(client, op, login.key)], expected(client, op, login)
                if cell not in want:
                    obs = results[(client, op, login.key)]
                    mismatches.append(
                        f"{client} / {op} / {login.title}: expected {' or '.join(want)}, "
                        f"got {cell} (reported {obs.errors}, connections "
                        f"{sorted(set(obs.connection))})"
                    )
    state_problems = check_broker_state(admin_config, everyone)
    notes = sorted(
        {
            f"  {client} / {op}: {results[(client, op, 'admin')].note}"
            for client in CLIENTS
            for op in OPS
            if results[(client, op, "admin")].note
        }
    )
    print(f"\n{render(table, everyone)}")
    print("\n".join(["notes:", *notes]))
    print(f"{len(table)} cells; set-up and matrix {time.monotonic() - started:.1f} s")
    for problem in mismatches + state_problems:
        print(f"MISMATCH {problem}")
    assert not mismatches and not state_problems, "\n".join(mismatches + state_problems)
