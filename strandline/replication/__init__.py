"""Pure replication state machines: leader-side Partition, follower state, truncation."""

from strandline.replication.follower import FetchState, FollowerState, follower_high_watermark
from strandline.replication.partition import FetchOutcome, Partition, ReplicaState
from strandline.replication.truncation import (
    EpochEndOffset,
    TruncationDecision,
    TruncationMode,
    follower_truncation,
    truncation_offset_without_leader,
    truncation_on_offset_out_of_range,
)

__all__ = [
    "EpochEndOffset",
    "FetchOutcome",
    "FetchState",
    "FollowerState",
    "Partition",
    "ReplicaState",
    "TruncationDecision",
    "TruncationMode",
    "follower_high_watermark",
    "follower_truncation",
    "truncation_offset_without_leader",
    "truncation_on_offset_out_of_range",
]
