"""A partition's log: an ordered list of segments in `<log.dir>/<topic>-<partition>/`.

The Log assigns offsets (leader) or keeps them (follower), rolls segments by size, age
and index capacity, flushes by `flush.messages` / `flush.ms`, applies retention by whole
segments, truncates for followers, and on open recovers the segments after the
recovery point (CRC32C check of every batch, torn tail cut, indexes rebuilt).

It also keeps the idempotent-producer state (`producer_state`), as Kafka's Log does:
checked before a leader append, replayed from batch headers on a follower append, and
snapshotted to `<offset>.snapshot` (offset = the log end offset it covers) on every roll
and on close. Opening or truncating reloads the newest snapshot at or below the log end
offset and replays the batch headers after it.

Transactions (KIP-98): the producer state tracks open transactions, from which the last
stable offset follows (`last_stable_offset(hw)`). A transaction marker (control batch)
appended here, by the leader (coordinator origin only) or by a follower, that aborts a
transaction adds an entry to its segment's `.txnindex`; recovery rebuilds those of the
recovered segments from the producer state, and `collect_aborted_transactions` answers
read_committed fetches from them.

The Log holds the state (segments, offsets, caches) and the order of every step; each
policy or file format it applies lives beside it, as pure functions or small
collaborators given what they need:

- `log_loader`: cleaning the dir, CRC recovery of segments, `partition.metadata`;
- `leader_epoch_checkpoint`: the `leader-epoch-checkpoint` file, synced lazily;
- `log_producer_state`: producer checks before a leader append, state updates after
  any append, `.snapshot` files, reload on open and truncation;
- `roll_policy`: when the active segment rolls;
- `log_retention`: which old segments retention and DeleteRecords delete;
- `log_compaction`: the cleaning plan and installing cleaned segments (`cleaner` does
  the work);
- `atomic_file`: the crash guarantees of each kind of file write.
"""

from __future__ import annotations

import bisect
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Generic, TypeVar

from strandline.errors import (
    InconsistentTopicIdError,
    InvalidRecordError,
    OffsetOutOfRangeError,
    StorageError,
)
from strandline.protocol.control_batch import EndTransactionMarker, NotAMarkerError, read_marker
from strandline.protocol.file_region import MIN_REGION_BYTES, Records
from strandline.protocol.record_batch import (
    BatchHeader,
    assign_offsets,
    iter_batches,
    validate_for_append,
)
from strandline.storage.atomic_file import fsync_dir, write_atomically
from strandline.storage.checkpoint import PARTITION_METADATA, render_partition_metadata
from strandline.storage.cleaner import CleanedSegment, CleaningPlan
from strandline.storage.cleaner import clean as clean_segments
from strandline.storage.config import LONG_MAX, LogConfig
from strandline.storage.disk import DEFAULT_WRITER
from strandline.storage.index import Writer
from strandline.storage.leader_epoch_cache import LeaderEpochCache
from strandline.storage.leader_epoch_checkpoint import (
    LeaderEpochCheckpointFile,
    load_leader_epoch_cache,
)
from strandline.storage.log_compaction import cleaning_plan, install_cleaned
from strandline.storage.log_loader import clean_directory, read_topic_id, recover_segments
from strandline.storage.log_producer_state import (
    AppendOrigin,
    ProducerSnapshots,
    aborted_txn,
    check_producers,
    load_producer_state,
    record_producers,
    record_replicated_producers,
)
from strandline.storage.log_retention import due_below_start, due_by_size, due_by_time
from strandline.storage.producer_state import ProducerStateManager
from strandline.storage.record_validation import check_and_rewrite, record_checks_of
from strandline.storage.roll_policy import roll_due_ms, should_roll, time_to_roll
from strandline.storage.segment import LOG_SUFFIX, LogSegment, SegmentRead
from strandline.storage.txn_index import AbortedTxn
from strandline.types import TopicPartition

logger = logging.getLogger(__name__)

R = TypeVar("R", bound=Records, covariant=True)
T = TypeVar("T", bound=Records)


class UnexpectedAppendOffsetError(InvalidRecordError):
    """A follower append whose first offset is below the log end offset."""


# Not frozen: a frozen dataclass's __init__ costs ~2 us (object.__setattr__ per
# field), paid for every batch appended or read.
@dataclass(slots=True)
class AppendInfo:
    first_offset: int
    last_offset: int
    log_append_time_ms: int  # -1 for CreateTime topics
    record_count: int
    max_timestamp: int
    size: int = 0
    # A retry of a batch already in the log: nothing was appended and the offsets are
    # the original batch's (Kafka answers NONE with them, not DUPLICATE_SEQUENCE_NUMBER).
    duplicate: bool = False


