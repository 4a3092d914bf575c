"""The `strandline` data source: batch and streaming readers, and the sink hooks.

Planning runs on the driver (OffsetReader asks the cluster, offsets.py decides);
reading runs in executors (RangeReader). Readers and partitions are pickled to the
executors, so they hold only plain data; clients are opened inside `read()`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from strandline.spark.offset_reader import OffsetReader
from strandline.spark.offsets import (
    JsonOffsets,
    OffsetRange,
    PartitionOffsets,
    from_json,
    plan_ranges,
    rate_limit,
    resolve_spec,
    split_ranges,
    to_json,
)
from strandline.spark.options import EARLIEST, LATEST, SinkOptions, SourceOptions
from strandline.spark.range_reader import RangeReader, report_data_loss
from strandline.spark.schema import KAFKA_SCHEMA
from strandline.spark.sink import StrandlineBatchWriter, StrandlineStreamWriter
from strandline.types import TopicPartition

log = logging.getLogger(__name__)


class OffsetRangePartition(InputPartition):
    def __init__(self, offset_range: OffsetRange) -> None:
        super().__init__(offset_range)
        self.offset_range = offset_range


def _read_partition(options: SourceOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    assert isinstance(partition, OffsetRangePartition)
    reader = RangeReader(
        options.kafka_config,
        partition.offset_range,
        options.fail_on_data_loss,
        options.poll_timeout_ms,
    )
    return reader.batches()


def _input_partitions(options: SourceOptions, ranges: list[OffsetRange]) -> list[InputPartition]:
    pieces = split_ranges(ranges, options.min_partitions, options.max_records_per_partition)
    return [OffsetRangePartition(r) for r in pieces]


def _starting_offsets(
    options: SourceOptions,
    offset_reader: OffsetReader,
    tps: list[TopicPartition],
    earliest: PartitionOffsets,
    latest: PartitionOffsets,
    default: int,
) -> PartitionOffsets:
    start = resolve_spec(options.starting_offsets, tps, earliest, latest, default)
    if options.starting_timestamps:
        wanted = {tp: ms for tp, ms in options.starting_timestamps.items() if tp in latest}
        for tp, offset in offset_reader.offsets_for_times(wanted).items():
            # No record at or after that time yet: start at the end, as Kafka answers -1.
            start[tp] = latest[tp] if offset < 0 else offset
    return start


def _report(losses: list[str], options: SourceOptions) -> None:
    for detail in losses:
        report_data_loss(detail, options.fail_on_data_loss)


class StrandlineBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        offset_reader = OffsetReader(self.options)
        try:
            tps = offset_reader.partitions()
            earliest, latest = offset_reader.watermarks(tps)
            start = _starting_offsets(self.options, offset_reader, tps, earliest, latest, EARLIEST)
        finally:
            offset_reader.close()
        end = resolve_spec(self.options.ending_offsets, tps, earliest, latest, LATEST)
        # An explicit ending offset past the HW would wait for records that may never come.
        end = {tp: min(offset, latest[tp]) for tp, offset in end.items()}
        plan = plan_ranges(start, end, earliest)
        _report(plan.data_loss, self.options)
        return _input_partitions(self.options, plan.ranges)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read_partition(self.options, partition)


class StrandlineStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader; its offsets are the checkpoint's `{"topic": {"p": next}}`."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._offset_reader = OffsetReader(options)
        # Trigger.AvailableNow: the latest offsets when the query began; never read past.
        self._available_now_target: PartitionOffsets | None = None

    def _snapshot(self) -> tuple[PartitionOffsets, PartitionOffsets]:
        tps = self._offset_reader.partitions()
        return self._offset_reader.watermarks(tps)

    def initialOffset(self) -> JsonOffsets:
        tps = self._offset_reader.partitions()
        earliest, latest = self._offset_reader.watermarks(tps)
        start = _starting_offsets(self.options, self._offset_reader, tps, earliest, latest, LATEST)
        return to_json(start)

    def prepareForTriggerAvailableNow(self) -> None:
        _, latest = self._snapshot()
        self._available_now_target = latest

    def latestOffset(self, start: JsonOffsets, limit: ReadLimit) -> JsonOffsets:
        earliest, latest = self._snapshot()
        if self._available_now_target is not None:
            target = self._available_now_target
            latest = {tp: min(off, target[tp]) for tp, off in latest.items() if tp in target}
        begin = from_json(start)
        if isinstance(limit, ReadMaxRows):
            end = rate_limit(begin, latest, earliest, limit.max_rows)
        else:
            end = dict(latest)
        # Never move a partition backwards: a new leader's HW can briefly lag the old
        # one's after a failover, and that is not data loss.
        for tp, position in begin.items():
            if tp in end and end[tp] < position:
                log.warning("%s: high watermark %d is below position %d", tp, end[tp], position)
                end[tp] = position
        return to_json(end)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def reportLatestOffset(self) -> JsonOffsets | None:
        _, latest = self._snapshot()
        return to_json(latest)

    def partitions(self, start: JsonOffsets, end: JsonOffsets) -> Sequence[InputPartition]:
        begin, stop = from_json(start), from_json(end)
        tps = set(begin) | set(stop)
        earliest, _ = self._offset_reader.watermarks(tps)
        plan = plan_ranges(begin, stop, earliest)
        _report(plan.data_loss, self.options)
        return _input_partitions(self.options, plan.ranges)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read_partition(self.options, partition)

    def commit(self, end: JsonOffsets) -> None:
        # Nothing to do: Spark's checkpoint, not a consumer group, is the source of truth.
        pass

    def stop(self) -> None:
        self._offset_reader.close()


class StrandlineDataSource(DataSource):
    """`format("strandline")`: Kafka-compatible topics as DataFrames, read and written."""

    @classmethod
    def name(cls) -> str:
        return "strandline"

    def schema(self) -> StructType:
        return KAFKA_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return StrandlineBatchReader(SourceOptions.parse(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return StrandlineStreamReader(SourceOptions.parse(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return StrandlineBatchWriter(SinkOptions.parse(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return StrandlineStreamWriter(SinkOptions.parse(self.options), schema)
