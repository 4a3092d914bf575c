"""Leader side of one partition: remote LEOs, ISR, high watermark. Numbers only, no log.

The caller owns the log. It tells `Partition` what happened (we appended, a follower
fetched at offset X, time passed) with `now_ms`, and gets back decisions: the HW moved
to X, propose ISR = {...}, answer this fetch with HW Y. The networked broker and the
simulator run exactly this class.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from kio.schema.errors import ErrorCode

from strandline.types import UNDEFINED_OFFSET

# "Has never caught up": far enough in the past to be outside any lag window.
NEVER_MS = -(1 << 62)


class ReplicaState:
    """What the leader knows of one follower (Kafka's remote `Replica`)."""

    __slots__ = (
        "broker_id",
        "log_end_offset",
        "last_caught_up_time_ms",
        "last_fetch_leader_log_end_offset",
        "last_fetch_time_ms",
    )

    def __init__(self, broker_id: int, now_ms: int, in_sync: bool) -> None:
        self.broker_id = broker_id
        # Unknown until the follower's first fetch under this leader.
        self.log_end_offset = UNDEFINED_OFFSET
        # An ISR member gets the benefit of the doubt for one lag period (as Kafka does).
        self.last_caught_up_time_ms = now_ms if in_sync else NEVER_MS
        self.last_fetch_leader_log_end_offset = UNDEFINED_OFFSET
        self.last_fetch_time_ms = now_ms if in_sync else NEVER_MS

    def record_fetch(self, fetch_offset: int, leader_log_end_offset: int, now_ms: int) -> None:
        """Kafka's updateFetchState: the follower caught up if it asked for our LEO, or for
        the LEO we had at its previous fetch (then it caught up at that earlier time)."""
        if fetch_offset >= leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_log_end_offset = leader_log_end_offset
        self.last_fetch_time_ms = now_ms

    def record_session_fetch(self, fetch_ms: int, leader_log_end_offset: int) -> None:
        """The follower's fetch session asked for this partition at `fetch_ms` without
        naming it (KIP-227: its position had not moved). The leader learns it only now,
        before it appends: if the follower was at our LEO then, it was caught up then."""
        if self.log_end_offset == leader_log_end_offset and fetch_ms > self.last_fetch_time_ms:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, fetch_ms)
            self.last_fetch_leader_log_end_offset = leader_log_end_offset
            self.last_fetch_time_ms = fetch_ms

    def is_caught_up(self, leader_log_end_offset: int, now_ms: int, lag_max_ms: int) -> bool:
        return (
            self.log_end_offset == leader_log_end_offset
            or now_ms - self.last_caught_up_time_ms <= lag_max_ms
        )


class FetchOutcome(NamedTuple):
    """The leader's decision for one follower FETCH."""

    # The HW to put in the response: the HW *before* this fetch's update (docs/replication.md).
    response_high_watermark: int
    # The new HW when this fetch advanced it, else None.
    high_watermark_advanced: int | None
    # A proposed ISR (to write to ZooKeeper) when the follower may rejoin, else None.
    isr_expand: frozenset[int] | None


