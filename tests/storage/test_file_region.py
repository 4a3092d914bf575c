"""Zero-copy: `Log.read_region` names exactly the bytes `Log.read` returns,
and the region stays readable (or fails loudly) whatever happens to the segment."""

from __future__ import annotations

import errno
import gc
import os
import random
from pathlib import Path

import pytest

from strandline.protocol.file_region import (
    MIN_REGION_BYTES,
    FileRegion,
    TruncatedRegionError,
    materialize,
)
from strandline.storage import segment as segment_module
from strandline.storage.config import LogConfig
from strandline.storage.log import Log
from strandline.types import TopicPartition

from .batches import build_batch

TP = TopicPartition("zero-copy", 0)


def open_log(path: Path, config: LogConfig) -> Log:
    return Log.open(path / TP.dir_name, TP, config, recovery_point=0, log_start_offset=0, now_ms=0)


def fill(log: Log, batches: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    for _ in range(batches):
        count = rng.randint(1, 6)
        log.append_as_leader(
            build_batch([bytes([rng.randrange(256)]) * rng.randint(1, 300)] * count), 0, 0
        )


def open_fds(under: Path) -> int:
    """This process's descriptors on files under `under` (others come and go with the
    threads earlier tests left behind, e.g. a client closing its sockets)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # closed meanwhile
        count += target.startswith(str(under))
    return count


@pytest.mark.parametrize("chunk", [None, 97])
def test_region_names_the_bytes_read_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int | None
) -> None:
    if chunk is not None:
        # Headers read a few at a time: the walk must re-read across chunk boundaries.
        monkeypatch.setattr(segment_module, "_LOCATE_CHUNK", chunk)
        monkeypatch.setattr(segment_module, "_WALK_CHUNK", chunk // 2)
    # Small segments and a dense index: reads cross segments and jump by the index.
    log = open_log(tmp_path, LogConfig(segment_bytes=4000, index_interval_bytes=300))
    fill(log, 120)
    assert log.num_segments > 3
    leo = log.log_end_offset
    rng = random.Random(1)
    cases = [(0, 1 << 20, None, True), (0, 0, None, True), (0, 0, None, False)]
    for _ in range(400):
        cases.append(
            (
                rng.randrange(leo + 1),
                rng.choice([0, 1, 60, 61, 100, 500, 1000, 3000, 1 << 20]),
                rng.choice([None, rng.randrange(leo + 1)]),
                rng.random() < 0.5,
            )
        )
    nonempty = 0
    for start, max_bytes, max_offset, min_one in cases:
        want = log.read(start, max_bytes, max_offset, min_one)
        got = log.read_region(start, max_bytes, max_offset, min_one, min_region_bytes=0)
        assert (got.first_offset, got.next_offset) == (want.first_offset, want.next_offset)
        assert len(got.records) == len(want.records)
        if want.records:
            nonempty += 1
            assert isinstance(got.records, FileRegion)
        else:
            assert got.records == b""
        assert materialize(got.records) == want.records, (start, max_bytes, max_offset, min_one)
    assert nonempty > 100  # the grid did read data, not only empty answers


def test_oversized_first_batch_goes_whole(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig())
    log.append_as_leader(build_batch([b"x" * 5000]), 0, 0)
    want = log.read(0, 100, None, True)
    got = log.read_region(0, 100, None, True, min_region_bytes=0)
    assert len(want.records) > 5000
    assert materialize(got.records) == want.records
    assert log.read_region(0, 100, None, False).records == b""


def test_region_survives_deletion_of_its_segment(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(segment_bytes=2000, retention_bytes=0))
    fill(log, 40)
    first = log.segments[0]
    got = log.read_region(0, 1500, min_region_bytes=0)
    want = log.read(0, 1500).records
    deleted = log.apply_retention(now_ms=0)
    assert deleted >= 1 and not first.log_path.exists() and first.fd == -1
    # The segment's fd number may be reused by the next open; the region's is its own.
    other = os.open(tmp_path / "unrelated", os.O_RDWR | os.O_CREAT)
    os.write(other, b"?" * 4096)
    try:
        assert materialize(got.records) == want
    finally:
        os.close(other)


def test_truncation_under_a_region_is_detected(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig())
    fill(log, 10)
    region = log.read_region(0, 1 << 20, min_region_bytes=0).records
    assert isinstance(region, FileRegion)
    log.truncate_to(3)  # a follower cutting its divergent tail: same file, shorter
    with pytest.raises(TruncatedRegionError):
        region.read()
    region.close()


def test_region_descriptors_are_released(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig())
    fill(log, 10)
    before = open_fds(tmp_path)
    regions = [log.read_region(0, 1 << 20, min_region_bytes=0).records for _ in range(20)]
    assert open_fds(tmp_path) == before + 20
    closed = regions.pop()
    assert isinstance(closed, FileRegion)
    closed.close()
    closed.close()  # idempotent
    assert closed.closed and open_fds(tmp_path) == before + 19
    with pytest.raises(ValueError):
        closed.fileno()
    del regions  # a dropped fetch result (e.g. read again after a purgatory wait)
    gc.collect()
    assert open_fds(tmp_path) == before


def test_small_reads_and_fd_exhaustion_give_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log(tmp_path, LogConfig())
    for i in range(40):
        log.append_as_leader(build_batch([bytes([i]) * 1000] * 4), 0, 0)
    small = log.read_region(0, MIN_REGION_BYTES // 2)
    assert isinstance(small.records, bytes)
    assert small.records == log.read(0, MIN_REGION_BYTES // 2).records
    big = log.read_region(0, 1 << 20)
    assert isinstance(big.records, FileRegion) and len(big.records) >= MIN_REGION_BYTES
    assert materialize(big.records) == log.read(0, 1 << 20).records

    def no_fd(_fd: int) -> int:
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(os, "dup", no_fd)
    starved = log.read_region(0, 1 << 20)
    assert starved.records == log.read(0, 1 << 20).records  # served, as a copy
