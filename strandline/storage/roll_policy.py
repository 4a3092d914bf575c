"""When a log rolls its active segment (Kafka's LogSegment.shouldRoll), pure: by
`segment.bytes`, by age (`segment.ms` less a jitter of up to `segment.jitter.ms`),
when an index is full, or when the next offsets no longer fit the segment's relative
offsets. `Log._roll` does the rolling.
"""

from __future__ import annotations

from strandline.storage.config import LogConfig
from strandline.storage.segment import LogSegment


def should_roll(
    segment: LogSegment,
    config: LogConfig,
    size: int,
    first_offset: int,
    last_offset: int,
    now_ms: int,
) -> bool:
    """Must `size` bytes holding [first_offset, last_offset] go to a new segment?"""
    if not segment.can_hold(last_offset):
        return True
    if segment.is_empty:
        # Keep a segment's base equal to its first offset (a follower may start higher).
        return first_offset != segment.base_offset
    return (
        segment.size + size > config.segment_bytes
        or time_to_roll(segment, config, now_ms)
        or segment.offset_index.is_full
        or segment.time_index.is_full
    )


def time_to_roll(segment: LogSegment, config: LogConfig, now_ms: int) -> bool:
    """Has the segment reached `segment.ms` (less its jitter)?"""
    # Kafka's jitter, derived from the base offset so that a replay rolls identically.
    jitter = segment.base_offset % (config.segment_jitter_ms + 1)
    return now_ms - segment.rolling_based_timestamp > config.max_segment_ms - jitter


def roll_due_ms(segment: LogSegment, config: LogConfig) -> int:
    """The first time at which `time_to_roll` holds for a non-empty segment."""
    jitter = segment.base_offset % (config.segment_jitter_ms + 1)
    return segment.rolling_based_timestamp + config.max_segment_ms - jitter + 1
