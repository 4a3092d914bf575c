"""One log segment: `<base>.log` with its sparse `<base>.index` and `<base>.timeindex`,
and the aborted-transaction index `<base>.txnindex` (created with its first entry).

The segment only ever handles whole v2 batches and reads their 61-byte headers; record
bodies are touched only to answer a timestamp lookup.
"""

from __future__ import annotations

import bisect
import errno
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from strandline.errors import CorruptRecordError
from strandline.protocol.control_batch import EndTransactionMarker, NotAMarkerError, read_marker
from strandline.protocol.file_region import MIN_REGION_BYTES, FileRegion, Records
from strandline.protocol.record_batch import (
    CONTROL_MASK,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    BatchHeader,
    first_record_at_or_after,
    read_header,
)
from strandline.storage.index import OffsetIndex, TimeIndex, Writer, write_fully
from strandline.storage.txn_index import TXN_INDEX_SUFFIX, TransactionIndex

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIMEINDEX_SUFFIX = ".timeindex"
SCAN_CHUNK = 1 << 20
# A segment's offsets are stored relative to its base as u32; Kafka keeps them in i32.
MAX_RELATIVE_OFFSET = 2**31 - 1

_OFFSET_AND_LENGTH = struct.Struct(">qi")
_I32 = struct.Struct(">i")
_LAST_OFFSET_DELTA_AT = 23
_LAST_OFFSET_DELTA_END = 27
_LOCATE_CHUNK = 64 * 1024
_WALK_CHUNK = 8 * 1024
_MAX_HINTS = 256

R = TypeVar("R", bound=bytes | FileRegion, covariant=True)


def _header_only(buf: bytes, i: int, position: int) -> BatchHeader:
    """Parse a header whose batch body is not in `buf` (the caller checked the length)."""
    header = BatchHeader(position, *HEADER.unpack_from(buf, i))
    if header.magic != 2 or header.batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(f"bad batch header at position {position}")
    return header


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


# Not frozen: a frozen dataclass's __init__ costs ~2 us (object.__setattr__ per
# field), paid for every batch appended or read.
@dataclass(slots=True)
class SegmentRead(Generic[R]):
    records: R  # bytes, or a FileRegion of the segment's file (`read_region`)
    first_offset: int  # baseOffset of the first batch returned
    next_offset: int  # offset after the last batch returned


@dataclass(frozen=True, slots=True)
class RecoveryResult:
    truncated_bytes: int
    reason: str | None  # why the tail was cut, None when the segment was whole


