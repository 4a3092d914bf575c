"""Transactions from three clients: confluent-kafka, kafka-python and aiokafka each run a committed
transaction (records + consumer-group offsets), an aborted one, and a committed one after
it; read_committed consumers of all three clients see every committed record exactly once
and no aborted record, read_uncommitted sees both (the filter is real), and the group's
offset changes only when a transaction that carries it commits. kcat produces with
`-X transactional.id`."""

from __future__ import annotations

import asyncio
import subprocess
import uuid
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition

from strandline.launcher.local_cluster import LocalCluster
from tests.cluster.support import create_topic
from tests.waiting import wait_until

from .support import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    READERS,
    group_offsets,
    read_confluent,
    txn_cluster,
    values,
)

OUT_PARTITIONS = 3
PER_TXN = 9
INPUT_RECORDS = 20
# Offsets each transaction commits for input partition 0.
COMMIT_1, ABORTED, COMMIT_2 = 10, 20, 15


def _records(tag: str) -> list[tuple[int, bytes]]:
    """(partition, value): every transaction spreads over all output partitions."""
    return [(i % OUT_PARTITIONS, f"{tag}-{i}".encode()) for i in range(PER_TXN)]


# Each client runs the same three transactions. `between(offset_sent)` is called after the
# offsets were sent to the transaction and before it ends, to look at the group's offset.
Plan = list[tuple[str, int, bool]]  # (tag, offset of input-0 to commit, commit?)
PLAN: Plan = [("commit", COMMIT_1, True), ("abort", ABORTED, False), ("after", COMMIT_2, True)]
Between = Callable[[str], None]
ClientRun = Callable[[str, str, str, str, str, Between], None]


def _confluent(
    bootstrap: str, txn_id: str, out: str, inp: str, group: str, between: Between
) -> None:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": txn_id,
            "transaction.timeout.ms": 30_000,
            "linger.ms": 5,
        }
    )
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    try:
        producer.init_transactions(30)
        for tag, offset, commit in PLAN:
            producer.begin_transaction()
            for partition, value in _records(tag):
                producer.produce(out, value=value, partition=partition)
            producer.send_offsets_to_transaction(
                [CkTopicPartition(inp, 0, offset)], consumer.consumer_group_metadata(), 30
            )
            between(tag)
            if commit:
                producer.commit_transaction(30)
            else:
                producer.abort_transaction(30)
    finally:
        consumer.close()


def _kafka_python(
    bootstrap: str, txn_id: str, out: str, inp: str, group: str, between: Between
) -> None:
    from kafka import KafkaProducer
    from kafka import TopicPartition as KpTopicPartition
    from kafka.structs import OffsetAndMetadata

    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        transactional_id=txn_id,
        transaction_timeout_ms=30_000,
        linger_ms=5,
    )
    try:
        producer.init_transactions()
        for tag, offset, commit in PLAN:
            producer.begin_transaction()
            for partition, value in _records(tag):
                producer.send(out, value=value, partition=partition)
            producer.send_offsets_to_transaction(
                {KpTopicPartition(inp, 0): OffsetAndMetadata(offset, "", -1)}, group
            )
            between(tag)
            if commit:
                producer.commit_transaction()
            else:
                producer.abort_transaction()
    finally:
        producer.close(10)


def _aiokafka(
    bootstrap: str, txn_id: str, out: str, inp: str, group: str, between: Between
) -> None:
    async def run() -> None:
        from aiokafka import AIOKafkaProducer
        from aiokafka import TopicPartition as AioTopicPartition

        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            transactional_id=txn_id,
            transaction_timeout_ms=30_000,
            linger_ms=5,
        )
        await producer.start()
        try:
            for tag, offset, commit in PLAN:
                await producer.begin_transaction()
                futures = [
                    await producer.send(out, value=value, partition=partition)
                    for partition, value in _records(tag)
                ]
                await asyncio.gather(*futures)
                await producer.send_offsets_to_transaction(
                    {AioTopicPartition(inp, 0): offset}, group
                )
                await asyncio.to_thread(between, tag)
                if commit:
                    await producer.commit_transaction()
                else:
                    await producer.abort_transaction()
        finally:
            await producer.stop()

    asyncio.run(run())


def _fill_input(cluster: LocalCluster, topic: str) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(INPUT_RECORDS):
        producer.produce(topic, value=b"in-%d" % i, partition=0)
    assert producer.flush(30) == 0


