"""A deterministic cluster of N replicas of one partition, a controller and producers.

Every replication decision comes from `strandline.replication` (the code the brokers run);
this module only supplies what the brokers' I/O shell would: a tiny in-memory log per
replica (epochs and values by offset), a clock, a network that can lose or delay fetch
responses, and a controller (clean/unclean election, ISR bookkeeping in "ZooKeeper").
It also keeps the books the invariant checks need (what was committed, and which
losses fall outside Kafka's guarantee).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from kio.schema.errors import ErrorCode

from strandline.controller import decisions
from strandline.controller.context import ControllerContext
from strandline.coordination.znodes import BrokerRegistration, LeaderAndIsr
from strandline.replication.follower import FetchState, FollowerState, follower_high_watermark
from strandline.replication.partition import Partition
from strandline.replication.truncation import (
    EpochEndOffset,
    TruncationMode,
    truncation_on_offset_out_of_range,
)
from strandline.sim import events as ev
from strandline.sim.events import Event
from strandline.storage.leader_epoch_cache import LeaderEpochCache
from strandline.types import TopicPartition

NAMES = "ABCDEFGHIJ"
NO_LEADER = -1
_TP = TopicPartition("sim", 0)  # the one partition this simulator replicates


@dataclass(frozen=True)
class SimConfig:
    replicas: int = 3
    truncation: TruncationMode = TruncationMode.KIP279
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    replica_lag_time_max_ms: int = 500
    step_ms: int = 50
    initial_leader: int = 0


class AcksAllAck(NamedTuple):
    """An acks=all produce answered with success, and who held the record at that moment."""

    offset: int
    value: str
    isr: frozenset[int]
    # ISR members whose log held the record when the ack went out (see `_ack_holders`).
    holders: frozenset[int]


class FetchResponse:
    __slots__ = (
        "fetch_offset",
        "leader_epoch",
        "epochs",
        "values",
        "high_watermark",
        "error",
        "leader_log_end_offset",
    )

    def __init__(
        self,
        fetch_offset: int,
        leader_epoch: int,
        epochs: list[int],
        values: list[str],
        high_watermark: int,
        error: ErrorCode,
        leader_log_end_offset: int,
    ) -> None:
        self.fetch_offset = fetch_offset
        self.leader_epoch = leader_epoch
        self.epochs = epochs
        self.values = values
        self.high_watermark = high_watermark
        self.error = error
        self.leader_log_end_offset = leader_log_end_offset


class Replica:
    """One broker's copy of the partition: the log and what the broker keeps beside it."""

    __slots__ = (
        "broker_id",
        "alive",
        "epochs",
        "values",
        "flushed",
        "high_watermark",
        "epoch_cache",
        "partition",
        "follower",
        "held_response",
    )

    def __init__(self, broker_id: int, mode: TruncationMode) -> None:
        self.broker_id = broker_id
        self.alive = True
        self.epochs: list[int] = []  # epochs[offset]: leader epoch the record was written in
        self.values: list[str] = []
        self.flushed = 0  # records below this offset survive a crash
        # The replication-offset-checkpoint is taken as written at every step.
        self.high_watermark = 0
        self.epoch_cache = LeaderEpochCache()
        self.partition: Partition | None = None  # set while leader
        self.follower = FollowerState(mode)
        self.held_response: FetchResponse | None = None

    @property
    def log_end_offset(self) -> int:
        return len(self.values)

    def truncate_to(self, offset: int) -> None:
        if offset < len(self.values):
            del self.epochs[offset:]
            del self.values[offset:]
            if self.flushed > offset:
                self.flushed = offset
        # Even a no-op truncation drops an epoch that starts at the LEO: this replica led
        # that epoch without writing in it, and the leader now says it is not there
        # (Kafka's UnifiedLog.truncateTo does the same).
        self.epoch_cache.truncate_from_end(offset)
        if self.high_watermark > offset:
            self.high_watermark = offset

    def append(self, epochs: list[int], values: list[str]) -> None:
        cache = self.epoch_cache
        start = len(self.values)
        for index, epoch in enumerate(epochs):
            if epoch > cache.latest_epoch:
                cache.assign(epoch, start + index)
        self.epochs.extend(epochs)
        self.values.extend(values)


