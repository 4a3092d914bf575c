"""Group coordinator: classic rebalance protocol and committed offsets (pure core)."""

from strandline.group.coordinator import Effect, GroupCoordinator
from strandline.group.model import AppendToOffsetsTopic, GroupConfig, GroupState, Respond
from strandline.group.partitioning import OFFSETS_TOPIC, partition_for

__all__ = [
    "OFFSETS_TOPIC",
    "AppendToOffsetsTopic",
    "Effect",
    "GroupConfig",
    "GroupCoordinator",
    "GroupState",
    "Respond",
    "partition_for",
]