class Partition:
    """Leader-side replication state of one partition on the leader broker."""

    __slots__ = (
        "local_broker_id",
        "replica_lag_time_max_ms",
        "leader_epoch",
        "leader_epoch_start_offset",
        "isr",
        "maximal_isr",
        "high_watermark",
        "log_end_offset",
        "remote_replicas",
    )

    def __init__(self, local_broker_id: int, replica_lag_time_max_ms: int) -> None:
        self.local_broker_id = local_broker_id
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.leader_epoch = -1
        self.leader_epoch_start_offset = 0
        self.isr: frozenset[int] = frozenset()
        # The ISR plus expansions proposed but not yet written: the HW must already wait
        # for a follower we are about to add (Kafka's maximalIsr).
        self.maximal_isr: frozenset[int] = frozenset()
        self.high_watermark = 0
        self.log_end_offset = 0
        self.remote_replicas: dict[int, ReplicaState] = {}

    # -- events ---------------------------------------------------------------

    def become_leader(
        self,
        leader_epoch: int,
        isr: frozenset[int],
        assigned_replicas: list[int],
        log_end_offset: int,
        high_watermark: int,
        now_ms: int,
    ) -> int | None:
        """This broker leads from now on (LeaderAndIsr). Returns the HW if it advanced.

        The caller must also append (leader_epoch, LEO) to its LeaderEpochCache.
        """
        self.leader_epoch = leader_epoch
        self.leader_epoch_start_offset = log_end_offset
        self.isr = isr
        self.maximal_isr = isr
        self.log_end_offset = log_end_offset
        # A follower's HW never exceeds what the old leader committed, so it is a safe start.
        self.high_watermark = min(high_watermark, log_end_offset)
        self.remote_replicas = {
            broker_id: ReplicaState(broker_id, now_ms, broker_id in isr)
            for broker_id in assigned_replicas
            if broker_id != self.local_broker_id
        }
        return self.maybe_increment_high_watermark(now_ms)

    def on_append(
        self,
        log_end_offset: int,
        now_ms: int,
        session_fetch_ms: Mapping[int, int] | None = None,
    ) -> int | None:
        """The leader appended produced records; returns the HW if it advanced.

        `session_fetch_ms`: per follower, when its fetch session last asked for this
        partition without naming it; idle partitions are not named in session fetches,
        so this is when such a follower last showed it was caught up."""
        if session_fetch_ms:
            for broker_id, fetch_ms in session_fetch_ms.items():
                replica = self.remote_replicas.get(broker_id)
                if replica is not None:
                    replica.record_session_fetch(fetch_ms, self.log_end_offset)
        self.log_end_offset = log_end_offset
        return self.maybe_increment_high_watermark(now_ms)

    def on_follower_fetch(self, follower_id: int, fetch_offset: int, now_ms: int) -> FetchOutcome:
        """A follower's FETCH at `fetch_offset`: its remote LEO becomes `fetch_offset`."""
        response_high_watermark = self.high_watermark
        replica = self.remote_replicas.get(follower_id)
        if replica is None:
            return FetchOutcome(response_high_watermark, None, None)
        replica.record_fetch(fetch_offset, self.log_end_offset, now_ms)
        isr_expand = None
        if follower_id not in self.maximal_isr and self.is_follower_in_sync(replica):
            isr_expand = self.isr | {follower_id}
            self.maximal_isr = self.maximal_isr | {follower_id}
        advanced = self.maybe_increment_high_watermark(now_ms)
        return FetchOutcome(response_high_watermark, advanced, isr_expand)

    def apply_isr(self, isr: frozenset[int], now_ms: int) -> int | None:
        """The ISR change was written (ZooKeeper conditional update succeeded)."""
        self.isr = isr
        self.maximal_isr = isr
        return self.maybe_increment_high_watermark(now_ms)

    # -- decisions --------------------------------------------------------------

    def is_follower_in_sync(self, replica: ReplicaState) -> bool:
        """A follower may rejoin the ISR once it reached the HW and this leader's epoch."""
        return (
            replica.log_end_offset >= self.high_watermark
            and replica.log_end_offset >= self.leader_epoch_start_offset
        )

    def isr_expansion(self) -> frozenset[int] | None:
        """Followers outside the (maximal) ISR that may rejoin now, proposed as a new ISR.

        `on_follower_fetch` proposes this when the follower's fetch shows it; this asks
        again for a follower whose proposal could not be written (a write in flight, a
        conflict) and that has no new position to fetch, so no fetch will show it."""
        joining = {
            broker_id
            for broker_id, replica in self.remote_replicas.items()
            if broker_id not in self.maximal_isr and self.is_follower_in_sync(replica)
        }
        if not joining:
            return None
        self.maximal_isr = self.maximal_isr | joining
        return self.isr | joining

    def isr_followers_caught_up(self) -> bool:
        """Every follower in the ISR is at our LEO: nothing can make it lag but an append,
        so the periodic ISR check may forget this partition until then."""
        return all(
            replica.log_end_offset == self.log_end_offset
            for broker_id, replica in self.remote_replicas.items()
            if broker_id in self.isr
        )

    def isr_shrink_proposal(self, now_ms: int) -> frozenset[int] | None:
        """Followers that have not caught up within replica.lag.time.max.ms leave the ISR."""
        out_of_sync = {
            broker_id
            for broker_id in self.isr
            if broker_id != self.local_broker_id
            and (replica := self.remote_replicas.get(broker_id)) is not None
            and replica.log_end_offset != self.log_end_offset
            and now_ms - replica.last_caught_up_time_ms > self.replica_lag_time_max_ms
        }
        if not out_of_sync:
            return None
        return self.isr - out_of_sync

    def maybe_increment_high_watermark(self, now_ms: int) -> int | None:
        """HW := min LEO over the leader, the (maximal) ISR, and followers caught up within
        the lag window (Kafka's ISR rule: a recovered follower counts before it formally rejoins).
        Never moves backwards."""
        new_high_watermark = self.log_end_offset
        lag = self.replica_lag_time_max_ms
        isr = self.maximal_isr
        for broker_id, replica in self.remote_replicas.items():
            leo = replica.log_end_offset
            if leo < new_high_watermark and (
                broker_id in isr or replica.is_caught_up(self.log_end_offset, now_ms, lag)
            ):
                new_high_watermark = leo
        if new_high_watermark > self.high_watermark:
            self.high_watermark = new_high_watermark
            return new_high_watermark
        return None

    def check_produce(self, acks: int, min_insync_replicas: int) -> ErrorCode:
        """acks=all is refused up front when the ISR is smaller than min.insync.replicas."""
        if acks == -1 and len(self.isr) < min_insync_replicas:
            return ErrorCode.not_enough_replicas
        return ErrorCode.none

    def produce_completion(self, last_offset: int, min_insync_replicas: int) -> ErrorCode | None:
        """An acks=all produce waiting for `last_offset`: None while waiting, else its answer.

        As Kafka's DelayedProduce: done once the HW passes the record; it then fails with
        NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below min.insync.replicas.
        """
        if self.high_watermark <= last_offset:
            return None
        if len(self.isr) < min_insync_replicas:
            return ErrorCode.not_enough_replicas_after_append
        return ErrorCode.none

    def consumer_fetch_upper_bound(self) -> int:
        """Consumers read offsets < HW only (exclusive bound, docs/replication.md)."""
        return self.high_watermark
