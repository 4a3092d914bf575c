"""The one real-cluster test of this package: a commit the coordinator has prepared
(PrepareCommit in `__transaction_state`) but whose markers cannot land yet survives the
SIGKILL of that coordinator; the next leader of the partition loads the log, resumes the
markers with its own coordinator epoch and completes the commit once the data partition
is back. confluent-kafka produces; a read_committed consumer checks the outcome."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from kafka.admin import KafkaAdminClient
from kafka.admin import NewTopic as KafkaNewTopic

from strandline.cli.transactions import Described, TxnClient
from strandline.launcher.local_cluster import LocalCluster, answers_metadata
from tests.conftest import ClusterFactory
from tests.waiting import wait_until

TXN_ID = "resume-tx"


def _ask(cluster: LocalCluster, call: Any) -> Any:
    async def run() -> Any:
        async with TxnClient(cluster.bootstrap, None) as client:
            return await call(client)

    return asyncio.run(run())


def _describe(cluster: LocalCluster) -> Described | None:
    try:
        described: Described = _ask(cluster, lambda c: c.describe(TXN_ID))
        return described
    except Exception:  # noqa: BLE001 - the coordinator is moving: ask again
        return None


def _reloaded_without(cluster: LocalCluster, coordinator: int, gone: int) -> bool:
    """ZooKeeper's ISR of `__transaction_state-0` no longer holds `gone`, the
    coordinator's own Metadata has that leader epoch (UpdateMetadata follows the
    LeaderAndIsr that reloads it), and it answers for the transaction again."""
    [state] = [p for p in cluster.status().partitions if p.tp.topic == "__transaction_state"]
    if gone in state.isr:
        return False
    metadata: Any = answers_metadata(*cluster.broker_address(coordinator))
    [epoch] = [
        p.leader_epoch
        for t in metadata.topics
        if t.name == "__transaction_state"
        for p in t.partitions
    ]
    return epoch == state.leader_epoch and _describe(cluster) is not None


@pytest.mark.timeout(180)
def test_new_coordinator_completes_a_prepared_commit(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(
        3,
        config={
            "transaction.state.log.num.partitions": "1",
            "transaction.state.log.min.isr": "1",
            "offsets.topic.num.partitions": "1",
        },
    )
    coordinator, _ = _ask(cluster, lambda c: c.coordinator(TXN_ID))
    data, survivor = (b for b in (1, 2, 3) if b != coordinator)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:  # the data partition lives on one broker only, so its markers can be held up
        admin.create_topics([KafkaNewTopic("t", -1, -1, replica_assignments={0: [data]})])
    finally:
        admin.close()

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": TXN_ID})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(5):
        producer.produce("t", value=f"v{i}")
    producer.flush(30)
    cluster.kill(data)
    # The controller's ISR shrink bumps the coordinator's epoch (a reload, as in Kafka):
    # wait for it, so that the commit is prepared by the final epoch of this coordinator.
    wait_until(
        "the coordinator to take the shrunk ISR",
        lambda: _reloaded_without(cluster, coordinator, data),
        60,
    )
    producer.commit_transaction(60)  # answered once PrepareCommit is replicated
    prepared = wait_until("the prepared commit", lambda: _describe(cluster))
    assert prepared.state == "PrepareCommit" and prepared.partitions == ("t-0",)

    cluster.kill(coordinator)
    resumed = wait_until(
        "a new coordinator",
        lambda: (d := _describe(cluster)) is not None and d.coordinator == survivor and d,
        60,
    )
    assert resumed.state == "PrepareCommit"  # still waiting for t-0's leader

    cluster.start(data)
    wait_until(
        "the commit to complete",
        lambda: (d := _describe(cluster)) is not None and d.state == "CompleteCommit",
        60,
    )
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "resume-reader",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe(["t"])
    got: list[str] = []
    deadline = time.monotonic() + 20
    while len(got) < 5 and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            got.append(message.value().decode())
    consumer.close()
    assert got == [f"v{i}" for i in range(5)]
