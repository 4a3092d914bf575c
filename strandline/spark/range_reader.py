"""Executor side: read one offset range with confluent-kafka into Arrow record batches.

The consumer is assigned the exact partition and start offset (no group, no commits),
so replaying a range returns the same records. Columns are built straight from the
message fields into Arrow arrays of exactly the schema's types.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from operator import itemgetter
from typing import cast

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Consumer, KafkaError, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition

from strandline.spark.offset_reader import consumer_config, retry_transient
from strandline.spark.offsets import OffsetRange
from strandline.spark.schema import ARROW_HEADERS_TYPE, KAFKA_ARROW_SCHEMA

log = logging.getLogger(__name__)

_first, _second = itemgetter(0), itemgetter(1)
MAX_MESSAGES_PER_POLL = 20_000
POLL_SLICE_S = 0.5
# librdkafka reports the message timestamp type as 1 (CreateTime) or 2 (LogAppendTime);
# Kafka and Spark number them 0 and 1.
_LIBRDKAFKA_TS_TYPE_OFFSET = 1


class DataLossError(RuntimeError):
    """Records the query still needed are gone from the log (failOnDataLoss=true)."""


def data_loss_message(detail: str) -> str:
    return (
        f"Data loss: {detail}. Some records were removed before the query read them "
        "(retention, DeleteRecords, or the topic was recreated). If you want the query to "
        "skip the missing records and go on, set the source option 'failOnDataLoss' to 'false'."
    )


def report_data_loss(detail: str, fail_on_data_loss: bool) -> None:
    """Raise when the query must fail on loss; otherwise log what is skipped."""
    if fail_on_data_loss:
        raise DataLossError(data_loss_message(detail))
    log.warning("failOnDataLoss=false, skipping: %s", detail)


def reader_consumer_config(kafka_config: dict[str, str]) -> dict[str, object]:
    return {
        **consumer_config(kafka_config),
        # An out-of-range start must surface as an error, never as a silent jump.
        "auto.offset.reset": "error",
        "enable.partition.eof": False,
        # Large fetches: one range is read sequentially to its end.
        "fetch.max.bytes": 64 * 1024 * 1024,
        "max.partition.fetch.bytes": 16 * 1024 * 1024,
        "queued.max.messages.kbytes": 256 * 1024,
        # The user's `kafka.*` settings win over the tuning above.
        **kafka_config,
    }


def _offset(message: Message) -> int:
    # A message without an error always has an offset.
    return cast(int, message.offset())


def messages_to_batch(messages: list[Message], topic: str, partition: int) -> pa.RecordBatch:
    n = len(messages)
    timestamps = [m.timestamp() for m in messages]
    ts_ms = pa.array(list(map(_second, timestamps)), pa.int64())
    ts_types = set(map(_first, timestamps))
    if len(ts_types) == 1:
        only = ts_types.pop() - _LIBRDKAFKA_TS_TYPE_OFFSET
        ts_type = pa.repeat(pa.scalar(only, pa.int32()), n)
    else:
        ts_type = pa.array([t[0] - _LIBRDKAFKA_TS_TYPE_OFFSET for t in timestamps], pa.int32())
    headers = [m.headers() for m in messages]
    if any(headers):
        header_col = pa.array(headers, ARROW_HEADERS_TYPE)
    else:
        header_col = pa.nulls(n, ARROW_HEADERS_TYPE)
    columns = [
        pa.array([m.key() for m in messages], pa.binary()),
        pa.array([m.value() for m in messages], pa.binary()),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.array([m.offset() for m in messages], pa.int64()),
        pc.multiply(ts_ms, 1000).cast(pa.timestamp("us", tz="UTC")),
        ts_type,
        header_col,
    ]
    return pa.RecordBatch.from_arrays(columns, schema=KAFKA_ARROW_SCHEMA)


class RangeReader:
    """Reads [start, end) of one partition; `end` is at or below the planned HW."""

    def __init__(
        self,
        kafka_config: dict[str, str],
        offset_range: OffsetRange,
        fail_on_data_loss: bool,
        poll_timeout_ms: int,
        consumer_factory: Callable[[dict[str, object]], Consumer] = Consumer,
    ) -> None:
        self._config = reader_consumer_config(kafka_config)
        self._consumer_factory = consumer_factory
        self._range = offset_range
        self._fail_on_data_loss = fail_on_data_loss
        self._poll_timeout_s = poll_timeout_ms / 1000.0

    def batches(self) -> Iterator[pa.RecordBatch]:
        r = self._range
        if r.start >= r.end:
            return
        consumer = self._consumer_factory(self._config)
        try:
            yield from self._read(consumer, r)
        finally:
            consumer.close()

    def _assign(self, consumer: Consumer, offset: int) -> None:
        r = self._range
        consumer.assign([KafkaTopicPartition(r.topic, r.partition, offset)])

    def _read(self, consumer: Consumer, r: OffsetRange) -> Iterator[pa.RecordBatch]:
        next_offset = r.start
        self._assign(consumer, next_offset)
        # The deadline restarts whenever data arrives: a leader failover only pauses us.
        deadline = time.monotonic() + self._poll_timeout_s
        while next_offset < r.end:
            wanted = min(MAX_MESSAGES_PER_POLL, r.end - next_offset)
            messages = consumer.consume(num_messages=wanted, timeout=POLL_SLICE_S)
            good: list[Message] = []
            for m in messages:
                err = m.error()
                if err is None:
                    good.append(m)
                elif err.code() == KafkaError._AUTO_OFFSET_RESET:
                    next_offset = self._skip_lost(consumer, next_offset)
                    good = []
                    break
                elif not err.retriable() and err.fatal():
                    raise RuntimeError(f"reading {r.topic}-{r.partition}: {err}")
                else:
                    log.info("retrying %s-%s after %s", r.topic, r.partition, err)
            if good:
                first = _offset(good[0])
                if first > next_offset:
                    self._check_gap(consumer, next_offset, first)
                if _offset(good[-1]) >= r.end:
                    good = [m for m in good if _offset(m) < r.end]
                if good:
                    next_offset = _offset(good[-1]) + 1
                    deadline = time.monotonic() + self._poll_timeout_s
                    yield messages_to_batch(good, r.topic, r.partition)
                    continue
            if time.monotonic() > deadline:
                self._give_up(consumer, next_offset)
                return

    def _log_start(self, consumer: Consumer) -> tuple[int, int]:
        r = self._range
        low, high = retry_transient(
            lambda: consumer.get_watermark_offsets(
                KafkaTopicPartition(r.topic, r.partition), timeout=10.0, cached=False
            )
        )
        return int(low), int(high)

    def _skip_lost(self, consumer: Consumer, next_offset: int) -> int:
        """Our offset fell out of range: the records below the log start were removed."""
        r = self._range
        low, high = self._log_start(consumer)
        if next_offset < low:
            resume = min(low, r.end)
            report_data_loss(
                f"{r.topic}-{r.partition}: offsets [{next_offset}, {resume}) were removed "
                f"(log start offset is now {low})",
                self._fail_on_data_loss,
            )
        else:
            # Out of range above the HW: the log was truncated or recreated under us.
            resume = r.end
            report_data_loss(
                f"{r.topic}-{r.partition}: offsets [{next_offset}, {r.end}) are no longer "
                f"in the log (high watermark is now {high})",
                self._fail_on_data_loss,
            )
        if resume < r.end:
            self._assign(consumer, resume)
        return resume

    def _check_gap(self, consumer: Consumer, expected: int, got: int) -> None:
        """A jump forward is loss only if the log start passed it (not compaction gaps)."""
        low, _ = self._log_start(consumer)
        if low > expected:
            r = self._range
            report_data_loss(
                f"{r.topic}-{r.partition}: offsets [{expected}, {min(low, got)}) were removed "
                f"(log start offset is now {low})",
                self._fail_on_data_loss,
            )

    def _give_up(self, consumer: Consumer, next_offset: int) -> None:
        r = self._range
        low, high = self._log_start(consumer)
        if high <= next_offset or low >= r.end:
            report_data_loss(
                f"{r.topic}-{r.partition}: offsets [{next_offset}, {r.end}) are no longer in "
                f"the log (log start {low}, high watermark {high})",
                self._fail_on_data_loss,
            )
            return
        raise TimeoutError(
            f"no records from {r.topic}-{r.partition} at offset {next_offset} within "
            f"kafkaConsumer.pollTimeoutMs={int(self._poll_timeout_s * 1000)}"
        )
