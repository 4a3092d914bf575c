"""Which of a log's oldest segments retention deletes (Kafka's UnifiedLog
deleteRetentionMsBreachedSegments, deleteRetentionSizeBreachedSegments and
deleteLogStartOffsetBreachedSegments), pure: each answers how many of the oldest
segments are due; `Log._delete_oldest` deletes them, always whole segments.
"""

from __future__ import annotations

from collections.abc import Sequence

from strandline.storage.segment import LogSegment


def due_by_time(segments: Sequence[LogSegment], now_ms: int, retention_ms: int) -> int:
    """`retention.ms`: the oldest segments whose newest record is older than it."""
    count = 0
    for segment in segments:
        if segment.is_empty:
            break
        if now_ms - segment.largest_timestamp > retention_ms:
            count += 1
        else:
            break
    return count


def due_by_size(segments: Sequence[LogSegment], size_in_bytes: int, retention_bytes: int) -> int:
    """`retention.bytes`: the oldest segments the log can lose and stay at or above it."""
    excess = size_in_bytes - retention_bytes
    count = 0
    for segment in segments:
        if segment.is_empty or excess - segment.size < 0:
            break
        excess -= segment.size
        count += 1
    return count


def due_below_start(segments: Sequence[LogSegment], log_start_offset: int) -> int:
    """The segments wholly below the log start offset (DeleteRecords, or a start
    checkpointed past them); never the active one."""
    count = 0
    for i in range(len(segments) - 1):
        if segments[i + 1].base_offset <= log_start_offset:
            count += 1
        else:
            break
    return count
