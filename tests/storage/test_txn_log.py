"""Transactions in the Log: markers close transactions, aborts land in `.txnindex`, the
LSO and the index survive restarts (clean and not), truncation, follower replication,
segment deletion, and the cleaner stays below the LSO and drops aborted records."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder

from strandline.errors import InvalidRecordError, StorageError
from strandline.protocol.control_batch import build_marker_batch
from strandline.protocol.record_batch import iter_batches
from strandline.storage.config import LogConfig
from strandline.storage.log import AppendOrigin, Log
from strandline.storage.producer_state import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    TransactionCoordinatorFencedError,
)
from strandline.storage.txn_index import AbortedTxn
from strandline.types import TopicPartition

from .batches import build_batch, decode

TP = TopicPartition("orders", 0)
A, B = 7_000, 8_000


def open_log(
    path: Path, config: LogConfig | None = None, *, clean: bool = False, recovery_point: int = 0
) -> Log:
    return Log.open(
        path / TP.dir_name,
        TP,
        config or LogConfig(),
        recovery_point=recovery_point,
        log_start_offset=0,
        now_ms=0,
        clean_shutdown=clean,
        writer=os.pwrite,
    )


class Producer:
    """A transactional producer's batches: sequences run on across transactions."""

    def __init__(self, pid: int, epoch: int = 0) -> None:
        self.pid, self.epoch, self.seq = pid, epoch, 0

    def batch(
        self, n: int = 2, *, keys: list[bytes] | None = None, transactional: bool = True
    ) -> bytes:
        builder = DefaultRecordBatchBuilder(
            2, 0, transactional, self.pid, self.epoch, self.seq, 1 << 20
        )
        for i in range(n):
            key = keys[i] if keys is not None else b"%d-%d" % (self.pid, self.seq + i)
            builder.append(i, 1_000, key, b"p%d-s%d" % (self.pid, self.seq + i), [])
        self.seq += n
        return bytes(builder.build())

    def write(self, log: Log, n: int = 2, **kwargs: object) -> int:
        return log.append_as_leader(self.batch(n, **kwargs), 0, 0).first_offset  # type: ignore[arg-type]

    def end(self, log: Log, *, commit: bool, coordinator_epoch: int = 0) -> int:
        marker = build_marker_batch(self.pid, self.epoch, coordinator_epoch, commit, 1_000)
        return log.append_as_leader(marker, 0, 0, AppendOrigin.COORDINATOR).first_offset


def files(log: Log, suffix: str) -> list[str]:
    return sorted(n for n in os.listdir(log.dir) if n.endswith(suffix))


def all_aborted(log: Log) -> list[AbortedTxn]:
    return log.collect_aborted_transactions(log.log_start_offset, log.log_end_offset)


# -- append -----------------------------------------------------------------------------------