class Simulator:
    def __init__(self, config: SimConfig, record: bool = False) -> None:
        self.config = config
        self.mode = config.truncation
        self.now_ms = 0
        self.replicas = [Replica(i, config.truncation) for i in range(config.replicas)]
        self.assignment = list(range(config.replicas))
        self.leader = NO_LEADER
        self.leader_epoch = -1
        self.isr: frozenset[int] = frozenset(self.assignment)
        # Bookkeeping for the invariants.
        self.committed: dict[int, tuple[int, str]] = {}  # offset -> (epoch, value)
        self.excused: set[int] = set()  # committed offsets whose loss Kafka does not guarantee
        self.lost: set[int] = set()
        self.dropped: set[int] = set()  # excused committed offsets later overwritten
        # Replicas that lost unflushed data, and from which offset, until the leader hears
        # their real LEO: meanwhile it counts stale data, so what it commits is not covered.
        self.unclean_shutdown_from: dict[int, int] = {}
        self.violations: list[str] = []
        self.term_high_watermark = 0
        self.acked: list[str] = []
        self.failed_produces: list[tuple[str, str]] = []
        self.waiting_produces: list[tuple[int, str]] = []  # (offset, value) for acks=all
        # For the min.insync.replicas invariants: every acks=all append accepted (with the
        # ISR it was accepted under) and every acks=all ack. The invariants read them
        # from a cursor, so each entry is judged once.
        self.acks_all_appends: list[tuple[str, frozenset[int]]] = []
        self.acks_all_acks: list[AcksAllAck] = []
        self.acks_all_appends_checked = 0
        self.acks_all_acks_checked = 0
        self.unclean_elections = 0
        self.record = record
        self.notes: list[str] = []
        self._install_leader(config.initial_leader, frozenset(self.assignment), unclean=False)

    # -- controller ---------------------------------------------------------------

    def _note(self, text: str) -> None:
        self.notes.append(text)

    def _install_leader(self, new_leader: int, isr: frozenset[int], unclean: bool) -> None:
        """The controller's LeaderAndIsr: bump the epoch; the rest become followers."""
        if unclean:
            self.unclean_elections += 1
            self.excused.update(self.committed)  # Kafka documents this possible loss
        self.leader_epoch += 1
        self.leader = new_leader
        self.isr = isr
        self.waiting_produces.clear()  # pending acks=all answers fail with NOT_LEADER
        self.unclean_shutdown_from.clear()  # the new leader starts with unknown remote LEOs
        replica = self.replicas[new_leader]
        replica.held_response = None
        replica.epoch_cache.assign(self.leader_epoch, replica.log_end_offset)
        partition = Partition(new_leader, self.config.replica_lag_time_max_ms)
        replica.partition = partition
        partition.become_leader(
            self.leader_epoch,
            isr,
            self.assignment,
            replica.log_end_offset,
            replica.high_watermark,
            self.now_ms,
        )
        replica.high_watermark = partition.high_watermark
        self.term_high_watermark = partition.high_watermark
        if self.record:
            kind = "unclean" if unclean else "clean"
            self._note(
                f"{NAMES[new_leader]} becomes leader, epoch {self.leader_epoch} "
                f"({kind}), ISR {self._isr_text()}"
            )
        for other in self.replicas:
            if other.broker_id != new_leader and other.alive:
                self._become_follower(other)

    def _become_follower(self, replica: Replica) -> None:
        replica.partition = None
        cut = replica.follower.become_follower(
            self.leader, self.leader_epoch, replica.log_end_offset, replica.high_watermark
        )
        if cut is not None:
            if self.record and cut < replica.log_end_offset:
                self._note(f"{NAMES[replica.broker_id]} truncates to its HW {cut}")
            replica.truncate_to(cut)

    def _elect(self) -> None:
        """Offline partition: the controller's own rule (`decisions.elect_leader`: the
        first live ISR replica, else any live one if unclean election is on), over what
        this simulator's "ZooKeeper" holds."""
        ctx = ControllerContext(broker_id=NO_LEADER)
        ctx.live_brokers = {
            r.broker_id: BrokerRegistration(r.broker_id, NAMES[r.broker_id], 0)
            for r in self.replicas
            if r.alive
        }
        ctx.assignments[_TP] = tuple(self.assignment)
        ctx.partition_states[_TP] = LeaderAndIsr(NO_LEADER, self.leader_epoch, tuple(self.isr))
        choice = decisions.elect_leader(ctx, _TP, self.config.unclean_leader_election_enable)
        if choice is not None:
            leader, isr, unclean = choice
            self._install_leader(leader, frozenset(isr), unclean=unclean)
            return
        self.leader = NO_LEADER
        if self.record:
            self._note("no live ISR replica: partition offline")

    def _set_isr(self, isr: frozenset[int]) -> None:
        """A conditional ISR write succeeded; the leader re-evaluates its HW."""
        self.isr = isr
        if self.record:
            self._note(f"ISR -> {self._isr_text()}")
        if self.leader != NO_LEADER:
            leader = self.replicas[self.leader]
            assert leader.partition is not None
            self._leader_hw_moved(leader, leader.partition.apply_isr(isr, self.now_ms))

    def _isr_text(self) -> str:
        return "{" + ",".join(NAMES[b] for b in sorted(self.isr)) + "}"

    # -- leader-side effects -------------------------------------------------------

    def _leader_hw_moved(self, leader: Replica, new_high_watermark: int | None) -> None:
        if new_high_watermark is None:
            return
        old = leader.high_watermark
        leader.high_watermark = new_high_watermark
        committed = self.committed
        excused = self.excused
        uncovered_from = (
            min(self.unclean_shutdown_from.values())
            if self.unclean_shutdown_from
            else new_high_watermark
        )
        for offset in range(old, new_high_watermark):
            record = (leader.epochs[offset], leader.values[offset])
            previous = committed.get(offset)
            if previous is not None and previous != record and offset in excused:
                self.dropped.add(offset)
            committed[offset] = record
            if offset >= uncovered_from:
                excused.add(offset)
            else:
                excused.discard(offset)
        if self.record:
            self._note(f"leader HW {old} -> {new_high_watermark}")
        if self.waiting_produces:
            self._complete_produces(leader)

    def _complete_produces(self, leader: Replica) -> None:
        partition = leader.partition
        assert partition is not None
        still_waiting = []
        for offset, value in self.waiting_produces:
            answer = partition.produce_completion(offset, self.config.min_insync_replicas)
            if answer is None:
                still_waiting.append((offset, value))
            elif answer == ErrorCode.none:
                self.acked.append(value)
                self.acks_all_acks.append(
                    AcksAllAck(offset, value, self.isr, self._ack_holders(leader, offset, value))
                )
            else:
                self.failed_produces.append((value, answer.name))
        self.waiting_produces = still_waiting

    def _ack_holders(self, leader: Replica, offset: int, value: str) -> frozenset[int]:
        """ISR members that hold the record at `offset`: the judge looks at the logs
        themselves, not at the remote LEOs the leader's decision was made from."""
        epoch = leader.epochs[offset]
        holders = []
        for broker_id in self.isr:
            replica = self.replicas[broker_id]
            if broker_id in self.unclean_shutdown_from or (
                replica.log_end_offset > offset
                and replica.values[offset] == value
                and replica.epochs[offset] == epoch
            ):
                # A replica that lost unflushed data counts on trust until the leader
                # hears its real LEO: Kafka's promise does not cover an unclean shutdown.
                holders.append(broker_id)
        return frozenset(holders)

    # -- events ----------------------------------------------------------------------

    def step(self, event: Event) -> None:
        self.now_ms += self.config.step_ms
        if self.record:
            self.notes = []
        kind = event.kind
        if kind == ev.FETCH:
            self._fetch(event.replica, deliver=True, hold=False)
        elif kind == ev.PRODUCE:
            self._produce(event.value, event.flag)
        elif kind == ev.FETCH_LOST:
            self._fetch(event.replica, deliver=False, hold=False)
        elif kind == ev.FETCH_DELAYED:
            self._fetch(event.replica, deliver=False, hold=True)
        elif kind == ev.DELIVER:
            self._deliver(event.replica)
        elif kind == ev.CRASH:
            self._crash(event.replica, event.flag)
        elif kind == ev.RESTART:
            self._restart(event.replica)
        elif kind == ev.BOUNCE:
            self._bounce(event.replica, event.flag)
        elif kind == ev.POWER_FAILURE:
            self._power_failure(event.flag)
        elif kind == ev.FLUSH:
            replica = self.replicas[event.replica]
            replica.flushed = replica.log_end_offset
        elif kind == ev.ELECT:
            self._controlled_election(event.replica)
        elif kind == ev.TICK:
            self.now_ms += self.config.replica_lag_time_max_ms // 2
            self._isr_expiration()
        else:
            raise ValueError(f"unknown event kind {kind!r}")

    def _produce(self, value: str, acks_all: bool) -> None:
        if self.leader == NO_LEADER:
            self.failed_produces.append((value, "NOT_LEADER_OR_FOLLOWER"))
            return
        leader = self.replicas[self.leader]
        partition = leader.partition
        assert partition is not None
        acks = -1 if acks_all else 1
        error = partition.check_produce(acks, self.config.min_insync_replicas)
        if error != ErrorCode.none:
            self.failed_produces.append((value, error.name))
            if self.record:
                self._note(f"{value} refused: {error.name}")
            return
        offset = leader.log_end_offset
        leader.epochs.append(self.leader_epoch)
        leader.values.append(value)
        if acks_all:
            self.waiting_produces.append((offset, value))
            self.acks_all_appends.append((value, self.isr))
        else:
            self.acked.append(value)
        if self.record:
            self._note(
                f"{NAMES[self.leader]} appends {value} at offset {offset}, "
                f"epoch {self.leader_epoch}"
            )
        self._leader_hw_moved(leader, partition.on_append(leader.log_end_offset, self.now_ms))

    def _fetch(self, follower_id: int, deliver: bool, hold: bool) -> None:
        if self.leader == NO_LEADER or follower_id == self.leader:
            return
        follower = self.replicas[follower_id]
        if not follower.alive:
            return
        leader = self.replicas[self.leader]
        if follower.follower.fetch_state is FetchState.TRUNCATING:
            # OffsetForLeaderEpoch for our latest epoch. Losing the response just means
            # asking again; delaying it is the same as losing it here.
            if not deliver:
                return
            answer = EpochEndOffset(
                *leader.epoch_cache.end_offset_for(
                    follower.epoch_cache.latest_epoch, leader.log_end_offset
                )
            )
            decision = follower.follower.on_epoch_answer(
                follower.epoch_cache, follower.log_end_offset, follower.high_watermark, answer
            )
            if self.record:
                self._note(
                    f"{NAMES[follower_id]}: OffsetForLeaderEpoch(epoch "
                    f"{follower.epoch_cache.latest_epoch}) -> (epoch {answer.leader_epoch}, "
                    f"end offset {answer.end_offset}); truncate to {decision.offset}"
                    + ("" if decision.truncation_completed else ", ask again")
                )
            follower.truncate_to(decision.offset)
            return
        response = self._leader_handles_fetch(leader, follower_id, follower.log_end_offset)
        if hold:
            follower.held_response = response
        elif deliver:
            self._apply_fetch_response(follower, response)
        elif self.record:
            self._note(f"{NAMES[follower_id]}: fetch response lost")

    def _leader_handles_fetch(
        self, leader: Replica, follower_id: int, fetch_offset: int
    ) -> FetchResponse:
        partition = leader.partition
        assert partition is not None
        self.unclean_shutdown_from.pop(follower_id, None)
        if fetch_offset > leader.log_end_offset:
            return FetchResponse(
                fetch_offset,
                self.leader_epoch,
                [],
                [],
                leader.high_watermark,
                ErrorCode.offset_out_of_range,
                leader.log_end_offset,
            )
        outcome = partition.on_follower_fetch(follower_id, fetch_offset, self.now_ms)
        response = FetchResponse(
            fetch_offset,
            self.leader_epoch,
            leader.epochs[fetch_offset:],
            leader.values[fetch_offset:],
            outcome.response_high_watermark,
            ErrorCode.none,
            leader.log_end_offset,
        )
        if self.record:
            self._note(
                f"{NAMES[self.leader]} handles FETCH from {NAMES[follower_id]} at "
                f"fetchOffset {fetch_offset}: remote LEO := {fetch_offset}, "
                f"response HW {outcome.response_high_watermark}"
            )
        self._leader_hw_moved(leader, outcome.high_watermark_advanced)
        if outcome.isr_expand is not None:
            self._set_isr(outcome.isr_expand)
        return response

    def _apply_fetch_response(self, follower: Replica, response: FetchResponse) -> None:
        state = follower.follower
        if not state.accepts_fetch_response(
            response.fetch_offset, response.leader_epoch, follower.log_end_offset
        ):
            if self.record:
                self._note(f"{NAMES[follower.broker_id]}: stale fetch response dropped")
            return
        if response.error == ErrorCode.offset_out_of_range:
            cut, _next_fetch = truncation_on_offset_out_of_range(
                follower.log_end_offset, 0, response.leader_log_end_offset
            )
            if self.record:
                self._note(f"{NAMES[follower.broker_id]}: OFFSET_OUT_OF_RANGE, truncate to {cut}")
            follower.truncate_to(cut)
            return
        if response.values:
            follower.append(response.epochs, response.values)
        follower.high_watermark = follower_high_watermark(
            follower.log_end_offset, response.high_watermark
        )
        if self.record:
            self._note(
                f"{NAMES[follower.broker_id]} appends {len(response.values)} record(s), "
                f"HW := min(LEO {follower.log_end_offset}, {response.high_watermark}) "
                f"= {follower.high_watermark}"
            )

    def _deliver(self, follower_id: int) -> None:
        follower = self.replicas[follower_id]
        response = follower.held_response
        if response is None or not follower.alive:
            return
        follower.held_response = None
        self._apply_fetch_response(follower, response)

    def _lose_unflushed(self, replica: Replica) -> None:
        for offset in range(replica.flushed, replica.log_end_offset):
            if offset in self.committed:
                self.excused.add(offset)  # an unclean shutdown is outside the guarantee
        if replica.flushed < replica.log_end_offset:
            previous = self.unclean_shutdown_from.get(replica.broker_id, replica.flushed)
            self.unclean_shutdown_from[replica.broker_id] = min(previous, replica.flushed)
        replica.truncate_to(replica.flushed)

    def _crash(self, broker_id: int, lose_unflushed: bool) -> None:
        replica = self.replicas[broker_id]
        if not replica.alive:
            return
        replica.alive = False
        replica.partition = None
        replica.held_response = None
        if lose_unflushed:
            self._lose_unflushed(replica)
        if self.record:
            self._note(f"{NAMES[broker_id]} is down")
        was_leader = broker_id == self.leader
        if was_leader:
            self.leader = NO_LEADER
        # The controller drops the dead replica from the ISR, except the last member,
        # which stays recorded so that a clean election can wait for it.
        if broker_id in self.isr and len(self.isr) > 1:
            self._set_isr(self.isr - {broker_id})
        if not any(self.replicas[b].alive for b in self.isr):
            self.excused.update(self.committed)  # every ISR replica is down at once
        if was_leader:
            self._elect()

    def _power_failure(self, lose_unflushed: bool) -> None:
        for replica in self.replicas:
            if replica.alive:
                replica.alive = False
                replica.partition = None
                replica.held_response = None
                if lose_unflushed:
                    self._lose_unflushed(replica)
        self.excused.update(self.committed)
        self.leader = NO_LEADER  # the ISR in ZooKeeper stays as it was: nobody updated it
        if self.record:
            self._note("every broker is down")

    def _reload_from_disk(self, replica: Replica) -> None:
        # What survives a restart: the log, the HW checkpoint (never above the LEO) and
        # the epoch cache (cut back to the log, as Kafka does on recovery).
        replica.held_response = None
        replica.partition = None
        if replica.high_watermark > replica.log_end_offset:
            replica.high_watermark = replica.log_end_offset
        replica.epoch_cache.truncate_from_end(replica.log_end_offset)
        replica.follower = FollowerState(self.mode)

    def _restart(self, broker_id: int) -> None:
        replica = self.replicas[broker_id]
        if replica.alive:
            return
        replica.alive = True
        self._reload_from_disk(replica)
        if self.record:
            self._note(f"{NAMES[broker_id]} is back")
        if self.leader == NO_LEADER:
            self._elect()
        else:
            self._become_follower(replica)

    def _bounce(self, broker_id: int, lose_unflushed: bool) -> None:
        replica = self.replicas[broker_id]
        if not replica.alive or broker_id == self.leader or self.leader == NO_LEADER:
            return
        if lose_unflushed:
            self._lose_unflushed(replica)
        self._reload_from_disk(replica)
        if self.record:
            self._note(f"{NAMES[broker_id]} restarted (unnoticed by the controller)")
        self._become_follower(replica)

    def _controlled_election(self, broker_id: int) -> None:
        replica = self.replicas[broker_id]
        if broker_id == self.leader or not replica.alive or broker_id not in self.isr:
            return
        live_isr = frozenset(b for b in self.isr if self.replicas[b].alive)
        old = self.leader
        if old != NO_LEADER:
            self.replicas[old].partition = None
        self._install_leader(broker_id, live_isr, unclean=False)

    def _isr_expiration(self) -> None:
        if self.leader == NO_LEADER:
            return
        partition = self.replicas[self.leader].partition
        assert partition is not None
        proposal = partition.isr_shrink_proposal(self.now_ms)
        if proposal is not None:
            self._set_isr(proposal)

    # -- convergence helpers --------------------------------------------------------------

    def settle(self, max_rounds: int = 100) -> None:
        """End of a schedule: bring every broker back and let the followers catch up."""
        for replica in self.replicas:
            if not replica.alive:
                self._restart(replica.broker_id)
        if self.leader == NO_LEADER:
            self._elect()
        for _ in range(max_rounds):
            if self.leader == NO_LEADER or self._quiescent():
                return
            for replica in self.replicas:
                if replica.broker_id != self.leader:
                    self._fetch(replica.broker_id, deliver=True, hold=False)

    def _quiescent(self) -> bool:
        leader = self.replicas[self.leader]
        for replica in self.replicas:
            if replica is leader:
                continue
            if (
                replica.follower.fetch_state is not FetchState.FETCHING
                or replica.log_end_offset != leader.log_end_offset
                or replica.high_watermark != leader.high_watermark
            ):
                return False
        return True

    # -- views ---------------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        replicas = []
        for replica in self.replicas:
            if not replica.alive:
                role = "down"
            elif replica.broker_id == self.leader:
                role = "leader"
            else:
                role = f"follower ({replica.follower.fetch_state.value})"
            replicas.append(
                {
                    "id": NAMES[replica.broker_id],
                    "role": role,
                    "log": [
                        [offset, replica.epochs[offset], replica.values[offset]]
                        for offset in range(replica.log_end_offset)
                    ],
                    "leo": replica.log_end_offset,
                    "hw": replica.high_watermark,
                    "epoch_cache": [[e.epoch, e.start_offset] for e in replica.epoch_cache.entries],
                    "flushed": replica.flushed,
                }
            )
        return {
            "leader": NAMES[self.leader] if self.leader != NO_LEADER else None,
            "leader_epoch": self.leader_epoch,
            "isr": [NAMES[b] for b in sorted(self.isr)],
            "now_ms": self.now_ms,
            "replicas": replicas,
        }
