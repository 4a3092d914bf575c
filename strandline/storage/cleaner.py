"""Log compaction (`cleanup.policy=compact`): keep only the latest record of every key.

Kafka's LogCleaner, reduced to what a compacted topic needs to stay bounded:

- Only the *cleanable* part of a log is touched: inactive segments below the high
  watermark (a record that may still be truncated must not shadow an older committed
  one) and older than `min.compaction.lag.ms`. The active segment is never rewritten.
  The part also ends at the last stable offset: the records of an open transaction may
  yet be aborted, so they must neither shadow older records nor be removed.
- An offset map (key -> latest offset) is built over that part; a record survives if it
  is the latest of its key there, or has no key. A tombstone (null value) survives
  until its segment is older than `delete.retention.ms`, so consumers that were behind
  still see the delete.
- Batches keep their base offset, `lastOffsetDelta`, leader epoch, producer fields and
  timestamp type (Kafka's `filterTo` with `overrideLastOffset`): offsets never move,
  segments keep their ranges, readers only see gaps. A batch that loses every record is
  dropped, except one carrying a producer id, kept empty so the producer state rebuilt
  from the log stays right.
- Transactions (KIP-98): the records of aborted transactions (the plan names them, from
  the txn indexes) are removed and never enter the offset map, so an aborted write never
  shadows a committed one. Control batches (transaction markers) are always kept whole:
  Kafka removes a marker once its transaction's data is gone and delete.retention.ms has
  passed; keeping them costs a few bytes per transaction and keeps every txn index entry
  and every replay of the producer state exact.
- The work (decoding, filtering, writing `<base>.log.cleaned`) reads its own file
  descriptors and touches no `Log` state, so the broker runs it in a thread; the
  `Log` swaps the results in afterwards, and only for segments that did not change
  meanwhile (`Log.swap_cleaned`).

Dirty tracking is kept in memory (Kafka persists `cleaner-offset-checkpoint`): after a
restart the first pass cleans the whole cleanable part again, which changes nothing
that an earlier pass kept.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crc32c import crc32c
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from strandline.protocol.record_batch import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    PARTITION_LEADER_EPOCH_OFFSET,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    iter_batches,
)
from strandline.storage.index import write_fully
from strandline.storage.txn_index import AbortedTxn

CLEANED_SUFFIX = ".cleaned"

_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_U32 = struct.Struct(">I")
_LAST_OFFSET_DELTA_OFFSET = 23
_BASE_TIMESTAMP_OFFSET = 27
_NO_LIMIT = 1 << 62


@dataclass(frozen=True, slots=True)
class SegmentToClean:
    base_offset: int
    path: Path  # the segment's `.log` file
    size: int  # bytes of it to clean: the segment's size when the plan was made
    drop_tombstones: bool  # the segment is older than delete.retention.ms


@dataclass(frozen=True, slots=True)
class CleaningPlan:
    segments: tuple[SegmentToClean, ...]
    end_offset: int  # the first offset not cleaned
    aborted: tuple[AbortedTxn, ...] = ()  # aborted transactions overlapping the range


_AbortedRanges = dict[int, list[tuple[int, int]]]  # producer id -> (first, marker offset)


def aborted_ranges(aborted: Iterable[AbortedTxn]) -> _AbortedRanges:
    ranges: _AbortedRanges = {}
    for txn in aborted:
        ranges.setdefault(txn.producer_id, []).append((txn.first_offset, txn.last_offset))
    return ranges


def is_aborted(header: BatchHeader, ranges: _AbortedRanges) -> bool:
    """Whether a data batch belongs to one of the aborted transactions."""
    if not ranges or not header.is_transactional or header.is_control:
        return False
    return any(
        first <= header.base_offset <= last for first, last in ranges.get(header.producer_id, ())
    )


@dataclass(frozen=True, slots=True)
class CleanedSegment:
    base_offset: int
    path: Path  # `<base>.log.cleaned`
    records_before: int
    records_after: int


def _read(segment: SegmentToClean) -> bytes:
    fd = os.open(segment.path, os.O_RDONLY)
    try:
        data = os.pread(fd, segment.size, 0)
    finally:
        os.close(fd)
    if len(data) != segment.size:
        raise OSError(f"{segment.path} is shorter than the planned {segment.size} bytes")
    return data


def batch_records(data: bytes, header: BatchHeader) -> Iterator[Any]:
    """The records of one batch (any codec), decoded by kafka-python."""
    return iter(DefaultRecordBatch(data[header.position : header.position + header.size]))


def build_offset_map(
    datas: Iterable[bytes], aborted: _AbortedRanges | None = None
) -> dict[bytes, int]:
    """key -> offset of its latest record, over the given segment contents in order;
    records of aborted transactions do not count."""
    latest: dict[bytes, int] = {}
    ranges = aborted or {}
    for data in datas:
        for header in iter_batches(data, verify_crc=False):
            if header.is_control or is_aborted(header, ranges):
                continue
            for record in batch_records(data, header):
                if record.key is not None:
                    latest[bytes(record.key)] = record.offset
    return latest


def _rebuild(header: BatchHeader, kept: list[Any]) -> bytes:
    """A batch holding only `kept`, with the original batch's offsets and identity."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=header.compression_codec,
        is_transactional=header.is_transactional,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        batch_size=_NO_LIMIT,
    )
    for record in kept:
        builder.append(
            record.offset - header.base_offset,
            record.timestamp,
            record.key,
            record.value,
            record.headers,
        )
    buf = builder.build()
    _I64.pack_into(buf, 0, header.base_offset)
    _I32.pack_into(buf, PARTITION_LEADER_EPOCH_OFFSET, header.partition_leader_epoch)
    attributes = _I16.unpack_from(buf, ATTRIBUTES_OFFSET)[0]
    _I16.pack_into(buf, ATTRIBUTES_OFFSET, attributes | (header.attributes & TIMESTAMP_TYPE_MASK))
    _I32.pack_into(buf, _LAST_OFFSET_DELTA_OFFSET, header.last_offset_delta)
    if not kept:
        _I64.pack_into(buf, _BASE_TIMESTAMP_OFFSET, header.base_timestamp)
    if not kept or header.is_log_append_time:
        _I64.pack_into(buf, MAX_TIMESTAMP_OFFSET, header.max_timestamp)
    _U32.pack_into(buf, CRC_OFFSET, crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:]))
    return bytes(buf)


