"""Executor-side reading against a scripted consumer: trimming, gaps, and data loss."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import pytest
from confluent_kafka import KafkaError

from strandline.spark.offsets import OffsetRange
from strandline.spark.range_reader import DataLossError, RangeReader
from strandline.spark.schema import KAFKA_ARROW_SCHEMA


@dataclass
class FakeMessage:
    _offset: int | None
    _error: KafkaError | None = None

    def error(self) -> KafkaError | None:
        return self._error

    def offset(self) -> int | None:
        return self._offset

    def key(self) -> bytes:
        return b"k%d" % (self._offset or 0)

    def value(self) -> bytes:
        return b"v%d" % (self._offset or 0)

    def timestamp(self) -> tuple[int, int]:
        return (1, 1_700_000_000_000 + (self._offset or 0))

    def headers(self) -> None:
        return None


@dataclass
class FakeConsumer:
    """A partition holding `offsets` (possibly with gaps) from log start `low`."""

    offsets: list[int]
    low: int
    position: int = 0
    assigned: list[int] = field(default_factory=list)

    def assign(self, partitions: list[object]) -> None:
        self.position = partitions[0].offset  # type: ignore[attr-defined]
        self.assigned.append(self.position)

    def consume(self, num_messages: int, timeout: float) -> list[FakeMessage]:
        if self.position < self.low:
            return [FakeMessage(None, KafkaError(KafkaError._AUTO_OFFSET_RESET))]
        batch = [o for o in self.offsets if o >= self.position][:num_messages]
        if batch:
            self.position = batch[-1] + 1
        return [FakeMessage(o) for o in batch]

    def get_watermark_offsets(self, tp: object, timeout: float, cached: bool) -> tuple[int, int]:
        return self.low, (self.offsets[-1] + 1 if self.offsets else self.low)

    def close(self) -> None:
        pass


def read(consumer: FakeConsumer, start: int, end: int, fail: bool) -> list[int]:
    reader = RangeReader(
        {"bootstrap.servers": "unused:1"},
        OffsetRange("t", 3, start, end),
        fail_on_data_loss=fail,
        poll_timeout_ms=200,
        consumer_factory=lambda config: consumer,  # type: ignore[arg-type,return-value]
    )
    offsets: list[int] = []
    for batch in reader.batches():
        assert batch.schema.equals(KAFKA_ARROW_SCHEMA)
        assert set(batch.column("partition").to_pylist()) == {3}
        offsets.extend(batch.column("offset").to_pylist())
    return offsets


def test_reads_exactly_the_range_and_stops_at_its_end() -> None:
    consumer = FakeConsumer(offsets=list(range(100)), low=0)
    assert read(consumer, 10, 40, fail=True) == list(range(10, 40))


def test_replaying_a_range_returns_the_same_records() -> None:
    consumer = FakeConsumer(offsets=list(range(50)), low=0)
    assert read(consumer, 5, 45, fail=True) == read(consumer, 5, 45, fail=True)


def test_compaction_gaps_are_not_data_loss() -> None:
    consumer = FakeConsumer(offsets=[0, 1, 5, 6, 9], low=0)
    assert read(consumer, 0, 10, fail=True) == [0, 1, 5, 6, 9]


def test_removed_offsets_fail_the_read_with_a_clear_message() -> None:
    consumer = FakeConsumer(offsets=list(range(5, 10)), low=5)
    with pytest.raises(DataLossError, match=r"offsets \[0, 5\) were removed.*failOnDataLoss"):
        read(consumer, 0, 10, fail=True)


def test_removed_offsets_are_skipped_and_logged_when_allowed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    consumer = FakeConsumer(offsets=list(range(5, 10)), low=5)
    with caplog.at_level(logging.WARNING):
        assert read(consumer, 0, 10, fail=False) == [5, 6, 7, 8, 9]
    assert "offsets [0, 5) were removed" in caplog.text
    assert consumer.assigned == [0, 5]


def test_a_range_entirely_removed_yields_nothing_when_allowed() -> None:
    consumer = FakeConsumer(offsets=list(range(20, 30)), low=20)
    assert read(consumer, 0, 10, fail=False) == []