@pytest.mark.parametrize(
    "client", [_confluent, _kafka_python, _aiokafka], ids=["confluent", "kafka-python", "aiokafka"]
)
def test_transactions_commit_abort_offsets_and_isolation(
    cluster_factory, client: ClientRun
) -> None:
    cluster = txn_cluster(cluster_factory)
    suffix = uuid.uuid4().hex[:6]
    inp, out, group = f"in-{suffix}", f"out-{suffix}", f"g-{suffix}"
    create_topic(cluster, inp, 1, 3)
    create_topic(cluster, out, OUT_PARTITIONS, 3)
    _fill_input(cluster, inp)

    # What the group's offset is while each transaction is open, then after it ended.
    while_open: dict[str, dict[int, int]] = {}

    def between(tag: str) -> None:
        while_open[tag] = group_offsets(cluster.bootstrap, group, inp, 1)

    client(cluster.bootstrap, f"tx-{suffix}", out, inp, group, between)

    assert while_open == {"commit": {}, "abort": {0: COMMIT_1}, "after": {0: COMMIT_1}}, (
        "offsets sent in a transaction were visible before it committed"
    )
    # commit_transaction() returns once the coordinator logged PrepareCommit (as in
    # Kafka); the offsets become the group's when the marker reaches __consumer_offsets.
    wait_until(
        "the last committed transaction's offset to become the group's",
        lambda: group_offsets(cluster.bootstrap, group, inp, 1) == {0: COMMIT_2},
        timeout_s=10,
    )

    committed = sorted(v for tag in ("commit", "after") for _p, v in _records(tag))
    aborted = sorted(v for _p, v in _records("abort"))
    for name, read in READERS.items():
        seen = read(cluster.bootstrap, out, OUT_PARTITIONS, READ_COMMITTED, set(committed))
        assert values(seen) == committed, (
            f"{name} read_committed: expected each committed record once and no aborted one; "
            f"aborted seen: {sorted(set(values(seen)) & set(aborted))}, "
            f"missing: {sorted(set(committed) - set(values(seen)))}"
        )
    everything = read_confluent(
        cluster.bootstrap, out, OUT_PARTITIONS, READ_UNCOMMITTED, set(committed) | set(aborted)
    )
    assert values(everything) == sorted(committed + aborted), (
        "read_uncommitted must see the aborted records too (else the filter proves nothing)"
    )


def test_kcat_produces_transactionally(cluster_factory, kcat: str) -> None:
    """kcat 1.7 (librdkafka 2.0.2) with `-X transactional.id`: one transaction around the
    whole input, committed at EOF; read_committed readers (confluent, kcat) see every line
    once, and each partition's log ends with a commit marker (one offset past the data)."""
    cluster = txn_cluster(cluster_factory)
    topic = f"kcat-{uuid.uuid4().hex[:6]}"
    create_topic(cluster, topic, OUT_PARTITIONS, 3)
    lines = [f"k{i}:kcat-{i}" for i in range(30)]
    done = subprocess.run(
        [
            kcat,
            "-P",
            "-b",
            cluster.bootstrap,
            "-t",
            topic,
            "-K",
            ":",
            "-X",
            f"transactional.id=kcat-{topic}",
            "-X",
            "transaction.timeout.ms=30000",
        ],
        input="\n".join(lines).encode() + b"\n",
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0, (
        f"kcat -X transactional.id failed ({done.returncode}): {done.stderr.decode()[-2000:]}"
    )
    expected = sorted(line.split(":", 1)[1].encode() for line in lines)
    seen = read_confluent(cluster.bootstrap, topic, OUT_PARTITIONS, READ_COMMITTED, set(expected))
    assert values(seen) == expected

    per_partition = {p: sum(1 for s in seen if s.partition == p) for p in range(OUT_PARTITIONS)}
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "kcat-verify"})
    try:
        high = {
            p: consumer.get_watermark_offsets(CkTopicPartition(topic, p), timeout=10)[1]
            for p in range(OUT_PARTITIONS)
        }
    finally:
        consumer.close()
    assert high == {p: n + 1 if n else 0 for p, n in per_partition.items()}, (
        "each partition kcat wrote to should end with one control (commit) record"
    )

    read_back = subprocess.run(
        [
            kcat,
            "-C",
            "-b",
            cluster.bootstrap,
            "-t",
            topic,
            "-e",
            "-o",
            "beginning",
            "-X",
            "isolation.level=read_committed",
            "-f",
            "%s\n",
        ],
        capture_output=True,
        timeout=60,
        check=True,
    )
    assert sorted(read_back.stdout.split()) == expected
