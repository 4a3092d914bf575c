"""Kafka semantics against real brokers: more than one batch per partition in a Produce
request and Fetch v12's `last_fetched_epoch` (diverging_epoch), which no client library
sends, with raw requests (kio); DeleteRecords' `timeout_ms` through confluent-kafka."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12 import request as fetch_v12
from kio.schema.produce.v9 import request as produce_v9
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import Records, i8, i16, i32, i32Timedelta, i64

from . import wire
from .cluster_support import new_cluster, wait_until_serving
from .roundtrip_support import create_topic_confluent

ClusterFactory = Callable[..., Any]


def _topic() -> str:
    return f"wire-{uuid.uuid4().hex[:8]}"


def _cluster(cluster_factory: ClusterFactory, brokers: int, **overrides: Any) -> Any:
    cluster = cluster_factory(brokers=brokers, **overrides)
    cluster.wait_for_full_metadata()
    return cluster


def _client(cluster: Any, broker_id: int) -> wire.WireClient:
    host, port = cluster.broker_address(broker_id)
    return wire.WireClient(f"{host}:{port}")


def _create(bootstrap: str, topic: str, replicas: list[int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(topic, num_partitions=1, replica_assignment=[replicas])
    for future in admin.create_topics([new], operation_timeout=10).values():
        future.result(timeout=15)
    wait_until_serving(bootstrap, topic, 1)


def _wait_for_leader(
    client: wire.WireClient, topic: str, leader: int, timeout_s: float = 30
) -> int:
    """Until the broker's Metadata names `leader` for partition 0; its leader epoch."""
    deadline = time.monotonic() + timeout_s
    while True:
        # This broker's metadata may not have the partition yet: no partitions then.
        partitions = client.request(wire.metadata(topic)).topics[0].partitions
        if partitions and partitions[0].leader_id == leader:
            return int(partitions[0].leader_epoch)
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topic}-0 is not led by {leader}: {partitions}")
        time.sleep(0.05)


def _batch(values: list[bytes]) -> bytes:
    # Timestamps of now: older ones would let retention.ms delete the segment meanwhile.
    return wire.batch(values, timestamp_ms=int(time.time() * 1000))


def _wait_for_isr(
    client: wire.WireClient, topic: str, isr: list[int], timeout_s: float = 30
) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        partitions = client.request(wire.metadata(topic)).topics[0].partitions
        if partitions and sorted(partitions[0].isr_nodes) == isr:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topic}-0's ISR is not {isr}: {partitions}")
        time.sleep(0.05)


# --- Produce: exactly one batch per partition (v3+) ----------------------------------


def test_two_batches_for_one_partition_are_invalid_record(
    cluster_factory: ClusterFactory,
) -> None:
    bootstrap = new_cluster(cluster_factory).bootstrap
    topic = _topic()
    create_topic_confluent(bootstrap, topic, partitions=2)
    request = produce_v9.ProduceRequest(
        transactional_id=None,
        acks=i16(1),
        timeout=i32Timedelta.parse(timedelta(seconds=5)),
        topic_data=(
            produce_v9.TopicProduceData(
                name=TopicName(topic),
                partition_data=(
                    produce_v9.PartitionProduceData(
                        index=i32(0),
                        records=Records(_batch([b"a1", b"a2"]) + _batch([b"b1"])),
                    ),
                    produce_v9.PartitionProduceData(
                        index=i32(1), records=Records(_batch([b"c1", b"c2"]))
                    ),
                ),
            ),
        ),
    )
    with wire.WireClient(bootstrap) as client:
        response = client.request(request)
        by_index = {p.index: p for p in response.responses[0].partition_responses}
        assert by_index[0].error_code == ErrorCode.invalid_record
        assert "exactly one record batch" in (by_index[0].error_message or "")
        assert by_index[1].error_code == ErrorCode.none
        assert by_index[1].base_offset == 0
        # Nothing of partition 0 was appended; partition 1 has its two records.
        fetched = client.request(wire.fetch_many(topic, {0: 0, 1: 0}))
        hws = {p.partition_index: p.high_watermark for p in fetched.responses[0].partitions}
        assert hws == {0: 0, 1: 2}
        # One batch is still welcome on partition 0.
        one = client.request(wire.produce(topic, 0, _batch([b"d1"])))
        assert wire.produce_error(one) == ErrorCode.none


# --- Fetch v12: last_fetched_epoch and diverging_epoch (KIP-320/KIP-595) --------------


