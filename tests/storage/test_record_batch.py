from __future__ import annotations

import struct

import pytest
from crc32c import crc32c
from kafka.record.default_records import DefaultRecordBatch

from strandline.errors import (
    CorruptRecordError,
    InvalidRecordError,
    RecordTooLargeError,
    UnsupportedMagicError,
)
from strandline.protocol.record_batch import (
    HEADER_SIZE,
    assign_offsets,
    first_record_at_or_after,
    iter_batches,
    validate_for_append,
)

from .batches import CODECS, build_batch, decode


def test_iter_batches_walks_a_concatenation_of_every_codec() -> None:
    parts = [build_batch([b"v" * 400] * (i + 1), codec=c) for i, c in enumerate(CODECS)]
    headers = list(iter_batches(b"".join(parts)))
    assert [h.compression_codec for h in headers] == list(CODECS.values())
    assert [h.record_count for h in headers] == [1, 2, 3, 4, 5]
    assert [h.size for h in headers] == [len(p) for p in parts]
    assert headers[1].position == len(parts[0])


def test_torn_batch_is_corrupt() -> None:
    batch = build_batch([b"a", b"b"])
    with pytest.raises(CorruptRecordError, match="torn"):
        list(iter_batches(batch + batch[:30]))
    with pytest.raises(CorruptRecordError, match="torn"):
        list(iter_batches(batch[:-1]))
    with pytest.raises(CorruptRecordError):
        list(iter_batches(batch[:5]))


def test_bad_length_is_corrupt() -> None:
    batch = bytearray(build_batch([b"a"]))
    struct.pack_into(">i", batch, 8, 10)
    with pytest.raises(CorruptRecordError, match="too small"):
        list(iter_batches(batch))


def test_bad_crc_is_corrupt() -> None:
    batch = bytearray(build_batch([b"hello"]))
    batch[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        list(iter_batches(batch))
    assert len(list(iter_batches(batch, verify_crc=False))) == 1


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_magic_is_unsupported(magic: int) -> None:
    legacy = bytearray(build_batch([b"a"]))
    legacy[16] = magic
    with pytest.raises(UnsupportedMagicError):
        list(iter_batches(legacy))


def test_validate_for_append_reads_headers_only() -> None:
    first = build_batch(
        [b"a" * 200] * 3,
        codec="zstd",
        timestamps=[5, 50, 7],
        producer_id=7,
        producer_epoch=2,
        base_sequence=11,
    )
    second = build_batch([b"d"], timestamps=[20])
    v = validate_for_append(first + second, max_message_bytes=10_000)
    assert v.batch_count == 2
    assert v.record_count == 4
    assert v.shallow_offset_count == 4
    assert v.max_timestamp == 50
    # The max belongs to the first batch, whose last offset delta is 2.
    assert v.offset_delta_of_max_timestamp == 2
    assert v.codec == CODECS["zstd"]
    assert (v.producer_id, v.producer_epoch, v.base_sequence) == (7, 2, 11)
    assert not v.is_transactional and not v.is_control
    assert v.size == len(first) + len(second)


def test_validate_rejects_oversized_batch_and_empty_payload() -> None:
    batch = build_batch([b"x" * 500])
    with pytest.raises(RecordTooLargeError):
        validate_for_append(batch, max_message_bytes=len(batch) - 1)
    assert validate_for_append(batch, max_message_bytes=len(batch)).record_count == 1
    with pytest.raises(InvalidRecordError):
        validate_for_append(b"", max_message_bytes=100)


def test_validate_rejects_count_that_disagrees_with_offset_delta() -> None:
    batch = bytearray(build_batch([b"a", b"b"]))
    struct.pack_into(">i", batch, 57, 3)  # recordCount, inside the CRC
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    with pytest.raises(InvalidRecordError):
        validate_for_append(batch, 10_000)


def test_assign_offsets_patches_in_place_and_keeps_crc_valid() -> None:
    buf = bytearray(build_batch([b"a", b"b"], codec="gzip") + build_batch([b"c"] * 3))
    next_offset = assign_offsets(buf, 100, leader_epoch=4)
    assert next_offset == 105
    headers = list(iter_batches(buf))  # CRC still valid: both fields are outside it
    assert [(h.base_offset, h.partition_leader_epoch) for h in headers] == [(100, 4), (102, 4)]
    assert [r[0] for r in decode(bytes(buf))] == [100, 101, 102, 103, 104]


def test_assign_offsets_with_log_append_time_recomputes_crc() -> None:
    buf = bytearray(build_batch([b"a" * 300, b"b" * 300], codec="lz4", timestamps=[1, 2]))
    assign_offsets(buf, 0, 0, log_append_time_ms=99_999)
    (header,) = iter_batches(buf)  # raises if the CRC were stale
    assert header.is_log_append_time
    assert header.max_timestamp == 99_999
    assert DefaultRecordBatch(bytes(buf)).validate_crc()
    assert [r[1] for r in decode(bytes(buf))] == [99_999, 99_999]


@pytest.mark.parametrize("codec", list(CODECS))
def test_first_record_at_or_after_inside_a_batch(codec: str) -> None:
    values = [b"a" * 300, b"b" * 300, b"c" * 300, b"d" * 300]
    buf = bytearray(build_batch(values, codec=codec, timestamps=[10, 30, 20, 40]))
    assign_offsets(buf, 50, 0)
    assert first_record_at_or_after(buf, 25) == (51, 30)
    assert first_record_at_or_after(buf, 0) == (50, 10)
    assert first_record_at_or_after(buf, 41) is None
    assert first_record_at_or_after(buf, 0, min_offset=52) == (52, 20)
    (header,) = iter_batches(buf)
    assert header.compression_codec == CODECS[codec]


def test_header_size_is_kafkas() -> None:
    assert HEADER_SIZE == 61
