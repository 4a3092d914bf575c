"""Build real v2 record batches with kafka-python, the way producers send them."""

from __future__ import annotations

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def build_batch(
    values: list[bytes],
    *,
    codec: str = "none",
    timestamps: list[int] | None = None,
    keys: list[bytes | None] | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytes:
    builder = DefaultRecordBatchBuilder(
        2, CODECS[codec], False, producer_id, producer_epoch, base_sequence, 1 << 30
    )
    for i, value in enumerate(values):
        ts = timestamps[i] if timestamps is not None else 1_000 + i
        key = keys[i] if keys is not None else b"k%d" % i
        builder.append(i, ts, key, value, [("h", b"v%d" % i)])
    return bytes(builder.build())


def decode(buf: bytes) -> list[tuple[int, int, bytes | None, bytes | None, list]]:
    """(offset, timestamp, key, value, headers) of every record in a run of batches."""
    out = []
    pos = 0
    while pos < len(buf):
        length = int.from_bytes(buf[pos + 8 : pos + 12], "big", signed=True)
        batch = DefaultRecordBatch(buf[pos : pos + 12 + length])
        assert batch.validate_crc()
        for record in batch:
            out.append(
                (record.offset, record.timestamp, record.key, record.value, list(record.headers))
            )
        pos += 12 + length
    return out
