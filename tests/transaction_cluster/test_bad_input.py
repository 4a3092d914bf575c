"""Bad input: transactional requests with an unknown producer id or a wrong
epoch get Kafka's error codes (INVALID_PRODUCER_ID_MAPPING; PRODUCER_FENCED, or
INVALID_PRODUCER_EPOCH for request versions older than KIP-588's), and none of them
changes another producer's open transaction: it still commits and its records become
readable. Spoken at the wire level with Strandline's own client connection and kio."""

from __future__ import annotations

import time
import uuid
from datetime import timedelta
from typing import Any

from kafka.record.default_records import DefaultRecordBatchBuilder
from kio.schema.add_partitions_to_txn.v1 import request as apt1
from kio.schema.add_partitions_to_txn.v3 import request as apt3
from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.end_txn.v1.request import EndTxnRequest as EndTxnV1
from kio.schema.end_txn.v3.request import EndTxnRequest as EndTxnV3
from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v3.request import InitProducerIdRequest
from kio.schema.produce.v9 import request as produce_v9
from kio.schema.types import ProducerId, TopicName, TransactionalId
from kio.static.primitive import Records, i16, i32, i32Timedelta

from tests.cluster.support import create_topic
from tests.waiting import wait_until

from .support import (
    READ_COMMITTED,
    ask_until_settled,
    find_txn_coordinator,
    leader_address,
    list_offset,
    read_confluent,
    txn_cluster,
    values,
    wire_many,
)

RECORDS = [b"good-0", b"good-1", b"good-2"]


def _init(txn_id: str) -> InitProducerIdRequest:
    return InitProducerIdRequest(
        transactional_id=TransactionalId(txn_id),
        transaction_timeout=i32Timedelta.parse(timedelta(seconds=60)),
        producer_id=ProducerId(-1),
        producer_epoch=i16(-1),
    )


def _add(version: int, txn_id: str, pid: int, epoch: int, topic: str) -> Any:
    m = apt3 if version == 3 else apt1
    return m.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=TransactionalId(txn_id),
        v3_and_below_producer_id=ProducerId(pid),
        v3_and_below_producer_epoch=i16(epoch),
        v3_and_below_topics=(
            m.AddPartitionsToTxnTopic(name=TopicName(topic), partitions=(i32(0),)),
        ),
    )


def _add_error(response: Any) -> ErrorCode:
    [topic] = response.results_by_topic_v3_and_below
    [partition] = topic.results_by_partition
    return ErrorCode(partition.partition_error_code)


def _end(version: int, txn_id: str, pid: int, epoch: int, commit: bool) -> Any:
    cls = EndTxnV3 if version == 3 else EndTxnV1
    return cls(
        transactional_id=TransactionalId(txn_id),
        producer_id=ProducerId(pid),
        producer_epoch=i16(epoch),
        committed=commit,
    )


def _produce(txn_id: str, topic: str, pid: int, epoch: int, seq: int, vals: list[bytes]) -> Any:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=True,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        batch_size=1 << 20,
    )
    now = int(time.time() * 1000)
    for i, value in enumerate(vals):
        builder.append(i, timestamp=now, key=None, value=value, headers=[])
    return produce_v9.ProduceRequest(
        transactional_id=TransactionalId(txn_id),
        acks=i16(-1),
        timeout=i32Timedelta.parse(timedelta(seconds=10)),
        topic_data=(
            produce_v9.TopicProduceData(
                name=TopicName(topic),
                partition_data=(
                    produce_v9.PartitionProduceData(
                        index=i32(0), records=Records(bytes(builder.build()))
                    ),
                ),
            ),
        ),
    )


def _produce_error(response: Any) -> ErrorCode:
    return ErrorCode(response.responses[0].partition_responses[0].error_code)


