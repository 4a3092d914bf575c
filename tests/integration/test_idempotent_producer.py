"""The idempotent producer against real brokers: InitProducerId, sequence checks on Produce,
duplicates answered with the original offsets (also after a SIGKILL restart), and
kafka-python / confluent-kafka idempotent producers delivering every record exactly once."""

from __future__ import annotations

import concurrent.futures
import time
import uuid
from datetime import timedelta
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.record.default_records import DefaultRecordBatchBuilder
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.schema.types import TransactionalId
from kio.static.primitive import i32Timedelta

from strandline.coordination.zk_client import ZkClient
from strandline.protocol.record_batch import BatchHeader, iter_batches
from strandline.server.producer_ids import ProducerIdManager
from strandline.storage.producer_state import (
    LATEST_PRODUCER_ID_BLOCK_ZNODE,
    PRODUCER_ID_BLOCK_SIZE,
    decode_producer_id_block,
)

from .cluster_support import wait_until_serving
from .roundtrip_support import consume_confluent, create_topic_confluent
from .wire import WireClient, fetch, fetch_partition, produce, produce_error

RECORDS = 20_000
PARTITIONS = 3


def _topic(name: str) -> str:
    return f"idem-{name}-{uuid.uuid4().hex[:8]}"


def init_producer_id(transactional_id: str | None = None, version: int = 4) -> Any:
    request_cls: Any = load_request_schema(22, version)
    return request_cls(
        transactional_id=None if transactional_id is None else TransactionalId(transactional_id),
        transaction_timeout=i32Timedelta.parse(timedelta(seconds=60)),
    )


def idempotent_batch(producer_id: int, epoch: int, seq: int, count: int = 4) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=seq,
        batch_size=1 << 30,
    )
    for i in range(count):
        builder.append(
            i,
            timestamp=1_700_000_000_000 + i,
            key=None,
            value=b"pid%d-seq%d" % (producer_id, seq + i),
            headers=[],
        )
    return bytes(builder.build())


def base_offset(response: Any) -> int:
    return int(response.responses[0].partition_responses[0].base_offset)


def assert_exactly_once_in_order(bootstrap: str, topic: str) -> None:
    received = consume_confluent(bootstrap, topic, RECORDS, partitions=PARTITIONS, timeout_s=60)
    indices = [int(r.value.split(b"-")[1]) for r in received if r.value is not None]
    assert len(indices) == RECORDS, f"{len(indices)} records instead of {RECORDS}"
    assert sorted(indices) == list(range(RECORDS)), "a record is missing or duplicated"
    by_partition: dict[int, list[tuple[int, int]]] = {}
    for r, index in zip(received, indices, strict=True):
        by_partition.setdefault(r.partition, []).append((r.offset, index))
    for partition, rows in by_partition.items():
        rows.sort()
        in_log = [index for _, index in rows]
        assert in_log == sorted(in_log), f"partition {partition} is not in send order"


def batch_headers(client: WireClient, topic: str, partition: int) -> list[BatchHeader]:
    """Every batch header below the high watermark (a fetch stops at a segment's end)."""
    headers: list[BatchHeader] = []
    offset = 0
    while True:
        answer = fetch_partition(client.request(fetch(topic, partition, offset)))
        assert answer.error_code == ErrorCode.none
        headers.extend(h for h in iter_batches(answer.records or b"") if h.last_offset >= offset)
        if not headers or headers[-1].next_offset >= answer.high_watermark:
            return headers
        offset = headers[-1].next_offset


def producer_ids_in_log(bootstrap: str, topic: str) -> set[int]:
    with WireClient(bootstrap) as client:
        return {
            h.producer_id
            for partition in range(PARTITIONS)
            for h in batch_headers(client, topic, partition)
        }


def send_plan(i: int) -> tuple[bytes, bytes]:
    return f"key-{i % 101}".encode(), f"value-{i}-{'x' * (i % 64)}".encode()


# -- InitProducerId and Produce on the wire ---------------------------------------------------


def test_init_producer_id_and_sequence_checks_survive_sigkill(cluster_factory: Any) -> None:
    cluster = cluster_factory(brokers=1)
    topic = _topic("wire")
    create_topic_confluent(cluster.bootstrap, topic, partitions=1)
    with WireClient(cluster.bootstrap) as client:
        for version in (0, 2, 4):
            first = client.request(init_producer_id(version=version))
            assert first.error_code == ErrorCode.none
            assert first.producer_epoch == 0 and first.producer_id >= 0
        second = client.request(init_producer_id())
        assert second.producer_id > first.producer_id
        # A transactional id is its transaction coordinator's to answer; before any
        # FindCoordinator created __transaction_state, no broker is one.
        refused = client.request(init_producer_id("a-transactional-app"))
        assert refused.error_code == ErrorCode.not_coordinator
        assert refused.producer_id == -1

        pid = int(second.producer_id)
        answer = client.request(produce(topic, 0, idempotent_batch(pid, 0, 0), acks=-1))
        assert produce_error(answer) == ErrorCode.none and base_offset(answer) == 0
        client.request(produce(topic, 0, idempotent_batch(pid, 0, 4), acks=-1))
        retry = client.request(produce(topic, 0, idempotent_batch(pid, 0, 0), acks=-1))
        assert produce_error(retry) == ErrorCode.none and base_offset(retry) == 0
        gap = client.request(produce(topic, 0, idempotent_batch(pid, 0, 12), acks=-1))
        assert produce_error(gap) == ErrorCode.out_of_order_sequence_number
        bumped = client.request(produce(topic, 0, idempotent_batch(pid, 1, 0), acks=-1))
        assert produce_error(bumped) == ErrorCode.none and base_offset(bumped) == 8
        fenced = client.request(produce(topic, 0, idempotent_batch(pid, 0, 8), acks=-1))
        assert produce_error(fenced) == ErrorCode.invalid_producer_epoch
        unknown = client.request(produce(topic, 0, idempotent_batch(pid + 1, 0, 40), acks=-1))
        assert produce_error(unknown) == ErrorCode.unknown_producer_id

    cluster.kill(1, "KILL")
    cluster.start(1)
    wait_until_serving(cluster.bootstrap, topic, 1)
    with WireClient(cluster.bootstrap) as client:
        retry = client.request(produce(topic, 0, idempotent_batch(pid, 1, 0), acks=-1))
        assert produce_error(retry) == ErrorCode.none and base_offset(retry) == 8
        following = client.request(produce(topic, 0, idempotent_batch(pid, 1, 4), acks=-1))
        assert produce_error(following) == ErrorCode.none and base_offset(following) == 12
        assert [h.base_offset for h in batch_headers(client, topic, 0)] == [0, 4, 8, 12]
        # A new producer id after the restart is still unique.
        again = client.request(init_producer_id())
        assert again.producer_id > pid


