from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from strandline.errors import (
    CorruptRecordError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    StorageError,
)
from strandline.protocol.record_batch import iter_batches
from strandline.storage.config import LogConfig
from strandline.storage.disk import FaultInjectingWriter
from strandline.storage.index import Writer
from strandline.storage.leader_epoch_cache import EpochEntry, parse_checkpoint
from strandline.storage.log import Log, UnexpectedAppendOffsetError
from strandline.types import TopicPartition

from .batches import CODECS, build_batch, decode

TP = TopicPartition("orders", 3)


def open_log(
    path: Path,
    config: LogConfig | None = None,
    *,
    recovery_point: int = 0,
    log_start_offset: int = 0,
    now_ms: int = 0,
    clean: bool = False,
    writer: Writer = os.pwrite,
) -> Log:
    return Log.open(
        path / TP.dir_name,
        TP,
        config or LogConfig(),
        recovery_point=recovery_point,
        log_start_offset=log_start_offset,
        now_ms=now_ms,
        clean_shutdown=clean,
        writer=writer,
    )


def read_all(log: Log, start: int = 0) -> list[tuple]:
    out: list[tuple] = []
    offset = start
    while offset < log.log_end_offset:
        got = log.read(offset, 1 << 20)
        assert got.records, f"no progress at {offset}"
        out.extend(r for r in decode(got.records) if r[0] >= offset)
        offset = got.next_offset
    return out


def fill(log: Log, batches: int, per_batch: int = 3, *, epoch: int = 0, ts0: int = 0) -> None:
    for i in range(batches):
        codec = list(CODECS)[i % len(CODECS)]
        values = [b"v%d-%d-" % (i, j) * 20 for j in range(per_batch)]
        stamps = [ts0 + i * 100 + j for j in range(per_batch)]
        log.append_as_leader(build_batch(values, codec=codec, timestamps=stamps), epoch, 0)


def test_leader_append_assigns_dense_offsets_and_reads_back(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    info = log.append_as_leader(build_batch([b"a", b"b", b"c"]), 5, now_ms=10)
    assert (info.first_offset, info.last_offset, info.record_count) == (0, 2, 3)
    assert info.log_append_time_ms == -1
    info = log.append_as_leader(build_batch([b"d"] * 400, codec="zstd"), 5, now_ms=10)
    assert (info.first_offset, info.last_offset) == (3, 402)
    assert log.log_end_offset == 403
    records = read_all(log)
    assert [r[0] for r in records] == list(range(403))
    assert records[0][2:4] == (b"k0", b"a")
    assert records[0][4] == [("h", b"v0")]
    assert [h.partition_leader_epoch for h in iter_batches(log.read(0, 1 << 20).records)] == [5, 5]


def test_log_append_time_topic_stamps_batches(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(message_timestamp_type="LogAppendTime"))
    info = log.append_as_leader(build_batch([b"a", b"b"], timestamps=[1, 2]), 0, now_ms=777)
    assert info.log_append_time_ms == 777 and info.max_timestamp == 777
    assert [r[1] for r in decode(log.read(0, 1000).records)] == [777, 777]
    assert log.offset_for_timestamp(700) == (0, 777)


def test_rolls_by_size_and_names_segments_by_base_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(segment_bytes=1024, index_interval_bytes=100))
    fill(log, 40)
    assert log.num_segments > 3
    names = sorted(p.name for p in log.dir.iterdir() if p.suffix == ".log")
    assert names[0] == "00000000000000000000.log"
    assert all(len(Path(n).stem) == 20 for n in names)
    for segment in log.segments[:-1]:
        assert segment.size <= 1024
        # Sparse: one (u32, u32) entry per index.interval.bytes at most.
        index_bytes = (log.dir / f"{segment.base_offset:020d}.index").stat().st_size
        assert 0 < index_bytes // 8 <= segment.size // 100
        assert (log.dir / f"{segment.base_offset:020d}.timeindex").stat().st_size % 12 == 0
    assert [r[0] for r in read_all(log)] == list(range(120))
    for offset in range(0, 120, 7):
        got = log.read(offset, 200)
        assert got.first_offset <= offset < got.next_offset


