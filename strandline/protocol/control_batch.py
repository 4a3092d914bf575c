"""Transaction markers: the control batches that close a transaction (KIP-98), pure.

A marker is a v2 batch with the transactional and control attribute bits set, carrying
the producer id and epoch of the transaction it ends, and one record (Kafka's
EndTransactionMarker / ControlRecordType):

    key   = version int16 (0) | type int16 (0 = ABORT, 1 = COMMIT)
    value = version int16 (0) | coordinator epoch int32

The batch's base sequence is -1: markers are not part of the producer's sequence.
Markers are never compressed (Kafka writes them uncompressed), so the record is read
straight from the bytes after the 61-byte batch header.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from crc32c import crc32c

from strandline.errors import InvalidRecordError
from strandline.protocol.record_batch import (
    ATTRIBUTES_OFFSET,
    CODEC_MASK,
    CONTROL_MASK,
    CRC_OFFSET,
    CURRENT_MAGIC,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TRANSACTIONAL_MASK,
    BatchHeader,
)

MARKER_ABORT = 0
MARKER_COMMIT = 1
MARKER_VERSION = 0
NO_SEQUENCE = -1

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")
_U32 = struct.Struct(">I")


@dataclass(frozen=True)
class EndTransactionMarker:
    commit: bool
    coordinator_epoch: int


class NotAMarkerError(InvalidRecordError):
    """A control batch whose record is not a transaction marker (another control type)."""


def _zigzag_varint(value: int) -> bytes:
    encoded = (value << 1) ^ (value >> 63)
    out = bytearray()
    while encoded >= 0x80:
        out.append((encoded & 0x7F) | 0x80)
        encoded >>= 7
    out.append(encoded)
    return bytes(out)


def _read_varint(buf: bytes | bytearray | memoryview, pos: int, end: int) -> tuple[int, int]:
    """A zigzag varint at `pos`; returns (value, next position)."""
    shift = 0
    raw = 0
    while True:
        if pos >= end:
            raise InvalidRecordError("control record is truncated")
        byte = buf[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
        if shift > 63:
            raise InvalidRecordError("control record holds a malformed varint")
    return (raw >> 1) ^ -(raw & 1), pos


def build_marker_batch(
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    commit: bool,
    timestamp_ms: int,
) -> bytes:
    """A one-record control batch ending `producer_id`'s transaction (base offset 0; the
    leader assigns the real offset and leader epoch when it appends)."""
    key = _KEY.pack(MARKER_VERSION, MARKER_COMMIT if commit else MARKER_ABORT)
    value = _VALUE.pack(MARKER_VERSION, coordinator_epoch)
    body = (
        b"\x00"  # record attributes
        + _zigzag_varint(0)  # timestamp delta
        + _zigzag_varint(0)  # offset delta
        + _zigzag_varint(len(key))
        + key
        + _zigzag_varint(len(value))
        + value
        + _zigzag_varint(0)  # header count
    )
    record = _zigzag_varint(len(body)) + body
    batch_length = HEADER_SIZE - LOG_OVERHEAD + len(record)
    buf = bytearray(HEADER_SIZE + len(record))
    HEADER.pack_into(
        buf,
        0,
        0,  # base offset
        batch_length,
        -1,  # partition leader epoch
        CURRENT_MAGIC,
        0,  # crc, below
        TRANSACTIONAL_MASK | CONTROL_MASK,
        0,  # last offset delta
        timestamp_ms,
        timestamp_ms,
        producer_id,
        producer_epoch,
        NO_SEQUENCE,
        1,  # record count
    )
    buf[HEADER_SIZE:] = record
    _U32.pack_into(buf, CRC_OFFSET, crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:]))
    return bytes(buf)


def read_marker(buf: bytes | bytearray | memoryview, header: BatchHeader) -> EndTransactionMarker:
    """The marker of the control batch `header` describes; `buf` holds the whole batch at
    `header.position`. Raises NotAMarkerError for another control record type and
    InvalidRecordError for a malformed one."""
    if not header.is_control:
        raise InvalidRecordError(f"batch at offset {header.base_offset} is not a control batch")
    if header.attributes & CODEC_MASK:
        raise InvalidRecordError(f"control batch at offset {header.base_offset} is compressed")
    if header.record_count != 1:
        raise InvalidRecordError(
            f"control batch at offset {header.base_offset} holds {header.record_count} records"
        )
    end = header.position + header.size
    pos = header.position + HEADER_SIZE
    _length, pos = _read_varint(buf, pos, end)
    pos += 1  # record attributes
    _, pos = _read_varint(buf, pos, end)  # timestamp delta
    _, pos = _read_varint(buf, pos, end)  # offset delta
    key_length, pos = _read_varint(buf, pos, end)
    if key_length < _KEY.size or pos + key_length > end:
        raise InvalidRecordError(f"control record key of {key_length} bytes is invalid")
    _key_version, control_type = _KEY.unpack_from(buf, pos)
    if control_type not in (MARKER_ABORT, MARKER_COMMIT):
        raise NotAMarkerError(f"control record type {control_type} is not a transaction marker")
    pos += key_length
    value_length, pos = _read_varint(buf, pos, end)
    if value_length < _VALUE.size or pos + value_length > end:
        raise InvalidRecordError(f"transaction marker value of {value_length} bytes is invalid")
    # Kafka reads the coordinator epoch whatever the value version (forward compatible).
    _value_version, coordinator_epoch = _VALUE.unpack_from(buf, pos)
    return EndTransactionMarker(control_type == MARKER_COMMIT, coordinator_epoch)