def _fetch_after(topic: str, fetch_offset: int, last_fetched_epoch: int) -> Any:
    return fetch_v12.FetchRequest(
        cluster_id=None,
        replica_id=BrokerId(-1),
        max_wait=i32Timedelta.parse(timedelta(milliseconds=0)),
        min_bytes=i32(1),
        max_bytes=i32(1 << 20),
        isolation_level=i8(0),
        session_id=i32(0),
        session_epoch=i32(-1),
        topics=(
            fetch_v12.FetchTopic(
                topic=TopicName(topic),
                partitions=(
                    fetch_v12.FetchPartition(
                        partition=i32(0),
                        current_leader_epoch=i32(-1),
                        fetch_offset=i64(fetch_offset),
                        last_fetched_epoch=i32(last_fetched_epoch),
                        log_start_offset=i64(-1),
                        partition_max_bytes=i32(1 << 20),
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )


def test_fetch_with_a_diverging_last_fetched_epoch_answers_diverging_epoch(
    cluster_factory: ClusterFactory,
) -> None:
    """Epoch 0 (leader 1) holds offsets 0-2; broker 1 dies, broker 2 leads epoch 1 and
    appends 3-4. A fetcher that says its offset 4 came from epoch 0 has a log that
    diverges from the leader's at 3."""
    cluster = _cluster(cluster_factory, 2)
    topic = _topic()
    _create(cluster.bootstrap, topic, [1, 2])
    with _client(cluster, 1) as client:
        assert _wait_for_leader(client, topic, 1) == 0
        _wait_for_isr(client, topic, [1, 2])
        first = client.request(wire.produce(topic, 0, _batch([b"a", b"b", b"c"]), acks=-1))
        assert wire.produce_error(first) == ErrorCode.none
    cluster.kill(1, "KILL")
    with _client(cluster, 2) as client:
        epoch = _wait_for_leader(client, topic, 2)
        assert epoch > 0
        second = client.request(wire.produce(topic, 0, _batch([b"d", b"e"])))
        assert wire.produce_error(second) == ErrorCode.none

        diverged = wire.fetch_partition(client.request(_fetch_after(topic, 4, 0)))
        assert diverged.error_code == ErrorCode.none
        assert (diverged.diverging_epoch.epoch, diverged.diverging_epoch.end_offset) == (0, 3)
        assert not diverged.records, "no records with a diverging epoch"
        assert diverged.high_watermark == 5

        # At the end of epoch 0 (and within the latest epoch) the logs agree: records.
        for offset, last_epoch in [(3, 0), (2, 0), (4, epoch)]:
            agreed = wire.fetch_partition(client.request(_fetch_after(topic, offset, last_epoch)))
            assert agreed.error_code == ErrorCode.none, (offset, last_epoch)
            assert agreed.diverging_epoch.epoch == -1, (offset, last_epoch)
            assert agreed.records
        # An epoch newer than every one this log has: the end offset is unknown.
        unknown = wire.fetch_partition(client.request(_fetch_after(topic, 4, epoch + 5)))
        assert unknown.error_code == ErrorCode.offset_out_of_range
        # -1 (what clients send): no check at all.
        plain = wire.fetch_partition(client.request(_fetch_after(topic, 4, -1)))
        assert plain.error_code == ErrorCode.none and plain.records


# --- DeleteRecords: timeout_ms (Kafka's DelayedDeleteRecords) ------------------------


def _delete_records(admin: AdminClient, topic: str, offset: int, timeout_s: float) -> Any:
    futures = admin.delete_records(
        [TopicPartition(topic, 0, offset)], operation_timeout=timeout_s, request_timeout=30
    )
    (future,) = futures.values()
    return future.result(timeout=40)


def test_delete_records_waits_for_every_live_replica(cluster_factory: ClusterFactory) -> None:
    # The longest session the test ZooKeeper allows: the stopped follower stays alive
    # (so waited for) well past the short timeout below.
    cluster = _cluster(cluster_factory, 3, zookeeper_session_timeout_ms=4000)
    topic = _topic()
    _create(cluster.bootstrap, topic, [1, 2, 3])
    with _client(cluster, 1) as client:
        _wait_for_isr(client, topic, [1, 2, 3])
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(20):
        producer.produce(topic, value=f"r{i}".encode(), partition=0)
    assert producer.flush(20) == 0
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})

    # All followers move their log start on their next fetch and report it: answered
    # with the partition's low watermark once all three are there.
    assert _delete_records(admin, topic, 5, timeout_s=20).low_watermark == 5

    cluster.kill(3, "STOP")
    try:
        with pytest.raises(KafkaException) as timed_out:
            _delete_records(admin, topic, 8, timeout_s=1)
        error = timed_out.value.args[0]
        assert error.code() == KafkaError.REQUEST_TIMED_OUT, error
        # The leader deleted all the same (as Kafka): its own log starts at 8.
        with _client(cluster, 1) as client:
            at_start = wire.fetch_partition(client.request(wire.fetch(topic, 0, 8)))
            assert at_start.log_start_offset == 8
    finally:
        cluster.kill(3, "CONT")
    # The follower resumes, catches up its log start: the same request now completes.
    assert _delete_records(admin, topic, 8, timeout_s=20).low_watermark == 8
