"""Follower side of one partition: which leader/epoch it follows and its fetch state.

The caller owns the log (LEO, HW, epoch cache). `FollowerState` tells it what to do:
truncate to X now, ask OffsetForLeaderEpoch, accept or drop a fetch response, set the HW.
"""

from __future__ import annotations

import enum

from strandline.replication.truncation import (
    EpochEndOffset,
    TruncationDecision,
    TruncationMode,
    follower_truncation,
    needs_epoch_round_trip,
    truncation_offset_without_leader,
)
from strandline.storage.leader_epoch_cache import LeaderEpochCache


class FetchState(enum.Enum):
    TRUNCATING = "truncating"  # must settle the log's end with the leader before fetching
    FETCHING = "fetching"


def follower_high_watermark(log_end_offset: int, leader_high_watermark: int) -> int:
    """After appending fetched data: HW := min(local LEO, the leader's HW in the response)."""
    return min(log_end_offset, leader_high_watermark)


class FollowerState:
    __slots__ = ("mode", "leader_id", "leader_epoch", "fetch_state")

    def __init__(self, mode: TruncationMode) -> None:
        self.mode = mode
        self.leader_id = -1
        self.leader_epoch = -1
        self.fetch_state = FetchState.TRUNCATING

    def become_follower(
        self, leader_id: int, leader_epoch: int, log_end_offset: int, high_watermark: int
    ) -> int | None:
        """LeaderAndIsr made us follower, or we restarted. Returns an offset to truncate to
        right now (HW mode only); in the epoch modes truncation waits for the leader."""
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        if needs_epoch_round_trip(self.mode):
            self.fetch_state = FetchState.TRUNCATING
            return None
        self.fetch_state = FetchState.FETCHING
        return truncation_offset_without_leader(log_end_offset, high_watermark)

    def on_epoch_answer(
        self,
        epoch_cache: LeaderEpochCache,
        log_end_offset: int,
        high_watermark: int,
        answer: EpochEndOffset,
    ) -> TruncationDecision:
        """The leader's OffsetForLeaderEpoch answer for `epoch_cache.latest_epoch`."""
        decision = follower_truncation(
            self.mode, epoch_cache, log_end_offset, high_watermark, answer
        )
        if decision.truncation_completed:
            self.fetch_state = FetchState.FETCHING
        return decision

    def accepts_fetch_response(
        self, fetch_offset: int, response_leader_epoch: int, log_end_offset: int
    ) -> bool:
        """A (possibly late) fetch response applies only if nothing moved since it was sent:
        same leader epoch, still fetching, and our LEO is still its fetch offset."""
        return (
            self.fetch_state is FetchState.FETCHING
            and response_leader_epoch == self.leader_epoch
            and fetch_offset == log_end_offset
        )
