"""Where kafka-consumer-groups.sh --reset-offsets moves a group's offsets: pure, no I/O.

The admin operation (strandline.client.groups.reset_offsets) reads the group's committed
offsets and the partitions' earliest, latest and by-time offsets from the cluster; this
module turns them and one reset spec into the new offsets, as Kafka's
ConsumerGroupCommand does: the target of the spec, clamped to the log's range.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Literal

from strandline.types import TopicPartition

Mode = Literal["earliest", "latest", "time", "file", "current", "offset", "shift"]


@dataclass(frozen=True)
class ResetSpec:
    """One of Kafka's reset scenarios. Exactly one is meant to be given (the grammars
    check it); should several be, the first of this order wins."""

    to_earliest: bool = False
    to_latest: bool = False
    to_datetime: datetime.datetime | None = None
    by_duration: datetime.timedelta | None = None
    from_file: dict[TopicPartition, int] | None = None
    to_current: bool = False
    to_offset: int | None = None
    shift_by: int | None = None

    @property
    def mode(self) -> Mode:
        if self.to_earliest:
            return "earliest"
        if self.to_latest:
            return "latest"
        if self.to_datetime is not None or self.by_duration is not None:
            return "time"
        if self.from_file is not None:
            return "file"
        if self.to_current:
            return "current"
        if self.to_offset is not None:
            return "offset"
        return "shift"

    def timestamp(self, now: datetime.datetime) -> int | None:
        """The time (ms) whose offsets ListOffsets is to find, for --to-datetime and
        --by-duration (that long before `now`); None for the other scenarios."""
        if self.mode != "time":
            return None
        when = self.to_datetime or now - (self.by_duration or datetime.timedelta())
        return int(when.timestamp() * 1000)


def new_offsets(
    spec: ResetSpec,
    partitions: list[TopicPartition],
    committed: dict[TopicPartition, int],
    earliest: dict[TopicPartition, int],
    latest: dict[TopicPartition, int],
    by_time: dict[TopicPartition, int] | None = None,
) -> dict[TopicPartition, int]:
    """The new offset per partition: the spec's target, clamped to [earliest, latest].
    `by_time` is ListOffsets' answer for `spec.timestamp(now)` (-1: no record that late,
    so the log end)."""
    mode = spec.mode
    if mode == "earliest":
        targets = dict(earliest)
    elif mode == "latest":
        targets = dict(latest)
    elif mode == "time":
        assert by_time is not None
        targets = {tp: (o if o >= 0 else latest[tp]) for tp, o in by_time.items()}
    elif mode == "file":
        assert spec.from_file is not None
        targets = dict(spec.from_file)
    elif mode == "current":
        targets = {tp: committed.get(tp, latest[tp]) for tp in partitions}
    elif mode == "offset":
        assert spec.to_offset is not None
        targets = dict.fromkeys(partitions, spec.to_offset)
    else:
        assert spec.shift_by is not None
        targets = {tp: committed.get(tp, latest.get(tp, 0)) + spec.shift_by for tp in partitions}
    return {tp: min(max(o, earliest.get(tp, 0)), latest.get(tp, o)) for tp, o in targets.items()}


def resettable(state: str) -> bool:
    """Like Kafka, only an inactive group (Empty, or Dead: unknown) may be reset."""
    return state in ("Empty", "Dead")
