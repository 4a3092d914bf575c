"""The `strandline` sink: write DataFrame rows as records, batch or streaming.

Columns as Spark's Kafka sink: `value` (required), optional `key`, `topic`,
`partition`, `headers`. The `topic` option, when set, wins over the column. Keyed rows
without a `partition` go where a Java producer (and Spark's Kafka sink) puts them:
murmur2(key) % partitions, Kafka's default partitioner.

By default the producer is idempotent with acks=all, so retries inside one task never
duplicate; a replayed task or micro-batch does write again: at-least-once.

`exactlyOnce=true`: each Spark task of micro-batch B writes its rows in one Kafka
transaction, with transactional id `<prefix>-<task partition>`, and commits in that same
transaction the offset B+1 of consumer group `<prefix>-<task partition>` on
(`topic`, 0) — a marker saying "this task's share of batch B is written". A replayed
task (the driver died before Spark recorded the batch, or a task is retried) first calls
init_transactions(), which fences any older producer with that id and ends its open
transaction, then reads the marker (OffsetFetch with require_stable) and writes nothing
if it is already past B. Readers must read read_committed. This relies on Spark
replaying a batch with the same rows in the same task partitions, which it does for
deterministic queries over replayable sources such as ours (see docs/spark.md).
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from strandline.spark.offset_reader import LoginWatch
from strandline.spark.options import OptionError, SinkOptions

log = logging.getLogger(__name__)
T = TypeVar("T")

FLUSH_TIMEOUT_S = 120.0
# How often a flush stops to look for a refused login (librdkafka retries it forever).
FLUSH_CHECK_S = 1.0
# librdkafka's RD_KAFKA_PARTITION_UA: let the partitioner choose.
PARTITION_ANY = -1
SINK_COLUMNS = ("key", "value", "topic", "partition", "headers")


# How long transactional calls (init, send offsets, commit) may take, failovers included.
TXN_TIMEOUT_S = 120.0
# Spark's local property holding the micro-batch id, set for every job of a batch
# (the streaming write's and those inside foreachBatch).
BATCH_ID_PROPERTY = "streaming.sql.batchId"
# The query's id, stable across restarts from the same checkpoint.
QUERY_ID_PROPERTY = "sql.streaming.queryId"
# Offsets for the consumer-group markers; librdkafka's "no committed offset" is -1001.
MARKER_PARTITION = 0


@dataclass
class SinkCommitMessage(WriterCommitMessage):
    records: int
    # exactlyOnce: this task found its share of the batch already committed.
    skipped: bool = False


def producer_config(kafka_config: dict[str, str]) -> dict[str, object]:
    return {
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 5,
        "batch.num.messages": 10_000,
        "compression.type": "none",
        # Kafka's default partitioner (Java producer, Spark's Kafka sink) for keyed
        # records: murmur2(key) & 0x7fffffff % partitions; null keys go to a random one.
        "partitioner": "murmur2_random",
        # Only failures call back: a per-record Python callback would halve throughput.
        "delivery.report.only.error": True,
        **kafka_config,
    }


def transactional_id(prefix: str, task_partition: int) -> str:
    """The transactional id, and marker consumer group, of one task partition."""
    return f"{prefix}-{task_partition}"


class MarkerAheadError(RuntimeError):
    """The marker is past the batch after this one: it belongs to another query."""


def already_written(committed_offset: int, batch_id: int) -> bool:
    """The marker offset is the next batch to write: batch B is done once it is > B.

    Spark replays only the last batch it did not record, so a marker can be at most
    B+1; further ahead, the prefix was used by another query (e.g. the same
    `transactionalIdPrefix` with a new checkpoint, whose batch ids start again at 0),
    and skipping would drop this query's rows: refuse instead."""
    if committed_offset > batch_id + 1:
        raise MarkerAheadError(
            f"the exactly-once marker says micro-batch {committed_offset - 1} was written, "
            f"but this query is at micro-batch {batch_id}: is 'transactionalIdPrefix' "
            "shared with another query or an older checkpoint? Use a new prefix."
        )
    return committed_offset > batch_id


