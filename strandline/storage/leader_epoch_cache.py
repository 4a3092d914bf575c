"""LeaderEpochCache: the (epoch -> start offset) map every replica keeps (KIP-101).

Pure and in memory. The storage layer persists it through `render_checkpoint` /
`parse_checkpoint`, which speak Kafka's `leader-epoch-checkpoint` text format:

    0            <- format version
    2            <- number of entries
    0 0          <- "epoch startOffset", oldest first
    1 120
"""

from __future__ import annotations

from typing import NamedTuple

from strandline.types import UNDEFINED_EPOCH, UNDEFINED_OFFSET

CHECKPOINT_VERSION = 0


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class LeaderEpochCache:
    """Entries sorted by epoch, with strictly increasing epochs and non-decreasing offsets."""

    __slots__ = ("_entries",)

    def __init__(self, entries: list[EpochEntry] | None = None) -> None:
        self._entries: list[EpochEntry] = []
        for entry in entries or ():
            self.assign(entry.epoch, entry.start_offset)

    @property
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        return self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH

    def copy(self) -> LeaderEpochCache:
        clone = LeaderEpochCache()
        clone._entries = list(self._entries)
        return clone

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset`; returns True when the cache changed.

        An older or equal epoch is ignored (it is already known). Entries of older epochs
        that start at or after `start_offset` are dropped, as Kafka does, because the new
        epoch overwrote their (necessarily empty or truncated) range.
        """
        entries = self._entries
        if entries and epoch <= entries[-1].epoch:
            return False
        while entries and entries[-1].start_offset >= start_offset:
            entries.pop()
        entries.append(EpochEntry(epoch, start_offset))
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """The log was truncated to `end_offset`: forget epochs starting at or after it."""
        entries = self._entries
        while entries and entries[-1].start_offset >= end_offset:
            entries.pop()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log start moved to `start_offset` (retention, DeleteRecords)."""
        entries = self._entries
        keep_from = 0
        for index, entry in enumerate(entries):
            if entry.start_offset <= start_offset:
                keep_from = index
            else:
                break
        del entries[:keep_from]
        if entries and entries[0].start_offset < start_offset:
            entries[0] = EpochEntry(entries[0].epoch, start_offset)

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka's OffsetForLeaderEpoch answer: (epoch, end offset) for `requested_epoch`.

        - UNDEFINED epoch, or an epoch newer than any known -> (-1, -1)
        - the latest epoch -> (epoch, LEO)
        - otherwise (largest epoch <= requested, start offset of the next higher epoch);
          an epoch older than every entry -> (requested, first entry's start offset).
        """
        entries = self._entries
        if requested_epoch == UNDEFINED_EPOCH or not entries:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if requested_epoch == entries[-1].epoch:
            return requested_epoch, log_end_offset
        floor: EpochEntry | None = None
        for entry in entries:
            if entry.epoch > requested_epoch:
                if floor is None:
                    return requested_epoch, entry.start_offset
                return floor.epoch, entry.start_offset
            floor = entry
        return UNDEFINED_EPOCH, UNDEFINED_OFFSET

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LeaderEpochCache) and self._entries == other._entries

    def __repr__(self) -> str:
        return f"LeaderEpochCache({self._entries!r})"


def render_checkpoint(entries: list[EpochEntry]) -> str:
    lines = [str(CHECKPOINT_VERSION), str(len(entries))]
    lines.extend(f"{entry.epoch} {entry.start_offset}" for entry in entries)
    return "\n".join(lines) + "\n"


def parse_checkpoint(text: str) -> list[EpochEntry]:
    """Parse a `leader-epoch-checkpoint`; raises ValueError on any malformed content."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) < 2:
        raise ValueError("leader-epoch-checkpoint: missing version or count line")
    if int(lines[0]) != CHECKPOINT_VERSION:
        raise ValueError(f"leader-epoch-checkpoint: unsupported version {lines[0]}")
    count = int(lines[1])
    body = lines[2:]
    if count != len(body):
        raise ValueError(f"leader-epoch-checkpoint: expected {count} entries, found {len(body)}")
    entries: list[EpochEntry] = []
    for line in body:
        parts = line.split()
        if len(parts) != 2:
            raise ValueError(f"leader-epoch-checkpoint: malformed entry {line!r}")
        entries.append(EpochEntry(int(parts[0]), int(parts[1])))
    return entries
