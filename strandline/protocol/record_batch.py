"""A zero-copy view over Kafka v2 record batches.

The broker treats batches as bytes: it reads the 61-byte header, checks the CRC32C
and patches `baseOffset` / `partitionLeaderEpoch` in place. Individual records are
decoded only off the hot path (ListOffsets by timestamp), through kafka-python.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

from crc32c import crc32c

from strandline.errors import (
    CorruptRecordError,
    InvalidRecordError,
    RecordTooLargeError,
    UnsupportedMagicError,
)

# baseOffset i64, batchLength i32, partitionLeaderEpoch i32, magic i8, crc u32,
# attributes i16, lastOffsetDelta i32, baseTimestamp i64, maxTimestamp i64,
# producerId i64, producerEpoch i16, baseSequence i32, recordCount i32
HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the part not counted in batchLength
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
MAGIC_OFFSET = 16  # the same in v0, v1 and v2, so a legacy batch can be recognised
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35
PARTITION_LEADER_EPOCH_OFFSET = 12
CURRENT_MAGIC = 2

CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20

CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}

_OFFSET_AND_LENGTH = struct.Struct(">qi")
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")


class BatchHeader(NamedTuple):
    """One batch's header plus where it starts in the buffer it was read from."""

    position: int
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression_codec(self) -> int:
        return self.attributes & CODEC_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_MASK)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)


def read_header(buf: bytes | bytearray | memoryview, pos: int, *, verify_crc: bool) -> BatchHeader:
    """Check the batch that starts at `pos` (length, magic, CRC) and return its header.

    Raises CorruptRecordError for a torn or short batch, a bad length or a bad CRC, and
    UnsupportedMagicError for a v0/v1 message set.
    """
    remaining = len(buf) - pos
    if remaining < LOG_OVERHEAD:
        raise CorruptRecordError(f"torn batch at position {pos}: {remaining} bytes left")
    base_offset, batch_length = _OFFSET_AND_LENGTH.unpack_from(buf, pos)
    if remaining > MAGIC_OFFSET:
        magic = buf[pos + MAGIC_OFFSET]
        if magic in (0, 1):
            raise UnsupportedMagicError(f"message format v{magic} at position {pos}")
    if batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(f"batch length {batch_length} at position {pos} is too small")
    if remaining < LOG_OVERHEAD + batch_length:
        raise CorruptRecordError(
            f"torn batch at position {pos}: length {batch_length}, {remaining - 12} bytes left"
        )
    header = BatchHeader(pos, *HEADER.unpack_from(buf, pos))
    if header.magic != CURRENT_MAGIC:
        raise CorruptRecordError(f"unknown magic {header.magic} at position {pos}")
    if verify_crc:
        actual = batch_crc(buf, header)
        if actual != header.crc:
            raise CorruptRecordError(
                f"CRC mismatch at position {pos}: "
                f"stored {header.crc:#010x}, computed {actual:#010x}"
            )
    if header.record_count < 0 or header.last_offset_delta < 0:
        raise CorruptRecordError(f"negative record count or offset delta at position {pos}")
    return header


def batch_crc(buf: bytes | bytearray | memoryview, header: BatchHeader) -> int:
    """The CRC32C the batch `header` describes should carry (attributes to the batch's
    end), computed over `buf`, which must hold the whole batch at `header.position`."""
    start = header.position + ATTRIBUTES_OFFSET
    return crc32c(memoryview(buf)[start : header.position + header.size])


def iter_batches(
    buf: bytes | bytearray | memoryview, *, verify_crc: bool = True
) -> Iterator[BatchHeader]:
    """Walk a concatenation of v2 batches (a Produce `records` field or a segment file)."""
    pos = 0
    end = len(buf)
    while pos < end:
        header = read_header(buf, pos, verify_crc=verify_crc)
        yield header
        pos += header.size


