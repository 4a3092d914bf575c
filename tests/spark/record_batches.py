"""Kafka v2 record batches for tests, built with kafka-python's reference codec."""

from __future__ import annotations

import struct

import crc32c
from kafka.record.memory_records import MemoryRecordsBuilder

from strandline.spark.record_decoder import CRC_COVERS_FROM

NONE, GZIP, SNAPPY, LZ4, ZSTD = range(5)
CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
T0 = 1_700_000_000_000
ATTRIBUTES_AT, CRC_AT, MAX_TIMESTAMP_AT = 21, 17, 35

# (timestamp ms, key, value, headers)
Record = tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]


def build_batch(
    records: list[Record],
    codec: int = NONE,
    base_offset: int = 0,
    offset_deltas: list[int] | None = None,
) -> bytes:
    """One batch at `base_offset`; `offset_deltas` (ascending) leave compaction gaps."""
    builder = MemoryRecordsBuilder(2, codec, batch_size=1 << 30)
    deltas = offset_deltas if offset_deltas is not None else list(range(len(records)))
    position = 0
    for delta, (ts, key, value, headers) in zip(deltas, records, strict=True):
        if delta > position:
            builder.skip(delta - position)
        builder.append(ts, key, value, headers)
        position = delta + 1
    builder.close()
    data = bytearray(builder.buffer())
    struct.pack_into(">q", data, 0, base_offset)  # the broker assigns offsets
    return bytes(data)


def patch_batch(data: bytes, *, set_bits: int = 0, max_timestamp: int | None = None) -> bytes:
    """Set attribute bits (LogAppendTime, control) as a broker would; fix the CRC."""
    out = bytearray(data)
    (attributes,) = struct.unpack_from(">h", out, ATTRIBUTES_AT)
    struct.pack_into(">h", out, ATTRIBUTES_AT, attributes | set_bits)
    if max_timestamp is not None:
        struct.pack_into(">q", out, MAX_TIMESTAMP_AT, max_timestamp)
    struct.pack_into(">I", out, CRC_AT, crc32c.crc32c(bytes(out[CRC_COVERS_FROM:])))
    return bytes(out)