def filter_segment(
    data: bytes,
    latest: dict[bytes, int],
    drop_tombstones: bool,
    aborted: _AbortedRanges | None = None,
) -> tuple[bytes, int, int]:
    """The segment's batches with superseded and aborted records removed:
    (bytes, before, after)."""
    out: list[bytes] = []
    before = after = 0
    ranges = aborted or {}
    for header in iter_batches(data, verify_crc=False):
        whole = data[header.position : header.position + header.size]
        if header.is_control:
            out.append(whole)
            continue
        records = list(batch_records(data, header))
        if is_aborted(header, ranges):
            kept = []
        else:
            kept = [
                r
                for r in records
                if r.key is None
                or (
                    latest.get(bytes(r.key)) == r.offset
                    and not (drop_tombstones and r.value is None)
                )
            ]
        before += len(records)
        after += len(kept)
        if len(kept) == len(records):
            out.append(whole)
        elif kept or header.producer_id >= 0:
            out.append(_rebuild(header, kept))
    return b"".join(out), before, after


def clean(plan: CleaningPlan) -> list[CleanedSegment]:
    """Write `<base>.log.cleaned` beside every planned segment that loses records.

    Reads and writes files only; the caller swaps the results into its `Log`.
    """
    datas = [_read(segment) for segment in plan.segments]
    ranges = aborted_ranges(plan.aborted)
    latest = build_offset_map(datas, ranges)
    results = []
    for segment, data in zip(plan.segments, datas, strict=True):
        cleaned, before, after = filter_segment(data, latest, segment.drop_tombstones, ranges)
        if after == before:
            continue
        path = segment.path.with_name(segment.path.name + CLEANED_SUFFIX)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            write_fully(os.pwrite, fd, cleaned, 0)
            os.fsync(fd)
        finally:
            os.close(fd)
        results.append(CleanedSegment(segment.base_offset, path, before, after))
    return results