# Not frozen: a frozen dataclass's __init__ costs ~2 us (object.__setattr__ per
# field), paid for every batch appended or read.
@dataclass(slots=True)
class ValidatedBatches:
    """What the leader needs to know about a produce payload, from headers only."""

    batches: list[BatchHeader]
    size: int
    record_count: int
    first_offset: int  # as sent: the first batch's baseOffset
    last_offset: int  # as sent: the last batch's last offset
    max_timestamp: int
    offset_delta_of_max_timestamp: int  # from the payload's first offset
    codec: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    is_transactional: bool
    is_control: bool

    @property
    def batch_count(self) -> int:
        return len(self.batches)

    @property
    def shallow_offset_count(self) -> int:
        """How many offsets the payload will take once offsets are assigned."""
        return sum(b.last_offset_delta + 1 for b in self.batches)


def validate_for_append(
    buf: bytes | bytearray | memoryview, max_message_bytes: int
) -> ValidatedBatches:
    """Validate a produce payload by headers and CRC, without decoding records."""
    batches: list[BatchHeader] = []
    record_count = 0
    max_timestamp = -1
    offset_delta_of_max = -1
    delta = 0
    for header in iter_batches(buf):
        if header.size > max_message_bytes:
            raise RecordTooLargeError(
                f"batch of {header.size} bytes exceeds max.message.bytes={max_message_bytes}"
            )
        if header.record_count != header.last_offset_delta + 1:
            raise InvalidRecordError(
                f"batch at position {header.position} has {header.record_count} records "
                f"but lastOffsetDelta {header.last_offset_delta}"
            )
        batches.append(header)
        record_count += header.record_count
        if header.max_timestamp > max_timestamp:
            max_timestamp = header.max_timestamp
            offset_delta_of_max = delta + header.last_offset_delta
        delta += header.last_offset_delta + 1
    if not batches:
        raise InvalidRecordError("produce payload holds no record batch")
    first, last = batches[0], batches[-1]
    return ValidatedBatches(
        batches=batches,
        size=len(buf),
        record_count=record_count,
        first_offset=first.base_offset,
        last_offset=last.last_offset,
        max_timestamp=max_timestamp,
        offset_delta_of_max_timestamp=offset_delta_of_max,
        codec=first.compression_codec,
        producer_id=first.producer_id,
        producer_epoch=first.producer_epoch,
        base_sequence=first.base_sequence,
        is_transactional=first.is_transactional,
        is_control=first.is_control,
    )


def assign_offsets(
    buf: bytearray | memoryview,
    base_offset: int,
    leader_epoch: int,
    *,
    log_append_time_ms: int | None = None,
) -> int:
    """Patch baseOffset and partitionLeaderEpoch of every batch in place; return next offset.

    Both fields lie outside the CRC. With `log_append_time_ms` (LogAppendTime topics) the
    maxTimestamp and the timestamp-type bit are set too, and those are inside the CRC, so
    it is recomputed. `buf` must already have passed `validate_for_append`.
    """
    view = memoryview(buf)
    pos = 0
    end = len(view)
    offset = base_offset
    while pos < end:
        batch_length = _I32.unpack_from(view, pos + 8)[0]
        last_offset_delta = _I32.unpack_from(view, pos + 23)[0]
        _I64.pack_into(view, pos, offset)
        _I32.pack_into(view, pos + PARTITION_LEADER_EPOCH_OFFSET, leader_epoch)
        batch_end = pos + LOG_OVERHEAD + batch_length
        if log_append_time_ms is not None:
            attributes = _I16.unpack_from(view, pos + ATTRIBUTES_OFFSET)[0]
            _I16.pack_into(view, pos + ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_MASK)
            _I64.pack_into(view, pos + MAX_TIMESTAMP_OFFSET, log_append_time_ms)
            crc = crc32c(view[pos + ATTRIBUTES_OFFSET : batch_end])
            _U32.pack_into(view, pos + CRC_OFFSET, crc)
        offset += last_offset_delta + 1
        pos = batch_end
    return offset


def first_record_at_or_after(
    batch: bytes | bytearray | memoryview, timestamp_ms: int, min_offset: int = 0
) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record in `batch` with timestamp >= `timestamp_ms`
    and offset >= `min_offset` (the log start offset may fall inside a batch).

    Decodes records (any codec) with kafka-python: use off the hot path only.
    """
    from kafka.record.default_records import DefaultRecordBatch

    decoded = DefaultRecordBatch(bytes(batch))
    for record in decoded:
        if record.timestamp >= timestamp_ms and record.offset >= min_offset:
            return record.offset, record.timestamp
    return None
