"""The numba batch decoder against kafka-python's reference codec (`kafka.record`).

Batches are built with kafka-python's MemoryRecordsBuilder (every codec) and decoded
both ways; the Arrow rows must equal what kafka-python reads, in the source's schema.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.memory_records import MemoryRecords

from strandline.spark.record_decoder import (
    CONTROL_BIT,
    LOG_APPEND_TIME_BIT,
    CorruptRecordsError,
    decode_records,
)
from strandline.spark.schema import ARROW_HEADERS_TYPE, KAFKA_ARROW_SCHEMA

from .record_batches import (
    ATTRIBUTES_AT,
    CODECS,
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    T0,
    ZSTD,
    Record,
    build_batch,
    patch_batch,
)

TOPIC, PARTITION = "orders", 7


def reference_rows(data: bytes, start: int = 0, end: int = 2**62) -> list[dict[str, Any]]:
    """What kafka-python reads, as rows of the source's schema."""
    rows = []
    records = MemoryRecords(data)
    while (batch := records.next_batch()) is not None:
        if batch.is_control_batch:
            continue
        for r in batch:
            if not start <= r.offset < end:
                continue
            rows.append(
                {
                    "key": r.key,
                    "value": r.value,
                    "topic": TOPIC,
                    "partition": PARTITION,
                    "offset": r.offset,
                    "timestamp": dt.datetime.fromtimestamp(r.timestamp / 1000, dt.UTC),
                    "timestampType": r.timestamp_type,
                    "headers": [{"key": k, "value": v} for k, v in r.headers] or None,
                }
            )
    return rows


def decoded_rows(data: bytes, start: int = 0, end: int = 2**62, **kw: Any) -> list[dict[str, Any]]:
    decoded = decode_records(data, TOPIC, PARTITION, start, end, **kw)
    for batch in decoded.batches:
        assert batch.schema.equals(KAFKA_ARROW_SCHEMA)
        batch.validate(full=True)
    rows = pa.Table.from_batches(decoded.batches, KAFKA_ARROW_SCHEMA).to_pylist()
    for row in rows:  # to_pylist gives zoneinfo UTC; compare as instants
        row["timestamp"] = row["timestamp"].astimezone(dt.UTC)
    return rows


def mixed_records(n: int) -> list[Record]:
    """Null and empty keys and values, headers on some records (one with a null value)."""
    records: list[Record] = []
    for i in range(n):
        key = None if i % 4 == 0 else (b"" if i % 4 == 1 else b"key-%d" % i)
        value = None if i % 5 == 0 else b"value-%d-" % i + b"z" * 200
        headers: list[tuple[str, bytes | None]] = (
            [("trace", b"t%d" % i), ("ünï", None)] if i % 3 == 0 else []
        )
        records.append((T0 + i * 7 - (50 if i % 2 else 0), key, value, headers))
    return records


@pytest.mark.parametrize("codec", CODECS, ids=["none", "gzip", "snappy", "lz4", "zstd"])
def test_every_codec_decodes_like_kafka_python(codec: int) -> None:
    data = build_batch(mixed_records(300), codec, base_offset=1000)
    assert data[ATTRIBUTES_AT + 1] & 0x07 == codec  # the builder really compressed
    expected = reference_rows(data)
    assert len(expected) == 300
    assert decoded_rows(data) == expected


def test_several_batches_of_mixed_codecs_in_one_fetch() -> None:
    data = b"".join(
        build_batch(mixed_records(50), codec, base_offset=50 * i) for i, codec in enumerate(CODECS)
    )
    decoded = decode_records(data, TOPIC, PARTITION, 0, 10**9)
    assert decoded.next_offset == 250
    assert decoded_rows(data) == reference_rows(data)
    assert [r["offset"] for r in decoded_rows(data)] == list(range(250))


def test_records_outside_the_range_are_dropped() -> None:
    data = build_batch(mixed_records(100), SNAPPY, base_offset=0) + build_batch(
        mixed_records(100), NONE, base_offset=100
    )
    rows = decoded_rows(data, start=30, end=150)
    assert [r["offset"] for r in rows] == list(range(30, 150))
    assert rows == reference_rows(data, 30, 150)
    # The whole fetch is still walked: the next fetch starts after the last batch.
    assert decode_records(data, TOPIC, PARTITION, 30, 150).next_offset == 200


def test_log_append_time_stamps_every_record_with_the_batch_max_timestamp() -> None:
    stamped = T0 + 123_456
    data = patch_batch(
        build_batch(mixed_records(20), LZ4), set_bits=LOG_APPEND_TIME_BIT, max_timestamp=stamped
    )
    rows = decoded_rows(data)
    assert rows == reference_rows(data)
    assert {r["timestampType"] for r in rows} == {1}
    assert {r["timestamp"] for r in rows} == {dt.datetime.fromtimestamp(stamped / 1000, dt.UTC)}


def test_create_time_is_type_0_and_keeps_millisecond_precision() -> None:
    data = build_batch([(T0 + 1, b"k", b"v", []), (T0 - 999, b"k", b"v", [])])
    batch = decode_records(data, TOPIC, PARTITION, 0, 10).batches[0]
    assert batch.column("timestampType").to_pylist() == [0, 0]
    assert batch.column("timestamp").cast(pa.int64()).to_pylist() == [
        (T0 + 1) * 1000,
        (T0 - 999) * 1000,
    ]


