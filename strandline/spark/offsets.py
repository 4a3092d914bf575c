"""Pure offset planning: which offset ranges a query reads, and what counts as data loss.

No I/O here: the driver fetches earliest/latest offsets from the cluster and passes them
in, so every rule below is unit-testable. Offsets are "next offset to read" (exclusive
ends), as in Kafka and in the checkpoint format `{"topic": {"partition": next_offset}}`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from strandline.spark.options import EARLIEST, LATEST, OffsetSpec
from strandline.types import TopicPartition

PartitionOffsets = dict[TopicPartition, int]
JsonOffsets = dict[str, dict[str, int]]


@dataclass(frozen=True)
class OffsetRange:
    """Records [start, end) of one topic-partition: one Spark input partition's work."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def to_json(offsets: Mapping[TopicPartition, int]) -> JsonOffsets:
    """Checkpoint form; keys sorted so equal offsets serialize identically."""
    out: JsonOffsets = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = offsets[tp]
    return out


def from_json(offsets: Mapping[str, Mapping[str, int]]) -> PartitionOffsets:
    return {
        TopicPartition(topic, int(p)): int(offset)
        for topic, parts in offsets.items()
        for p, offset in parts.items()
    }


def resolve_spec(
    spec: OffsetSpec,
    partitions: Iterable[TopicPartition],
    earliest: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    default: int,
) -> PartitionOffsets:
    """Turn an option value into concrete offsets for `partitions`.

    A partition missing from an explicit JSON spec gets `default` (EARLIEST or LATEST).
    """
    out: PartitionOffsets = {}
    for tp in partitions:
        if spec == "earliest":
            wanted = EARLIEST
        elif spec == "latest":
            wanted = LATEST
        else:
            assert isinstance(spec, dict)
            wanted = spec.get(tp, default)
        if wanted == EARLIEST:
            out[tp] = earliest[tp]
        elif wanted == LATEST:
            out[tp] = latest[tp]
        else:
            out[tp] = wanted
    return out


@dataclass(frozen=True)
class Plan:
    ranges: list[OffsetRange]
    # Human-readable descriptions of records the query will never see.
    data_loss: list[str]


def plan_ranges(
    start: Mapping[TopicPartition, int],
    end: Mapping[TopicPartition, int],
    earliest: Mapping[TopicPartition, int],
) -> Plan:
    """Ranges to read for one batch, checking `start` against what the log still holds.

    `earliest` is the log start offset now (it moves up with retention and DeleteRecords).
    A partition in `end` but not in `start` is new and is read from its beginning.
    """
    ranges: list[OffsetRange] = []
    losses: list[str] = []
    for tp in sorted(set(start) - set(end)):
        losses.append(f"partition {tp} was deleted; records from offset {start[tp]} on are lost")
    for tp in sorted(end):
        log_start = earliest.get(tp, 0)
        if tp in start:
            begin = start[tp]
        else:
            begin = log_start
            if log_start > 0:
                losses.append(
                    f"new partition {tp} starts at offset {log_start}, not 0: "
                    f"records [0, {log_start}) are lost"
                )
        stop = end[tp]
        if begin < log_start:
            losses.append(
                f"{tp}: offsets [{begin}, {log_start}) were removed (retention or DeleteRecords) "
                "before the query read them"
            )
            begin = log_start
        if stop < begin:
            # The partition's offsets went backwards: the topic was deleted and recreated.
            losses.append(f"{tp}: offset went back from {begin} to {stop}; records may be lost")
            continue
        if stop > begin:
            ranges.append(OffsetRange(tp.topic, tp.partition, begin, stop))
    return Plan(ranges, losses)


def split_ranges(
    ranges: list[OffsetRange],
    min_partitions: int | None = None,
    max_records_per_partition: int | None = None,
) -> list[OffsetRange]:
    """Split long ranges so Spark gets at least `min_partitions` tasks of bounded size.

    Same proportional rule as Spark's KafkaOffsetRangeCalculator: a range gets
    round(size / total * min_partitions) pieces, at least one.
    """
    pieces: list[OffsetRange] = []
    total = sum(r.size for r in ranges)
    for r in ranges:
        parts = 1
        if max_records_per_partition:
            parts = max(parts, math.ceil(r.size / max_records_per_partition))
        if min_partitions and min_partitions > len(ranges) and total > 0:
            parts = max(parts, round(r.size / total * min_partitions))
        parts = max(1, min(parts, r.size))
        for i in range(parts):
            lo = r.start + r.size * i // parts
            hi = r.start + r.size * (i + 1) // parts
            pieces.append(OffsetRange(r.topic, r.partition, lo, hi))
    return pieces


def rate_limit(
    start: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    earliest: Mapping[TopicPartition, int],
    limit: int,
) -> PartitionOffsets:
    """End offsets for a micro-batch of at most about `limit` records (maxOffsetsPerTrigger).

    The budget is shared in proportion to each partition's backlog, as Spark's Kafka
    source does; a partition with a fractional share below one still moves one record so
    no partition starves.
    """
    begin = {tp: max(start.get(tp, earliest.get(tp, 0)), earliest.get(tp, 0)) for tp in latest}
    backlog = {tp: max(0, latest[tp] - begin[tp]) for tp in latest}
    total = sum(backlog.values())
    if total <= limit:
        return dict(latest)
    out: PartitionOffsets = {}
    for tp, end in latest.items():
        if backlog[tp] == 0:
            out[tp] = end
            continue
        share = limit * backlog[tp] / total
        step = math.ceil(share) if share < 1 else math.floor(share)
        out[tp] = min(end, begin[tp] + step)
    return out