class LogSegment:
    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_entries: int,
        writer: Writer,
        created_ms: int,
    ) -> None:
        self.base_offset = base_offset
        self.log_path = directory / segment_file_name(base_offset, LOG_SUFFIX)
        self.index_interval_bytes = index_interval_bytes
        self.writer = writer
        self.created_ms = created_ms
        self.fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            self.offset_index = OffsetIndex(
                directory / segment_file_name(base_offset, INDEX_SUFFIX),
                base_offset,
                max_index_entries,
            )
            self.time_index = TimeIndex(
                directory / segment_file_name(base_offset, TIMEINDEX_SUFFIX),
                base_offset,
                max_index_entries,
            )
        except OSError:
            os.close(self.fd)
            raise
        self.txn_index = TransactionIndex(
            directory / segment_file_name(base_offset, TXN_INDEX_SUFFIX), writer
        )
        self.size = os.fstat(self.fd).st_size
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset
        self.first_batch_timestamp = -1
        self.bytes_since_last_index = 0
        self.flushed_size = self.size
        # Set by `recover`: whether the segment holds a control batch (a marker).
        self.has_control_batches = True
        # batch base offset -> file position, for the offsets fetches are likely to ask next
        self._position_hints: dict[int, int] = {}

    # ------------------------------------------------------------------ scanning

    def scan(
        self, start: int = 0, end: int | None = None, *, verify_crc: bool = False
    ) -> Iterator[BatchHeader]:
        """Batch headers from file position `start` to `end`, positions absolute.

        Raises CorruptRecordError (position in the message) at a torn or corrupt batch.
        """
        end = self.size if end is None else end
        pos = start
        while pos < end:
            buf = os.pread(self.fd, min(SCAN_CHUNK, end - pos), pos)
            i = 0
            while i < len(buf):
                if len(buf) - i < HEADER_SIZE:
                    if pos + i + HEADER_SIZE <= end:
                        break  # the header crosses the chunk: read on from here
                    read_header(buf, i, verify_crc=False)  # raises: torn
                batch_length = _OFFSET_AND_LENGTH.unpack_from(buf, i)[1]
                size = LOG_OVERHEAD + batch_length
                if i + size > len(buf) and batch_length >= MIN_BATCH_LENGTH:
                    if pos + i + size > end:
                        read_header(buf, i, verify_crc=False)  # raises: torn
                    if verify_crc:
                        if i == 0:  # a batch bigger than the chunk: read it whole
                            whole = os.pread(self.fd, size, pos)
                            yield read_header(whole, 0, verify_crc=True)._replace(position=pos)
                            i = size
                        break
                    yield _header_only(buf, i, pos + i)
                    i += size
                    break
                header = read_header(buf, i, verify_crc=verify_crc)
                yield header._replace(position=pos + i)
                i += size
            pos += i

    # ------------------------------------------------------------------ loading

    def recover(self, *, verify_crc: bool = True, dense: bool = False) -> RecoveryResult:
        """Walk every batch, cut the file at the first torn or corrupt one, rebuild indexes.

        `dense` also rejects an offset gap: baseOffset lies outside the CRC, and with
        cleanup.policy=delete every segment holds consecutive offsets from its base.
        """
        index_entries: list[tuple[int, int]] = []
        time_entries: list[tuple[int, int]] = []
        self._reset_stats()
        valid_end = 0
        reason: str | None = None
        expected = self.base_offset
        control_batches = False
        try:
            for header in self.scan(0, os.fstat(self.fd).st_size, verify_crc=verify_crc):
                control_batches = control_batches or header.attributes & CONTROL_MASK != 0
                if header.base_offset < expected or (dense and header.base_offset != expected):
                    reason = (
                        f"batch at position {header.position} has base offset "
                        f"{header.base_offset}, expected {expected}"
                    )
                    break
                if header.last_offset - self.base_offset > MAX_RELATIVE_OFFSET:
                    reason = f"batch at position {header.position} overflows the segment"
                    break
                self._account(
                    header.position,
                    header.size,
                    header.last_offset,
                    header.max_timestamp,
                    index_entries,
                    time_entries,
                )
                expected = header.next_offset
                valid_end = header.position + header.size
        except CorruptRecordError as exc:
            reason = str(exc)
        file_size = os.fstat(self.fd).st_size
        # Whether the txn index may need rebuilding (a marker may have been cut too,
        # but then the index is reset anyway: see Log._load).
        self.has_control_batches = control_batches
        truncated = file_size - valid_end
        if truncated:
            os.ftruncate(self.fd, valid_end)
        self.size = valid_end
        self.flushed_size = min(self.flushed_size, valid_end)
        self.offset_index.reset(self.writer, index_entries)
        self.time_index.reset(self.writer, time_entries)
        return RecoveryResult(truncated, reason if truncated else None)

    def load(self) -> None:
        """Open a segment that was flushed: trust the indexes, read only the tail's headers.

        Falls back to a header rebuild when an index does not match the log file.
        """
        try:
            self.offset_index.load()
            self.time_index.load()
            if self.offset_index.last_position > self.size:
                raise ValueError("offset index points past the end of the log")
            if not len(self.offset_index) and self.size > 2 * self.index_interval_bytes + 1:
                raise ValueError("offset index is missing")
            self._reset_stats()
            start = self.offset_index.last_position
            for header in self.scan(start, self.size):
                self._note_batch(header)
            if self.time_index.last_timestamp > self.max_timestamp:
                self.max_timestamp = self.time_index.last_timestamp
                self.offset_of_max_timestamp = self.time_index.last_offset
            if self.size >= HEADER_SIZE:
                first = os.pread(self.fd, HEADER_SIZE, 0)
                self.first_batch_timestamp = _header_only(first, 0, 0).max_timestamp
        except (ValueError, CorruptRecordError):
            self.recover(verify_crc=False)

    def _reset_stats(self) -> None:
        self._position_hints.clear()
        self.next_offset = self.base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = self.base_offset
        self.first_batch_timestamp = -1
        self.bytes_since_last_index = 0

    def _note_batch(self, header: BatchHeader) -> None:
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.offset_of_max_timestamp = header.last_offset
        self.next_offset = header.next_offset

    def _account(
        self,
        position: int,
        size: int,
        last_offset: int,
        max_timestamp: int,
        index_entries: list[tuple[int, int]],
        time_entries: list[tuple[int, int]],
    ) -> None:
        """Kafka's per-batch indexing rule, applied to staged entry lists."""
        if position == 0:
            self.first_batch_timestamp = max_timestamp
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = last_offset
        if self.bytes_since_last_index > self.index_interval_bytes:
            index_entries.append((last_offset - self.base_offset, position))
            last_ts = time_entries[-1][0] if time_entries else self.time_index.last_timestamp
            if self.max_timestamp > last_ts:
                time_entries.append(
                    (self.max_timestamp, self.offset_of_max_timestamp - self.base_offset)
                )
            self.bytes_since_last_index = 0
        self.bytes_since_last_index += size
        self.next_offset = last_offset + 1

    # ------------------------------------------------------------------ appending

    def can_hold(self, last_offset: int) -> bool:
        return last_offset - self.base_offset <= MAX_RELATIVE_OFFSET

    def append(
        self, data: bytes | bytearray | memoryview, batches: list[tuple[int, int, int, int, int]]
    ) -> None:
        """Append whole batches whose offsets are assigned.

        `batches` holds (position in `data`, base offset, size, last offset, max timestamp).
        All or nothing: if a write fails the files are cut back and the segment's state is
        unchanged, and the OSError propagates.
        """
        saved = (
            self.next_offset,
            self.max_timestamp,
            self.offset_of_max_timestamp,
            self.first_batch_timestamp,
            self.bytes_since_last_index,
        )
        start = self.size
        index_count = len(self.offset_index)
        time_count = len(self.time_index)
        index_entries: list[tuple[int, int]] = []
        time_entries: list[tuple[int, int]] = []
        for position, _base, size, last_offset, max_timestamp in batches:
            self._account(
                start + position, size, last_offset, max_timestamp, index_entries, time_entries
            )
        try:
            write_fully(self.writer, self.fd, data, start)
            self.offset_index.append_entries(self.writer, index_entries)
            self.time_index.append_entries(self.writer, time_entries)
        except OSError:
            (
                self.next_offset,
                self.max_timestamp,
                self.offset_of_max_timestamp,
                self.first_batch_timestamp,
                self.bytes_since_last_index,
            ) = saved
            try:
                os.ftruncate(self.fd, start)
                if len(self.offset_index) != index_count:
                    self.offset_index.truncate_entries(index_count)
                else:
                    os.ftruncate(self.offset_index.fd, index_count * 8)
                os.ftruncate(self.time_index.fd, time_count * 12)
            except OSError:
                pass  # recovery after restart cuts whatever is left past the valid end
            raise
        self.size = start + len(data)
        self._remember(batches[0][1], start)

    def on_become_inactive(self) -> None:
        """Kafka's final time-index entry on roll, so the segment's max timestamp survives."""
        if self.max_timestamp > self.time_index.last_timestamp:
            self.time_index.append_entries(
                self.writer, [(self.max_timestamp, self.offset_of_max_timestamp - self.base_offset)]
            )

    # ------------------------------------------------------------------ reading

    def read_marker(self, header: BatchHeader) -> EndTransactionMarker | None:
        """The transaction marker of the control batch `header` (read from this segment's
        file); None for a control record of another type."""
        batch = os.pread(self.fd, header.size, header.position)
        try:
            return read_marker(batch, header._replace(position=0))
        except NotAMarkerError:
            return None

    def _remember(self, offset: int, position: int) -> None:
        """Note where the batch starting at `offset` lies: the next fetch usually asks there."""
        hints = self._position_hints
        if len(hints) >= _MAX_HINTS:
            hints.clear()
        hints[offset] = position

    def locate(self, offset: int) -> int | None:
        """File position of the first batch whose last offset is >= `offset`; None past end."""
        if offset >= self.next_offset:
            return None
        hinted = self._position_hints.get(offset)
        if hinted is not None:
            return hinted
        _, pos = self.offset_index.lookup(offset)
        size = self.size
        unpack_head = _OFFSET_AND_LENGTH.unpack_from
        unpack_i32 = _I32.unpack_from
        while pos < size:
            buf = os.pread(self.fd, min(_LOCATE_CHUNK, size - pos), pos)
            i = 0
            limit = len(buf) - _LAST_OFFSET_DELTA_END
            while i <= limit:
                base_offset, batch_length = unpack_head(buf, i)
                if base_offset + unpack_i32(buf, i + _LAST_OFFSET_DELTA_AT)[0] >= offset:
                    return pos + i
                if batch_length < MIN_BATCH_LENGTH:
                    raise CorruptRecordError(f"bad batch length at position {pos + i}")
                i += LOG_OVERHEAD + batch_length
            if i == 0:
                raise CorruptRecordError(f"torn batch at position {pos}")
            pos += i
        return None

    def translate_offset(self, offset: int) -> BatchHeader | None:
        """The header of the first batch whose last offset is >= `offset`."""
        position = self.locate(offset)
        if position is None:
            return None
        return _header_only(os.pread(self.fd, HEADER_SIZE, position), 0, position)

    def position_of(self, offset: int) -> int:
        """File position where `offset`'s batch starts (the end if past the last batch)."""
        position = self.locate(offset)
        return self.size if position is None else position

    def read(
        self, start_offset: int, max_bytes: int, max_offset: int | None, min_one_batch: bool
    ) -> SegmentRead[bytes] | None:
        """Whole batches from the one holding `start_offset`, stopping before `max_offset`."""
        position = self.locate(start_offset)
        if position is None:
            return None
        found = self._extent(position, max_bytes, max_offset, min_one_batch, whole_window=True)
        if found is None:
            return None
        end, first_offset, next_offset, window = found
        if end <= len(window):
            records = window if end == len(window) else window[:end]
        else:
            # KIP-74: the first batch goes out whole even when it is over max_bytes.
            records = os.pread(self.fd, end, position)
        return SegmentRead(records, first_offset, next_offset)

    def read_region(
        self,
        start_offset: int,
        max_bytes: int,
        max_offset: int | None,
        min_one_batch: bool,
        min_region_bytes: int = MIN_REGION_BYTES,
    ) -> SegmentRead[Records] | None:
        """The batches `read` would return, as a region of the file instead of bytes: only
        batch headers are read here, the records go from the page cache to the socket.

        Fewer than `min_region_bytes` come back as bytes: their copy is cheaper than a
        sendfile, and a descriptor per small partition read would pile up in a fetch of
        thousands of partitions. So does a read when no descriptor is left (EMFILE)."""
        position = self.locate(start_offset)
        if position is None:
            return None
        found = self._extent(position, max_bytes, max_offset, min_one_batch, whole_window=False)
        if found is None:
            return None
        end, first_offset, next_offset, buf = found
        records: Records
        if end < min_region_bytes:
            # Usually already read: the header walk's first chunk holds them.
            records = buf[:end] if len(buf) >= end else os.pread(self.fd, end, position)
        else:
            try:
                records = FileRegion.of(self.fd, position, end)
            except OSError as exc:
                if exc.errno not in (errno.EMFILE, errno.ENFILE):
                    raise
                records = os.pread(self.fd, end, position)
        return SegmentRead(records, first_offset, next_offset)

    def _extent(
        self,
        position: int,
        max_bytes: int,
        max_offset: int | None,
        min_one_batch: bool,
        *,
        whole_window: bool,
    ) -> tuple[int, int, int, bytes] | None:
        """How many bytes of whole batches from file position `position` a read returns:
        (size, first batch's base offset, offset after the last batch, bytes read).

        Batches stop before `max_offset` and within `max_bytes`, except that with
        `min_one_batch` the first batch counts whole even when larger (KIP-74). With
        `whole_window` the window (up to max_bytes) is read in one pread and returned, so
        `read` slices its records out of it; otherwise headers are read in small chunks
        and the returned bytes are only the last chunk (not records).
        """
        limit = min(max(max_bytes, HEADER_SIZE), self.size - position)
        # Without the window: a first chunk that holds a small read whole (returned as
        # bytes), then header-sized reads: past an index entry only a few batches
        # (index.interval.bytes) are walked, and large batches need one header each.
        chunk = limit if whole_window else min(limit, _LOCATE_CHUNK)
        again = limit if whole_window else _WALK_CHUNK
        buf = os.pread(self.fd, chunk, position)
        at = 0  # window position of buf[0]
        unpack_head = _OFFSET_AND_LENGTH.unpack_from
        unpack_i32 = _I32.unpack_from
        first_offset, first_length = unpack_head(buf, 0)
        if max_offset is not None and first_offset >= max_offset:
            return None
        end = 0
        next_offset = first_offset
        jump = self._index_jump(position, position + limit, max_offset)
        if jump > position:
            # Every batch before an index entry inside the window is whole and below
            # max_offset: skip walking their headers.
            end = jump - position
            if end + _LAST_OFFSET_DELTA_END > at + len(buf):
                buf, at = os.pread(self.fd, min(again, limit - end), position + end), end
            next_offset = unpack_head(buf, end - at)[0]
        while end + _LAST_OFFSET_DELTA_END <= limit:
            if end + _LAST_OFFSET_DELTA_END > at + len(buf):
                buf, at = os.pread(self.fd, min(again, limit - end), position + end), end
            i = end - at
            base_offset, batch_length = unpack_head(buf, i)
            size = LOG_OVERHEAD + batch_length
            if end + size > limit or end + size > max_bytes:
                break
            if max_offset is not None and base_offset >= max_offset:
                break
            if batch_length < MIN_BATCH_LENGTH:
                raise CorruptRecordError(f"bad batch length at position {position + end}")
            next_offset = base_offset + unpack_i32(buf, i + _LAST_OFFSET_DELTA_AT)[0] + 1
            end += size
        if end == 0:
            if not min_one_batch:
                return None
            # KIP-74: the first batch goes out whole even when it is over max_bytes (its
            # header is in the first chunk: nothing was walked, so nothing re-read).
            last_delta = unpack_i32(buf, _LAST_OFFSET_DELTA_AT)[0]
            end, next_offset = LOG_OVERHEAD + first_length, first_offset + last_delta + 1
        if position + end < self.size:
            self._remember(next_offset, position + end)
        # `buf` is returned only while it starts at `position` (the window, or a first chunk).
        return end, first_offset, next_offset, buf if at == 0 else b""

    def _index_jump(self, start: int, limit: int, max_offset: int | None) -> int:
        """The last indexed batch position in [start, limit] whose batch ends below max_offset."""
        index = self.offset_index
        # The header of the batch jumped to must lie in the window: its base is needed.
        i = bisect.bisect_right(index.values, limit - _LAST_OFFSET_DELTA_END)
        if max_offset is not None:
            i = min(i, bisect.bisect_left(index.keys, max_offset - self.base_offset))
        if i > 0 and index.values[i - 1] > start:
            return index.values[i - 1]
        return start

    def find_offset_by_timestamp(
        self, timestamp_ms: int, min_offset: int = 0
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= `timestamp_ms`."""
        if self.max_timestamp < timestamp_ms:
            return None
        start_offset = max(self.time_index.lookup(timestamp_ms), min_offset)
        first = self.translate_offset(start_offset)
        if first is None:
            return None
        for header in self.scan(first.position, self.size):
            if header.max_timestamp >= timestamp_ms and header.last_offset >= min_offset:
                batch = os.pread(self.fd, header.size, header.position)
                found = first_record_at_or_after(batch, timestamp_ms, min_offset)
                if found is not None:
                    return found
        return None

    # ------------------------------------------------------------------ truncation

    def truncate_to(self, offset: int) -> int:
        """Drop batches holding offsets >= `offset` (whole batches); returns bytes removed."""
        position = self.position_of(offset)
        removed = self.size - position
        self.txn_index.truncate_to(offset)
        if removed:
            os.ftruncate(self.fd, position)
            self.size = position
            self.flushed_size = min(self.flushed_size, position)
            self.recover(verify_crc=False)
        return removed

    # ------------------------------------------------------------------ lifecycle

    @property
    def is_empty(self) -> bool:
        return self.size == 0

    @property
    def rolling_based_timestamp(self) -> int:
        return self.first_batch_timestamp if self.first_batch_timestamp >= 0 else self.created_ms

    @property
    def largest_timestamp(self) -> int:
        """Retention's view of the segment's age: max timestamp, else the file's mtime."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return int(os.fstat(self.fd).st_mtime * 1000)

    def flush(self) -> None:
        os.fsync(self.fd)
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()
        self.flushed_size = self.size

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.close()

    def delete(self) -> None:
        self.close()
        self.log_path.unlink(missing_ok=True)
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, size={self.size}, next={self.next_offset})"


__all__ = ["HEADER", "LogSegment", "RecoveryResult", "SegmentRead", "segment_file_name"]