def test_control_batches_are_skipped_but_moved_past() -> None:
    marker = patch_batch(
        build_batch([(T0, b"\x00\x00\x00\x00", b"", [])], base_offset=10), set_bits=CONTROL_BIT
    )
    data = build_batch(mixed_records(10), base_offset=0) + marker
    decoded = decode_records(data, TOPIC, PARTITION, 0, 100)
    assert [r["offset"] for r in decoded_rows(data)] == list(range(10))
    assert decoded.next_offset == 11
    only_marker = decode_records(marker, TOPIC, PARTITION, 10, 100)
    assert only_marker.batches == [] and only_marker.next_offset == 11


def test_a_partial_trailing_batch_is_ignored() -> None:
    first = build_batch(mixed_records(10), ZSTD, base_offset=0)
    second = build_batch(mixed_records(10), NONE, base_offset=10)
    for cut in (1, 11, 40, len(second) - 1):
        decoded = decode_records(first + second[:cut], TOPIC, PARTITION, 0, 100)
        assert decoded.next_offset == 10
        assert [r["offset"] for r in decoded_rows(first + second[:cut])] == list(range(10))
    nothing = decode_records(second[:-1], TOPIC, PARTITION, 10, 100)
    assert nothing.batches == [] and nothing.next_offset is None


def test_empty_data_decodes_to_nothing() -> None:
    assert decode_records(b"", TOPIC, PARTITION, 0, 10).next_offset is None


def test_records_without_headers_have_a_null_headers_column() -> None:
    data = build_batch([(T0, b"k", b"v", [])] * 5)
    column = decode_records(data, TOPIC, PARTITION, 0, 10).batches[0].column("headers")
    assert column.equals(pa.nulls(5, ARROW_HEADERS_TYPE))


def test_large_fetches_decode_in_groups() -> None:
    data = b"".join(build_batch(mixed_records(40), GZIP, base_offset=40 * i) for i in range(6))
    decoded = decode_records(data, TOPIC, PARTITION, 0, 10**9, max_group_bytes=20_000)
    assert len(decoded.batches) > 1
    assert decoded_rows(data, max_group_bytes=20_000) == reference_rows(data)


def test_a_crc_mismatch_is_refused() -> None:
    data = bytearray(build_batch(mixed_records(5)))
    data[-3] ^= 0xFF
    with pytest.raises(CorruptRecordsError, match="CRC mismatch"):
        decode_records(bytes(data), TOPIC, PARTITION, 0, 10)


def test_a_record_running_past_its_batch_is_refused() -> None:
    data = build_batch([(T0, b"key", b"value", [])])
    # Lengthen the record's key (zig-zag 3 -> 100) and re-sign the batch.
    body = bytearray(data)
    at = body.index(b"\x06key")
    body[at] = 200
    with pytest.raises(CorruptRecordsError, match="runs past"):
        decode_records(patch_batch(bytes(body)), TOPIC, PARTITION, 0, 10)


def test_message_formats_before_v2_are_refused() -> None:
    data = bytearray(build_batch([(T0, b"k", b"v", [])]))
    data[16] = 1
    with pytest.raises(CorruptRecordsError, match="message format v1"):
        decode_records(bytes(data), TOPIC, PARTITION, 0, 10)


_headers = st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=8)), max_size=3)
_records = st.lists(
    st.tuples(
        st.integers(-(2**40), 2**42),
        st.none() | st.binary(max_size=20),
        st.none() | st.binary(max_size=300),
        _headers,
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(
    batches=st.lists(st.tuples(_records, st.sampled_from(CODECS)), min_size=1, max_size=4),
    bounds=st.tuples(st.integers(0, 170), st.integers(0, 170)),
    log_append=st.booleans(),
)
def test_any_records_decode_like_kafka_python(
    batches: list[tuple[list[Record], int]], bounds: tuple[int, int], log_append: bool
) -> None:
    parts, offset = [], 0
    for records, codec in batches:
        part = build_batch(records, codec, base_offset=offset)
        if log_append:
            part = patch_batch(part, set_bits=LOG_APPEND_TIME_BIT)
        parts.append(part)
        offset += len(records)
    data = b"".join(parts)
    start, end = sorted(bounds)
    assert decoded_rows(data, start, end) == reference_rows(data, start, end)
    assert decode_records(data, TOPIC, PARTITION, start, end).next_offset == offset


def test_compaction_gaps_inside_a_batch_keep_their_offsets() -> None:
    records = [(T0, b"k%d" % i, b"v", []) for i in range(4)]
    data = build_batch(records, ZSTD, base_offset=100, offset_deltas=[0, 3, 4, 9])
    rows = decoded_rows(data)
    assert [r["offset"] for r in rows] == [100, 103, 104, 109]
    assert rows == reference_rows(data)
    assert decode_records(data, TOPIC, PARTITION, 0, 10**9).next_offset == 110


def test_a_header_key_that_is_not_utf8_is_refused() -> None:
    data = bytearray(build_batch([(T0, b"k", b"v", [("@@", b"x")])]))
    at = data.index(b"@@")
    data[at : at + 2] = b"\xff\xfe"
    with pytest.raises(CorruptRecordsError, match="header key is not UTF-8"):
        decode_records(patch_batch(bytes(data)), TOPIC, PARTITION, 0, 10)