@dataclass(frozen=True)
class TaskIdentity:
    """Where an exactly-once task is: its micro-batch and its transactional prefix."""

    batch_id: int
    prefix: str
    task_partition: int


def task_identity(options: SinkOptions) -> TaskIdentity:
    """Read inside a task: the micro-batch id and query id Spark sets as local
    properties, unless the options give them."""
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        raise RuntimeError("the exactly-once sink writes only inside a Spark task")
    batch_id = options.batch_id
    if batch_id is None:
        prop = context.getLocalProperty(BATCH_ID_PROPERTY)
        if prop is None:
            raise OptionError(
                "option 'exactlyOnce' needs a micro-batch id: write from a streaming query "
                "(writeStream or foreachBatch), or set the option 'batchId'"
            )
        batch_id = int(prop)
    prefix = options.transactional_id_prefix
    if prefix is None:
        # A streaming write has one sink per query: the query id (kept in the
        # checkpoint) names it. Batch writes require the option (StrandlineBatchWriter).
        query_id = context.getLocalProperty(QUERY_ID_PROPERTY)
        if query_id is None:
            raise OptionError("option 'exactlyOnce' needs 'transactionalIdPrefix' here")
        prefix = f"strandline-spark-{query_id}"
    return TaskIdentity(batch_id, prefix, context.partitionId())


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

    def __init__(self, options: SinkOptions, extra: dict[str, object] | None = None) -> None:
        self._options = options
        self._failures: list[str] = []
        self._login = LoginWatch()
        config = producer_config(options.kafka_config)
        config.update(extra or {})
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
        count = self._produce_all(batches)
        remaining = self._flush()
        if remaining:
            raise TimeoutError(f"{remaining} records not acknowledged within {FLUSH_TIMEOUT_S}s")
        self._check_failures()
        return SinkCommitMessage(records=count)

    def _check_failures(self) -> None:
        if self._failures:
            raise RuntimeError(f"{len(self._failures)} records failed, first: {self._failures[0]}")

    def _produce_all(self, batches: Iterator[pa.RecordBatch]) -> int:
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
                if self._options.row_delay_ms:
                    self._producer.poll(self._options.row_delay_ms / 1000)
            count += n
            self._producer.poll(0)
            self._login.check()
        return count

    def _flush(self) -> int:
        """Wait up to FLUSH_TIMEOUT_S for every ack; a refused login fails at once."""
        deadline = time.monotonic() + FLUSH_TIMEOUT_S
        while True:
            left = deadline - time.monotonic()
            remaining = int(self._producer.flush(max(0.0, min(FLUSH_CHECK_S, left))))
            self._login.check()
            if remaining == 0 or left <= FLUSH_CHECK_S:
                return remaining


def _drain(batches: Iterator[pa.RecordBatch]) -> None:
    for _ in batches:  # Spark streams the task's input to us: read it to the end
        pass


def _kafka_error(exc: KafkaException) -> KafkaError | None:
    error = exc.args[0] if exc.args else None
    return error if isinstance(error, KafkaError) else None