def test_unknown_producer_and_wrong_epoch_leave_other_transaction_alone(cluster_factory) -> None:
    cluster = txn_cluster(cluster_factory)
    suffix = uuid.uuid4().hex[:6]
    topic, good, nobody = f"bad-{suffix}", f"good-{suffix}", f"nobody-{suffix}"
    create_topic(cluster, topic, 1, 3)
    coordinator = cluster.broker_address(find_txn_coordinator(cluster, good))
    # An id nobody initialised still has a coordinator (the leader of its partition).
    nobody_coordinator = cluster.broker_address(find_txn_coordinator(cluster, nobody))

    # The well-behaved producer: initialised twice (epoch bumped, so a stale epoch exists),
    # one partition added, three records written; its transaction stays open.
    init = ask_until_settled(coordinator, _init(good), lambda r: r.error_code)
    assert init.error_code == ErrorCode.none, init
    init = ask_until_settled(coordinator, _init(good), lambda r: r.error_code)
    assert init.error_code == ErrorCode.none, init
    pid, epoch = int(init.producer_id), int(init.producer_epoch)
    assert epoch >= 1, f"a second InitProducerId must bump the epoch: {init}"
    added = ask_until_settled(coordinator, _add(3, good, pid, epoch, topic), _add_error)
    assert _add_error(added) == ErrorCode.none, added
    leader = leader_address(cluster, topic, 0)
    [written] = wire_many(*leader, [_produce(good, topic, pid, epoch, 0, RECORDS)])
    assert _produce_error(written) == ErrorCode.none, written

    # Unknown transactional id / unknown producer id.
    bad_pid = pid + 7919
    [r] = wire_many(*nobody_coordinator, [_add(3, nobody, bad_pid, 0, topic)])
    assert _add_error(r) == ErrorCode.invalid_producer_id_mapping, r
    [r] = wire_many(*coordinator, [_add(3, good, bad_pid, epoch, topic)])
    assert _add_error(r) == ErrorCode.invalid_producer_id_mapping, r
    [r] = wire_many(*nobody_coordinator, [_end(3, nobody, bad_pid, 0, commit=True)])
    assert r.error_code == ErrorCode.invalid_producer_id_mapping, r
    [r] = wire_many(*coordinator, [_end(3, good, bad_pid, epoch, commit=False)])
    assert r.error_code == ErrorCode.invalid_producer_id_mapping, r

    # Wrong epochs: PRODUCER_FENCED from v2 on, INVALID_PRODUCER_EPOCH before (KafkaApis
    # translates for clients that predate KIP-588).
    stale, future = epoch - 1, epoch + 1
    [r] = wire_many(*coordinator, [_add(3, good, pid, stale, topic)])
    assert _add_error(r) == ErrorCode.producer_fenced, r
    [r] = wire_many(*coordinator, [_add(1, good, pid, stale, topic)])
    assert _add_error(r) == ErrorCode.invalid_producer_epoch, r
    [r] = wire_many(*coordinator, [_end(3, good, pid, stale, commit=False)])
    assert r.error_code == ErrorCode.producer_fenced, r
    [r] = wire_many(*coordinator, [_end(3, good, pid, future, commit=False)])
    assert r.error_code == ErrorCode.producer_fenced, r
    [r] = wire_many(*coordinator, [_end(1, good, pid, stale, commit=False)])
    assert r.error_code == ErrorCode.invalid_producer_epoch, r
    # A zombie's produce with the older epoch, at the partition leader.
    [r] = wire_many(*leader, [_produce(good, topic, pid, stale, 0, [b"zombie"])])
    assert _produce_error(r) == ErrorCode.invalid_producer_epoch, r

    # Nothing of `good`'s transaction moved: still Ongoing, same producer, same partition,
    # and the partition's LSO is still held at its first record.
    [described] = wire_many(
        *coordinator, [DescribeTransactionsRequest(transactional_ids=(TransactionalId(good),))]
    )
    [state] = described.transaction_states
    assert state.error_code == ErrorCode.none, state
    assert (state.transaction_state, int(state.producer_id), int(state.producer_epoch)) == (
        "Ongoing",
        pid,
        epoch,
    )
    assert [(t.topic, list(t.partitions)) for t in state.topics] == [(topic, [0])]
    assert list_offset(cluster, topic, 0, read_committed=False) == len(RECORDS)
    assert list_offset(cluster, topic, 0, read_committed=True) == 0

    # It commits, and its records (and nothing of the zombie) are readable.
    ended = ask_until_settled(
        coordinator, _end(3, good, pid, epoch, commit=True), lambda x: x.error_code
    )
    assert ended.error_code == ErrorCode.none, ended
    wait_until(
        "the commit marker to make the records stable",
        lambda: list_offset(cluster, topic, 0, read_committed=True) == len(RECORDS) + 1,
    )
    seen = read_confluent(cluster.bootstrap, topic, 1, READ_COMMITTED, set(RECORDS))
    assert values(seen) == sorted(RECORDS)
