"""Rebuild a `__consumer_offsets` partition's groups and offsets by replaying its records.

Transactional offset commits (TxnOffsetCommit) replay as in Kafka's
GroupMetadataManager.doLoadGroupsAndOffsets: a transactional batch's offsets are pending
for its producer; that producer's next control batch commits them (each replaces the
committed offset unless that one was written later) or aborts them. Offsets of a
transaction without a marker yet stay pending after the load, for the marker to come.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from strandline.group.metadata import PendingTxnOffset
from strandline.group.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    OffsetsBatch,
    OffsetsRecordError,
    RawRecord,
    decode_record,
)
from strandline.types import TopicPartition

GroupOffsets = dict[str, dict[TopicPartition, OffsetCommitValue]]


@dataclass
class LoadedPartition:
    """The last word of the log for every key: later records win, tombstones delete."""

    groups: dict[str, GroupMetadataValue] = field(default_factory=dict)
    offsets: GroupOffsets = field(default_factory=dict)
    # group -> partition -> base offset of the batch that wrote the committed offset.
    positions: dict[str, dict[TopicPartition, int]] = field(default_factory=dict)
    # group -> producer id -> partition -> offset of a transaction still open at the end.
    pending: dict[str, dict[int, dict[TopicPartition, PendingTxnOffset]]] = field(
        default_factory=dict
    )
    # One past the highest position seen (positions of later appends must exceed it).
    end_position: int = 0
    # (batch base offset, record index, why) of each record that could not be read: it
    # is skipped, as Kafka logs and ignores an unknown key version; a load never stops.
    skipped: list[tuple[int, int, str]] = field(default_factory=list)

    def group_ids(self) -> set[str]:
        return (
            set(self.groups)
            | {g for g, offsets in self.offsets.items() if offsets}
            | {g for g, producers in self.pending.items() if producers}
        )

    def _commit(self, group: str, tp: TopicPartition, value: OffsetCommitValue, at: int) -> None:
        offsets = self.offsets.setdefault(group, {})
        positions = self.positions.setdefault(group, {})
        if tp in offsets and positions.get(tp, -1) > at:
            return  # a later-written offset stays (Kafka's olderThan)
        offsets[tp] = value
        positions[tp] = at


def load(entries: Iterable[OffsetsBatch | RawRecord]) -> LoadedPartition:
    """Replay batches (or bare non-transactional (key, value) records) in log order, like
    Kafka's GroupMetadataManager.loadGroupsAndOffsets."""
    loaded = LoadedPartition()
    # producer id -> (group, partition) -> pending offset, until the producer's marker.
    open_txns: dict[int, dict[tuple[str, TopicPartition], PendingTxnOffset]] = {}
    for entry in entries:
        batch = entry if isinstance(entry, OffsetsBatch) else _bare(entry, loaded.end_position)
        at = batch.base_offset
        loaded.end_position = max(loaded.end_position, at + max(len(batch.records), 1))
        if batch.marker is not None:
            finished = open_txns.pop(batch.producer_id, {})
            if batch.marker:
                for (group, tp), pending in finished.items():
                    assert pending.position is not None
                    loaded._commit(group, tp, pending.value, pending.position)
            continue
        for i, (raw_key, raw_value) in enumerate(batch.records):
            try:
                _replay_record(loaded, open_txns, batch, raw_key, raw_value)
            except OffsetsRecordError as e:
                loaded.skipped.append((at, i, str(e)))
    for producer_id, offsets in open_txns.items():
        for (group, tp), pending in offsets.items():
            loaded.pending.setdefault(group, {}).setdefault(producer_id, {})[tp] = pending
    return loaded


def _bare(record: RawRecord, position: int) -> OffsetsBatch:
    """A record given without its batch (tests, tools): non-transactional, next in order."""
    return OffsetsBatch(position, (record,))


def _replay_record(
    loaded: LoadedPartition,
    open_txns: dict[int, dict[tuple[str, TopicPartition], PendingTxnOffset]],
    batch: OffsetsBatch,
    raw_key: bytes,
    raw_value: bytes | None,
) -> None:
    key, value = decode_record(raw_key, raw_value)
    if isinstance(key, OffsetCommitKey):
        tp = TopicPartition(key.topic, key.partition)
        if batch.transactional:
            txn = open_txns.setdefault(batch.producer_id, {})
            if value is None:
                txn.pop((key.group, tp), None)
            else:
                assert isinstance(value, OffsetCommitValue)
                txn[(key.group, tp)] = PendingTxnOffset(value, batch.base_offset)
        elif value is None:
            loaded.offsets.get(key.group, {}).pop(tp, None)
            loaded.positions.get(key.group, {}).pop(tp, None)
        else:
            assert isinstance(value, OffsetCommitValue)
            # Plain commits land in log order: the last one written wins outright.
            loaded.offsets.setdefault(key.group, {})[tp] = value
            loaded.positions.setdefault(key.group, {})[tp] = batch.base_offset
    elif isinstance(key, GroupMetadataKey):
        if value is None:
            # Offsets have their own tombstones (DeleteGroups writes them first); an
            # offset that survives a group tombstone keeps the group alive as Empty,
            # as Kafka's loader does.
            loaded.groups.pop(key.group, None)
        else:
            assert isinstance(value, GroupMetadataValue)
            loaded.groups[key.group] = value
