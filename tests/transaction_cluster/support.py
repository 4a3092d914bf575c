"""Helpers shared by the transaction tests (docs/transactions.md): the cluster settings, reading a
topic with each client under an isolation level, and the raw-wire lookups the clients
do not expose (FindCoordinator for a transactional id)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.list_offsets.v7 import request as lo
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i32, i64

from strandline.client.connection import KafkaConnection
from strandline.launcher.local_cluster import LocalCluster
from strandline.server.apis.groups import GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE
from strandline.types import TopicPartition
from tests.cluster.support import partition_status
from tests.waiting import wait_until

# Small everything: a 3-broker cluster whose internal topics are rf=3 (so a coordinator
# or group coordinator can fail over), a quick ISR shrink after a SIGKILL, a quick abort
# of timed-out transactions, and no initial rebalance delay for subscribing consumers.
TXN_CLUSTER: dict[str, str] = {
    "transaction.state.log.num.partitions": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
    "offsets.topic.num.partitions": "3",
    "offsets.topic.replication.factor": "3",
    "group.initial.rebalance.delay.ms": "0",
    "replica.lag.time.max.ms": "2000",
    "min.insync.replicas": "2",
}

READ_COMMITTED = "read_committed"
READ_UNCOMMITTED = "read_uncommitted"


@dataclass(frozen=True)
class Seen:
    partition: int
    offset: int
    value: bytes


def txn_cluster(cluster_factory: Any, brokers: int = 3, **extra: str) -> LocalCluster:
    config = dict(TXN_CLUSTER)
    if brokers < 3:
        for key in (
            "transaction.state.log.replication.factor",
            "offsets.topic.replication.factor",
        ):
            config[key] = str(brokers)
        config["transaction.state.log.min.isr"] = "1"
        config["min.insync.replicas"] = "1"
    config.update(extra)
    cluster: LocalCluster = cluster_factory(brokers=brokers, config=config)
    return cluster


# --- reading a topic under an isolation level, with each client ------------------------


def _done(seen: list[Seen], expect_last: set[bytes]) -> bool:
    return expect_last <= {s.value for s in seen}


def read_confluent(
    bootstrap: str,
    topic: str,
    partitions: int,
    isolation: str,
    until: set[bytes],
    timeout_s: float = 30.0,
    settle_s: float = 1.0,
) -> list[Seen]:
    """Every record of `topic` from the beginning, read until all of `until` arrived and
    then `settle_s` longer (so a duplicate or an aborted record after them shows too)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"verify-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "topic.metadata.refresh.interval.ms": 500,
        }
    )
    consumer.assign([CkTopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    seen: list[Seen] = []
    deadline = time.monotonic() + timeout_s
    settle_at: float | None = None
    try:
        while time.monotonic() < deadline:
            for m in consumer.consume(1000, 0.2):
                if m.error() is not None:
                    continue
                seen.append(Seen(m.partition() or 0, m.offset() or 0, m.value() or b""))
            if settle_at is None and _done(seen, until):
                settle_at = time.monotonic() + settle_s
            if settle_at is not None and time.monotonic() > settle_at:
                break
    finally:
        consumer.close()
    return seen


def read_kafka_python(
    bootstrap: str,
    topic: str,
    partitions: int,
    isolation: str,
    until: set[bytes],
    timeout_s: float = 30.0,
    settle_s: float = 1.0,
) -> list[Seen]:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KpTopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level=isolation,
    )
    tps = [KpTopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    seen: list[Seen] = []
    deadline = time.monotonic() + timeout_s
    settle_at: float | None = None
    try:
        while time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=200, max_records=1000).values():
                seen.extend(Seen(r.partition, r.offset, r.value) for r in batch)
            if settle_at is None and _done(seen, until):
                settle_at = time.monotonic() + settle_s
            if settle_at is not None and time.monotonic() > settle_at:
                break
    finally:
        consumer.close()
    return seen


def read_aiokafka(
    bootstrap: str,
    topic: str,
    partitions: int,
    isolation: str,
    until: set[bytes],
    timeout_s: float = 30.0,
    settle_s: float = 1.0,
) -> list[Seen]:
    async def run() -> list[Seen]:
        from aiokafka import AIOKafkaConsumer
        from aiokafka import TopicPartition as AioTopicPartition

        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            isolation_level=isolation,
        )
        await consumer.start()
        seen: list[Seen] = []
        try:
            tps = [AioTopicPartition(topic, p) for p in range(partitions)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            deadline = time.monotonic() + timeout_s
            settle_at: float | None = None
            while time.monotonic() < deadline:
                got = await consumer.getmany(timeout_ms=200, max_records=1000)
                for batch in got.values():
                    seen.extend(Seen(r.partition, r.offset, r.value or b"") for r in batch)
                if settle_at is None and _done(seen, until):
                    settle_at = time.monotonic() + settle_s
                if settle_at is not None and time.monotonic() > settle_at:
                    break
        finally:
            await consumer.stop()
        return seen

    return asyncio.run(run())


READERS = {
    "confluent": read_confluent,
    "kafka-python": read_kafka_python,
    "aiokafka": read_aiokafka,
}


def values(seen: Iterable[Seen]) -> list[bytes]:
    return sorted(s.value for s in seen)


# --- committed group offsets, as an admin sees them (no require_stable) ----------------


def group_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """partition -> committed offset (absent: none committed), not waiting for stability."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(
        group, [CkTopicPartition(topic, p) for p in range(partitions)]
    )
    futures = admin.list_consumer_group_offsets([request], require_stable=False)
    result = futures[group].result(30)
    return {tp.partition: tp.offset for tp in result.topic_partitions if tp.offset >= 0}


# --- raw wire ---------------------------------------------------------------------------


def wire(bootstrap: str, request: Any, timeout_s: float = 10.0) -> Any:
    """Send one kio request to the first broker of `bootstrap` and return the response,
    through Strandline's own client connection."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    return asyncio.run(_wire(host, int(port), request, timeout_s))


async def _wire(host: str, port: int, request: Any, timeout_s: float) -> Any:
    conn = await KafkaConnection.open(host, port, client_id="txn-tests", timeout=timeout_s)
    try:
        return await conn.send(request, timeout=timeout_s)
    finally:
        await conn.close()


def wire_many(host: str, port: int, requests: list[Any], timeout_s: float = 10.0) -> list[Any]:
    """Several requests, in order, over one connection (one client)."""

    async def run() -> list[Any]:
        conn = await KafkaConnection.open(host, port, client_id="txn-tests", timeout=timeout_s)
        try:
            return [await conn.send(r, timeout=timeout_s) for r in requests]
        finally:
            await conn.close()

    return asyncio.run(run())


def find_txn_coordinator(cluster: LocalCluster, transactional_id: str) -> int:
    """The broker id FindCoordinator (key type 1) names for `transactional_id`."""
    return find_coordinator(cluster, transactional_id, TRANSACTION_KEY_TYPE)


def find_group_coordinator(cluster: LocalCluster, group_id: str) -> int:
    """The broker id FindCoordinator (key type 0) names for `group_id`."""
    return find_coordinator(cluster, group_id, GROUP_KEY_TYPE)


def find_coordinator(cluster: LocalCluster, key: str, key_type: int) -> int:
    """The broker id FindCoordinator names for `key`, asking each running broker in turn
    (a stopped or dying one may not answer); the first ask creates the internal topic."""
    deadline = time.monotonic() + 30
    last: Any = None
    request = FindCoordinatorRequest(key_type=i8(key_type), coordinator_keys=(key,))
    while time.monotonic() < deadline:
        for broker_id in sorted(cluster.brokers):
            if not cluster.is_running(broker_id):
                continue
            try:
                [response] = wire_many(*cluster.broker_address(broker_id), [request], 2.0)
            except Exception as exc:  # a broker mid-failover may refuse or hang: next
                last = exc
                continue
            [coordinator] = response.coordinators
            last = coordinator
            if coordinator.error_code == ErrorCode.none and coordinator.node_id >= 0:
                return int(coordinator.node_id)
        time.sleep(0.2)
    raise AssertionError(f"no coordinator (key type {key_type}) for {key!r}: {last!r}")


RETRIABLE = frozenset(
    {
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.coordinator_not_available,
        ErrorCode.not_coordinator,
        ErrorCode.concurrent_transactions,
        ErrorCode.not_leader_or_follower,
        ErrorCode.not_enough_replicas,
    }
)


def ask_until_settled(
    address: tuple[str, int], request: Any, error_of: Any, timeout_s: float = 20.0
) -> Any:
    """Send `request` again while the answer's error (`error_of(response)`) is one a client
    retries (coordinator loading, concurrent transactions...); return the last answer."""
    deadline = time.monotonic() + timeout_s
    while True:
        [response] = wire_many(*address, [request])
        if error_of(response) not in RETRIABLE or time.monotonic() > deadline:
            return response
        time.sleep(0.2)


def leader_address(cluster: LocalCluster, topic: str, partition: int) -> tuple[str, int]:
    leader = wait_until(
        f"a leader for {topic}-{partition}",
        lambda: (
            (p := partition_status(cluster, TopicPartition(topic, partition))).leader
            and p.leader > 0
            and p.leader
        ),
    )
    return cluster.broker_address(int(leader))


def list_offset(
    cluster: LocalCluster, topic: str, partition: int, read_committed: bool, timestamp: int = -1
) -> int:
    """ListOffsets LATEST (-1) from the leader: the high watermark, or with read_committed
    the last stable offset."""
    request = lo.ListOffsetsRequest(
        replica_id=BrokerId(-1),
        isolation_level=i8(1 if read_committed else 0),
        topics=(
            lo.ListOffsetsTopic(
                name=TopicName(topic),
                partitions=(
                    lo.ListOffsetsPartition(
                        partition_index=i32(partition),
                        current_leader_epoch=i32(-1),
                        timestamp=i64(timestamp),
                    ),
                ),
            ),
        ),
    )
    response = ask_until_settled(
        leader_address(cluster, topic, partition),
        request,
        lambda r: r.topics[0].partitions[0].error_code,
    )
    answer = response.topics[0].partitions[0]
    assert answer.error_code == ErrorCode.none, f"ListOffsets {topic}-{partition}: {answer}"
    return int(answer.offset)
