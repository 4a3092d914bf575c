"""Executor side: read one offset range of one partition into Arrow record batches.

Record batches are fetched as bytes with our own Fetch requests (`fetch_client`) and
decoded into Arrow columns without a Python object per record (`record_decoder`).
Nothing is committed anywhere, so replaying a range returns the same records.

The rules kept from Kafka's Spark source:
* a range stops exactly at `end`; batches can start before `start` (records outside
  the range are dropped);
* the wait for the next record (`kafkaConsumer.pollTimeoutMs`) restarts whenever the
  read moves on: a leader failover only pauses it (leadership errors and dropped
  connections refresh the metadata and retry after a short backoff);
* records gone from under the read (OFFSET_OUT_OF_RANGE, or a jump past a log start
  offset that moved) are data loss; a gap not below the log start offset is
  compaction, not loss.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Protocol

import pyarrow as pa

from strandline.client.fetch_client import (
    FetchedRecords,
    FetchError,
    FetchOffsetOutOfRangeError,
    PartitionClient,
    RetriableFetchError,
)
from strandline.spark.offsets import OffsetRange
from strandline.spark.options import ISOLATION_LEVEL, READ_COMMITTED
from strandline.spark.record_decoder import AbortedTransactions, decode_records

log = logging.getLogger(__name__)

RETRY_BACKOFF_S = 0.2
# How long offset look-ups (log start, high watermark) keep retrying while leadership
# moves, as the driver's look-ups do.
OFFSETS_DEADLINE_S = 30.0


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


class PartitionFetcher(Protocol):
    """What the reader needs from a client (`fetch_client.PartitionClient`)."""

    def fetch(self, offset: int) -> FetchedRecords: ...

    def list_offsets(self) -> tuple[int, int]:
        """(log start offset, end): the high watermark, or the LSO when read_committed."""
        ...

    def close(self) -> None: ...


FetcherFactory = Callable[[Mapping[str, str], str, int], PartitionFetcher]


class RangeReader:
    """Reads [start, end) of one partition; `end` is at or below the planned HW."""

    def __init__(
        self,
        kafka_config: dict[str, str],
        offset_range: OffsetRange,
        fail_on_data_loss: bool,
        poll_timeout_ms: int,
        fetcher_factory: FetcherFactory = PartitionClient,
    ) -> None:
        self._config = kafka_config
        self._fetcher_factory = fetcher_factory
        self._range = offset_range
        self._fail_on_data_loss = fail_on_data_loss
        self._poll_timeout_s = poll_timeout_ms / 1000.0
        # read_committed: the fetcher asks for committed records only (up to the LSO) and
        # we drop those of aborted transactions.
        self._read_committed = kafka_config.get(ISOLATION_LEVEL) == READ_COMMITTED

    def batches(self) -> Iterator[pa.RecordBatch]:
        r = self._range
        if r.start >= r.end:
            return
        fetcher = self._fetcher_factory(self._config, r.topic, r.partition)
        try:
            yield from self._read(fetcher, r)
        finally:
            fetcher.close()

    def _read(self, fetcher: PartitionFetcher, r: OffsetRange) -> Iterator[pa.RecordBatch]:
        next_offset = r.start
        deadline = time.monotonic() + self._poll_timeout_s
        while next_offset < r.end:
            try:
                fetched = fetcher.fetch(next_offset)
            except FetchOffsetOutOfRangeError:
                next_offset = self._skip_lost(fetcher, next_offset)
                continue
            except RetriableFetchError as exc:
                if time.monotonic() > deadline:
                    self._give_up(fetcher, next_offset)
                    return
                log.info("retrying %s-%s after %s", r.topic, r.partition, exc)
                time.sleep(RETRY_BACKOFF_S)
                continue
            aborted = (
                AbortedTransactions(fetched.aborted_transactions) if self._read_committed else None
            )
            decoded = decode_records(
                fetched.records, r.topic, r.partition, next_offset, r.end, aborted=aborted
            )
            if decoded.next_offset is None and fetched.records:
                # KIP-74 brokers always return the first batch whole, however large.
                raise FetchError(
                    f"{r.topic}-{r.partition}: no complete record batch at offset "
                    f"{next_offset} in {len(fetched.records)} bytes"
                )
            if decoded.batches:
                first = decoded.batches[0].column("offset")[0].as_py()
                if first > next_offset:
                    self._check_gap(fetcher, fetched.log_start_offset, next_offset, first)
                yield from decoded.batches
            if decoded.next_offset is not None and decoded.next_offset > next_offset:
                # Control batches and compacted-away records move us on too.
                next_offset = decoded.next_offset
                deadline = time.monotonic() + self._poll_timeout_s
            elif time.monotonic() > deadline:
                self._give_up(fetcher, next_offset)
                return

    def _offsets(self, fetcher: PartitionFetcher) -> tuple[int, int]:
        """(log start offset, high watermark), retried while leadership moves."""
        give_up = time.monotonic() + OFFSETS_DEADLINE_S
        while True:
            try:
                return fetcher.list_offsets()
            except RetriableFetchError:
                if time.monotonic() >= give_up:
                    raise
                time.sleep(RETRY_BACKOFF_S)

    def _skip_lost(self, fetcher: PartitionFetcher, next_offset: int) -> int:
        """Our offset fell out of range: the records below the log start were removed."""
        r = self._range
        low, high = self._offsets(fetcher)
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
        return resume

    def _check_gap(
        self, fetcher: PartitionFetcher, log_start: int, expected: int, got: int
    ) -> None:
        """A jump forward is loss only if the log start passed it (not compaction gaps)."""
        if log_start < 0:  # a Fetch version without the log start offset
            log_start, _ = self._offsets(fetcher)
        if log_start > expected:
            r = self._range
            report_data_loss(
                f"{r.topic}-{r.partition}: offsets [{expected}, {min(log_start, got)}) were "
                f"removed (log start offset is now {log_start})",
                self._fail_on_data_loss,
            )

    def _give_up(self, fetcher: PartitionFetcher, next_offset: int) -> None:
        r = self._range
        low, high = self._offsets(fetcher)
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
