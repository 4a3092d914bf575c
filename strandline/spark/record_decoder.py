"""Decode Kafka v2 record batches (raw Fetch bytes) straight into Arrow columns.

No Python object is made per record: batch headers are read with `struct` (there are
few batches), compressed batch bodies are inflated with kafka-python's codecs (xerial
snappy and lz4 frames included), and one numba-compiled loop walks the records of a
group of batches, writing keys, values, offsets, timestamps and headers into flat numpy
buffers. Those buffers become the Arrow arrays of `KAFKA_ARROW_SCHEMA` through
`pa.Array.from_buffers`, without another copy.

Record layout (KIP-98); every integer is a zig-zag varint except `attributes`, and a
length of -1 means null:

    length, attributes (int8), timestampDelta, offsetDelta, keyLength, key,
    valueLength, value, headerCount, then per header: keyLength, key, valueLength, value
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import crc32c
import numpy as np
import numpy.typing as npt
import pyarrow as pa
from kafka.codec import gzip_decode, lz4_decode, snappy_decode, zstd_decode
from numba import njit

from strandline.spark.schema import (
    ARROW_HEADERS_TYPE,
    CREATE_TIME,
    KAFKA_ARROW_SCHEMA,
    LOG_APPEND_TIME,
)

# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta,
# baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordCount
BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
BATCH_HEADER_SIZE = BATCH_HEADER.size  # 61
# baseOffset and batchLength are not counted in batchLength.
_OFFSET_AND_LENGTH = struct.Struct(">qi")
LOG_OVERHEAD = _OFFSET_AND_LENGTH.size
CRC_COVERS_FROM = 21  # the CRC covers attributes .. end of batch
MAGIC_V2 = 2

COMPRESSION_MASK = 0x07
LOG_APPEND_TIME_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
NO_PRODUCER_ID = -1
# A control record's key: int16 version, int16 type (0 abort, 1 commit).
CONTROL_ABORT, CONTROL_COMMIT = 0, 1
_CONTROL_KEY = struct.Struct(">hh")
_DECOMPRESS = {1: gzip_decode, 2: snappy_decode, 3: lz4_decode, 4: zstd_decode}

# A fetch is decoded in groups of at most this many payload bytes (after
# decompression), one RecordBatch each: Arrow's binary offsets are int32, and it bounds
# what one batch holds in memory.
MAX_GROUP_BYTES = 64 * 1024 * 1024
_MAX_ARROW_OFFSET = 2**31 - 1

# Columns of the batch table handed to the numba loop, one row per record batch.
_SRC, _START, _END, _BASE_OFFSET, _BASE_TS, _COUNT, _LOG_APPEND, _MAX_TS = range(8)
# Where a batch's records are: in the fetched bytes, or in the inflated bodies.
_FROM_FETCH, _FROM_INFLATED = 0, 1

_TIMESTAMP_TYPE = KAFKA_ARROW_SCHEMA.field("timestamp").type
_HEADER_STRUCT_TYPE = ARROW_HEADERS_TYPE.value_type
_EMPTY = np.empty(0, np.uint8)

U8Array = npt.NDArray[np.uint8]
I32Array = npt.NDArray[np.int32]
I64Array = npt.NDArray[np.int64]


class CorruptRecordsError(ValueError):
    """Fetched record batches failed their CRC or do not parse."""


class AbortedTransactions:
    """read_committed, as Kafka's consumers do it (Java's CompletedFetch, librdkafka's
    rd_kafka_msgset_reader): a Fetch response lists the (producer id, first offset) of
    the aborted transactions overlapping its records. Walking the batches in offset
    order, a producer becomes "aborted" once a batch reaches its first offset; its
    transactional batches are dropped until its ABORT marker (a control batch) ends
    that transaction. Committed transactions and non-transactional batches pass.

    One instance per Fetch response (its list covers the records it returned)."""

    def __init__(self, aborted: Iterable[tuple[int, int]]) -> None:
        # By first offset: they are opened in the order the batches reach them.
        self._pending = sorted(aborted, key=lambda a: a[1])
        self._next = 0
        self._open: set[int] = set()

    def drops(
        self, producer_id: int, last_offset: int, transactional: bool, abort_marker: bool
    ) -> bool:
        """Whether the batch's records are dropped (control batches never reach users;
        the caller drops them whatever this says, but must pass them here)."""
        if producer_id == NO_PRODUCER_ID:
            return False
        while self._next < len(self._pending) and self._pending[self._next][1] <= last_offset:
            self._open.add(self._pending[self._next][0])
            self._next += 1
        if abort_marker:
            self._open.discard(producer_id)
            return False
        return transactional and producer_id in self._open


def _read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    raw = shift = 0
    while pos < len(buf) and shift < 64:
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
    raise CorruptRecordsError("malformed varint in a control record")


def control_type(body: bytes | memoryview) -> int:
    """The type of the first control record of an (uncompressed) control batch body:
    CONTROL_ABORT or CONTROL_COMMIT (-1 when the batch has no readable key)."""
    length, pos = _read_varint(body, 0)
    end = pos + length
    pos += 1  # attributes
    _, pos = _read_varint(body, pos)  # timestamp delta
    _, pos = _read_varint(body, pos)  # offset delta
    key_len, pos = _read_varint(body, pos)
    if key_len < _CONTROL_KEY.size or pos + key_len > end or end > len(body):
        return -1
    _, kind = _CONTROL_KEY.unpack_from(bytes(body[pos : pos + _CONTROL_KEY.size]))
    return int(kind)


@dataclass(frozen=True)
class DecodedRecords:
    batches: list[pa.RecordBatch]
    # The offset after the last complete batch (control and empty batches included):
    # where the next fetch starts. None when the data held no complete batch.
    next_offset: int | None


# ------------------------------------------------------------------ the numba loop


@njit(cache=True, inline="always")
def _varint(buf: U8Array, pos: int, limit: int) -> tuple[int, int]:
    """The zig-zag varint at buf[pos] and the position after it."""
    # Accumulate unsigned: a 10-byte varlong must not overflow into the wrong sign.
    raw = np.uint64(0)
    shift = np.uint64(0)
    while pos < limit and shift < np.uint64(64):
        b = np.uint64(buf[pos])
        pos += 1
        raw |= (b & np.uint64(0x7F)) << shift
        if b < np.uint64(0x80):
            return int(np.int64(raw >> np.uint64(1)) ^ -np.int64(raw & np.uint64(1))), pos
        shift += np.uint64(7)
    raise ValueError("malformed varint in a record")


@njit(cache=True, inline="always")
def _field(buf: U8Array, pos: int, limit: int) -> tuple[int, int]:
    """A (length, bytes) field: returns (length, position of the bytes); -1 is null."""
    length, pos = _varint(buf, pos, limit)
    if length > limit - pos or length < -1:
        raise ValueError("a record field runs past its record")
    return length, pos


@njit(cache=True, nogil=True)
def _decode_group(
    fetched: U8Array,
    inflated: U8Array,
    table: I64Array,
    start: int,
    end: int,
    max_rows: int,
    max_bytes: int,
) -> tuple[
    I64Array, I64Array, I32Array,
    I32Array, U8Array, U8Array,
    I32Array, U8Array, U8Array,
    I32Array, U8Array,
    I32Array, U8Array, I32Array, U8Array, U8Array,
]:  # fmt: skip
    """Every record of the batches in `table` whose offset is in [start, end).

    Outputs are allocated at upper bounds, never touched past what is written (the OS
    maps untouched pages lazily), and returned trimmed: rows <= the batches' record
    counts, bytes <= their payload bytes, headers <= payload bytes / 2 (a header takes
    at least its two length bytes). `*_valid` are one byte per slot, 1 = not null.
    """
    max_headers = max_bytes // 2 + 1
    offsets = np.empty(max_rows, np.int64)
    timestamps_us = np.empty(max_rows, np.int64)
    ts_types = np.empty(max_rows, np.int32)
    key_offsets = np.empty(max_rows + 1, np.int32)
    key_data = np.empty(max_bytes, np.uint8)
    key_valid = np.empty(max_rows, np.uint8)
    value_offsets = np.empty(max_rows + 1, np.int32)
    value_data = np.empty(max_bytes, np.uint8)
    value_valid = np.empty(max_rows, np.uint8)
    header_lists = np.empty(max_rows + 1, np.int32)
    header_valid = np.empty(max_rows, np.uint8)
    hkey_offsets = np.empty(max_headers + 1, np.int32)
    hkey_data = np.empty(max_bytes, np.uint8)
    hvalue_offsets = np.empty(max_headers + 1, np.int32)
    hvalue_data = np.empty(max_bytes, np.uint8)
    hvalue_valid = np.empty(max_headers, np.uint8)
    key_offsets[0] = value_offsets[0] = header_lists[0] = 0
    hkey_offsets[0] = hvalue_offsets[0] = 0

    rows = key_end = value_end = n_headers = hkey_end = hvalue_end = 0
    for b in range(table.shape[0]):
        buf = fetched if table[b, _SRC] == _FROM_FETCH else inflated
        pos = table[b, _START]
        batch_end = table[b, _END]
        base_offset = table[b, _BASE_OFFSET]
        base_ts = table[b, _BASE_TS]
        log_append = table[b, _LOG_APPEND] != 0
        max_ts = table[b, _MAX_TS]
        for _ in range(table[b, _COUNT]):
            length, pos = _varint(buf, pos, batch_end)
            if length < 0 or length > batch_end - pos:
                raise ValueError("a record runs past its batch")
            record_end = pos + length
            pos += 1  # record attributes: unused since v2
            ts_delta, pos = _varint(buf, pos, record_end)
            offset_delta, pos = _varint(buf, pos, record_end)
            offset = base_offset + offset_delta
            # A batch can straddle the range's ends: records outside it are skipped
            # (still parsed, to reach the next one).
            keep = start <= offset < end
            key_len, key_at = _field(buf, pos, record_end)
            pos = key_at + max(key_len, 0)
            value_len, value_at = _field(buf, pos, record_end)
            pos = value_at + max(value_len, 0)
            header_count, pos = _varint(buf, pos, record_end)
            if header_count < 0:
                raise ValueError("a record has a negative header count")
            if not keep:
                pos = record_end
                continue

            offsets[rows] = offset
            if log_append:
                # The broker stamped the whole batch: its max timestamp is every record's.
                timestamps_us[rows] = max_ts * 1000
                ts_types[rows] = LOG_APPEND_TIME
            else:
                timestamps_us[rows] = (base_ts + ts_delta) * 1000
                ts_types[rows] = CREATE_TIME
            key_valid[rows] = key_len >= 0
            if key_len > 0:
                key_data[key_end : key_end + key_len] = buf[key_at : key_at + key_len]
                key_end += key_len
            key_offsets[rows + 1] = key_end
            value_valid[rows] = value_len >= 0
            if value_len > 0:
                value_data[value_end : value_end + value_len] = buf[value_at : value_at + value_len]
                value_end += value_len
            value_offsets[rows + 1] = value_end

            for _h in range(header_count):
                hk_len, hk_at = _field(buf, pos, record_end)
                if hk_len < 0:
                    raise ValueError("a record header has a null key")
                hv_len, hv_at = _field(buf, hk_at + hk_len, record_end)
                pos = hv_at + max(hv_len, 0)
                hkey_data[hkey_end : hkey_end + hk_len] = buf[hk_at : hk_at + hk_len]
                hkey_end += hk_len
                hkey_offsets[n_headers + 1] = hkey_end
                hvalue_valid[n_headers] = hv_len >= 0
                if hv_len > 0:
                    hvalue_data[hvalue_end : hvalue_end + hv_len] = buf[hv_at : hv_at + hv_len]
                    hvalue_end += hv_len
                hvalue_offsets[n_headers + 1] = hvalue_end
                n_headers += 1
            # Like librdkafka's Message.headers(): a record without headers has null,
            # not an empty list.
            header_valid[rows] = header_count > 0
            header_lists[rows + 1] = n_headers
            rows += 1
            # The length prefix is authoritative (a newer record may carry more fields).
            pos = record_end
    return (
        offsets[:rows], timestamps_us[:rows], ts_types[:rows],
        key_offsets[: rows + 1], key_data[:key_end], key_valid[:rows],
        value_offsets[: rows + 1], value_data[:value_end], value_valid[:rows],
        header_lists[: rows + 1], header_valid[:rows],
        hkey_offsets[: n_headers + 1], hkey_data[:hkey_end],
        hvalue_offsets[: n_headers + 1], hvalue_data[:hvalue_end], hvalue_valid[:n_headers],
    )  # fmt: skip


# ------------------------------------------------------------- batches and Arrow


def _validity(valid: npt.NDArray[Any]) -> tuple[pa.Buffer | None, int]:
    """Arrow validity bitmap (None when nothing is null) and the null count."""
    nulls = len(valid) - int(np.count_nonzero(valid))
    if nulls == 0:
        return None, 0
    return pa.py_buffer(np.packbits(valid, bitorder="little")), nulls


def _binary(
    data_type: pa.DataType,
    offsets: npt.NDArray[Any],
    data: npt.NDArray[Any],
    valid: npt.NDArray[Any],
) -> pa.Array:
    validity, nulls = _validity(valid)
    buffers = [validity, pa.py_buffer(offsets), pa.py_buffer(data)]
    return pa.Array.from_buffers(data_type, len(valid), buffers, null_count=nulls)


def _to_record_batch(
    decoded: tuple[npt.NDArray[Any], ...], topic: str, partition: int
) -> pa.RecordBatch:
    (
        offsets, timestamps_us, ts_types,
        key_offsets, key_data, key_valid,
        value_offsets, value_data, value_valid,
        header_lists, header_valid,
        hkey_offsets, hkey_data, hvalue_offsets, hvalue_data, hvalue_valid,
    ) = decoded  # fmt: skip
    n = len(offsets)
    header_keys = _binary(
        pa.string(), hkey_offsets, hkey_data, np.ones(len(hvalue_valid), np.uint8)
    )
    try:
        # Header keys are strings: Spark must never see invalid UTF-8 in one.
        header_keys.validate(full=True)
    except pa.ArrowInvalid as exc:
        raise CorruptRecordsError(f"{topic}-{partition}: a header key is not UTF-8") from exc
    header_structs = pa.Array.from_buffers(
        _HEADER_STRUCT_TYPE,
        len(hvalue_valid),
        [None],
        children=[header_keys, _binary(pa.binary(), hvalue_offsets, hvalue_data, hvalue_valid)],
    )
    validity, nulls = _validity(header_valid)
    headers = pa.Array.from_buffers(
        ARROW_HEADERS_TYPE,
        n,
        [validity, pa.py_buffer(header_lists)],
        null_count=nulls,
        children=[header_structs],
    )
    columns = [
        _binary(pa.binary(), key_offsets, key_data, key_valid),
        _binary(pa.binary(), value_offsets, value_data, value_valid),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.array(offsets, pa.int64()),
        pa.Array.from_buffers(_TIMESTAMP_TYPE, n, [None, pa.py_buffer(timestamps_us)]),
        pa.array(ts_types, pa.int32()),
        headers,
    ]
    return pa.RecordBatch.from_arrays(columns, schema=KAFKA_ARROW_SCHEMA)


class _Group:
    """Record batches collected for one pass of the numba loop."""

    def __init__(self) -> None:
        self.table: list[tuple[int, int, int, int, int, int, int, int]] = []
        self.inflated: list[bytes] = []
        self.inflated_size = 0
        self.payload_bytes = 0
        self.records = 0

    def add(self, codec: int, body: memoryview, body_at: int, header: tuple[int, ...]) -> None:
        base_offset, base_ts, max_ts, count, log_append = header
        if codec:
            try:
                inflated = _DECOMPRESS[codec](bytes(body))
            except KeyError:
                raise CorruptRecordsError(f"unknown compression codec {codec}") from None
            src, first = _FROM_INFLATED, self.inflated_size
            self.inflated.append(inflated)
            self.inflated_size += len(inflated)
            size = len(inflated)
        else:
            src, first, size = _FROM_FETCH, body_at, len(body)
        self.table.append(
            (src, first, first + size, base_offset, base_ts, count, log_append, max_ts)
        )
        self.payload_bytes += size
        self.records += count

    def decode(
        self, fetched: U8Array, topic: str, partition: int, start: int, end: int
    ) -> pa.RecordBatch:
        if self.payload_bytes > _MAX_ARROW_OFFSET:
            raise CorruptRecordsError(
                f"{topic}-{partition}: a record batch of {self.payload_bytes} bytes is too "
                "large for one Arrow batch"
            )
        inflated = np.frombuffer(b"".join(self.inflated), np.uint8) if self.inflated else _EMPTY
        try:
            decoded = _decode_group(
                fetched,
                inflated,
                np.array(self.table, np.int64),
                start,
                end,
                self.records,
                self.payload_bytes,
            )
        except ValueError as exc:
            raise CorruptRecordsError(f"{topic}-{partition}: {exc}") from exc
        return _to_record_batch(decoded, topic, partition)


def _inflate(attributes: int, body: memoryview) -> bytes | memoryview:
    codec = attributes & COMPRESSION_MASK
    if not codec:
        return body
    try:
        return bytes(_DECOMPRESS[codec](bytes(body)))
    except KeyError:
        raise CorruptRecordsError(f"unknown compression codec {codec}") from None


def decode_records(
    data: bytes,
    topic: str,
    partition: int,
    start: int,
    end: int,
    max_group_bytes: int = MAX_GROUP_BYTES,
    aborted: AbortedTransactions | None = None,
) -> DecodedRecords:
    """The records of `data` (a Fetch response's record set) with offsets in [start, end).

    Control batches (transaction markers) are skipped; with `aborted` (read_committed)
    so are the batches of aborted transactions. A partial batch at the end (the broker
    cuts the set at the size limit) is ignored. Raises CorruptRecordsError on a CRC
    mismatch or anything that does not parse.
    """
    view = memoryview(data)
    fetched = np.frombuffer(data, np.uint8)
    batches: list[pa.RecordBatch] = []
    group = _Group()
    next_offset: int | None = None
    pos = 0
    while pos + LOG_OVERHEAD <= len(data):
        base_offset, batch_length = _OFFSET_AND_LENGTH.unpack_from(data, pos)
        batch_end = pos + LOG_OVERHEAD + batch_length
        if batch_end > len(data):
            break  # a partial trailing batch
        if batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD:
            raise CorruptRecordsError(f"{topic}-{partition}: batch at {base_offset} too short")
        (
            _, _, _, magic, crc, attributes, last_offset_delta, base_ts, max_ts,
            producer_id, _, _, count,
        ) = BATCH_HEADER.unpack_from(data, pos)  # fmt: skip
        if magic != MAGIC_V2:
            raise CorruptRecordsError(
                f"{topic}-{partition}: message format v{magic} at offset {base_offset} "
                "is not supported (v2 only)"
            )
        if crc32c.crc32c(view[pos + CRC_COVERS_FROM : batch_end]) != crc:
            raise CorruptRecordsError(
                f"{topic}-{partition}: CRC mismatch in the batch at offset {base_offset}"
            )
        body_at = pos + BATCH_HEADER_SIZE
        pos = batch_end
        next_offset = base_offset + last_offset_delta + 1
        control = bool(attributes & CONTROL_BIT)
        if aborted is not None:
            abort_marker = (
                control
                and count > 0
                and control_type(_inflate(attributes, view[body_at:batch_end])) == CONTROL_ABORT
            )
            if aborted.drops(
                producer_id, next_offset - 1, bool(attributes & TRANSACTIONAL_BIT), abort_marker
            ):
                continue
        if control or count <= 0 or next_offset <= start or base_offset >= end:
            continue
        codec = attributes & COMPRESSION_MASK
        log_append = 1 if attributes & LOG_APPEND_TIME_BIT else 0
        if group.records and group.payload_bytes + (batch_end - body_at) > max_group_bytes:
            batches.append(group.decode(fetched, topic, partition, start, end))
            group = _Group()
        group.add(
            codec,
            view[body_at:batch_end],
            body_at,
            (base_offset, base_ts, max_ts, count, log_append),
        )
    if group.records:
        batches.append(group.decode(fetched, topic, partition, start, end))
    return DecodedRecords([b for b in batches if b.num_rows], next_offset)
