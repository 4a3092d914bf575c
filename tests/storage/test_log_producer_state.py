"""The idempotent-producer state kept by the Log: checked on leader appends, replayed on
follower appends, snapshotted on roll and close, rebuilt on open and truncation."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from strandline.errors import KafkaError
from strandline.storage.config import LogConfig
from strandline.storage.log import Log
from strandline.storage.producer_state import (
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
    UnknownProducerIdError,
)
from strandline.types import TopicPartition

from .batches import build_batch, decode

TP = TopicPartition("payments", 1)
PID = 4_000
RECORDS_PER_BATCH = 3


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


def batch(seq: int, *, pid: int = PID, epoch: int = 0, n: int = RECORDS_PER_BATCH) -> bytes:
    """A producer batch of `n` records with sequences seq .. seq+n-1."""
    values = [b"p%d-e%d-s%d" % (pid, epoch, seq + i) for i in range(n)]
    return build_batch(
        values, producer_id=pid, producer_epoch=epoch, base_sequence=seq, codec="lz4"
    )


def produce(log: Log, batches: int, *, pid: int = PID, epoch: int = 0, first_seq: int = 0) -> None:
    for i in range(batches):
        log.append_as_leader(batch(first_seq + i * RECORDS_PER_BATCH, pid=pid, epoch=epoch), 0, 0)


def values(log: Log) -> list[bytes | None]:
    got = log.read(0, 1 << 24, max_offset=log.log_end_offset)
    return [r[3] for r in decode(got.records)] if got.records else []


def snapshots(log: Log) -> list[str]:
    return sorted(p.name for p in log.dir.iterdir() if p.name.endswith(".snapshot"))


def test_duplicate_retry_returns_original_offsets_and_appends_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    produce(log, 6)  # offsets 0..17, sequences 0..17
    before = values(log)
    leo = log.log_end_offset
    # The newest batch and the oldest one still among the last five.
    for seq, first in ((15, 15), (3, 3)):
        info = log.append_as_leader(batch(seq), 0, 0)
        assert info.duplicate
        assert (info.first_offset, info.last_offset) == (first, first + RECORDS_PER_BATCH - 1)
        assert info.record_count == 0
    assert log.log_end_offset == leo
    assert values(log) == before
    # The next new batch is still accepted in sequence.
    info = log.append_as_leader(batch(18), 0, 0)
    assert not info.duplicate and info.first_offset == leo


def test_batch_older_than_the_five_cached_is_out_of_order(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    produce(log, 6)
    with pytest.raises(OutOfOrderSequenceError) as err:
        log.append_as_leader(batch(0), 0, 0)  # evicted from the cache of the last five
    assert err.value.code == ErrorCode.out_of_order_sequence_number


def test_sequence_gap_is_out_of_order_and_nothing_is_written(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    produce(log, 2)
    leo = log.log_end_offset
    with pytest.raises(OutOfOrderSequenceError) as err:
        log.append_as_leader(batch(9), 0, 0)  # expected 6
    assert err.value.code == ErrorCode.out_of_order_sequence_number == 45
    assert "expected 6" in str(err.value)
    assert log.log_end_offset == leo


def test_older_epoch_is_fenced_and_a_new_epoch_restarts_at_zero(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    produce(log, 2, epoch=0)
    info = log.append_as_leader(batch(0, epoch=1), 0, 0)  # KIP-360 local epoch bump
    assert not info.duplicate
    with pytest.raises(InvalidProducerEpochError) as fenced:
        log.append_as_leader(batch(6, epoch=0), 0, 0)
    assert fenced.value.code == ErrorCode.invalid_producer_epoch == 47
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(batch(5, epoch=2), 0, 0)  # a new epoch must start at 0
    leo = log.log_end_offset
    assert log.append_as_leader(batch(3, epoch=1), 0, 0).first_offset == leo


def test_unknown_producer_must_start_at_sequence_zero(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    with pytest.raises(UnknownProducerIdError) as err:
        log.append_as_leader(batch(12, pid=77), 0, 0)
    assert err.value.code == ErrorCode.unknown_producer_id == 59
    assert isinstance(err.value, KafkaError)
    assert log.log_end_offset == 0
    assert log.append_as_leader(batch(0, pid=77), 0, 0).first_offset == 0


def test_producers_are_independent_and_plain_batches_pass(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    produce(log, 2, pid=1)
    log.append_as_leader(build_batch([b"plain"]), 0, 0)
    produce(log, 2, pid=2)
    assert log.append_as_leader(batch(3, pid=1), 0, 0).first_offset == 3
    assert log.append_as_leader(batch(3, pid=2), 0, 0).first_offset == 10
    assert log.producer_state.map_end_offset == log.log_end_offset


def test_several_batches_in_one_payload_are_checked_in_order(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    info = log.append_as_leader(batch(0) + batch(3) + batch(6), 0, 0)
    assert (info.first_offset, info.last_offset) == (0, 8)
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(batch(9) + batch(13), 0, 0)  # the second one skips 12
    assert log.log_end_offset == 9
    assert log.append_as_leader(batch(9), 0, 0).first_offset == 9
    assert log.append_as_leader(batch(6), 0, 0).duplicate


def test_clean_restart_loads_the_close_snapshot(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    produce(log, 4)
    log.flush()
    log.close()
    assert snapshots(log) == ["00000000000000000012.snapshot"]
    again = open_log(tmp_path, clean=True)
    info = again.append_as_leader(batch(9), 0, 0)
    assert info.duplicate and info.first_offset == 9
    assert again.append_as_leader(batch(12), 0, 0).first_offset == 12


def test_sigkill_restart_without_any_snapshot_replays_the_log(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    produce(log, 4)
    # No close, no flush: the process died. The next open recovers and replays headers.
    again = open_log(tmp_path, clean=False)
    assert snapshots(again) == []
    assert again.append_as_leader(batch(6), 0, 0).duplicate
    with pytest.raises(OutOfOrderSequenceError):
        again.append_as_leader(batch(15), 0, 0)


def test_sigkill_restart_replays_after_the_newest_roll_snapshot(tmp_path: Path) -> None:
    small = LogConfig(segment_bytes=300)
    log = open_log(tmp_path, small)
    produce(log, 8)
    assert log.num_segments > 2
    assert snapshots(log), "a roll writes a snapshot"
    newest = int(snapshots(log)[-1].split(".")[0])
    assert 0 < newest < log.log_end_offset  # some batches lie after it
    again = open_log(tmp_path, small, clean=False)
    # Every one of the last five batches, whether before or after the snapshot, is known.
    for seq in range(9, 24, RECORDS_PER_BATCH):
        info = again.append_as_leader(batch(seq), 0, 0)
        assert info.duplicate and info.first_offset == seq
    assert again.append_as_leader(batch(24), 0, 0).first_offset == 24


def test_corrupt_snapshot_is_ignored_and_state_rebuilt_from_the_log(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    produce(log, 3)
    log.close()
    path = log.dir / "00000000000000000009.snapshot"
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    again = open_log(tmp_path, clean=True)
    assert not path.exists()
    assert again.append_as_leader(batch(6), 0, 0).duplicate


def test_snapshot_beyond_the_recovered_end_is_dropped(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    produce(log, 3)
    log.close()
    # The tail batch is torn after the snapshot was written (a disk that lied).
    segment = log.dir / "00000000000000000000.log"
    os.truncate(segment, segment.stat().st_size - 5)
    again = open_log(tmp_path, clean=False)
    assert again.log_end_offset == 6
    assert snapshots(again) == []
    # The lost batch is no duplicate: it is appended again, in sequence.
    info = again.append_as_leader(batch(6), 0, 0)
    assert not info.duplicate and info.first_offset == 6


def test_truncation_forgets_truncated_batches(tmp_path: Path) -> None:
    small = LogConfig(segment_bytes=300)
    log = open_log(tmp_path, small)
    produce(log, 8)  # offsets 0..23
    log.truncate_to(12)
    assert log.log_end_offset == 12
    assert all(int(name.split(".")[0]) <= 12 for name in snapshots(log))
    # Batches at or beyond 12 are forgotten: seq 12 is new again, not a duplicate.
    assert log.append_as_leader(batch(9), 0, 0).duplicate
    info = log.append_as_leader(batch(12), 0, 0)
    assert not info.duplicate and info.first_offset == 12
    # The truncated state survives a crash restart too.
    again = open_log(tmp_path, small, clean=False)
    assert again.append_as_leader(batch(12), 0, 0).duplicate
    assert again.append_as_leader(batch(15), 0, 0).first_offset == 15


def test_truncation_keeps_producers_whose_batches_left_the_cache(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    produce(log, 10)  # the cache holds the last five batches, offsets 15..29
    log.truncate_to(15)
    # The reload rebuilds the five batches before 15, so sequence 15 follows on.
    assert log.append_as_leader(batch(12), 0, 0).duplicate
    assert log.append_as_leader(batch(15), 0, 0).first_offset == 15


def test_truncate_fully_forgets_everything(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(segment_bytes=300))
    produce(log, 6)
    log.truncate_fully_and_start_at(100)
    assert snapshots(log) == []
    assert log.producer_state.producers == {}
    with pytest.raises(UnknownProducerIdError):
        log.append_as_leader(batch(18), 0, 0)


def test_follower_replays_headers_and_can_take_over(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader")
    produce(leader, 4, epoch=2)
    follower = open_log(tmp_path / "follower")
    follower.append_as_follower(leader.read(0, 1 << 20).records, now_ms=0)
    # The follower becomes leader: the producer's retry is recognised there.
    info = follower.append_as_leader(batch(9, epoch=2), 1, 0)
    assert info.duplicate and info.first_offset == 9
    with pytest.raises(InvalidProducerEpochError):
        follower.append_as_leader(batch(12, epoch=1), 1, 0)


def test_retention_drops_snapshots_of_deleted_segments(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(segment_bytes=300))
    produce(log, 10)
    assert len(snapshots(log)) >= 3
    log.delete_records_before(log.segments[-2].base_offset)
    kept = [int(name.split(".")[0]) for name in snapshots(log)]
    below = [offset for offset in kept if offset < log.segments[0].base_offset]
    assert len(below) <= 1
    # Producer state itself is not lost by retention.
    assert log.append_as_leader(batch(27), 0, 0).duplicate
