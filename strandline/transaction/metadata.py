"""A transactional id's metadata and its state transitions (Kafka's TransactionMetadata).

Every change is two steps, as in Kafka: `prepare_*` checks the transition, sets
`pending_state` and returns the target (`TxnTransit`) to append to `__transaction_state`;
`complete_transition` applies it once the append is replicated. While a transition is
pending every other request for the id is answered CONCURRENT_TRANSACTIONS.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import NoReturn

from strandline.transaction.records import TxnLogValue
from strandline.types import TopicPartition

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
SHORT_MAX = 32767


class TxnState(enum.Enum):
    """(id written to the log, name shown by DescribeTransactions/ListTransactions)."""

    EMPTY = (0, "Empty")
    ONGOING = (1, "Ongoing")
    PREPARE_COMMIT = (2, "PrepareCommit")
    PREPARE_ABORT = (3, "PrepareAbort")
    COMPLETE_COMMIT = (4, "CompleteCommit")
    COMPLETE_ABORT = (5, "CompleteAbort")
    DEAD = (6, "Dead")
    PREPARE_EPOCH_FENCE = (7, "PrepareEpochFence")

    @property
    def id(self) -> int:
        return int(self.value[0])

    @property
    def display_name(self) -> str:
        return str(self.value[1])

    @classmethod
    def from_id(cls, state_id: int) -> TxnState:
        for state in cls:
            if state.id == state_id:
                return state
        raise ValueError(f"unknown transaction state id {state_id}")

    @classmethod
    def from_name(cls, name: str) -> TxnState | None:
        return next((s for s in cls if s.display_name == name), None)

    @property
    def expiration_allowed(self) -> bool:
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


S = TxnState
_VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}


class IllegalTransition(RuntimeError):
    """A transition the state machine forbids: a coordinator bug, never a client's doing."""


def is_epoch_exhausted(epoch: int) -> bool:
    # Short.MaxValue stays free so the coordinator can always fence the current producer.
    return epoch >= SHORT_MAX - 1