# Not frozen: a frozen dataclass's __init__ costs ~2 us (object.__setattr__ per
# field), paid for every batch appended or read.
@dataclass(slots=True)
class FetchSlice(Generic[R]):
    """Whole batches read from one segment, as file bytes (or a region of the file)."""

    records: R
    first_offset: int  # baseOffset of the first batch (may be below the requested offset)
    next_offset: int  # offset after the last batch returned
    log_start_offset: int
    log_end_offset: int

    @property
    def size(self) -> int:
        return len(self.records)


class Log:
    def __init__(
        self, directory: Path, tp: TopicPartition, config: LogConfig, writer: Writer, now_ms: int
    ) -> None:
        self.dir = directory
        self.tp = tp
        self.config = config
        self._record_checks = record_checks_of(config)
        self.writer = writer
        self.segments: list[LogSegment] = []
        self._bases: list[int] = []
        self.log_start_offset = 0
        self.recovery_point = 0
        self.leader_epoch_cache = LeaderEpochCache()
        self._epoch_checkpoint = LeaderEpochCheckpointFile(directory)
        self.producer_state = ProducerStateManager()
        self._snapshots = ProducerSnapshots(directory)
        self.unflushed_messages = 0
        self.last_flush_ms = now_ms
        # Told each flush's duration in seconds (the broker's LogFlushRateAndTimeMs).
        self.on_flushed: Callable[[float], None] | None = None
        # Told when this log, having had no timed work (segment.ms roll, flush.ms), gets
        # some: the LogManager then schedules it, and leaves idle logs alone.
        self.on_timer_armed: Callable[[Log], None] | None = None
        self.timer_armed = False
        # Below it the cleaner has already compacted (kept in memory: see storage.cleaner).
        self.first_dirty_offset = 0
        self.closed = False
        # KIP-516: the id of the topic this dir belongs to, from `partition.metadata`;
        # None until the controller first names it (or the file is unreadable).
        self.topic_id: uuid.UUID | None = None

    # ================================================================== opening

    @classmethod
    def open(
        cls,
        dir: Path,
        tp: TopicPartition,
        config: LogConfig,
        *,
        recovery_point: int,
        log_start_offset: int,
        now_ms: int,
        clean_shutdown: bool = False,
        writer: Writer = DEFAULT_WRITER,
    ) -> Log:
        """Open (creating if needed) the log in `dir`, recovering after `recovery_point`."""
        try:
            dir.mkdir(parents=True, exist_ok=True)
            log = cls(dir, tp, config, writer, now_ms)
            log._load(recovery_point, log_start_offset, now_ms, clean_shutdown)
        except OSError as exc:
            raise StorageError(f"cannot open log {tp} in {dir}: {exc}") from exc
        return log

    def _new_segment(self, base_offset: int, created_ms: int) -> LogSegment:
        segment = LogSegment(
            self.dir,
            base_offset,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_entries=self.config.segment_index_bytes // 8,
            writer=self.writer,
            created_ms=created_ms,
        )
        return segment

    def _load(
        self, recovery_point: int, log_start_offset: int, now_ms: int, clean_shutdown: bool
    ) -> None:
        bases = clean_directory(self.dir, self.tp)
        self.topic_id = read_topic_id(self.dir, self.tp)
        for base in bases:
            mtime_ms = int((self.dir / f"{base:020d}{LOG_SUFFIX}").stat().st_mtime * 1000)
            self.segments.append(self._new_segment(base, mtime_ms))
        self._bases = [s.base_offset for s in self.segments]

        recover_from = len(self.segments)
        if not clean_shutdown and self.segments:
            recover_from = max(0, bisect.bisect_right(self._bases, recovery_point) - 1)
        for segment in self.segments[:recover_from]:
            segment.load()
        # Aborted-transaction entries of the recovered segments are rebuilt from the
        # producer state replayed over them (Kafka's LogSegment.recover).
        rebuild_txn_index_from = (
            self.segments[recover_from].base_offset if recover_from < len(self.segments) else None
        )
        recovered = recover_segments(
            self.segments, recover_from, self.tp, dense=self.config.cleanup_policy == "delete"
        )
        self._bases = [s.base_offset for s in self.segments]

        if not self.segments:
            self.segments.append(self._new_segment(log_start_offset, now_ms))
            self._bases = [log_start_offset]
        self.log_start_offset = max(log_start_offset, self.segments[0].base_offset)
        if self.log_start_offset > self.log_end_offset:
            # The checkpointed start lies past the surviving data (e.g. it was all deleted).
            self._replace_all_segments(self.log_start_offset, now_ms)
        if recovered:
            self.flush(now_ms)
        self.recovery_point = (
            self.log_end_offset
            if clean_shutdown or recovered
            else min(recovery_point, self.log_end_offset)
        )
        # After an unclean shutdown, batches from the recovery point on may carry epochs
        # whose checkpoint entry was not yet synced.
        self.leader_epoch_cache = load_leader_epoch_cache(
            self._epoch_checkpoint,
            self._headers_from,
            self.log_start_offset,
            self.log_end_offset,
            None if clean_shutdown else recovery_point,
            self.tp,
        )
        if rebuild_txn_index_from is not None:
            recovered_segments = [
                s for s in self.segments if s.base_offset >= rebuild_txn_index_from
            ]
            for segment in recovered_segments:
                segment.txn_index.reset()
            if not any(s.has_control_batches for s in recovered_segments):
                # No marker there, so no abort to index: the usual (newest) snapshot will do.
                rebuild_txn_index_from = None
        self._load_producer_state(rebuild_txn_index_from)

    def assign_topic_id(self, topic_id: uuid.UUID) -> None:
        """Record the topic id durably in `partition.metadata` (once; Kafka's
        Log.assignTopicId). A dir that already belongs to another id is refused: it is
        a stale replica of a deleted topic of the same name."""
        if self.topic_id == topic_id:
            return
        if self.topic_id is not None:
            raise InconsistentTopicIdError(
                f"{self.dir} belongs to topic id {self.topic_id}, not {topic_id}"
            )
        text = render_partition_metadata(topic_id)
        self._guarded(
            lambda: write_atomically(self.dir / PARTITION_METADATA, text), PARTITION_METADATA
        )
        self.topic_id = topic_id

    # ================================================================== epoch cache

    def _update_epoch_cache(self, change: LeaderEpochCache, durable: bool = True) -> None:
        """Persist a changed cache first, then adopt it: memory never runs ahead of the
        file. `durable=False` (the append paths) replaces the file without fsync; the
        next `flush` syncs it before the recovery point covers its entries."""
        if change.entries != self.leader_epoch_cache.entries:
            if durable:
                self._epoch_checkpoint.write(change)
            else:
                self._epoch_checkpoint.replace_unsynced(change)
            self.leader_epoch_cache = change

    def _sync_epoch_checkpoint(self) -> None:
        self._epoch_checkpoint.sync(self.leader_epoch_cache)

    def assign_leader_epoch(self, epoch: int, start_offset: int) -> None:
        """A new leader epoch starts at `start_offset` (this broker became leader)."""
        cache = self.leader_epoch_cache.copy()
        if cache.assign(epoch, start_offset):
            self._guarded(lambda: self._update_epoch_cache(cache), "leader-epoch-checkpoint write")

    # ================================================================== properties

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self.segments[-1].next_offset

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    @property
    def num_segments(self) -> int:
        return len(self.segments)

    def update_config(self, config: LogConfig) -> None:
        self.config = config
        self._record_checks = record_checks_of(config)
        for segment in self.segments:
            segment.index_interval_bytes = config.index_interval_bytes
        self._arm_timer(force=True)  # a shorter segment.ms or flush.ms is due sooner

    def next_timer_due_ms(self) -> int | None:
        """When `maybe_roll` or `maybe_flush` next has work, or None while they have none
        (an empty active segment and nothing unflushed): then only an append gives some."""
        due: int | None = None
        segment = self.active_segment
        if not segment.is_empty:
            due = roll_due_ms(segment, self.config)
        if self.recovery_point < self.log_end_offset and self.config.flush_ms < LONG_MAX:
            flush_due = self.last_flush_ms + self.config.flush_ms
            due = flush_due if due is None else min(due, flush_due)
        return due

    def _arm_timer(self, force: bool = False) -> None:
        if (force or not self.timer_armed) and self.on_timer_armed is not None:
            self.timer_armed = True
            self.on_timer_armed(self)

    # ================================================================== appending

    def append_as_leader(
        self,
        records: bytes | bytearray | memoryview,
        leader_epoch: int,
        now_ms: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> AppendInfo:
        self._check_open()
        validated = validate_for_append(records, self.config.max_message_bytes)
        checks = self._record_checks
        if (
            checks is not None
            and origin == AppendOrigin.CLIENT
            and checks.wanted(validated.batches)
        ):
            rewritten = check_and_rewrite(records, validated.batches, checks, now_ms, self.tp)
            if rewritten is not None:
                records = rewritten
                # As Kafka: a batch the new codec made larger may now be too large.
                validated = validate_for_append(records, self.config.max_message_bytes)
        append_time = now_ms if self.config.log_append_time else None
        first_offset = self.log_end_offset
        batches = []
        offset = first_offset
        for header in validated.batches:
            last_offset = offset + header.last_offset_delta
            max_timestamp = header.max_timestamp if append_time is None else append_time
            batches.append((header.position, offset, header.size, last_offset, max_timestamp))
            offset = last_offset + 1
        duplicate = check_producers(
            self.producer_state, validated.batches, batches, records, origin, self.tp
        )
        if duplicate is not None:
            return AppendInfo(
                first_offset=duplicate.first_offset,
                last_offset=duplicate.last_offset,
                log_append_time_ms=-1 if append_time is None else duplicate.timestamp_ms,
                record_count=0,
                max_timestamp=duplicate.timestamp_ms,
                size=0,
                duplicate=True,
            )
        buf = bytearray(records)
        next_offset = assign_offsets(
            buf, first_offset, leader_epoch, log_append_time_ms=append_time
        )
        cache = None
        if leader_epoch > self.leader_epoch_cache.latest_epoch:
            cache = self.leader_epoch_cache.copy()
            cache.assign(leader_epoch, first_offset)
        self._append(buf, batches, now_ms, validated.record_count, cache)
        record_producers(
            self.producer_state,
            validated.batches,
            batches,
            buf,
            self.log_end_offset,
            self._apply_marker,
        )
        return AppendInfo(
            first_offset=first_offset,
            last_offset=next_offset - 1,
            log_append_time_ms=-1 if append_time is None else append_time,
            record_count=validated.record_count,
            max_timestamp=validated.max_timestamp if append_time is None else append_time,
            size=len(buf),
        )

    def append_as_follower(
        self, records: bytes | bytearray | memoryview, now_ms: int
    ) -> AppendInfo:
        """Append batches fetched from the leader, keeping their offsets and epochs."""
        self._check_open()
        if len(records) == 0:
            leo = self.log_end_offset
            return AppendInfo(leo, leo - 1, -1, 0, -1)
        headers = list(iter_batches(records, verify_crc=True))
        expected = self.log_end_offset
        # Copied only when a batch opens a newer epoch: most appends carry none.
        changed: LeaderEpochCache | None = None
        latest_epoch = self.leader_epoch_cache.latest_epoch
        record_count = 0
        max_timestamp = -1
        for header in headers:
            if header.base_offset < expected:
                raise UnexpectedAppendOffsetError(
                    f"{self.tp}: batch base offset {header.base_offset} is below {expected}"
                )
            expected = header.next_offset
            record_count += header.record_count
            if header.max_timestamp > max_timestamp:
                max_timestamp = header.max_timestamp
            if header.partition_leader_epoch > latest_epoch:
                if changed is None:
                    changed = self.leader_epoch_cache.copy()
                changed.assign(header.partition_leader_epoch, header.base_offset)
                latest_epoch = header.partition_leader_epoch
        batches = [
            (h.position, h.base_offset, h.size, h.last_offset, h.max_timestamp) for h in headers
        ]
        self._append(records, batches, now_ms, record_count, changed)
        record_replicated_producers(self.producer_state, headers, records, self._apply_marker)
        return AppendInfo(
            first_offset=headers[0].base_offset,
            last_offset=headers[-1].last_offset,
            log_append_time_ms=-1,
            record_count=record_count,
            max_timestamp=max_timestamp,
            size=len(records),
        )

    def _append(
        self,
        data: bytes | bytearray | memoryview,
        batches: list[tuple[int, int, int, int, int]],
        now_ms: int,
        record_count: int,
        cache: LeaderEpochCache | None,
    ) -> None:
        """Write, all or nothing: on OSError the log is exactly as before the call.

        `batches`: (position in data, base offset, size, last offset, max timestamp).
        """
        first_offset = batches[0][1]
        last_offset = batches[-1][3]
        rolled_from: LogSegment | None = None
        try:
            if cache is not None:
                # The epoch entry may safely run ahead of the data (it names the next offset).
                self._update_epoch_cache(cache, durable=False)
            if should_roll(
                self.active_segment, self.config, len(data), first_offset, last_offset, now_ms
            ):
                rolled_from = self.active_segment
                self._roll(first_offset, now_ms)
            self.active_segment.append(data, batches)
        except OSError as exc:
            if rolled_from is not None and self.active_segment is not rolled_from:
                self._undo_roll()
            raise StorageError(f"append to {self.tp} failed: {exc}") from exc
        self.unflushed_messages += record_count
        if self.unflushed_messages >= self.config.flush_messages:
            self.flush(now_ms)
        if not self.timer_armed:
            self._arm_timer()

    # ================================================================== producer state

    def _apply_marker(
        self,
        header: BatchHeader,
        offset: int,
        buf: bytes | bytearray | memoryview,
        append_start: int,
    ) -> None:
        """Close the producer's transaction with the marker just appended at `offset`, and
        index it in the active segment if it aborted one.

        Should the index write fail, the append is undone (the log cut back to
        `append_start` and the producer state reloaded) and StorageError raised: a marker
        in the log without its index entry would let read_committed consumers read the
        aborted records, and the coordinator's retry would not index it again.
        """
        try:
            marker = read_marker(buf, header)
        except NotAMarkerError:
            marker = None
        completed = self.producer_state.on_batch(header._replace(base_offset=offset), marker)
        if completed is None or not completed.is_aborted:
            return
        try:
            self.active_segment.txn_index.append(aborted_txn(completed))
        except OSError as exc:
            logger.error("indexing an aborted transaction of %s failed: %s", self.tp, exc)
            try:
                self.active_segment.truncate_to(append_start)
                self._load_producer_state()
            except OSError as undo:
                logger.error("undoing the append to %s failed: %s", self.tp, undo)
            self.recovery_point = min(self.recovery_point, self.log_end_offset)
            raise StorageError(f"txn index append to {self.tp} failed: {exc}") from exc

    def _load_producer_state(self, rebuild_txn_index_from: int | None = None) -> None:
        self.producer_state = load_producer_state(
            self._snapshots,
            self.log_end_offset,
            self._headers_from,
            self._marker_of,
            self._segment_for,
            self.tp,
            rebuild_txn_index_from,
        )

    def _segment_for(self, offset: int) -> LogSegment:
        return self.segments[max(0, bisect.bisect_right(self._bases, offset) - 1)]

    def _marker_of(self, header: BatchHeader) -> EndTransactionMarker | None:
        """The marker of a control batch read back from its segment (rare: one small
        read per marker replayed)."""
        try:
            return self._segment_for(header.base_offset).read_marker(header)
        except InvalidRecordError as exc:
            logger.warning(
                "ignoring unreadable control batch at %d of %s: %s",
                header.base_offset,
                self.tp,
                exc,
            )
            return None

    # ================================================================== transactions

    def last_stable_offset(self, high_watermark: int) -> int:
        """min(high watermark, first offset of an open or unreplicated transaction), but
        not below the log start offset (retention or DeleteRecords may have removed the
        start of a transaction still open), as Kafka's UnifiedLog."""
        state = self.producer_state
        if not state.ongoing_txns and not state.unreplicated_txns:
            return high_watermark
        return max(
            state.last_stable_offset(high_watermark), min(high_watermark, self.log_start_offset)
        )

    def collect_aborted_transactions(
        self, start_offset: int, upper_bound_offset: int
    ) -> list[AbortedTxn]:
        """Aborted transactions overlapping [start_offset, upper_bound_offset), from the
        txn indexes of the segment holding `start_offset` onwards (Kafka's
        UnifiedLog.collectAbortedTransactions)."""
        self._check_open()
        found: list[AbortedTxn] = []
        i = max(0, bisect.bisect_right(self._bases, start_offset) - 1)
        try:
            for segment in self.segments[i:]:
                txns, complete = segment.txn_index.collect(start_offset, upper_bound_offset)
                found.extend(txns)
                if complete:
                    break
        except OSError as exc:
            raise StorageError(f"reading the txn index of {self.tp} failed: {exc}") from exc
        return found

    def _headers_from(self, offset: int) -> Iterator[BatchHeader]:
        """Headers of the batches holding offsets >= `offset`; no record is decoded."""
        i = max(0, bisect.bisect_right(self._bases, offset) - 1)
        for segment in self.segments[i:]:
            if segment.next_offset <= offset:
                continue
            start = segment.position_of(offset) if offset > segment.base_offset else 0
            yield from segment.scan(start)

    # ================================================================== rolling

    def _roll(self, new_base: int, now_ms: int) -> None:
        old = self.active_segment
        if old.is_empty:
            # An empty active segment is replaced, not kept behind the new one.
            self.segments.pop()
            old.delete()
        else:
            # Before anything changes: a failed snapshot write leaves the roll undone.
            self._snapshots.take(self.producer_state, self.log_end_offset)
            old.on_become_inactive()
            old.flush()
            # The recovery point passes the old segment: its batches' epochs go to disk
            # first (appends leave the checkpoint unsynced).
            self._sync_epoch_checkpoint()
            self.recovery_point = max(self.recovery_point, old.next_offset)
        segment = self._new_segment(new_base, now_ms)
        if segment.size:
            # A leftover file at this base (an interrupted delete): start it clean.
            os.ftruncate(segment.fd, 0)
            segment.size = segment.flushed_size = 0
            segment.recover(verify_crc=False)
        segment.txn_index.reset()
        self.segments.append(segment)
        self._bases = [s.base_offset for s in self.segments]
        fsync_dir(self.dir)

    def _undo_roll(self) -> None:
        self.segments.pop().delete()
        self._bases = [s.base_offset for s in self.segments]

    def maybe_roll(self, now_ms: int) -> None:
        """Roll a non-empty active segment that has reached `segment.ms`."""
        segment = self.active_segment
        if not segment.is_empty and time_to_roll(segment, self.config, now_ms):
            self._guarded(lambda: self._roll(self.log_end_offset, now_ms), "roll")

    # ================================================================== reading

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        min_one_batch: bool = True,
    ) -> FetchSlice[bytes]:
        return self._read(LogSegment.read, b"", start_offset, max_bytes, max_offset, min_one_batch)

    def read_region(
        self,
        start_offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        min_one_batch: bool = True,
        min_region_bytes: int = MIN_REGION_BYTES,
    ) -> FetchSlice[Records]:
        """What `read` returns, the records as a FileRegion of the segment's file when
        there are at least `min_region_bytes` of them (bytes otherwise, b"" for none):
        for the zero-copy send of a fetch response."""
        return self._read(
            partial(LogSegment.read_region, min_region_bytes=min_region_bytes),
            b"",
            start_offset,
            max_bytes,
            max_offset,
            min_one_batch,
        )

    def _read(
        self,
        read_segment: Callable[[LogSegment, int, int, int | None, bool], SegmentRead[T] | None],
        empty: T,
        start_offset: int,
        max_bytes: int,
        max_offset: int | None,
        min_one_batch: bool,
    ) -> FetchSlice[T]:
        self._check_open()
        leo = self.log_end_offset
        if start_offset < self.log_start_offset or start_offset > leo:
            raise OffsetOutOfRangeError(
                f"offset {start_offset} is outside [{self.log_start_offset}, {leo}] of {self.tp}"
            )
        i = max(0, bisect.bisect_right(self._bases, start_offset) - 1)
        offset = start_offset
        try:
            for segment in self.segments[i:]:
                if max_offset is not None and offset >= max_offset:
                    break
                if offset < segment.next_offset:
                    got = read_segment(segment, offset, max_bytes, max_offset, min_one_batch)
                    if got is not None:
                        return FetchSlice(
                            got.records,
                            got.first_offset,
                            got.next_offset,
                            self.log_start_offset,
                            leo,
                        )
                    break
                offset = max(offset, segment.next_offset)
        except OSError as exc:
            raise StorageError(f"read from {self.tp} failed: {exc}") from exc
        return FetchSlice(empty, start_offset, start_offset, self.log_start_offset, leo)

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= `timestamp_ms`."""
        self._check_open()
        for segment in self.segments:
            if segment.next_offset <= self.log_start_offset:
                continue
            if segment.max_timestamp >= timestamp_ms:
                found = segment.find_offset_by_timestamp(timestamp_ms, self.log_start_offset)
                if found is not None:
                    return found
        return None

    def offset_of_max_timestamp(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record holding the largest timestamp (Kafka's
        MAX_TIMESTAMP lookup: the segment with the largest, then the record in it)."""
        self._check_open()
        best = None
        for segment in self.segments:
            if segment.next_offset <= self.log_start_offset or segment.max_timestamp < 0:
                continue
            if best is None or segment.max_timestamp > best.max_timestamp:
                best = segment
        if best is None:
            return None
        return best.find_offset_by_timestamp(best.max_timestamp, self.log_start_offset)

    # ================================================================== truncation

    def truncate_to(self, offset: int) -> None:
        """Follower truncation: drop every batch holding an offset >= `offset`."""
        self._check_open()
        if offset >= self.log_end_offset:
            # Nothing to cut, but an epoch this replica led without writing in it may
            # start at the LEO; drop it, or OffsetForLeaderEpoch would ask about it forever.
            cache = self.leader_epoch_cache.copy()
            cache.truncate_from_end(offset)
            self._guarded(lambda: self._update_epoch_cache(cache), "truncate epoch cache")
            return
        if offset < self.segments[0].base_offset:
            self.truncate_fully_and_start_at(offset)
            return

        def cut() -> None:
            while len(self.segments) > 1 and self.segments[-1].base_offset >= offset:
                self.segments.pop().delete()
            self._bases = [s.base_offset for s in self.segments]
            self.active_segment.truncate_to(offset)
            self.recovery_point = min(self.recovery_point, self.log_end_offset)
            self.first_dirty_offset = min(self.first_dirty_offset, self.log_end_offset)
            cache = self.leader_epoch_cache.copy()
            cache.truncate_from_end(self.log_end_offset)
            self._update_epoch_cache(cache)
            # Kafka's truncateAndReload: exact state as of the new end, not a guess.
            self._load_producer_state()

        self._guarded(cut, "truncate")
        logger.info("truncated %s to %d", self.tp, self.log_end_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self._check_open()

        def restart() -> None:
            self._replace_all_segments(offset, None)
            self.log_start_offset = offset
            self.recovery_point = offset
            self.first_dirty_offset = offset
            self._update_epoch_cache(LeaderEpochCache())
            self._snapshots.delete_all()
            self.producer_state = ProducerStateManager()
            self.producer_state.map_end_offset = offset

        self._guarded(restart, "truncate fully")

    def _replace_all_segments(self, offset: int, now_ms: int | None) -> None:
        created_ms = now_ms if now_ms is not None else self.active_segment.created_ms
        for segment in self.segments:
            segment.delete()
        self.segments = [self._new_segment(offset, created_ms)]
        self._bases = [offset]
        self.recovery_point = min(self.recovery_point, offset)
        fsync_dir(self.dir)

    # ================================================================== retention

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: advance the log start offset; returns the new log start offset."""
        self._check_open()
        if offset > self.log_end_offset or offset < 0:
            raise OffsetOutOfRangeError(
                f"cannot delete before {offset}: log end offset of {self.tp} is "
                f"{self.log_end_offset}"
            )
        if offset > self.log_start_offset:
            self._advance_log_start(offset)
            self._delete_segments_below_start()
        return self.log_start_offset

    def _advance_log_start(self, offset: int) -> None:
        self.log_start_offset = offset
        cache = self.leader_epoch_cache.copy()
        cache.truncate_from_start(offset)
        self._guarded(lambda: self._update_epoch_cache(cache), "checkpoint leader epochs")

    def _delete_segments_below_start(self) -> int:
        count = due_below_start(self.segments, self.log_start_offset)
        return self._delete_oldest(count, "log start offset", None)

    def apply_retention(self, now_ms: int) -> int:
        """Delete whole old segments by retention.ms and retention.bytes; returns how many."""
        self._check_open()
        deleted = 0
        if self.config.delete_enabled:
            if self.config.retention_ms >= 0:
                count = due_by_time(self.segments, now_ms, self.config.retention_ms)
                deleted += self._delete_oldest(count, "retention.ms", now_ms)
            if self.config.retention_bytes >= 0:
                count = due_by_size(self.segments, self.size_in_bytes, self.config.retention_bytes)
                deleted += self._delete_oldest(count, "retention.bytes", now_ms)
        deleted += self._delete_segments_below_start()
        return deleted

    def _delete_oldest(self, count: int, reason: str, now_ms: int | None) -> int:
        if count <= 0:
            return 0

        def delete() -> None:
            if count >= len(self.segments):
                # Every segment is due, the active one too: roll so the log keeps its end.
                self._roll(self.log_end_offset, now_ms if now_ms is not None else 0)
            doomed = self.segments[:count]
            del self.segments[:count]
            self._bases = [s.base_offset for s in self.segments]
            for segment in doomed:
                segment.delete()
            logger.info(
                "deleted %d segment(s) of %s by %s: %s",
                len(doomed),
                self.tp,
                reason,
                [s.base_offset for s in doomed],
            )
            new_start = self.segments[0].base_offset
            if new_start > self.log_start_offset:
                self._advance_log_start(new_start)
            self._snapshots.delete_below(new_start)

        self._guarded(delete, "delete segments")
        return count

    # ================================================================== compaction

    def cleaning_plan(self, now_ms: int, high_watermark: int) -> CleaningPlan | None:
        """What the cleaner may rewrite now, or None (`log_compaction.cleaning_plan`):
        never past the last stable offset, nor the active segment."""
        self._check_open()
        if not self.config.compact_enabled:
            return None
        return cleaning_plan(
            self.segments,
            self.config,
            now_ms,
            self.last_stable_offset(high_watermark),
            self.first_dirty_offset,
            self.collect_aborted_transactions,
        )

    def swap_cleaned(self, plan: CleaningPlan, cleaned: list[CleanedSegment]) -> int:
        """Put the cleaner's output in place of the segments it was made from, unless a
        segment changed meanwhile (truncated, deleted, closed); returns how many."""
        if self.closed:
            for result in cleaned:
                result.path.unlink(missing_ok=True)
            return 0
        planned = {s.base_offset: s.size for s in plan.segments}
        swapped = skipped = 0
        for result in cleaned:
            i = bisect.bisect_left(self._bases, result.base_offset)
            segment = self.segments[i] if i < len(self._bases) - 1 else None
            if (
                segment is None
                or segment.base_offset != result.base_offset
                or segment.size != planned[result.base_offset]
            ):
                result.path.unlink(missing_ok=True)
                skipped += 1
                continue
            self._guarded(partial(self._swap_segment, i, result.path), "swap cleaned segment")
            swapped += 1
            logger.info(
                "compacted %s segment %d: %d -> %d records",
                self.tp,
                result.base_offset,
                result.records_before,
                result.records_after,
                extra={"tp": str(self.tp), "segment": result.base_offset},
            )
        if not skipped:  # else the next pass looks at this range again
            self.first_dirty_offset = max(self.first_dirty_offset, plan.end_offset)
        return swapped

    def _swap_segment(self, i: int, cleaned_path: Path) -> None:
        old = self.segments[i]
        install_cleaned(old, cleaned_path, self.dir)
        segment = self._new_segment(old.base_offset, old.created_ms)
        segment.recover(verify_crc=False)
        if segment.is_empty and i > 0:
            # Nothing left: an empty segment mid-log would only stop retention's walk.
            segment.delete()
            del self.segments[i]
            self._bases = [s.base_offset for s in self.segments]
            fsync_dir(self.dir)
        else:
            segment.flush()
            self.segments[i] = segment

    def clean(self, now_ms: int, high_watermark: int) -> int:
        """One compaction pass in the caller's thread; returns the segments rewritten."""
        plan = self.cleaning_plan(now_ms, high_watermark)
        if plan is None:
            return 0
        try:
            cleaned = clean_segments(plan)
        except OSError as exc:
            raise StorageError(f"compaction of {self.tp} failed: {exc}") from exc
        return self.swap_cleaned(plan, cleaned)

    # ================================================================== flushing, lifecycle

    def flush(self, now_ms: int | None = None) -> None:
        """fsync every segment holding unflushed bytes; the recovery point becomes the LEO."""

        def sync() -> None:
            for segment in self.segments:
                if segment.flushed_size != segment.size or segment is self.active_segment:
                    segment.flush()

        started = time.perf_counter()
        self._guarded(sync, "flush")
        # The epochs of the data now flushed must survive a crash with it.
        self._guarded(self._sync_epoch_checkpoint, "leader-epoch-checkpoint sync")
        if self.on_flushed is not None:
            self.on_flushed(time.perf_counter() - started)
        self.recovery_point = self.log_end_offset
        self.unflushed_messages = 0
        if now_ms is not None:
            self.last_flush_ms = now_ms

    def maybe_flush(self, now_ms: int) -> None:
        """The `flush.ms` policy, driven by the LogManager's tick."""
        if self.recovery_point < self.log_end_offset and (
            now_ms - self.last_flush_ms >= self.config.flush_ms
        ):
            self.flush(now_ms)

    def close(self) -> None:
        """Close after a snapshot of the producer state at the log end offset, so the next
        open replays nothing (Kafka takes it in Log.close)."""
        if self.closed:
            return
        try:
            # A log that never saw an idempotent producer nor rolled has nothing to remember.
            if self.producer_state.producers or self._snapshots.offsets():
                self._snapshots.take(self.producer_state, self.log_end_offset)
            self._sync_epoch_checkpoint()
        except OSError as exc:
            # The next open replays from an older snapshot: slower, never wrong.
            logger.warning("producer-state snapshot of %s on close failed: %s", self.tp, exc)
        self._close_segments()

    def _close_segments(self) -> None:
        for segment in self.segments:
            segment.close()
        self.closed = True

    def delete(self) -> None:
        if not self.closed:
            self._close_segments()
        # Renamed first, as Kafka does: a crash halfway leaves a `-delete` dir, which the
        # next start removes, never a half-deleted partition dir that loads as a log.
        doomed = self.dir.with_name(f"{self.dir.name}.{uuid.uuid4().hex}-delete")
        try:
            self.dir.rename(doomed)
        except OSError:
            doomed = self.dir
        shutil.rmtree(doomed, ignore_errors=True)

    def _check_open(self) -> None:
        if self.closed:
            raise StorageError(f"log {self.tp} is closed")

    def _guarded(self, action: Callable[[], None], what: str) -> None:
        try:
            action()
        except OSError as exc:
            raise StorageError(f"{what} of {self.tp} failed: {exc}") from exc

    def __repr__(self) -> str:
        return (
            f"Log({self.tp}, start={self.log_start_offset}, end={self.log_end_offset}, "
            f"segments={len(self.segments)})"
        )