def test_markers_close_transactions_and_aborts_are_indexed(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    a, b = Producer(A), Producer(B)
    assert a.write(log) == 0  # offsets 0-1
    log.append_as_leader(build_batch([b"plain"]), 0, 0)  # 2
    assert b.write(log) == 3  # 3-4
    assert log.last_stable_offset(log.log_end_offset) == 0

    assert a.end(log, commit=False) == 5
    assert log.last_stable_offset(5) == 0  # the marker is not below the HW yet
    assert log.last_stable_offset(6) == 3  # B's transaction is open
    assert b.end(log, commit=True) == 6
    assert log.last_stable_offset(7) == 7

    assert all_aborted(log) == [AbortedTxn(A, 0, 5, 3)]
    assert files(log, ".txnindex") == ["00000000000000000000.txnindex"]
    # The index answers only ranges the aborted transaction overlaps.
    assert log.collect_aborted_transactions(6, 7) == []
    assert log.collect_aborted_transactions(1, 3) == [AbortedTxn(A, 0, 5, 3)]


def test_only_the_coordinator_writes_markers_and_a_fenced_one_writes_nothing(
    tmp_path: Path,
) -> None:
    log = open_log(tmp_path)
    a = Producer(A, epoch=3)
    a.write(log)
    marker = build_marker_batch(A, 3, 0, True, 1_000)
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(marker, 0, 0)  # a client's produce
    a.end(log, commit=False, coordinator_epoch=5)
    end = log.log_end_offset

    with pytest.raises(TransactionCoordinatorFencedError):
        a.end(log, commit=True, coordinator_epoch=4)
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(build_marker_batch(A, 2, 5, True, 1), 0, 0, AppendOrigin.COORDINATOR)
    assert log.log_end_offset == end
    assert all_aborted(log) == [AbortedTxn(A, 0, 2, 3)]


def test_a_plain_write_from_a_producer_inside_a_transaction_is_refused(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    a = Producer(A)
    a.write(log)
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(a.batch(transactional=False), 0, 0)
    assert log.log_end_offset == 2
    a.seq -= 2  # the refused batch's sequences are free again
    a.end(log, commit=True)
    assert log.append_as_leader(a.batch(transactional=False), 0, 0).first_offset == 3


# -- restart ----------------------------------------------------------------------------------


@pytest.mark.parametrize("clean", [True, False])
def test_a_restart_keeps_an_open_transaction_and_the_lso(tmp_path: Path, clean: bool) -> None:
    small = LogConfig(segment_bytes=400)
    log = open_log(tmp_path, small)
    a, b = Producer(A), Producer(B)
    log.append_as_leader(build_batch([b"x"] * 3), 0, 0)
    first = a.write(log)
    for _ in range(6):
        b.write(log)
        b.end(log, commit=False)
    assert log.num_segments > 2  # A's transaction spans segments and snapshots
    before = (log.last_stable_offset(log.log_end_offset), all_aborted(log))
    assert before[0] == first
    if clean:
        log.close()
    else:
        log._close_segments()  # killed: no close snapshot, recovery from offset 0

    again = open_log(tmp_path, small, clean=clean)

    assert (again.last_stable_offset(again.log_end_offset), all_aborted(again)) == before
    a.end(again, commit=False)
    assert again.last_stable_offset(again.log_end_offset) == again.log_end_offset
    assert all_aborted(again)[-1] == AbortedTxn(
        A, first, again.log_end_offset - 1, again.log_end_offset
    )


def test_recovery_rebuilds_the_txn_index_of_the_recovered_segments(tmp_path: Path) -> None:
    small = LogConfig(segment_bytes=400)
    log = open_log(tmp_path, small)
    a, b = Producer(A), Producer(B)
    a.write(log)  # A stays open over the whole log
    for i in range(8):
        b.write(log)
        b.end(log, commit=i % 2 == 1)
    a.end(log, commit=False)
    expected = all_aborted(log)
    assert len(expected) == 5 and log.num_segments > 3
    recovery_point = log.segments[2].base_offset
    log.flush()
    log._close_segments()
    for name in files(log, ".txnindex"):
        (log.dir / name).unlink()  # lost with the unflushed tail, say

    again = open_log(tmp_path, small, recovery_point=recovery_point)

    # Segments from the recovery point on are rebuilt; those before keep what they had.
    rebuilt = [t for t in expected if t.last_offset >= recovery_point]
    assert all_aborted(again) == rebuilt
    assert rebuilt[-1].producer_id == A and rebuilt[-1].first_offset == 0


# -- truncation, replication, deletion --------------------------------------------------------


def test_truncation_drops_cut_aborts_and_reopens_their_transactions(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    a, b = Producer(A), Producer(B)
    a.write(log)  # 0-1
    b.write(log)  # 2-3
    a.end(log, commit=False)  # 4
    b.end(log, commit=False)  # 5
    assert [t.producer_id for t in all_aborted(log)] == [A, B]

    log.truncate_to(5)  # B's marker goes: B's transaction is open again
    assert all_aborted(log) == [AbortedTxn(A, 0, 4, 2)]
    assert log.last_stable_offset(5) == 2

    log.truncate_to(2)  # A's marker and all of B go
    assert all_aborted(log) == []
    assert log.last_stable_offset(2) == 0
    assert log.producer_state.ongoing_txns == {A: 0}
    assert B not in log.producer_state.producers


def test_a_follower_indexes_the_aborts_it_replicates_and_can_take_over(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader")
    follower = open_log(tmp_path / "follower")
    a, b = Producer(A), Producer(B)
    a.write(leader)
    b.write(leader)
    a.end(leader, commit=False)
    b.write(leader)
    chunk = leader.read(0, 1 << 20).records
    # Replicated in two fetches, the second beginning with the marker.
    headers = list(iter_batches(chunk))
    cut = headers[2].position
    follower.append_as_follower(chunk[:cut], 0)
    follower.append_as_follower(chunk[cut:], 0)

    assert all_aborted(follower) == all_aborted(leader) == [AbortedTxn(A, 0, 4, 2)]
    assert follower.last_stable_offset(7) == leader.last_stable_offset(7) == 2
    # As the new leader it refuses B's plain write and takes B's marker.
    with pytest.raises(InvalidTxnStateError):
        follower.append_as_leader(b.batch(transactional=False), 1, 0)
    b.seq -= 2
    b.end(follower, commit=True)
    assert follower.last_stable_offset(follower.log_end_offset) == follower.log_end_offset


def test_deleting_segments_deletes_their_txn_index(tmp_path: Path) -> None:
    small = LogConfig(segment_bytes=400)
    log = open_log(tmp_path, small)
    b = Producer(B)
    for _ in range(6):
        b.write(log)
        b.end(log, commit=False)
    indexes = files(log, ".txnindex")
    assert len(indexes) > 2
    log.delete_records_before(log.segments[2].base_offset)
    assert files(log, ".txnindex") == indexes[2:]
    assert all(t.last_offset >= log.log_start_offset for t in all_aborted(log))


# -- compaction -------------------------------------------------------------------------------

COMPACT = LogConfig(cleanup_policy="compact", segment_bytes=300, min_cleanable_dirty_ratio=0.0)


def values_by_key(log: Log) -> dict[bytes, list[bytes]]:
    out: dict[bytes, list[bytes]] = {}
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        got = log.read(offset, 1 << 24)
        for _o, _ts, key, value, _h in decode(got.records):
            out.setdefault(key, []).append(value)  # type: ignore[arg-type]
        offset = got.next_offset
    return out


def test_the_cleaner_drops_aborted_records_without_letting_them_shadow(tmp_path: Path) -> None:
    log = open_log(tmp_path, COMPACT)
    a, b = Producer(A), Producer(B)
    a.write(log, 1, keys=[b"k"])
    a.end(log, commit=True)
    b.write(log, 1, keys=[b"k"])  # aborted: must not replace A's committed k
    b.end(log, commit=False)
    for i in range(6):
        log.append_as_leader(build_batch([b"f%d" % i], keys=[b"filler%d" % i]), 0, 0)
    assert log.num_segments > 2

    assert log.clean(now_ms=0, high_watermark=log.log_end_offset) > 0

    survivors = values_by_key(log)
    assert survivors[b"k"] == [b"p%d-s0" % A]
    # The markers stay, so the state rebuilt from the log is the same.
    replica = open_log(tmp_path / "copy", COMPACT)
    while replica.log_end_offset < log.log_end_offset:
        replica.append_as_follower(log.read(replica.log_end_offset, 1 << 24).records, 0)
    assert all_aborted(replica) == all_aborted(log) == [AbortedTxn(B, 2, 3, 4)]
    assert replica.last_stable_offset(log.log_end_offset) == log.log_end_offset


def test_the_cleaner_stops_at_the_first_open_transaction(tmp_path: Path) -> None:
    log = open_log(tmp_path, COMPACT)
    a = Producer(A)
    for i in range(3):
        log.append_as_leader(build_batch([b"v%d" % i], keys=[b"k"]), 0, 0)
    open_at = a.write(log, 1, keys=[b"k"])
    for i in range(8):
        log.append_as_leader(build_batch([b"w%d" % i], keys=[b"k"]), 0, 0)
    assert log.num_segments > 3

    plan = log.cleaning_plan(0, log.log_end_offset)

    assert plan is not None and plan.end_offset <= open_at
    log.clean(now_ms=0, high_watermark=log.log_end_offset)
    # A's record (and all after it) is still there, whatever its transaction's outcome.
    kept = values_by_key(log)[b"k"]
    assert kept[kept.index(b"p%d-s0" % A) :] == [b"p%d-s0" % A] + [b"w%d" % i for i in range(8)]


def test_a_marker_whose_abort_cannot_be_indexed_is_not_appended(tmp_path: Path) -> None:
    """Otherwise read_committed consumers would read the aborted records, and the
    coordinator's retry would find no open transaction left to index."""
    failing = {"on": False}

    def writer(fd: int, data: bytes | bytearray | memoryview, pos: int) -> int:
        if failing["on"] and os.readlink(f"/proc/self/fd/{fd}").endswith(".txnindex"):
            raise OSError(28, "No space left on device")
        return os.pwrite(fd, data, pos)

    log = Log.open(
        tmp_path / TP.dir_name,
        TP,
        LogConfig(),
        recovery_point=0,
        log_start_offset=0,
        now_ms=0,
        writer=writer,
    )
    a = Producer(A)
    a.write(log)
    failing["on"] = True
    with pytest.raises(StorageError):
        a.end(log, commit=False)
    assert log.log_end_offset == 2
    assert log.producer_state.ongoing_txns == {A: 0}

    failing["on"] = False  # the coordinator retries
    assert a.end(log, commit=False) == 2
    assert all_aborted(log) == [AbortedTxn(A, 0, 2, 3)]


def test_the_lso_never_falls_below_the_log_start_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(segment_bytes=300))
    Producer(A).write(log)  # open at 0, never ended
    for i in range(10):
        log.append_as_leader(build_batch([b"v%d" % i]), 0, 0)
    assert log.last_stable_offset(log.log_end_offset) == 0
    log.delete_records_before(5)
    assert log.last_stable_offset(log.log_end_offset) == 5
    assert log.last_stable_offset(3) == 3  # and never above the HW


def test_an_abort_marker_torn_by_a_crash_leaves_no_index_entry(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    a = Producer(A)
    a.write(log)
    a.end(log, commit=False)
    assert all_aborted(log) == [AbortedTxn(A, 0, 2, 3)]
    log._close_segments()  # killed before the marker's bytes all reached the disk
    segment_file = log.dir / "00000000000000000000.log"
    os.truncate(segment_file, segment_file.stat().st_size - 5)

    again = open_log(tmp_path)

    assert again.log_end_offset == 2
    assert all_aborted(again) == []
    assert again.last_stable_offset(2) == 0  # A's transaction is open again
    a.end(again, commit=True)  # the coordinator's retry
    assert all_aborted(again) == []


# -- property: any history, any restarts and truncations --------------------------------------

_ops = st.lists(
    st.one_of(
        st.tuples(st.just("plain"), st.just(0)),
        st.tuples(st.sampled_from(["txn", "commit", "abort"]), st.sampled_from([A, B])),
        st.tuples(st.sampled_from(["clean", "killed"]), st.just(0)),
        st.tuples(st.just("truncate"), st.integers(1, 4)),
    ),
    max_size=30,
)


def _model(events: list[tuple[str, int, int]], end: int) -> tuple[int, list[AbortedTxn]]:
    """LSO at HW = `end` and the aborted transactions, from the events below `end`."""
    open_at: dict[int, int] = {}
    aborted = []
    for kind, pid, offset in events:
        if offset >= end:
            break
        if kind == "txn":
            open_at.setdefault(pid, offset)
        elif kind in ("commit", "abort") and pid in open_at:
            first = open_at.pop(pid)
            if kind == "abort":
                others = [f for p, f in open_at.items() if p != pid]
                aborted.append(AbortedTxn(pid, first, offset, min(others, default=offset + 1)))
    return min([end, *open_at.values()]), aborted


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=_ops)
def test_any_history_of_transactions_survives_restarts_and_truncation(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, int]]
) -> None:
    root = tmp_path_factory.mktemp("txn")
    config = LogConfig(segment_bytes=350)
    log = open_log(root, config)
    producers = {A: Producer(A), B: Producer(B)}
    events: list[tuple[str, int, int]] = []  # (kind, producer, offset of its first record)
    for kind, arg in ops:
        if kind == "plain":
            events.append(
                ("plain", 0, log.append_as_leader(build_batch([b"p"]), 0, 0).first_offset)
            )
        elif kind == "txn":
            events.append(("txn", arg, producers[arg].write(log, 1)))
        elif kind in ("commit", "abort"):
            events.append((kind, arg, producers[arg].end(log, commit=kind == "commit")))
        elif kind == "clean":
            log.close()
            log = open_log(root, config, clean=True)
        elif kind == "killed":
            log._close_segments()
            log = open_log(root, config, recovery_point=log.segments[-1].base_offset // 2)
        else:  # a follower's truncation by `arg` offsets
            cut = max(0, log.log_end_offset - arg)
            log.truncate_to(cut)
            events = [e for e in events if e[2] < cut]
            for producer in producers.values():  # sequences of cut batches are free again
                producer.seq = sum(1 for k, p, _ in events if k == "txn" and p == producer.pid)
        end = log.log_end_offset
        assert (log.last_stable_offset(end), all_aborted(log)) == _model(events, end)
    log.close()
