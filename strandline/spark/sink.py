"""The `strandline` sink: write DataFrame rows as records, batch or streaming.

Columns as Spark's Kafka sink: `value` (required), optional `key`, `topic`,
`partition`, `headers`. The `topic` option, when set, wins over the column.
The producer is idempotent with acks=all, so retries inside one task never duplicate;
a replayed task or micro-batch does write again: at-least-once (see docs/spark.md).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from confluent_kafka import KafkaError, Message, Producer
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from strandline.spark.offset_reader import LoginWatch
from strandline.spark.options import OptionError, SinkOptions

log = logging.getLogger(__name__)

FLUSH_TIMEOUT_S = 120.0
# How often a flush stops to look for a refused login (librdkafka retries it forever).
FLUSH_CHECK_S = 1.0
# librdkafka's RD_KAFKA_PARTITION_UA: let the partitioner choose.
PARTITION_ANY = -1
SINK_COLUMNS = ("key", "value", "topic", "partition", "headers")


@dataclass
class SinkCommitMessage(WriterCommitMessage):
    records: int


def producer_config(kafka_config: dict[str, str]) -> dict[str, object]:
    return {
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 5,
        "batch.num.messages": 10_000,
        "compression.type": "none",
        # Only failures call back: a per-record Python callback would halve throughput.
        "delivery.report.only.error": True,
        **kafka_config,
    }


def check_sink_schema(schema: StructType, options: SinkOptions) -> None:
    names = set(schema.fieldNames())
    if "value" not in names:
        raise OptionError("the sink needs a 'value' column (binary or string)")
    if options.topic is None and "topic" not in names:
        raise OptionError("set the sink option 'topic' or give the DataFrame a 'topic' column")
    unknown = names - set(SINK_COLUMNS)
    if unknown:
        log.info("sink ignores columns %s", sorted(unknown))


def _as_bytes(value: object) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    raise TypeError(f"key/value must be binary or string, got {type(value).__name__}")


class _ProducingTask:
    """One Spark task's producer: produce every row, then wait for every ack."""

    def __init__(self, options: SinkOptions) -> None:
        self._options = options
        self._failures: list[str] = []
        self._login = LoginWatch()
        config = producer_config(options.kafka_config)
        config["on_delivery"] = self._on_delivery
        config["error_cb"] = self._login
        self._producer = Producer(config)

    def _on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self._failures.append(f"{msg.topic()}-{msg.partition()}: {err}")

    def _produce(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None,
        partition: int,
        headers: list[tuple[str, str | bytes | None]] | None,
    ) -> None:
        while True:
            try:
                self._producer.produce(
                    topic, value=value, key=key, partition=partition, headers=headers
                )
                return
            except BufferError:
                # The local queue is full: let librdkafka send before adding more.
                self._producer.poll(0.05)
                self._login.check()

    def write(self, batches: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        count = 0
        fixed_topic = self._options.topic
        for batch in batches:
            n = batch.num_rows
            if n == 0:
                continue
            cols = batch.schema.names
            values = batch.column("value").to_pylist()
            keys = batch.column("key").to_pylist() if "key" in cols else [None] * n
            if fixed_topic is not None:
                topics: list[str | None] = [fixed_topic] * n
            else:
                topics = batch.column("topic").to_pylist()
            parts = batch.column("partition").to_pylist() if "partition" in cols else [None] * n
            headers = batch.column("headers").to_pylist() if "headers" in cols else [None] * n
            for key, value, topic, part, hdrs in zip(
                keys, values, topics, parts, headers, strict=True
            ):
                if topic is None:
                    raise ValueError("a row has a null topic and no 'topic' option is set")
                self._produce(
                    topic,
                    _as_bytes(value),
                    _as_bytes(key),
                    PARTITION_ANY if part is None else part,
                    [(h["key"], h["value"]) for h in hdrs] if hdrs else None,
                )
            count += n
            self._producer.poll(0)
            self._login.check()
        remaining = self._flush()
        if remaining:
            raise TimeoutError(f"{remaining} records not acknowledged within {FLUSH_TIMEOUT_S}s")
        if self._failures:
            raise RuntimeError(f"{len(self._failures)} records failed, first: {self._failures[0]}")
        return SinkCommitMessage(records=count)

    def _flush(self) -> int:
        """Wait up to FLUSH_TIMEOUT_S for every ack; a refused login fails at once."""
        deadline = time.monotonic() + FLUSH_TIMEOUT_S
        while True:
            left = deadline - time.monotonic()
            remaining = int(self._producer.flush(max(0.0, min(FLUSH_CHECK_S, left))))
            self._login.check()
            if remaining == 0 or left <= FLUSH_CHECK_S:
                return remaining


class StrandlineBatchWriter(DataSourceArrowWriter):
    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        check_sink_schema(schema, options)
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        return _ProducingTask(self.options).write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        total = sum(m.records for m in messages if isinstance(m, SinkCommitMessage))
        log.info("sink wrote %d records", total)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        # Records acknowledged before the failure stay in the log: there is no undo
        # without transactions.
        log.warning("sink job aborted; records already acknowledged stay written")


class StrandlineStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        check_sink_schema(schema, options)
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        return _ProducingTask(self.options).write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        total = sum(m.records for m in messages if isinstance(m, SinkCommitMessage))
        log.info("sink micro-batch %d wrote %d records", batchId, total)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning("sink micro-batch %d aborted; a retry may write some records twice", batchId)