def test_rolls_by_age(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(segment_ms=1000))
    log.append_as_leader(build_batch([b"a"], timestamps=[5_000]), 0, now_ms=5_000)
    log.append_as_leader(build_batch([b"b"], timestamps=[5_500]), 0, now_ms=5_500)
    assert log.num_segments == 1
    log.append_as_leader(build_batch([b"c"], timestamps=[6_100]), 0, now_ms=6_100)
    assert [s.base_offset for s in log.segments] == [0, 2]
    log.maybe_roll(now_ms=6_500)
    assert log.num_segments == 2
    log.maybe_roll(now_ms=7_200)
    assert [s.base_offset for s in log.segments] == [0, 2, 3]
    assert log.recovery_point == 3  # a rolled segment is flushed


def test_read_returns_whole_batches_within_max_bytes(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    sizes = []
    for _ in range(5):
        sizes.append(log.append_as_leader(build_batch([b"x" * 100] * 2), 0, 0).size)
    got = log.read(0, sizes[0] + sizes[1] + 10)
    assert len(got.records) == sizes[0] + sizes[1]
    assert (got.first_offset, got.next_offset) == (0, 4)
    # KIP-74: one whole batch even when it alone exceeds max_bytes.
    got = log.read(2, 10)
    assert len(got.records) == sizes[1] and got.next_offset == 4
    assert log.read(2, 10, min_one_batch=False).records == b""
    # A fetch from inside a batch starts at that batch.
    assert log.read(3, 1 << 20).first_offset == 2


def test_read_stops_at_max_offset_and_checks_range(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 4)
    got = log.read(0, 1 << 20, max_offset=6)
    assert (got.first_offset, got.next_offset) == (0, 6)
    assert log.read(6, 1 << 20, max_offset=6).records == b""
    assert log.read(12, 1 << 20).records == b""  # at the LEO: empty, not an error
    with pytest.raises(OffsetOutOfRangeError):
        log.read(13, 100)
    log.delete_records_before(4)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(3, 100)


def test_offset_for_timestamp_finds_record_inside_batch_across_segments(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(segment_bytes=600, index_interval_bytes=64))
    stamps = [[10, 50, 30], [60, 55, 90], [100, 95, 140], [150, 200, 170]] * 3
    base = 0
    for i, ts in enumerate(stamps):
        shifted = [t + (i // 4) * 1000 for t in ts]
        codec = list(CODECS)[i % 5]
        log.append_as_leader(build_batch([b"z" * 120] * 3, codec=codec, timestamps=shifted), 0, 0)
        base += 3
    assert log.num_segments > 2
    assert log.offset_for_timestamp(51) == (3, 60)
    assert log.offset_for_timestamp(56) == (3, 60)
    assert log.offset_for_timestamp(91) == (6, 100)
    assert log.offset_for_timestamp(1_000) == (12, 1_010)
    assert log.offset_for_timestamp(2_160) == (34, 2_200)  # first by offset, not nearest
    assert log.offset_for_timestamp(2_201) is None
    assert log.offset_for_timestamp(0) == (0, 10)
    log.delete_records_before(13)
    assert log.offset_for_timestamp(0) == (13, 1_050)


def test_follower_append_keeps_offsets_and_epochs(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader")
    fill(leader, 2, epoch=1)
    fill(leader, 2, epoch=3)
    follower = open_log(tmp_path / "follower")
    fetched = leader.read(0, 1 << 20)
    info = follower.append_as_follower(fetched.records, now_ms=0)
    assert (info.first_offset, info.last_offset, info.record_count) == (0, 11, 12)
    assert follower.log_end_offset == 12
    assert follower.leader_epoch_cache.entries == [EpochEntry(1, 0), EpochEntry(3, 6)]
    assert (follower.dir / "leader-epoch-checkpoint").read_text() == "0\n2\n1 0\n3 6\n"
    assert read_all(follower) == read_all(leader)
    with pytest.raises(UnexpectedAppendOffsetError):
        follower.append_as_follower(fetched.records, now_ms=0)
    corrupt = bytearray(fetched.records)
    corrupt[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        open_log(tmp_path / "other").append_as_follower(bytes(corrupt), now_ms=0)


def test_bad_produce_leaves_log_untouched(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(max_message_bytes=500))
    log.append_as_leader(build_batch([b"ok"]), 0, 0)
    with pytest.raises(RecordTooLargeError):
        log.append_as_leader(build_batch([b"x" * 600]), 0, 0)
    bad = bytearray(build_batch([b"bad"]))
    bad[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(bytes(bad), 0, 0)
    assert log.log_end_offset == 1 and log.size_in_bytes == log.segments[0].size


def test_truncate_to_drops_tail_and_epochs(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(segment_bytes=700))
    fill(log, 4, epoch=1)
    fill(log, 4, epoch=2)
    assert log.leader_epoch_cache.entries == [EpochEntry(1, 0), EpochEntry(2, 12)]
    log.truncate_to(12)
    assert log.log_end_offset == 12
    assert log.leader_epoch_cache.entries == [EpochEntry(1, 0)]
    assert [r[0] for r in read_all(log)] == list(range(12))
    log.truncate_to(4)  # mid-batch: the whole batch holding offset 4 goes
    assert log.log_end_offset == 3
    fill(log, 1, epoch=3)
    assert [r[0] for r in read_all(log)] == list(range(6))
    log.truncate_fully_and_start_at(50)
    assert (log.log_start_offset, log.log_end_offset, log.num_segments) == (50, 50, 1)
    assert log.leader_epoch_cache.entries == []
    info = log.append_as_leader(build_batch([b"q"]), 4, 0)
    assert info.first_offset == 50
    assert sorted(p.name for p in log.dir.glob("*.log")) == ["00000000000000000050.log"]


def test_delete_records_and_retention(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=600, retention_ms=1_000)
    log = open_log(tmp_path, config)
    fill(log, 12, ts0=10_000)  # timestamps 10_000 .. 11_102
    segments = log.num_segments
    assert segments >= 4
    assert log.delete_records_before(4) == 4
    assert log.log_start_offset == 4
    second_base = log.segments[1].base_offset
    log.delete_records_before(second_base)
    assert log.segments[0].base_offset == second_base
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(log.log_end_offset + 1)
    # Time: only segments whose newest record is older than retention.ms go.
    newest_first_seg = log.segments[0].max_timestamp
    assert log.apply_retention(now_ms=newest_first_seg + 1_000) == 0
    assert log.apply_retention(now_ms=newest_first_seg + 1_001) >= 1
    assert log.log_start_offset == log.segments[0].base_offset
    # Everything expired: the active segment rolls and the log keeps its end offset.
    end = log.log_end_offset
    log.apply_retention(now_ms=1_000_000)
    assert (log.log_start_offset, log.log_end_offset, log.num_segments) == (end, end, 1)
    assert log.read(end, 100).records == b""


def test_retention_by_size(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(segment_bytes=600, retention_ms=-1, retention_bytes=1_500))
    fill(log, 15)
    log.apply_retention(now_ms=10**12)
    assert log.size_in_bytes <= 1_500 + log.active_segment.size
    remaining = [r[0] for r in read_all(log, log.log_start_offset)]
    assert remaining == list(range(log.log_start_offset, 45))
    assert log.log_start_offset > 0


def test_flush_messages_moves_recovery_point(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(flush_messages=5))
    fill(log, 1)
    assert log.recovery_point == 0
    fill(log, 1)
    assert log.recovery_point == 6
    slow = open_log(tmp_path / "slow", LogConfig(flush_ms=1_000), now_ms=0)
    fill(slow, 1)
    slow.maybe_flush(now_ms=999)
    assert slow.recovery_point == 0
    slow.maybe_flush(now_ms=1_000)
    assert slow.recovery_point == 3


@pytest.mark.parametrize("partial", [0, 7])
def test_full_disk_leaves_log_intact_and_recovers(tmp_path: Path, partial: int) -> None:
    disk = FaultInjectingWriter()
    log = open_log(tmp_path, LogConfig(segment_bytes=800, index_interval_bytes=50), writer=disk)
    fill(log, 5)
    before = read_all(log)
    sizes = [(p.name, p.stat().st_size) for p in sorted(log.dir.iterdir())]
    segments = log.num_segments
    disk.fail_with(errno.ENOSPC, partial_bytes=partial)
    for _ in range(3):  # including appends that would roll a new segment
        with pytest.raises(StorageError) as err:
            fill(log, 1)
        assert "No space left" in str(err.value)
    assert disk.failed_writes >= 3
    assert read_all(log) == before and log.num_segments == segments
    assert [(p.name, p.stat().st_size) for p in sorted(log.dir.iterdir())] == sizes
    disk.recover()
    fill(log, 2)
    assert [r[0] for r in read_all(log)] == list(range(21))
    log.close()
    reopened = open_log(tmp_path)
    assert [r[0] for r in read_all(reopened)] == list(range(21))


def test_reopen_after_clean_close_keeps_everything(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=700, index_interval_bytes=80)
    log = open_log(tmp_path, config)
    fill(log, 10, epoch=2)
    log.flush()
    expected = read_all(log)
    log.close()
    for clean in (True, False):
        again = open_log(tmp_path, config, recovery_point=30, clean=clean)
        assert again.log_end_offset == 30 and again.recovery_point == 30
        assert read_all(again) == expected
        assert again.leader_epoch_cache.entries == [EpochEntry(2, 0)]
        assert again.offset_for_timestamp(450) == (15, 500)
        again.close()


def test_recovery_truncates_torn_tail(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(index_interval_bytes=50))
    fill(log, 6)
    sizes = [h.size for h in iter_batches(log.read(0, 1 << 20).records)]
    log.close()
    path = tmp_path / TP.dir_name / "00000000000000000000.log"
    with open(path, "r+b") as f:
        f.truncate(sum(sizes[:4]) + 20)  # half of the fifth batch survives
    log = open_log(tmp_path, LogConfig(index_interval_bytes=50))
    assert log.log_end_offset == 12
    assert path.stat().st_size == sum(sizes[:4])
    assert [r[0] for r in read_all(log)] == list(range(12))
    fill(log, 1)
    assert [r[0] for r in read_all(log)] == list(range(15))


def test_recovery_cuts_at_corrupt_batch_and_drops_later_segments(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=700)
    log = open_log(tmp_path, config)
    fill(log, 12, epoch=1)
    log.flush()
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 3
    log.close()
    victim = tmp_path / TP.dir_name / f"{bases[1]:020d}.log"
    data = bytearray(victim.read_bytes())
    first_size = next(iter_batches(data)).size
    data[first_size + 70] ^= 0xFF  # inside the second batch of the second segment
    victim.write_bytes(data)
    # Recovery starts at the segment holding the recovery point: the second one here.
    log = open_log(tmp_path, config, recovery_point=bases[1])
    assert log.log_end_offset == bases[1] + 3
    assert [s.base_offset for s in log.segments] == bases[:2]
    assert not (tmp_path / TP.dir_name / f"{bases[2]:020d}.log").exists()
    assert [r[0] for r in read_all(log)] == list(range(bases[1] + 3))
    assert log.recovery_point == log.log_end_offset


def test_clean_start_skips_validation_but_crash_start_does_not(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 3)
    log.close()
    path = tmp_path / TP.dir_name / "00000000000000000000.log"
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(data)
    assert open_log(tmp_path, recovery_point=9, clean=True).log_end_offset == 9
    assert open_log(tmp_path, recovery_point=0).log_end_offset == 6


def test_stale_files_are_removed_and_start_offset_respected(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 2)
    log.close()
    (log.dir / "00000000000000000099.index").write_bytes(b"\0" * 8)
    (log.dir / "00000000000000000000.log.deleted").write_bytes(b"x")
    again = open_log(tmp_path, log_start_offset=4)
    assert sorted(p.name for p in again.dir.iterdir()) == [
        "00000000000000000000.index",
        "00000000000000000000.log",
        "00000000000000000000.timeindex",
        "leader-epoch-checkpoint",
    ]
    assert again.log_start_offset == 4
    beyond = open_log(tmp_path / "x", log_start_offset=0)
    beyond.close()
    assert open_log(tmp_path, log_start_offset=100).log_end_offset == 100


def test_follower_starting_above_an_empty_segment_gets_a_matching_base(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader")
    leader.truncate_fully_and_start_at(1_000)
    fill(leader, 2, epoch=7)
    follower = open_log(tmp_path / "follower")
    follower.append_as_follower(leader.read(1_000, 1 << 20).records, now_ms=0)
    assert [s.base_offset for s in follower.segments] == [1_000]
    follower.close()
    # A crash restart CRC-checks it with the dense-offset rule and keeps everything.
    again = open_log(tmp_path / "follower", log_start_offset=1_000)
    assert (again.log_start_offset, again.log_end_offset) == (1_000, 1_006)
    assert again.leader_epoch_cache.entries == [EpochEntry(7, 1_000)]


def test_missing_or_damaged_indexes_are_rebuilt(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=2_000, index_interval_bytes=100)
    log = open_log(tmp_path, config)
    fill(log, 20)
    expected = read_all(log)
    first = log.segments[0].base_offset
    index_size = (log.dir / f"{first:020d}.index").stat().st_size
    log.close()
    (log.dir / f"{first:020d}.index").unlink()
    (log.dir / f"{first:020d}.timeindex").write_bytes(b"\x01" * 5)
    again = open_log(tmp_path, config, recovery_point=60, clean=True)
    assert read_all(again) == expected
    assert (log.dir / f"{first:020d}.index").stat().st_size == index_size
    assert (log.dir / f"{first:020d}.timeindex").stat().st_size % 12 == 0
    assert again.offset_for_timestamp(1_050) == (33, 1_100)


def test_read_window_ending_exactly_at_an_indexed_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(index_interval_bytes=0))  # an entry for every batch
    sizes = [log.append_as_leader(build_batch([b""]), 0, 0).size for _ in range(6)]
    got = log.read(0, sum(sizes[:3]))
    assert (got.next_offset, len(got.records)) == (3, sum(sizes[:3]))
    got = log.read(0, sum(sizes[:3]) + 5, max_offset=2)
    assert (got.next_offset, len(got.records)) == (2, sum(sizes[:2]))


def test_a_new_log_writes_its_empty_epoch_checkpoint_without_a_sync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening a new log used to write "no leader epochs" with two fsyncs: most of the
    time a 1,000-partition topic took to create (docs/scaling.md). Nothing to lose there."""
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    log = open_log(tmp_path)
    assert synced == []
    assert (log.dir / "leader-epoch-checkpoint").read_text() == "0\n0\n"
    log.assign_leader_epoch(3, 0)  # a real entry is written durably
    assert synced
    log.close()


def test_a_torn_epoch_checkpoint_reads_as_no_entries_and_is_rewritten(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.close()
    (log.dir / "leader-epoch-checkpoint").write_text("0\n")  # torn by a crash
    again = open_log(tmp_path)
    assert again.leader_epoch_cache.entries == []
    assert (again.dir / "leader-epoch-checkpoint").read_text() == "0\n0\n"


def _count_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    return synced


def test_a_follower_append_of_a_new_epoch_does_not_sync_until_the_flush(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """KAFKA-15046: the follower's first append of each epoch wrote the checkpoint with
    two fsyncs on its fetch path (a fifth of a leader's time on a new topic). The file
    is replaced unsynced, and the flush syncs it before the recovery point moves."""
    leader = open_log(tmp_path / "leader")
    fill(leader, 2, epoch=1)
    fill(leader, 2, epoch=3)
    follower = open_log(tmp_path / "follower")
    synced = _count_fsyncs(monkeypatch)
    follower.append_as_follower(leader.read(0, 1 << 20).records, now_ms=0)
    assert synced == []
    checkpoint = follower.dir / "leader-epoch-checkpoint"
    assert checkpoint.read_text() == "0\n2\n1 0\n3 6\n"  # visible at once, not yet durable
    follower.flush(0)
    assert len(synced) >= 2  # the segment, the checkpoint and its directory
    assert follower.recovery_point == 12
    synced.clear()
    follower.flush(0)
    assert all(fd != -1 for fd in synced)
    follower.close()


def _leader_with_epochs(path: Path) -> Log:
    leader = open_log(path)
    fill(leader, 2, epoch=1)  # offsets 0-5
    fill(leader, 2, epoch=3)  # offsets 6-11
    fill(leader, 2, epoch=4)  # offsets 12-17
    return leader


@pytest.mark.parametrize(
    "left_by_crash",
    [
        "0\n1\n1 0\n",  # the copy synced at the last flush: epochs 3 and 4 not in it
        "0\n",  # torn
        None,  # missing
    ],
)
def test_epochs_missing_from_the_checkpoint_after_a_crash_are_rebuilt_from_the_batches(
    tmp_path: Path, left_by_crash: str | None
) -> None:
    """The checkpoint may lag the data after an unclean shutdown (appends do not sync
    it); every batch carries its epoch, so recovery assigns them again and
    OffsetForLeaderEpoch answers as before the crash."""
    leader = _leader_with_epochs(tmp_path / "leader")
    follower = open_log(tmp_path / "follower")
    follower.append_as_follower(leader.read(0, 1 << 20).records, now_ms=0)
    expected = follower.leader_epoch_cache.entries
    assert expected == [EpochEntry(1, 0), EpochEntry(3, 6), EpochEntry(4, 12)]
    follower.close()
    checkpoint = follower.dir / "leader-epoch-checkpoint"
    if left_by_crash is None:
        checkpoint.unlink()
    else:
        checkpoint.write_text(left_by_crash)
    # Flushed up to offset 6 before the crash: the recovery point says so.
    again = open_log(tmp_path / "follower", recovery_point=6)
    assert again.leader_epoch_cache.entries == expected
    assert checkpoint.read_text() == "0\n3\n1 0\n3 6\n4 12\n"  # rewritten, durably
    assert again.leader_epoch_cache.end_offset_for(3, again.log_end_offset) == (3, 12)


def test_a_stale_checkpoint_entry_past_the_recovered_data_is_dropped(tmp_path: Path) -> None:
    """The other way round: an entry written for data the crash took (its batches were
    never flushed and are cut by recovery) goes with them."""
    leader = _leader_with_epochs(tmp_path / "leader")
    follower = open_log(tmp_path / "follower")
    follower.append_as_follower(leader.read(0, 1 << 20, max_offset=12).records, now_ms=0)
    follower.close()
    (follower.dir / "leader-epoch-checkpoint").write_text("0\n3\n1 0\n3 6\n4 40\n")
    again = open_log(tmp_path / "follower", recovery_point=0)
    assert again.leader_epoch_cache.entries == [EpochEntry(1, 0), EpochEntry(3, 6)]


def test_a_roll_syncs_the_epoch_checkpoint_before_its_recovery_point_passes_the_segment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A roll moves the recovery point past the old segment (it is flushed): the epochs
    of its batches must be on disk by then, since recovery rebuilds only from there on."""
    leader = _leader_with_epochs(tmp_path / "leader")
    follower = open_log(tmp_path / "follower", LogConfig(segment_bytes=200))
    synced = _count_fsyncs(monkeypatch)
    follower.append_as_follower(leader.read(0, 1 << 20, max_offset=6).records, now_ms=0)
    assert synced == []  # epoch 1's entry written, not synced
    follower.append_as_follower(leader.read(6, 1 << 20).records, now_ms=0)  # rolls
    assert follower.num_segments > 1
    assert follower.recovery_point >= 6
    assert not follower._epoch_checkpoint.unsynced  # synced by the roll
    checkpoint = parse_checkpoint((follower.dir / "leader-epoch-checkpoint").read_text())
    assert checkpoint == follower.leader_epoch_cache.entries
