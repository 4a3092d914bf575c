"""The Log's side of compaction (`cleaner.py` does the work in between): which segments
to clean now (`cleaning_plan`, Kafka's LogCleanerManager) and putting a cleaned file in
place of the segment it was made from (`install_cleaned`, Kafka's replaceSegments).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from strandline.storage.atomic_file import fsync_dir
from strandline.storage.cleaner import CleaningPlan, SegmentToClean
from strandline.storage.config import LONG_MAX, LogConfig
from strandline.storage.segment import LogSegment
from strandline.storage.txn_index import AbortedTxn


def cleaning_plan(
    segments: Sequence[LogSegment],
    config: LogConfig,
    now_ms: int,
    last_stable_offset: int,
    first_dirty_offset: int,
    aborted_transactions: Callable[[int, int], list[AbortedTxn]],
) -> CleaningPlan | None:
    """What the cleaner may rewrite now, or None: inactive segments below the last
    stable offset (so below the HW, and never into an open transaction, whose outcome
    decides which of its records count) and older than min.compaction.lag.ms, once
    their dirty share reaches min.cleanable.dirty.ratio. The plan names the aborted
    transactions of that range (`aborted_transactions(start, end)`): their records are
    dropped and shadow nothing."""
    cleanable: list[LogSegment] = []
    for segment in segments[:-1]:
        lag = config.min_compaction_lag_ms
        if segment.next_offset > last_stable_offset or (
            lag > 0 and now_ms - segment.largest_timestamp < lag
        ):
            break
        cleanable.append(segment)
    total = sum(s.size for s in cleanable)
    dirty_segments = [s for s in cleanable if s.next_offset > first_dirty_offset]
    dirty = sum(s.size for s in dirty_segments)
    if not total or not dirty:
        return None
    # max.compaction.lag.ms (KIP-354): a dirty segment that old is compacted now,
    # whatever the dirty ratio (Kafka's LogCleanerManager.maxCompactionDelay).
    max_lag = config.max_compaction_lag_ms
    overdue = max_lag < LONG_MAX and any(
        now_ms - s.rolling_based_timestamp > max_lag for s in dirty_segments
    )
    if not overdue and dirty / total < config.min_cleanable_dirty_ratio:
        return None
    horizon = now_ms - config.delete_retention_ms
    end_offset = cleanable[-1].next_offset
    return CleaningPlan(
        tuple(
            SegmentToClean(s.base_offset, s.log_path, s.size, s.largest_timestamp < horizon)
            for s in cleanable
            if not s.is_empty
        ),
        end_offset,
        tuple(aborted_transactions(cleanable[0].base_offset, end_offset)),
    )


def install_cleaned(old: LogSegment, cleaned_path: Path, directory: Path) -> None:
    """Close `old` and put the cleaned file in place of its `.log`; the caller opens the
    result as a new segment (its indexes are rebuilt then)."""
    old.close()
    # The indexes go first: a crash after the rename must not leave index entries
    # pointing into the old layout (a missing index is rebuilt when the log opens).
    old.offset_index.delete()
    old.time_index.delete()
    fsync_dir(directory)
    # Retention and segment.ms age a segment by its mtime where timestamps are missing.
    original = os.stat(old.log_path)
    os.utime(cleaned_path, ns=(original.st_atime_ns, original.st_mtime_ns))
    os.replace(cleaned_path, old.log_path)
    fsync_dir(directory)
