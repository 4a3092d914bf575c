"""Executor-side reading against a scripted partition serving real record batches:
trimming, gaps, control batches, retries and data loss."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import pytest

from strandline.client.fetch_client import (
    FetchedRecords,
    FetchOffsetOutOfRangeError,
    RetriableFetchError,
)
from strandline.spark import range_reader
from strandline.spark.offsets import OffsetRange
from strandline.spark.range_reader import DataLossError, RangeReader
from strandline.spark.record_decoder import CONTROL_BIT
from strandline.spark.schema import KAFKA_ARROW_SCHEMA

from .record_batches import LZ4, T0, build_batch, patch_batch

BATCH = 4  # records per batch: ranges start and end inside batches


@dataclass
class FakePartition:
    """A partition holding `offsets` (possibly with gaps) from log start `low`, served in
    batches of BATCH records like a broker: a fetch returns whole batches, the first
    one containing the fetch offset. `failures` are raised by the next fetches first."""

    offsets: list[int]
    low: int
    per_fetch: int = 2
    control_at: int | None = None
    failures: list[Exception] = field(default_factory=list)
    fetched_at: list[int] = field(default_factory=list)
    # A broker whose log start moved between the planning and the fetch.
    out_of_range_below_low: bool = True

    @property
    def high(self) -> int:
        last = max([*self.offsets, self.control_at or -1], default=self.low - 1)
        return last + 1

    def _batches(self) -> list[tuple[int, int, bytes]]:
        out = []
        for i in range(0, len(self.offsets), BATCH):
            chunk = self.offsets[i : i + BATCH]
            base = chunk[0]
            records = [(T0 + o, b"k%d" % o, b"v%d" % o, [("n", b"%d" % o)]) for o in chunk]
            data = build_batch(records, LZ4, base, [o - base for o in chunk])
            out.append((base, chunk[-1], data))
        if self.control_at is not None:
            marker = build_batch([(T0, b"\0\0\0\0", b"", [])], base_offset=self.control_at)
            out.append(
                (self.control_at, self.control_at, patch_batch(marker, set_bits=CONTROL_BIT))
            )
        return out

    def fetch(self, offset: int) -> FetchedRecords:
        self.fetched_at.append(offset)
        if self.failures:
            raise self.failures.pop(0)
        if (offset < self.low and self.out_of_range_below_low) or offset > self.high:
            raise FetchOffsetOutOfRangeError(f"offset {offset}")
        batches = [data for _, last, data in self._batches() if last >= offset]
        return FetchedRecords(b"".join(batches[: self.per_fetch]), self.high, self.low)

    def list_offsets(self) -> tuple[int, int]:
        return self.low, self.high

    def close(self) -> None:
        pass


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(range_reader, "RETRY_BACKOFF_S", 0.0)


def read(
    partition: FakePartition, start: int, end: int, fail: bool, timeout_ms: int = 200
) -> list[int]:
    reader = RangeReader(
        {"bootstrap.servers": "unused:1"},
        OffsetRange("t", 3, start, end),
        fail_on_data_loss=fail,
        poll_timeout_ms=timeout_ms,
        fetcher_factory=lambda config, topic, p: partition,
    )
    offsets: list[int] = []
    for batch in reader.batches():
        assert batch.schema.equals(KAFKA_ARROW_SCHEMA)
        assert set(batch.column("partition").to_pylist()) == {3}
        assert set(batch.column("topic").to_pylist()) == {"t"}
        for row in batch.select(["key", "value", "offset", "headers"]).to_pylist():
            o = row["offset"]
            assert (row["key"], row["value"]) == (b"k%d" % o, b"v%d" % o)
            assert row["headers"] == [{"key": "n", "value": b"%d" % o}]
        offsets.extend(batch.column("offset").to_pylist())
    return offsets


def test_reads_exactly_the_range_and_stops_at_its_end() -> None:
    partition = FakePartition(offsets=list(range(100)), low=0)
    assert read(partition, 10, 41, fail=True) == list(range(10, 41))
    # Batches hold 4 records: the first fetch starts inside one, the last ends inside one.
    assert partition.fetched_at == [10, 16, 24, 32, 40]


def test_replaying_a_range_returns_the_same_records() -> None:
    partition = FakePartition(offsets=list(range(50)), low=0)
    assert read(partition, 5, 45, fail=True) == read(partition, 5, 45, fail=True)


def test_compaction_gaps_are_not_data_loss() -> None:
    partition = FakePartition(offsets=[0, 1, 5, 6, 9, 20, 21, 30], low=0)
    assert read(partition, 0, 31, fail=True) == [0, 1, 5, 6, 9, 20, 21, 30]
    assert read(partition, 2, 25, fail=True) == [5, 6, 9, 20, 21]


def test_a_control_batch_at_the_end_of_the_range_ends_the_read() -> None:
    # Transaction marker at 10 = end - 1: nothing to yield there, and no waiting for it.
    partition = FakePartition(offsets=list(range(10)), low=0, control_at=10)
    assert read(partition, 0, 11, fail=True, timeout_ms=60_000) == list(range(10))


def test_removed_offsets_fail_the_read_with_a_clear_message() -> None:
    partition = FakePartition(offsets=list(range(5, 10)), low=5)
    with pytest.raises(DataLossError, match=r"offsets \[0, 5\) were removed.*failOnDataLoss"):
        read(partition, 0, 10, fail=True)


def test_removed_offsets_are_skipped_and_logged_when_allowed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    partition = FakePartition(offsets=list(range(5, 10)), low=5)
    with caplog.at_level(logging.WARNING):
        assert read(partition, 0, 10, fail=False) == [5, 6, 7, 8, 9]
    assert "offsets [0, 5) were removed" in caplog.text
    assert partition.fetched_at == [0, 5]


def test_a_range_entirely_removed_yields_nothing_when_allowed() -> None:
    partition = FakePartition(offsets=list(range(20, 30)), low=20)
    assert read(partition, 0, 10, fail=False) == []


def test_a_jump_past_a_moved_log_start_is_data_loss() -> None:
    # The log start moved to 8 under us; this broker answers from there instead of
    # OFFSET_OUT_OF_RANGE. The jump is below the log start: loss, not compaction.
    partition = FakePartition(offsets=list(range(8, 16)), low=8, out_of_range_below_low=False)
    with pytest.raises(DataLossError, match=r"offsets \[2, 8\) were removed"):
        read(partition, 2, 16, fail=True)
    assert read(partition, 2, 16, fail=False) == list(range(8, 16))


def test_leadership_errors_are_retried_until_records_arrive() -> None:
    partition = FakePartition(
        offsets=list(range(20)),
        low=0,
        failures=[RetriableFetchError("NOT_LEADER_OR_FOLLOWER"), ConnectionErrorLike()],
    )
    assert read(partition, 0, 20, fail=True, timeout_ms=5_000) == list(range(20))
    assert partition.fetched_at[:3] == [0, 0, 0]


class ConnectionErrorLike(RetriableFetchError):
    """What the client raises when the leader's socket dies."""


def test_the_wait_gives_up_after_the_poll_timeout() -> None:
    partition = FakePartition(
        offsets=list(range(20)), low=0, failures=[RetriableFetchError("down")] * 10**6
    )
    with pytest.raises(
        TimeoutError, match=r"t-3 at offset 0 within kafkaConsumer.pollTimeoutMs=50"
    ):
        read(partition, 0, 20, fail=True, timeout_ms=50)


def test_records_that_never_come_past_a_lower_high_watermark_are_data_loss() -> None:
    # The range was planned up to 30, but the log now ends at 20 (recreated topic).
    partition = FakePartition(offsets=list(range(20)), low=0)
    with pytest.raises(DataLossError, match=r"offsets \[20, 30\) are no longer in the log"):
        read(partition, 0, 30, fail=True, timeout_ms=50)
