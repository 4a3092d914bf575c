"""Log compaction: the latest record of every key survives, at its offset; nothing else
moves, nothing uncommitted or active is touched, and an interrupted pass loses nothing."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from strandline.errors import InvalidConfigError
from strandline.protocol.record_batch import iter_batches
from strandline.storage.cleaner import CLEANED_SUFFIX
from strandline.storage.cleaner import clean as clean_segments
from strandline.storage.config import LogConfig
from strandline.storage.log import Log
from strandline.storage.replica_verify import compare_replicas
from strandline.types import TopicPartition

from .batches import build_batch, decode

TP = TopicPartition("profiles", 0)
DAY_MS = 24 * 3_600_000
COMPACT = LogConfig(cleanup_policy="compact", segment_bytes=300, min_cleanable_dirty_ratio=0.0)

Record = tuple[int, bytes | None, bytes | None]


def open_log(path: Path, config: LogConfig = COMPACT) -> Log:
    return Log.open(path / TP.dir_name, TP, config, recovery_point=0, log_start_offset=0, now_ms=0)


def write(log: Log, records: list[tuple[bytes, bytes | None]], codec: str = "none") -> None:
    """One batch per record, so segments roll every few records."""
    for key, value in records:
        log.append_as_leader(build_batch([value], keys=[key], codec=codec), 0, now_ms=0)  # type: ignore[list-item]


def read_all(log: Log) -> list[Record]:
    out: list[Record] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        got = log.read(offset, 1 << 20)
        if not got.records:
            break
        out += [(o, k, v) for o, _ts, k, v, _h in decode(got.records)]
        offset = got.next_offset
    return out


def compacted(records: list[Record], end: int) -> list[Record]:
    """The model: below `end` only each key's latest record below `end` survives."""
    latest = {k: o for o, k, _v in records if o < end}
    return [(o, k, v) for o, k, v in records if o >= end or latest[k] == o]


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_only_the_latest_record_of_each_key_survives_at_its_offset(
    tmp_path: Path, codec: str
) -> None:
    log = open_log(tmp_path)
    write(log, [(b"k%d" % (i % 3), b"v%d" % i) for i in range(30)], codec)
    before = read_all(log)
    end = log.active_segment.base_offset
    assert log.num_segments > 5 and end > 20

    assert log.clean(now_ms=0, high_watermark=log.log_end_offset) > 0

    assert read_all(log) == compacted(before, end)
    assert log.log_end_offset == 30
    log.close()
    assert read_all(open_log(tmp_path)) == compacted(before, end)


