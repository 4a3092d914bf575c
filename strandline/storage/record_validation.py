"""Record-level checks and rewrites of a produce payload (Kafka's LogValidator).

The leader's hot path reads batch headers only (`record_batch.validate_for_append`).
Records are decoded here, and only when a topic config asks for something headers cannot
tell: a compacted topic (every record needs a key), a bounded timestamp window
(`message.timestamp.difference.max.ms` and its 3.6+ before/after split), or a topic
`compression.type` other than the producer's codec (the batch is rewritten). A topic with
Kafka's defaults never comes here.

As in Kafka, one bad record fails its whole batch and the partition's answer lists every
bad record (`record_errors`, KIP-467): INVALID_RECORD for a missing key,
INVALID_TIMESTAMP for a timestamp out of range (any timestamp error makes the partition's
error INVALID_TIMESTAMP). A compressed batch whose inner offset deltas are not 0, 1, 2...
is not refused: Kafka rewrites it with the right ones ("some older clients do not
implement the internal offsets correctly"), and so does this, whenever it decodes it.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafka.codec import gzip_encode, lz4_encode, snappy_encode, zstd_encode
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kio.schema.errors import ErrorCode

from strandline.errors import KafkaError
from strandline.protocol.record_batch import CODEC_NAMES, BatchHeader
from strandline.storage.config import LogConfig

LONG_MAX = 2**63 - 1
NO_TIMESTAMP = -1
CODEC_BY_NAME = {name: codec for codec, name in CODEC_NAMES.items()} | {"uncompressed": 0}
# compression.type "producer": keep the producer's codec.
PRODUCER = "producer"
_MAX_SHOWN = 3  # record errors named in the partition's error_message, as Kafka


class RecordValidationError(KafkaError):
    """A batch refused for its records: `record_errors` is [(index in its batch, message)]."""

    def __init__(
        self, message: str, code: ErrorCode, record_errors: list[tuple[int, str | None]]
    ) -> None:
        super().__init__(message, code)
        self.record_errors = record_errors


@dataclass(frozen=True, slots=True)
class RecordChecks:
    compacted: bool
    before_max_ms: int  # LONG_MAX: unbounded
    after_max_ms: int
    create_time: bool  # the topic's message.timestamp.type is CreateTime
    target_codec: int | None  # None: keep the producer's codec

    @property
    def timestamps_bounded(self) -> bool:
        return self.create_time and (
            self.before_max_ms != LONG_MAX or self.after_max_ms != LONG_MAX
        )

    def wanted(self, batches: list[BatchHeader]) -> bool:
        """Whether any batch must be decoded: cheap, from the config and headers only."""
        if self.compacted or self.timestamps_bounded:
            return True
        target = self.target_codec
        return target is not None and any(
            not b.is_control and b.compression_codec != target for b in batches
        )


def record_checks_of(config: LogConfig) -> RecordChecks | None:
    """What a topic's config asks of each record; None when nothing (Kafka's defaults)."""
    codec = None if config.compression_type == PRODUCER else CODEC_BY_NAME[config.compression_type]
    checks = RecordChecks(
        compacted=config.compact_enabled,
        before_max_ms=config.timestamp_before_max_ms,
        after_max_ms=config.timestamp_after_max_ms,
        create_time=not config.log_append_time,
        target_codec=codec,
    )
    if not (checks.compacted or checks.timestamps_bounded or codec is not None):
        return None
    return checks


def check_and_rewrite(
    buf: bytes | bytearray | memoryview,
    batches: list[BatchHeader],
    checks: RecordChecks,
    now_ms: int,
    topic_partition: object,
) -> bytes | None:
    """Validate every record of `batches` (all of `buf`); the payload rewritten (new
    codec, or inner offsets put right), or None when it is to be appended as it is.
    Raises RecordValidationError for the first batch with a bad record."""
    rewritten: list[bytes] = []
    changed = False
    for header in batches:
        raw = bytes(buf[header.position : header.position + header.size])
        if header.is_control:  # the broker writes control batches; nothing to check
            rewritten.append(raw)
            continue
        decoded = DefaultRecordBatch(raw)
        records = list(decoded)
        errors: list[tuple[ErrorCode, int, str]] = []
        offsets_ok = True
        for index, record in enumerate(records):
            if record.offset - header.base_offset != index:
                offsets_ok = False
            if checks.compacted and record.key is None:
                errors.append(
                    (
                        ErrorCode.invalid_record,
                        index,
                        "Compacted topic cannot accept message without key in topic "
                        f"partition {topic_partition}.",
                    )
                )
                continue
            ts = record.timestamp
            if checks.create_time and ts != NO_TIMESTAMP:
                diff = now_ms - ts
                if diff > checks.before_max_ms or -diff > checks.after_max_ms:
                    low = now_ms - checks.before_max_ms
                    high = now_ms + checks.after_max_ms
                    errors.append(
                        (
                            ErrorCode.invalid_timestamp,
                            index,
                            f"Timestamp {ts} of message with offset {record.offset} is out of "
                            f"range. The timestamp should be within [{low}, {high}]",
                        )
                    )
        if errors:
            _raise(errors)
        target = checks.target_codec
        recompress = target is not None and header.compression_codec != target
        if not recompress and (offsets_ok or header.compression_codec == 0):
            # An uncompressed batch's inner offsets are only deltas Kafka keeps as sent.
            rewritten.append(raw)
            continue
        codec = header.compression_codec if target is None else target
        rewritten.append(_rebuild(header, records, codec))
        changed = True
    return b"".join(rewritten) if changed else None


class _Builder(DefaultRecordBatchBuilder):  # type: ignore[misc]
    """kafka-python's builder, compressing even when that saves nothing: it would fall
    back to an uncompressed batch, and Kafka stores what compression.type names."""

    def _maybe_compress(self) -> bool:
        if self._compression_type == self.CODEC_NONE:
            return False
        self._assert_has_codec(self._compression_type)
        header_size = self.HEADER_STRUCT.size
        data = bytes(self._buffer[header_size:])
        compressed = _COMPRESSORS[self._compression_type](data)
        del self._buffer[header_size:]
        self._buffer += compressed
        return True


_COMPRESSORS = {1: gzip_encode, 2: snappy_encode, 3: lz4_encode, 4: zstd_encode}


def _rebuild(header: BatchHeader, records: list, codec: int) -> bytes:  # type: ignore[type-arg]
    builder = _Builder(
        magic=2,
        compression_type=codec,
        is_transactional=header.is_transactional,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        batch_size=2**31 - 1,
    )
    for index, record in enumerate(records):
        builder.append(index, record.timestamp, record.key, record.value, list(record.headers))
    out = bytes(builder.build())
    # The builder writes offset 0 and epoch -1 (assign_offsets patches both, outside the CRC).
    return out


def _raise(errors: list[tuple[ErrorCode, int, str]]) -> None:
    record_errors: list[tuple[int, str | None]] = [(i, m) for _c, i, m in errors]
    if any(code == ErrorCode.invalid_timestamp for code, _i, _m in errors):
        raise RecordValidationError(
            "One or more records have been rejected due to invalid timestamp",
            ErrorCode.invalid_timestamp,
            record_errors,
        )
    shown = ", ".join(
        f"RecordError(batchIndex={i}, message='{m}')" for i, m in record_errors[:_MAX_SHOWN]
    )
    raise RecordValidationError(
        f"One or more records have been rejected due to {len(errors)} record errors in total, "
        f"and only showing the first three errors at most: [{shown}]",
        ErrorCode.invalid_record,
        record_errors,
    )