@dataclass(frozen=True)
class TxnTransit:
    """The target of a pending transition: what is appended to the log."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    start_timestamp_ms: int
    last_update_timestamp_ms: int

    def log_value(self) -> TxnLogValue:
        return TxnLogValue(
            self.producer_id,
            self.producer_epoch,
            self.timeout_ms,
            self.state.id,
            frozenset() if self.state is S.EMPTY else self.partitions,
            self.last_update_timestamp_ms,
            self.start_timestamp_ms,
        )


@dataclass
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    partitions: set[TopicPartition] = field(default_factory=set)
    start_timestamp_ms: int = -1
    last_update_timestamp_ms: int = -1
    pending_state: TxnState | None = None
    # A fencing epoch bump whose log write failed: the next fence reuses that epoch
    # (it was never returned to a client, so reusing it is safe).
    has_failed_epoch_fence: bool = False

    @classmethod
    def from_log(cls, transactional_id: str, value: TxnLogValue) -> TransactionMetadata:
        state = TxnState.from_id(value.state_id)
        return cls(
            transactional_id,
            value.producer_id,
            value.producer_epoch,
            value.timeout_ms,
            state,
            partitions=set() if state is S.EMPTY else set(value.partitions),
            start_timestamp_ms=value.start_timestamp_ms,
            last_update_timestamp_ms=value.last_update_timestamp_ms,
        )

    @property
    def pending(self) -> bool:
        return self.pending_state is not None

    @property
    def epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    @property
    def has_open_transaction(self) -> bool:
        return self.state in (S.ONGOING, S.PREPARE_ABORT, S.PREPARE_COMMIT)

    # -- prepare ----------------------------------------------------------------------------

    def prepare_fence_producer_epoch(self) -> TxnTransit:
        if self.producer_epoch == SHORT_MAX:
            raise IllegalTransition("cannot fence a producer at epoch Short.MaxValue")
        bumped = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._prepare(
            S.PREPARE_EPOCH_FENCE,
            self.producer_id,
            bumped,
            NO_PRODUCER_EPOCH,
            self.timeout_ms,
            frozenset(self.partitions),
            self.start_timestamp_ms,
            self.last_update_timestamp_ms,
        )

    def prepare_increment_producer_epoch(
        self, timeout_ms: int, expected_epoch: int | None, now_ms: int
    ) -> TxnTransit | None:
        """The epoch bump of InitProducerId; None means PRODUCER_FENCED."""
        if self.epoch_exhausted:
            raise IllegalTransition(f"no epochs left for producer id {self.producer_id}")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            # A new producer instance: bump, and forget the previous epoch.
            epoch, last_epoch = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            # KIP-360: the current producer recovering from an error bumps its own epoch.
            epoch, last_epoch = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            # A retry of a bump whose answer was lost: return the current epoch again.
            epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        else:
            return None
        return self._prepare(
            S.EMPTY, self.producer_id, epoch, last_epoch, timeout_ms, frozenset(), -1, now_ms
        )

    def prepare_producer_id_rotation(
        self, new_producer_id: int, timeout_ms: int, now_ms: int, record_last_epoch: bool
    ) -> TxnTransit:
        if self.has_open_transaction:
            raise IllegalTransition("cannot rotate producer ids while a transaction is open")
        return self._prepare(
            S.EMPTY,
            new_producer_id,
            0,
            self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
            timeout_ms,
            frozenset(),
            -1,
            now_ms,
        )

    def prepare_add_partitions(self, added: frozenset[TopicPartition], now_ms: int) -> TxnTransit:
        starting = self.state in (S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT)
        return self._prepare(
            S.ONGOING,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.timeout_ms,
            frozenset(self.partitions) | added,
            now_ms if starting else self.start_timestamp_ms,
            now_ms,
        )

    def prepare_abort_or_commit(self, new_state: TxnState, now_ms: int) -> TxnTransit:
        return self._prepare(
            new_state,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.timeout_ms,
            frozenset(self.partitions),
            self.start_timestamp_ms,
            now_ms,
        )

    def prepare_complete(self, now_ms: int) -> TxnTransit:
        new_state = S.COMPLETE_COMMIT if self.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
        # The prepare record is in the log, so a failed fence is settled.
        self.has_failed_epoch_fence = False
        return self._prepare(
            new_state,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.timeout_ms,
            frozenset(),
            self.start_timestamp_ms,
            now_ms,
        )

    def prepare_dead(self) -> TxnTransit:
        return self._prepare(
            S.DEAD,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.timeout_ms,
            frozenset(),
            self.start_timestamp_ms,
            self.last_update_timestamp_ms,
        )

    def _prepare(
        self,
        new_state: TxnState,
        producer_id: int,
        epoch: int,
        last_epoch: int,
        timeout_ms: int,
        partitions: frozenset[TopicPartition],
        start_ms: int,
        now_ms: int,
    ) -> TxnTransit:
        if self.pending_state is not None:
            raise IllegalTransition(
                f"{self.transactional_id}: transition to {new_state.display_name} while "
                f"{self.pending_state.display_name} is pending"
            )
        if producer_id < 0:
            raise IllegalTransition(f"illegal producer id {producer_id}")
        if new_state is not S.DEAD and epoch < 0:
            raise IllegalTransition(f"illegal producer epoch {epoch}")
        if self.state not in _VALID_PREVIOUS[new_state]:
            raise IllegalTransition(
                f"{self.transactional_id}: {self.state.display_name} -> "
                f"{new_state.display_name} is not a valid transition"
            )
        self.pending_state = new_state
        return TxnTransit(
            producer_id,
            self.producer_id,
            epoch,
            last_epoch,
            timeout_ms,
            new_state,
            partitions,
            start_ms,
            now_ms,
        )

    # -- complete ---------------------------------------------------------------------------

    def remove_partition(self, tp: TopicPartition) -> None:
        """A marker is written: the partition no longer waits for it."""
        if self.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            raise IllegalTransition(
                f"{self.transactional_id}: marker done in state {self.state.display_name}"
            )
        self.partitions.discard(tp)

    def complete_transition(self, transit: TxnTransit) -> None:
        """Apply a transition whose record is replicated; checks it as Kafka does."""
        to_state = self.pending_state
        if to_state is None or to_state is not transit.state:
            self._fail(transit)
        same_producer = (
            transit.producer_epoch == self.producer_epoch
            and transit.producer_id == self.producer_id
        )
        if to_state is S.EMPTY:
            bumped = transit.producer_epoch == self.producer_epoch + 1 or (
                transit.producer_epoch == 0 and transit.producer_id != self.producer_id
            )
            if (
                (transit.producer_epoch != self.producer_epoch and not bumped)
                or transit.partitions
                or transit.start_timestamp_ms != -1
            ):
                self._fail(transit)
            self.timeout_ms = transit.timeout_ms
            self.producer_epoch = transit.producer_epoch
            self.last_producer_epoch = transit.last_producer_epoch
            self.producer_id = transit.producer_id
            self.last_producer_id = transit.last_producer_id
        elif to_state is S.ONGOING:
            if (
                not same_producer
                or not self.partitions <= transit.partitions
                or self.timeout_ms != transit.timeout_ms
            ):
                self._fail(transit)
            self.start_timestamp_ms = transit.start_timestamp_ms
            self.partitions |= transit.partitions
        elif to_state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
            if (
                not same_producer
                or set(transit.partitions) != self.partitions
                or self.timeout_ms != transit.timeout_ms
                or self.start_timestamp_ms != transit.start_timestamp_ms
            ):
                self._fail(transit)
        elif to_state in (S.COMPLETE_ABORT, S.COMPLETE_COMMIT):
            if (
                not same_producer
                or self.timeout_ms != transit.timeout_ms
                or transit.start_timestamp_ms == -1
            ):
                self._fail(transit)
            self.start_timestamp_ms = transit.start_timestamp_ms
            self.partitions.clear()
        else:
            # PrepareEpochFence is never written (it becomes PrepareAbort); Dead removes
            # the id from the cache instead of being applied.
            self._fail(transit)
        self.last_update_timestamp_ms = transit.last_update_timestamp_ms
        self.pending_state = None
        self.state = to_state

    def _fail(self, transit: TxnTransit) -> NoReturn:
        raise IllegalTransition(
            f"{self.transactional_id}: cannot complete the transition from {self} to {transit}"
        )
