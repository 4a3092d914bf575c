"""Rebuild a `__consumer_offsets` partition's groups and offsets by replaying its records."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from strandline.group.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    RawRecord,
    decode_record,
)
from strandline.types import TopicPartition


@dataclass
class LoadedPartition:
    """The last word of the log for every key: later records win, tombstones delete."""

    groups: dict[str, GroupMetadataValue] = field(default_factory=dict)
    offsets: dict[str, dict[TopicPartition, OffsetCommitValue]] = field(default_factory=dict)

    def group_ids(self) -> set[str]:
        return set(self.groups) | {g for g, offsets in self.offsets.items() if offsets}


def load(records: Iterable[RawRecord]) -> LoadedPartition:
    """Replay (key, value) records in log order, like Kafka's GroupMetadataManager.loadGroups."""
    loaded = LoadedPartition()
    for raw_key, raw_value in records:
        key, value = decode_record(raw_key, raw_value)
        if isinstance(key, OffsetCommitKey):
            tp = TopicPartition(key.topic, key.partition)
            if value is None:
                loaded.offsets.get(key.group, {}).pop(tp, None)
            else:
                assert isinstance(value, OffsetCommitValue)
                loaded.offsets.setdefault(key.group, {})[tp] = value
        elif isinstance(key, GroupMetadataKey):
            if value is None:
                # Offsets have their own tombstones (DeleteGroups writes them first); an
                # offset that survives a group tombstone keeps the group alive as Empty,
                # as Kafka's loader does.
                loaded.groups.pop(key.group, None)
            else:
                assert isinstance(value, GroupMetadataValue)
                loaded.groups[key.group] = value
    return loaded
