"""The partition side of transactions through the ReplicaManager and the WriteTxnMarkers
handler: markers wait for the ISR, the LSO follows the HW, read_committed reads stop at
the LSO with the aborted transactions, and __consumer_offsets markers reach the groups."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from kafka.record.default_records import DefaultRecordBatchBuilder
from kio.schema.errors import ErrorCode
from kio.schema.write_txn_markers.v1.request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)

from strandline.group.partitioning import OFFSETS_TOPIC
from strandline.protocol.controller_requests import PartitionState
from strandline.server.apis import write_txn_markers
from strandline.server.replica_manager import READ_COMMITTED, ReplicaManager
from strandline.state_change_log import StateChangeLog
from strandline.storage.config import LogConfig
from strandline.storage.log_manager import LogManager
from strandline.storage.txn_index import AbortedTxn
from strandline.types import TopicPartition

from .batches import build_batch, decode

NOW = int(time.time() * 1000)  # markers are stamped with the real clock
TP = TopicPartition("payments", 0)
PID = 5_000


def replica_manager(
    tmp_path: Path, tps: list[TopicPartition], isr: tuple[int, ...]
) -> ReplicaManager:
    logs = LogManager([tmp_path / "logs"], LogConfig(), 1)
    rm = ReplicaManager(1, logs, lambda _t: LogConfig(), StateChangeLog(None, 1), 10_000)
    states = [PartitionState(tp, 1, 1, 1, isr, 0, isr) for tp in tps]
    rm.become_leader_or_follower(1, states, (), NOW)
    return rm


def txn_batch(seq: int, values: list[bytes]) -> bytes:
    builder = DefaultRecordBatchBuilder(2, 0, True, PID, 0, seq, 1 << 20)
    for i, value in enumerate(values):
        builder.append(i, NOW, b"k", value, [])
    return bytes(builder.build())


def test_a_marker_moves_the_lso_once_the_isr_has_it(tmp_path: Path) -> None:
    async def run() -> None:
        rm = replica_manager(tmp_path, [TP], (1, 2))
        hosted = rm.partitions[TP]
        rm.append_as_leader(TP, build_batch([b"before"]), acks=1, now_ms=NOW)  # 0
        rm.append_as_leader(TP, txn_batch(0, [b"t0", b"t1"]), acks=1, now_ms=NOW)  # 1-2
        rm.on_follower_fetch(TP, 2, 3, NOW)
        assert (hosted.high_watermark, hosted.last_stable_offset) == (3, 1)

        marker = asyncio.create_task(rm.write_txn_marker(TP, PID, 0, 0, commit=True))
        await asyncio.sleep(0.05)
        assert not marker.done()  # waits for the follower, like acks=all
        assert hosted.last_stable_offset == 1
        rm.on_follower_fetch(TP, 2, 4, NOW)
        assert await asyncio.wait_for(marker, 2) == ErrorCode.none
        assert (hosted.high_watermark, hosted.last_stable_offset) == (4, 4)

        late = await rm.write_txn_marker(TP, PID, 0, 0, commit=True, timeout_s=0.05)
        assert late == ErrorCode.request_timed_out  # appended, not replicated in time
        assert (
            await rm.write_txn_marker(TopicPartition("nope", 0), PID, 0, 0, commit=True)
            == ErrorCode.unknown_topic_or_partition
        )

    asyncio.run(run())


def test_read_committed_stops_at_the_lso_and_names_the_aborted_transactions(
    tmp_path: Path,
) -> None:
    async def run() -> None:
        rm = replica_manager(tmp_path, [TP], (1,))
        rm.append_as_leader(TP, txn_batch(0, [b"aborted"]), acks=1, now_ms=NOW)  # 0
        assert await rm.write_txn_marker(TP, PID, 0, 0, commit=False) == ErrorCode.none  # 1
        rm.append_as_leader(TP, build_batch([b"plain"]), acks=1, now_ms=NOW)  # 2
        rm.append_as_leader(TP, txn_batch(1, [b"open"]), acks=1, now_ms=NOW)  # 3
        rm.append_as_leader(TP, build_batch([b"after"]), acks=1, now_ms=NOW)  # 4

        committed = rm.read(TP, 0, 1 << 20, isolation_level=READ_COMMITTED)
        assert committed.last_stable_offset == 3 and committed.high_watermark == 5
        assert [r[0] for r in decode(committed.records)] == [0, 1, 2]
        assert committed.aborted_transactions == [AbortedTxn(PID, 0, 1, 2)]
        assert rm.read(TP, 3, 1 << 20, isolation_level=READ_COMMITTED).records == b""
        assert rm.read(TP, 3, 1 << 20, isolation_level=READ_COMMITTED).aborted_transactions == []
        # A read_committed fetch at the LSO waits (0 bytes) instead of spinning.
        assert rm.available_bytes(TP, 3, -1, 1, READ_COMMITTED) == 0
        assert rm.available_bytes(TP, 2, -1, 1, READ_COMMITTED) == 1

        uncommitted = rm.read(TP, 0, 1 << 20)
        assert [r[0] for r in decode(uncommitted.records)] == [0, 1, 2, 3, 4]
        assert uncommitted.aborted_transactions is None
        assert uncommitted.last_stable_offset == 3

        assert await rm.write_txn_marker(TP, PID, 0, 0, commit=True) == ErrorCode.none  # 5
        done = rm.read(TP, 3, 1 << 20, isolation_level=READ_COMMITTED)
        assert [r[0] for r in decode(done.records)] == [3, 4, 5]
        assert done.aborted_transactions == []

    asyncio.run(run())


def test_write_txn_markers_answers_per_partition_and_completes_group_offsets(
    tmp_path: Path,
) -> None:
    offsets_tp = TopicPartition(OFFSETS_TOPIC, 3)
    completed: list[tuple[int, int, bool]] = []
    groups = SimpleNamespace(
        complete_txn_offsets=lambda p, pid, commit: completed.append((p, pid, commit))
    )

    async def run() -> Any:
        rm = replica_manager(tmp_path, [TP, offsets_tp], (1,))
        rm.append_as_leader(TP, txn_batch(0, [b"x"]), acks=1, now_ms=NOW)
        ctx = SimpleNamespace(replica_manager=rm, group_service=groups, authorizer=None)
        request = WriteTxnMarkersRequest(
            markers=(
                WritableTxnMarker(
                    producer_id=PID,
                    producer_epoch=0,
                    transaction_result=True,
                    topics=(
                        WritableTxnMarkerTopic(name=TP.topic, partition_indexes=(0, 9)),
                        WritableTxnMarkerTopic(name=OFFSETS_TOPIC, partition_indexes=(3,)),
                    ),
                    coordinator_epoch=2,
                ),
            )
        )
        response = await write_txn_markers.handle(
            ctx,  # type: ignore[arg-type]
            SimpleNamespace(api_version=1),  # type: ignore[arg-type]
            request,
        )
        # A second coordinator with an older epoch is fenced.
        fenced = await rm.write_txn_marker(TP, PID, 0, 1, commit=False)
        return rm, response, fenced

    rm, response, fenced = asyncio.run(run())
    (marker,) = response.markers
    errors = {
        (t.name, p.partition_index): p.error_code for t in marker.topics for p in t.partitions
    }
    assert errors == {
        (TP.topic, 0): ErrorCode.none,
        (TP.topic, 9): ErrorCode.unknown_topic_or_partition,
        (OFFSETS_TOPIC, 3): ErrorCode.none,
    }
    assert completed == [(3, PID, True)]
    assert rm.partitions[TP].last_stable_offset == 2
    assert fenced == ErrorCode.transaction_coordinator_fenced
