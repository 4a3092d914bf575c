"""Record-level checks of a produce payload (Kafka's LogValidator)."""

from __future__ import annotations

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kio.schema.errors import ErrorCode

from strandline.protocol.record_batch import validate_for_append
from strandline.storage.config import LogConfig
from strandline.storage.record_validation import (
    RecordValidationError,
    check_and_rewrite,
    record_checks_of,
)

NOW = 1_700_000_000_000


def batch(
    keys: list[bytes | None],
    codec: int = 0,
    offsets: list[int] | None = None,
    timestamps: list[int] | None = None,
) -> bytes:
    builder = DefaultRecordBatchBuilder(2, codec, False, 7, 1, 0, 1 << 20)
    for i, key in enumerate(keys):
        offset = offsets[i] if offsets else i
        ts = timestamps[i] if timestamps else NOW
        builder.append(offset, timestamp=ts, key=key, value=b"v%d" % i, headers=[])
    return bytes(builder.build())


def run(config: LogConfig, payload: bytes) -> bytes | None:
    checks = record_checks_of(config)
    assert checks is not None
    return check_and_rewrite(
        payload, validate_for_append(payload, 1 << 20).batches, checks, NOW, "t-0"
    )


def test_defaults_ask_for_nothing() -> None:
    assert record_checks_of(LogConfig()) is None


def test_keyless_records_of_a_compacted_topic_are_named() -> None:
    config = LogConfig(cleanup_policy="delete,compact")
    with pytest.raises(RecordValidationError) as info:
        run(config, batch([b"a", None, b"c", None]))
    assert info.value.code == ErrorCode.invalid_record
    assert [i for i, _m in info.value.record_errors] == [1, 3]
    assert run(config, batch([b"a", b"", b"c"])) is None  # an empty key is a key


def test_timestamps_outside_the_window_are_invalid_timestamp() -> None:
    config = LogConfig(message_timestamp_difference_max_ms=1000)
    payload = batch([None] * 3, timestamps=[NOW, NOW - 5000, NOW + 999])
    with pytest.raises(RecordValidationError) as info:
        run(config, payload)
    assert info.value.code == ErrorCode.invalid_timestamp
    assert [i for i, _m in info.value.record_errors] == [1]
    # before/after (KIP-937) take precedence over the difference.
    config = LogConfig(
        message_timestamp_difference_max_ms=1000, message_timestamp_before_max_ms=10_000
    )
    assert run(config, payload) is None


def test_compression_type_rewrites_with_the_named_codec() -> None:
    payload = batch([b"k1", b"k2"], codec=0)
    rewritten = run(LogConfig(compression_type="gzip"), payload)
    assert rewritten is not None
    (header,) = validate_for_append(rewritten, 1 << 20).batches
    assert header.compression_codec == 1
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 1, 0)
    records = list(DefaultRecordBatch(rewritten))
    assert [(r.key, r.value) for r in records] == [(b"k1", b"v0"), (b"k2", b"v1")]
    assert run(LogConfig(compression_type="gzip"), rewritten) is None  # already gzip


def test_small_batches_are_compressed_too() -> None:
    # kafka-python's builder keeps a batch uncompressed when gzip saves nothing; Kafka
    # stores what compression.type names, whatever the size.
    rewritten = run(LogConfig(compression_type="zstd"), batch([b"k"]))
    assert rewritten is not None
    assert validate_for_append(rewritten, 1 << 20).batches[0].compression_codec == 4
    assert [r.key for r in DefaultRecordBatch(rewritten)] == [b"k"]


def test_wrong_inner_offsets_of_a_compressed_batch_are_rewritten() -> None:
    payload = batch([b"a" * 200, b"a" * 200, b"a" * 200], codec=1, offsets=[0, 2, 2])
    assert validate_for_append(payload, 1 << 20).batches[0].compression_codec == 1
    rewritten = run(LogConfig(cleanup_policy="compact"), payload)
    assert rewritten is not None
    assert [r.offset for r in DefaultRecordBatch(rewritten)] == [0, 1, 2]
