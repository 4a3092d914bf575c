"""ReplicaManager applying LeaderAndIsr partition states to real logs on disk."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from kio.schema.errors import ErrorCode

from strandline.protocol.controller_requests import BrokerInfo, PartitionState
from strandline.replication.follower import FetchState
from strandline.server.replica_fetcher import BACKOFF_S, ReplicaFetcher, ReplicaFetcherManager
from strandline.server.replica_manager import ReplicaManager
from strandline.state_change_log import StateChangeLog
from strandline.storage.checkpoint import LEADER_EPOCH_CHECKPOINT
from strandline.storage.config import LogConfig
from strandline.storage.leader_epoch_cache import EpochEntry, parse_checkpoint
from strandline.storage.log_manager import LogManager
from strandline.types import TopicPartition
from tests.storage.batches import build_batch

NOW = 1_700_000_000_000
TPS = [TopicPartition("t", p) for p in range(40)]


def replica_manager(tmp_path: Path) -> ReplicaManager:
    logs = LogManager([tmp_path / "logs"], LogConfig(), 1)
    return ReplicaManager(1, logs, lambda _t: LogConfig(), StateChangeLog(None, 1), 10_000)


def state(tp: TopicPartition, leader: int, leader_epoch: int) -> PartitionState:
    return PartitionState(tp, 1, leader, leader_epoch, (1, 2), 0, (1, 2))


def epochs_on_disk(tmp_path: Path, tp: TopicPartition) -> list[EpochEntry]:
    path = tmp_path / "logs" / f"{tp.topic}-{tp.partition}" / LEADER_EPOCH_CHECKPOINT
    return parse_checkpoint(path.read_text())


def test_many_new_leaders_have_their_epoch_on_disk_before_they_lead(tmp_path: Path) -> None:
    rm = replica_manager(tmp_path)
    rm.become_leader_or_follower(1, [state(tp, 1, 3) for tp in TPS], (), NOW)
    for tp in TPS[:5]:  # some partitions hold records of epoch 3, the others none
        rm.append_as_leader(tp, build_batch([b"a", b"b"]), acks=1, now_ms=NOW)
    rm.become_leader_or_follower(1, [state(tp, 2, 4) for tp in TPS], (), NOW)

    results = rm.become_leader_or_follower(1, [state(tp, 1, 5) for tp in TPS], (), NOW)

    assert set(results.values()) == {ErrorCode.none}
    for tp in TPS:
        hosted = rm.partitions[tp]
        expected = [EpochEntry(3, 0), EpochEntry(5, 2)] if tp in TPS[:5] else [EpochEntry(5, 0)]
        assert hosted.is_leader(1)
        assert hosted.log.leader_epoch_cache.entries == expected
        assert epochs_on_disk(tmp_path, tp) == expected


def test_a_state_with_an_old_leader_epoch_changes_nothing(tmp_path: Path) -> None:
    rm = replica_manager(tmp_path)
    rm.become_leader_or_follower(1, [state(tp, 1, 5) for tp in TPS[:3]], (), NOW)

    results = rm.become_leader_or_follower(1, [state(tp, 2, 5) for tp in TPS[:3]], (), NOW)

    assert set(results.values()) == {ErrorCode.stale_controller_epoch}
    for tp in TPS[:3]:
        assert rm.partitions[tp].is_leader(1)
        assert epochs_on_disk(tmp_path, tp) == [EpochEntry(5, 0)]


def test_a_partition_error_holds_only_that_partition_back_for_the_back_off(
    tmp_path: Path,
) -> None:
    rm = replica_manager(tmp_path)
    rm.become_leader_or_follower(1, [state(tp, 2, 5) for tp in TPS[:2]], (), NOW)
    for tp in TPS[:2]:
        follower = rm.partitions[tp].follower_state
        assert follower is not None
        follower.fetch_state = FetchState.FETCHING  # as after its epoch round trip

    async def ready_sets() -> tuple[set[TopicPartition], set[TopicPartition]]:
        fetcher = ReplicaFetcher(ReplicaFetcherManager(1, rm), BrokerInfo(2, "127.0.0.1", 1, None))
        await fetcher.stop()  # drive it by hand: no connection to broker 2
        fetcher.add(set(TPS[:2]))
        fetcher._on_partition_error(TPS[0], ErrorCode.not_leader_or_follower, 5)
        now = time.monotonic()
        return set(fetcher._ready(now)), set(fetcher._ready(now + 2 * BACKOFF_S))

    during, after = asyncio.run(ready_sets())

    assert during == {TPS[1]}
    assert after == set(TPS[:2])


def test_a_sequence_gap_left_by_a_full_disk_is_answered_as_the_storage_error(
    tmp_path: Path,
) -> None:
    """Found by chaos (seed 2210). Batch 1 of an idempotent producer is refused by a full
    log dir, and batch 2, already in flight, arrives with the next sequence numbers.
    Answering OUT_OF_ORDER_SEQUENCE_NUMBER made librdkafka bump its epoch and write again
    batches it had in flight elsewhere (duplicates). The answer is KAFKA_STORAGE_ERROR, and
    once space returns both batches go in, in order, with their own sequences."""
    from strandline.errors import StorageError
    from strandline.storage.disk import FaultInjectingWriter

    writer = FaultInjectingWriter()
    logs = LogManager([tmp_path / "logs"], LogConfig(), 1, writer=writer)
    rm = ReplicaManager(1, logs, lambda _t: LogConfig(), StateChangeLog(None, 1), 10_000)
    tp = TPS[0]
    rm.become_leader_or_follower(1, [state(tp, 1, 1)], (), NOW)
    first = build_batch([b"a", b"b"], producer_id=7, producer_epoch=0, base_sequence=0)
    second = build_batch([b"c"], producer_id=7, producer_epoch=0, base_sequence=2)

    writer.fail_with()
    for batch in (first, second):
        try:
            rm.append_as_leader(tp, batch, acks=1, now_ms=NOW)
        except StorageError as e:
            assert e.code == ErrorCode.kafka_storage_error
        else:
            raise AssertionError("a write to the full log dir was accepted")
    assert rm.partitions[tp].log.log_end_offset == 0

    writer.recover()
    assert rm.append_as_leader(tp, first, acks=1, now_ms=NOW).first_offset == 0
    assert rm.append_as_leader(tp, second, acks=1, now_ms=NOW).first_offset == 2
    # Without a storage failure a real gap is still OUT_OF_ORDER_SEQUENCE_NUMBER.
    from strandline.storage.producer_state import OutOfOrderSequenceError

    gap = build_batch([b"d"], producer_id=7, producer_epoch=0, base_sequence=9)
    try:
        rm.append_as_leader(tp, gap, acks=1, now_ms=NOW)
    except OutOfOrderSequenceError:
        pass
    else:
        raise AssertionError("a sequence gap was accepted")