def test_producer_id_blocks_are_unique_across_brokers(zk_connect: str) -> None:
    import asyncio

    clients = [ZkClient(zk_connect).connect() for _ in range(2)]
    try:
        managers = [ProducerIdManager(zk, broker_id) for broker_id, zk in enumerate(clients, 1)]

        def allocate_all(manager: ProducerIdManager) -> list[int]:
            async def run() -> list[int]:
                return [await manager.generate() for _ in range(PRODUCER_ID_BLOCK_SIZE + 10)]

            return asyncio.run(run())

        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            results = list(pool.map(allocate_all, managers))
        every = results[0] + results[1]
        assert len(set(every)) == len(every), "a producer id was handed out twice"
        data, _ = clients[0].kazoo.get(LATEST_PRODUCER_ID_BLOCK_ZNODE)
        latest = decode_producer_id_block(data)
        assert latest.last_id == 4 * PRODUCER_ID_BLOCK_SIZE - 1  # two blocks per broker
        assert max(every) <= latest.last_id
    finally:
        for zk in clients:
            zk.close()


# -- real clients ---------------------------------------------------------------------------


def test_kafka_python_idempotent_producer_delivers_exactly_once(cluster_factory: Any) -> None:
    from kafka import KafkaProducer

    cluster = cluster_factory(brokers=1)
    topic = _topic("kafkapython")
    create_topic_confluent(cluster.bootstrap, topic, partitions=PARTITIONS)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, linger_ms=5)
    assert producer.config["enable_idempotence"]
    try:
        futures = [
            producer.send(topic, key=k, value=v) for k, v in (send_plan(i) for i in range(RECORDS))
        ]
        producer.flush(60)
        for future in futures:
            future.get(timeout=10)
    finally:
        producer.close(5)
    assert_exactly_once_in_order(cluster.bootstrap, topic)
    ids = producer_ids_in_log(cluster.bootstrap, topic)
    assert len(ids) == 1 and min(ids) >= 0, f"not produced idempotently: {ids}"


def test_confluent_idempotent_producer_delivers_exactly_once(cluster_factory: Any) -> None:
    cluster = cluster_factory(brokers=1)
    topic = _topic("confluent")
    create_topic_confluent(cluster.bootstrap, topic, partitions=PARTITIONS)
    errors: list[object] = []
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "enable.idempotence": True,
            "linger.ms": 5,
            "error_cb": errors.append,
        }
    )

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(err)

    deadline = time.monotonic() + 60
    for i in range(RECORDS):
        key, value = send_plan(i)
        while True:
            try:
                producer.produce(topic, key=key, value=value, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(max(1.0, deadline - time.monotonic())) == 0
    assert not errors, errors
    assert_exactly_once_in_order(cluster.bootstrap, topic)
    ids = producer_ids_in_log(cluster.bootstrap, topic)
    assert len(ids) == 1 and min(ids) >= 0, f"not produced idempotently: {ids}"


def test_idempotent_producer_across_a_leader_sigkill(cluster_factory: Any) -> None:
    """Producer state replicated to followers: after the leader dies mid-stream the new
    leader recognises retries, and nothing is lost or doubled (rf=3, acks=all)."""
    # A short replica.lag.time.max.ms: acks=all waits on the dead follower only that long.
    cluster = cluster_factory(brokers=3, min_insync_replicas=2, replica_lag_time_max_ms=2000)
    topic = _topic("failover")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for future in admin.create_topics(
        [NewTopic(topic, num_partitions=PARTITIONS, replication_factor=3)], operation_timeout=10
    ).values():
        future.result(timeout=15)
    wait_until_serving(cluster.bootstrap, topic, PARTITIONS)
    leader = admin.list_topics(topic, timeout=5).topics[topic].partitions[0].leader
    errors: list[object] = []
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.timeout.ms": 60_000,
        }
    )

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(err)

    for i in range(RECORDS):
        if i == RECORDS // 2:
            producer.flush(0.2)  # some batches acked, others in flight
            cluster.kill(leader, "KILL")
        key, value = send_plan(i)
        while True:
            try:
                producer.produce(topic, key=key, value=value, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(90) == 0
    assert not errors, errors[:5]
    assert_exactly_once_in_order(cluster.bootstrap, topic)