class _TransactionalTask(_ProducingTask):
    """One Spark task of an exactly-once write: one transaction, or nothing when the
    marker says this task's share of the batch is already in the log."""

    def __init__(self, options: SinkOptions, identity: TaskIdentity) -> None:
        self._identity = identity
        self._id = transactional_id(identity.prefix, identity.task_partition)
        super().__init__(options, {"transactional.id": self._id})
        assert options.topic is not None  # SinkOptions.parse requires it
        self._marker = KafkaTopicPartition(options.topic, MARKER_PARTITION)

    def write(self, batches: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        producer = self._producer
        consumer = Consumer(
            {
                **self._options.kafka_config,
                "group.id": self._id,
                "enable.auto.commit": False,
                # read_committed: OffsetFetch asks require_stable, so a marker of a
                # transaction still being completed is waited for, never missed.
                "isolation.level": "read_committed",
                "error_cb": self._login,
            }
        )
        try:
            # Fences every older producer with this id and completes or aborts its
            # transaction: after this, the marker is final.
            self._call(lambda: producer.init_transactions(TXN_TIMEOUT_S))
            done = self._call(
                lambda: consumer.committed([self._marker], timeout=TXN_TIMEOUT_S)[0].offset
            )
            batch_id = self._identity.batch_id
            if already_written(done, batch_id):
                log.info("%s: batch %d already written (marker %d)", self._id, batch_id, done)
                _drain(batches)
                return SinkCommitMessage(records=0, skipped=True)
            producer.begin_transaction()
            try:
                count = self._produce_all(batches)
                offsets = [
                    KafkaTopicPartition(self._marker.topic, self._marker.partition, batch_id + 1)
                ]
                self._call(
                    lambda: producer.send_offsets_to_transaction(
                        offsets, consumer.consumer_group_metadata(), TXN_TIMEOUT_S
                    )
                )
                self._call(lambda: producer.commit_transaction(TXN_TIMEOUT_S))
            except BaseException:
                self._abort()
                raise
            self._check_failures()
            return SinkCommitMessage(records=count)
        finally:
            consumer.close()

    def _abort(self) -> None:
        """Abort the open transaction, if the producer still can (after a fatal error,
        such as being fenced, it cannot: the next init_transactions ends it)."""
        try:
            self._producer.abort_transaction(TXN_TIMEOUT_S)
        except KafkaException as exc:
            log.warning("%s: could not abort the transaction: %s", self._id, exc)

    def _call(self, call: Callable[[], T]) -> T:
        """Run a transactional call, repeating it while librdkafka says it is retriable
        (a coordinator moving); a refused login fails at once."""
        deadline = time.monotonic() + TXN_TIMEOUT_S
        while True:
            try:
                return call()
            except KafkaException as exc:
                self._login.check()
                error = _kafka_error(exc)
                if error is None or not error.retriable() or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)


def _write_task(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
    if not options.exactly_once:
        return _ProducingTask(options).write(batches)
    identity = task_identity(options)
    first = next((b for b in batches if b.num_rows), None)
    if first is None:
        # Nothing to write in this task: no producer, no transaction, no marker. Its
        # replay (the same rows in the same task, by assumption) has nothing either.
        return SinkCommitMessage(records=0)
    return _TransactionalTask(options, identity).write(itertools.chain([first], batches))


def _summary(messages: list[WriterCommitMessage | None]) -> tuple[int, int]:
    done = [m for m in messages if isinstance(m, SinkCommitMessage)]
    return sum(m.records for m in done), sum(1 for m in done if m.skipped)


class StrandlineBatchWriter(DataSourceArrowWriter):
    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        check_sink_schema(schema, options)
        if options.exactly_once and options.transactional_id_prefix is None:
            # Inside foreachBatch a function may write several DataFrames per batch:
            # each needs its own prefix, or the second would find the first's marker.
            raise OptionError(
                "option 'exactlyOnce' on a batch write (e.g. inside foreachBatch) needs "
                "'transactionalIdPrefix', distinct for each write of a micro-batch and "
                "stable across restarts"
            )
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        return _write_task(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        total, skipped = _summary(messages)
        log.info("sink wrote %d records (%d tasks had already written theirs)", total, skipped)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        # Records acknowledged before the failure stay in the log: there is no undo
        # without transactions (exactlyOnce: committed tasks are skipped on replay).
        log.warning("sink job aborted; records already acknowledged stay written")


class StrandlineStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        check_sink_schema(schema, options)
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        return _write_task(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        total, skipped = _summary(messages)
        log.info("sink micro-batch %d wrote %d records (%d tasks skipped)", batchId, total, skipped)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.options.exactly_once:
            log.warning("sink micro-batch %d aborted; its replay skips committed tasks", batchId)
        else:
            log.warning(
                "sink micro-batch %d aborted; a retry may write some records twice", batchId
            )