def test_records_that_may_still_be_truncated_are_not_compacted(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    write(log, [(b"k%d" % (i % 2), b"v%d" % i) for i in range(30)])
    before = read_all(log)
    high_watermark = 13
    # The last segment wholly below the HW ends the cleanable part.
    end = max(s.next_offset for s in log.segments[:-1] if s.next_offset <= high_watermark)

    log.clean(now_ms=0, high_watermark=high_watermark)

    assert read_all(log) == compacted(before, end)
    assert [r for r in read_all(log) if r[0] >= end] == [r for r in before if r[0] >= end]


def test_a_tombstone_survives_until_delete_retention_ms(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    write(log, [(b"gone", b"v0"), (b"kept", b"v1"), (b"gone", None)])
    write(log, [(b"pad", b"p%d" % i) for i in range(6)])

    log.clean(now_ms=DAY_MS - 1, high_watermark=log.log_end_offset)
    assert (0, b"gone", b"v0") not in read_all(log)
    assert (2, b"gone", None) in read_all(log)

    write(log, [(b"pad", b"q%d" % i) for i in range(6)])  # new dirty data: another pass
    log.clean(now_ms=DAY_MS + 10_000, high_watermark=log.log_end_offset)
    keys = {k for _o, k, _v in read_all(log)}
    assert b"gone" not in keys and b"kept" in keys


def test_a_producer_batch_that_loses_every_record_stays_as_an_empty_batch(
    tmp_path: Path,
) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(
        build_batch([b"old"], keys=[b"k"], producer_id=7, producer_epoch=0, base_sequence=0),
        0,
        now_ms=0,
    )
    write(log, [(b"k", b"new%d" % i) for i in range(8)])

    log.clean(now_ms=0, high_watermark=log.log_end_offset)

    first = log.segments[0]
    headers = list(iter_batches(os.pread(first.fd, first.size, 0), verify_crc=True))
    assert (headers[0].base_offset, headers[0].last_offset) == (0, 0)
    assert (headers[0].producer_id, headers[0].record_count) == (7, 0)
    log.close()
    reopened = open_log(tmp_path)
    assert 7 in reopened.producer_state.producers


def test_a_segment_that_changed_meanwhile_is_left_alone(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    write(log, [(b"k", b"v%d" % i) for i in range(12)])
    plan = log.cleaning_plan(now_ms=0, high_watermark=log.log_end_offset)
    assert plan is not None
    cleaned = clean_segments(plan)
    assert cleaned

    log.truncate_to(1)  # e.g. a follower truncating while the cleaner worked
    assert log.swap_cleaned(plan, cleaned) == 0

    assert read_all(log) == [(0, b"k", b"v0")]
    assert not list((tmp_path / TP.dir_name).glob("*" + CLEANED_SUFFIX))


def test_a_pass_interrupted_before_the_swap_changes_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    write(log, [(b"k%d" % (i % 2), b"v%d" % i) for i in range(12)])
    before = read_all(log)
    plan = log.cleaning_plan(now_ms=0, high_watermark=log.log_end_offset)
    assert plan is not None
    assert clean_segments(plan)  # the worker wrote its files; then the broker died
    log.close()

    reopened = open_log(tmp_path)

    assert read_all(reopened) == before
    assert not list((tmp_path / TP.dir_name).glob("*" + CLEANED_SUFFIX))


def test_delete_policy_and_a_clean_log_are_not_cleaned(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(segment_bytes=300))
    write(log, [(b"k", b"v%d" % i) for i in range(12)])
    assert log.cleaning_plan(now_ms=0, high_watermark=log.log_end_offset) is None

    compact = open_log(tmp_path / "c", LogConfig(cleanup_policy="compact", segment_bytes=300))
    write(compact, [(b"k", b"v%d" % i) for i in range(12)])
    assert compact.clean(now_ms=0, high_watermark=compact.log_end_offset) > 0
    # Nothing new since: below min.cleanable.dirty.ratio (0.5 by default), no pass.
    assert compact.cleaning_plan(now_ms=0, high_watermark=compact.log_end_offset) is None


def test_cleaner_configs_follow_kafka() -> None:
    config = LogConfig.from_props({"min.cleanable.dirty.ratio": "0.1", "cleanup.policy": "compact"})
    assert config.min_cleanable_dirty_ratio == 0.1 and config.compact_enabled
    assert (
        LogConfig.from_broker_props({"log.cleaner.delete.retention.ms": "5"}).delete_retention_ms
        == 5
    )
    with pytest.raises(InvalidConfigError, match="min.cleanable.dirty.ratio"):
        LogConfig.from_props({"min.cleanable.dirty.ratio": "2"})


def test_replicas_compacted_at_different_times_still_verify(tmp_path: Path) -> None:
    logs = {r: open_log(tmp_path / str(r)) for r in (1, 2, 3)}
    for log in logs.values():
        write(log, [(b"k%d" % (i % 3), b"v%d" % i) for i in range(20)])
    assert logs[1].clean(now_ms=0, high_watermark=20) > 0  # replica 2 has not cleaned yet
    logs[3].truncate_to(18)  # replica 3 diverged: another value for k0 at offset 18
    write(logs[3], [(b"k0", b"other"), (b"k1", b"v19")])
    dirs = {r: tmp_path / str(r) / TP.dir_name for r in logs}

    result = compare_replicas(TP, dirs, below=20)

    assert result.mismatched == (3,)
    assert result.sizes[1] < result.sizes[2]  # the bytes do differ between 1 and 2


def test_records_written_again_after_a_truncation_are_dirty(tmp_path: Path) -> None:
    log = open_log(tmp_path, replace(COMPACT, min_cleanable_dirty_ratio=0.9))
    write(log, [(b"k", b"v%d" % i) for i in range(12)])
    assert log.clean(now_ms=0, high_watermark=log.log_end_offset) > 0
    log.truncate_to(1)  # a follower following a new leader's log from offset 1
    write(log, [(b"k", b"w%d" % i) for i in range(12)])

    assert log.clean(now_ms=0, high_watermark=log.log_end_offset) > 0

    survivors = [r for r in read_all(log) if r[0] < log.active_segment.base_offset]
    assert len(survivors) == 1
