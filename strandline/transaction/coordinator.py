"""The transaction coordinator as a pure state machine (Kafka's TransactionCoordinator,
the cache and log parts of TransactionStateManager, and the bookkeeping of
TransactionMarkerChannelManager).

Requests, append outcomes, marker outcomes and timer ticks go in with an explicit
`now_ms`; effects come out: `Respond` (answer a parked request), `AppendToTxnLog`
(a transition to replicate to `__transaction_state`) and `SendMarkers` (WriteTxnMarkers
to the partitions of a transaction that is being committed or aborted). The shell calls
`tick(now_ms)` no later than `next_deadline_ms()`.

The coordinator epoch of a `__transaction_state` partition is its leader epoch: markers
carry it, so a partition leader refuses markers of a coordinator that was deposed.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from strandline.transaction.metadata import (
    NO_PRODUCER_EPOCH,
    IllegalTransition,
    TransactionMetadata,
    TxnState,
    TxnTransit,
    is_epoch_exhausted,
)
from strandline.transaction.model import (
    AppendToTxnLog,
    DescribedTxn,
    Effect,
    InitProducerIdResult,
    ListedTxn,
    ListedTxns,
    Respond,
    SendMarkers,
    Token,
    TxnConfig,
    TxnResult,
)
from strandline.transaction.partitioning import partition_for
from strandline.transaction.records import (
    TxnLogRecordError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from strandline.types import TopicPartition

log = logging.getLogger(__name__)
E = ErrorCode
S = TxnState

# (error, now_ms) -> follow-up effects
Callback = Callable[[ErrorCode, int], list[Effect]]
ProducerIdAndEpoch = tuple[int, int]

# How Kafka's TransactionStateManager translates a failed append for the client.
_APPEND_ERRORS = {
    E.unknown_topic_or_partition: E.coordinator_not_available,
    E.not_enough_replicas: E.coordinator_not_available,
    E.not_enough_replicas_after_append: E.coordinator_not_available,
    E.request_timed_out: E.coordinator_not_available,
    E.not_leader_or_follower: E.not_coordinator,
    E.kafka_storage_error: E.not_coordinator,
    E.message_too_large: E.unknown_server_error,
    E.record_list_too_large: E.unknown_server_error,
}
# Marker answers that mean "try again, maybe at a new leader".
_MARKER_RETRIABLE = frozenset(
    {
        E.unknown_topic_or_partition,
        E.not_leader_or_follower,
        E.not_enough_replicas,
        E.not_enough_replicas_after_append,
        E.request_timed_out,
        E.kafka_storage_error,
    }
)
# The partition will never need this marker: the producer could not have written to it.
_MARKER_NOT_NEEDED = frozenset({E.none, E.unsupported_for_message_format, E.unsupported_version})
# Another producer epoch or coordinator owns the partition's transaction now.
_MARKER_FENCED = frozenset({E.invalid_producer_epoch, E.transaction_coordinator_fenced})


@dataclass
class _PartitionCache:
    coordinator_epoch: int
    txns: dict[str, TransactionMetadata]


@dataclass(frozen=True)
class _PendingAppend:
    transactional_id: str
    coordinator_epoch: int
    transit: TxnTransit
    callback: Callback
    # Errors after which the pending state stays (the caller appends again).
    retry_on: frozenset[ErrorCode]


@dataclass(frozen=True)
class _PendingCompletion:
    """A prepared transaction whose markers are being written (Kafka's PendingCompleteTxn)."""

    transactional_id: str
    coordinator_epoch: int
    commit: bool
    transit: TxnTransit


def _no_follow_up(error: ErrorCode, now_ms: int) -> list[Effect]:
    del error, now_ms
    return []


class TransactionCoordinator:
    def __init__(self, config: TxnConfig) -> None:
        self.config = config
        self._caches: dict[int, _PartitionCache] = {}
        self._loading: dict[int, int] = {}  # partition -> coordinator epoch being loaded
        self._append_ids = itertools.count(1)
        self._appends: dict[int, _PendingAppend] = {}
        self._completions: dict[str, _PendingCompletion] = {}
        self._completion_retries: list[tuple[int, _PendingCompletion]] = []
        self._next_abort_check_ms = 0
        self._next_expiration_check_ms = 0

    # == ownership ============================================================================

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.num_partitions)

    def owned_partitions(self) -> dict[int, int]:
        """Served partitions with their coordinator epoch."""
        return {p: c.coordinator_epoch for p, c in self._caches.items()}

    def begin_loading(self, partition: int, coordinator_epoch: int) -> None:
        """Became leader of the partition: COORDINATOR_LOAD_IN_PROGRESS until `load`."""
        self._forget(partition)
        self._loading[partition] = coordinator_epoch

    def load(
        self,
        partition: int,
        coordinator_epoch: int,
        records: Iterable[tuple[bytes, bytes | None]],
        now_ms: int,
    ) -> list[Effect]:
        """Replay the partition's records and serve it; transactions left in PrepareCommit
        or PrepareAbort by the previous coordinator get their markers written again."""
        if self._loading.get(partition) != coordinator_epoch:
            return []  # leadership moved on while the log was read
        txns: dict[str, TransactionMetadata] = {}
        for key, value in records:
            try:
                transactional_id = decode_key(key)
                if value is None:
                    txns.pop(transactional_id, None)
                else:
                    txns[transactional_id] = TransactionMetadata.from_log(
                        transactional_id, decode_value(value)
                    )
            except (TxnLogRecordError, ValueError, UnicodeDecodeError) as e:
                log.warning(
                    "skipping unreadable record in __transaction_state-%d: %s", partition, e
                )
        del self._loading[partition]
        self._caches[partition] = _PartitionCache(coordinator_epoch, txns)
        out: list[Effect] = []
        for txn in txns.values():
            if txn.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                log.info(
                    "resuming %s of transactional id %r (producer %d, epoch %d) on %d partitions",
                    txn.state.display_name,
                    txn.transactional_id,
                    txn.producer_id,
                    txn.producer_epoch,
                    len(txn.partitions),
                )
                commit = txn.state is S.PREPARE_COMMIT
                complete = txn.prepare_complete(now_ms)
                out += self._start_markers(txn, coordinator_epoch, commit, complete, now_ms)
        return out

    def unload(self, partition: int) -> None:
        """No longer the leader: forget the partition. Appends in flight are answered
        NOT_COORDINATOR when they report back; markers in flight are dropped."""
        self._forget(partition)

    def _forget(self, partition: int) -> None:
        self._loading.pop(partition, None)
        self._caches.pop(partition, None)
        for txn_id in [t for t in self._completions if self.partition_for(t) == partition]:
            del self._completions[txn_id]
        self._completion_retries = [
            (due, pc)
            for due, pc in self._completion_retries
            if self.partition_for(pc.transactional_id) != partition
        ]

    def _lookup(
        self, transactional_id: str
    ) -> tuple[ErrorCode | None, _PartitionCache | None, TransactionMetadata | None]:
        partition = self.partition_for(transactional_id)
        if partition in self._loading:
            return E.coordinator_load_in_progress, None, None
        cache = self._caches.get(partition)
        if cache is None:
            return E.not_coordinator, None, None
        return None, cache, cache.txns.get(transactional_id)

    # == InitProducerId =======================================================================

    def needs_producer_id(self, transactional_id: str, expected: ProducerIdAndEpoch | None) -> bool:
        """Whether `init_producer_id` would need a fresh producer id (a new transactional
        id, or an exhausted epoch): the shell claims one first, since that may block."""
        error, _, txn = self._lookup(transactional_id)
        if error is not None or not transactional_id:
            return False
        if txn is None:
            return True
        return (
            not txn.pending
            and txn.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
            and txn.epoch_exhausted
            and (expected is None or expected[1] == txn.producer_epoch)
        )

    def init_producer_id(
        self,
        token: Token,
        transactional_id: str,
        timeout_ms: int,
        expected: ProducerIdAndEpoch | None,
        now_ms: int,
        fresh_producer_id: int | None = None,
    ) -> list[Effect]:
        def answer(error: ErrorCode, producer_id: int = -1, epoch: int = -1) -> list[Effect]:
            return [Respond(token, InitProducerIdResult(error, producer_id, epoch))]

        if not transactional_id:
            return answer(E.invalid_request)
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return answer(E.invalid_transaction_timeout)
        error, cache, txn = self._lookup(transactional_id)
        if error is not None:
            return answer(error)
        assert cache is not None
        if txn is None:
            if fresh_producer_id is None:
                return answer(E.concurrent_transactions)  # the shell had no id: retry
            txn = TransactionMetadata(
                transactional_id,
                fresh_producer_id,
                NO_PRODUCER_EPOCH,
                timeout_ms,
                S.EMPTY,
                last_update_timestamp_ms=now_ms,
            )
            cache.txns[transactional_id] = txn
            fresh_producer_id = None
        coordinator_epoch = cache.coordinator_epoch
        prepared = self._prepare_init(txn, timeout_ms, expected, now_ms, fresh_producer_id)
        if isinstance(prepared, ErrorCode):
            return answer(prepared)
        transit = prepared
        if transit.state is S.PREPARE_EPOCH_FENCE:
            # Abort the open transaction first; the client retries (CONCURRENT_TRANSACTIONS)
            # and its retry bumps the epoch once more, for itself.
            log.info(
                "InitProducerId for %r fences producer %d epoch %d and aborts its transaction",
                transactional_id,
                txn.producer_id,
                txn.producer_epoch,
            )

            def after_abort(error: ErrorCode, now_ms: int) -> list[Effect]:
                return answer(E.concurrent_transactions if error is E.none else error)

            return self._end_transaction(
                transactional_id,
                transit.producer_id,
                transit.producer_epoch,
                False,
                False,
                after_abort,
                now_ms,
            )

        def after_append(error: ErrorCode, now_ms: int) -> list[Effect]:
            if error is not E.none:
                return answer(error)
            log.info(
                "initialized transactional id %r with producer id %d epoch %d",
                transactional_id,
                transit.producer_id,
                transit.producer_epoch,
            )
            return answer(E.none, transit.producer_id, transit.producer_epoch)

        return self._append(transactional_id, coordinator_epoch, transit, after_append, now_ms)

    def _prepare_init(
        self,
        txn: TransactionMetadata,
        timeout_ms: int,
        expected: ProducerIdAndEpoch | None,
        now_ms: int,
        fresh_producer_id: int | None,
    ) -> TxnTransit | ErrorCode:
        if txn.pending:
            return E.concurrent_transactions
        if expected is not None:
            expected_id, expected_epoch = expected
            # Unless the metadata is new, the id must be the current one, or the previous
            # one with an exhausted epoch (a retry of the bump that rotated the id).
            valid = (
                txn.producer_epoch == NO_PRODUCER_EPOCH
                or expected_id == txn.producer_id
                or (expected_id == txn.last_producer_id and is_epoch_exhausted(expected_epoch))
            )
            if not valid:
                return E.producer_fenced
        if txn.state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
            return E.concurrent_transactions
        if txn.state in (S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT):
            if txn.epoch_exhausted and (expected is None or expected[1] == txn.producer_epoch):
                if fresh_producer_id is None:
                    return E.concurrent_transactions
                return txn.prepare_producer_id_rotation(
                    fresh_producer_id, timeout_ms, now_ms, expected is not None
                )
            transit = txn.prepare_increment_producer_epoch(
                timeout_ms, None if expected is None else expected[1], now_ms
            )
            return E.producer_fenced if transit is None else transit
        if txn.state is S.ONGOING:
            return txn.prepare_fence_producer_epoch()
        raise IllegalTransition(
            f"transactional id {txn.transactional_id} is in state {txn.state.display_name}"
        )

    # == AddPartitionsToTxn / AddOffsetsToTxn =================================================

    def add_partitions(
        self,
        token: Token,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        now_ms: int,
    ) -> list[Effect]:
        def answer(error: ErrorCode, now_ms: int = now_ms) -> list[Effect]:
            return [Respond(token, TxnResult(error))]

        added = frozenset(partitions)
        if not transactional_id:
            return answer(E.invalid_request)
        error, cache, txn = self._lookup(transactional_id)
        if error is not None:
            return answer(error)
        assert cache is not None
        if txn is None or txn.producer_id != producer_id:
            return answer(E.invalid_producer_id_mapping)
        if txn.producer_epoch != producer_epoch:
            return answer(E.producer_fenced)
        if txn.pending or txn.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return answer(E.concurrent_transactions)
        if txn.state is S.ONGOING and added <= txn.partitions:
            return answer(E.none)
        transit = txn.prepare_add_partitions(added, now_ms)
        return self._append(transactional_id, cache.coordinator_epoch, transit, answer, now_ms)

    # == EndTxn ===============================================================================

    def end_txn(
        self,
        token: Token,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        now_ms: int,
    ) -> list[Effect]:
        def answer(error: ErrorCode, now_ms: int) -> list[Effect]:
            return [Respond(token, TxnResult(error))]

        return self._end_transaction(
            transactional_id, producer_id, producer_epoch, commit, True, answer, now_ms
        )

    def _end_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        from_client: bool,
        callback: Callback,
        now_ms: int,
    ) -> list[Effect]:
        if not transactional_id:
            return callback(E.invalid_request, now_ms)
        error, cache, txn = self._lookup(transactional_id)
        if error is not None:
            return callback(error, now_ms)
        assert cache is not None
        if txn is None or txn.producer_id != producer_id:
            return callback(E.invalid_producer_id_mapping, now_ms)
        # A client must name the current epoch; the coordinator itself ends with the
        # epoch it is fencing with, which is newer.
        if (from_client and producer_epoch != txn.producer_epoch) or (
            producer_epoch < txn.producer_epoch
        ):
            return callback(E.producer_fenced, now_ms)
        if txn.pending and txn.pending_state is not S.PREPARE_EPOCH_FENCE:
            return callback(E.concurrent_transactions, now_ms)
        coordinator_epoch = cache.coordinator_epoch
        state = txn.state
        if state is S.COMPLETE_COMMIT:
            return callback(E.none if commit else E.invalid_txn_state, now_ms)
        if state is S.COMPLETE_ABORT:
            return callback(E.invalid_txn_state if commit else E.none, now_ms)
        if state is S.PREPARE_COMMIT:
            return callback(E.concurrent_transactions if commit else E.invalid_txn_state, now_ms)
        if state is S.PREPARE_ABORT:
            return callback(E.invalid_txn_state if commit else E.concurrent_transactions, now_ms)
        if state is S.EMPTY:
            return callback(E.invalid_txn_state, now_ms)
        if state is not S.ONGOING:
            raise IllegalTransition(
                f"transactional id {transactional_id} is in state {state.display_name}"
            )
        next_state = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
        is_fence = False
        if next_state is S.PREPARE_ABORT and txn.pending_state is S.PREPARE_EPOCH_FENCE:
            # The fence is written as the PrepareAbort itself, with the bumped epoch:
            # from now on the old producer's requests are refused.
            is_fence = True
            txn.pending_state = None
            txn.producer_epoch = producer_epoch
            txn.last_producer_epoch = NO_PRODUCER_EPOCH
        transit = txn.prepare_abort_or_commit(next_state, now_ms)

        def after_prepare(error: ErrorCode, now_ms: int) -> list[Effect]:
            if error is not E.none:
                if is_fence:
                    _, cache_now, txn_now = self._lookup(transactional_id)
                    if cache_now is not None and txn_now is not None:
                        if cache_now.coordinator_epoch == coordinator_epoch:
                            txn_now.has_failed_epoch_fence = True
                return callback(error, now_ms)
            lookup_error, cache_now, txn_now = self._lookup(transactional_id)
            if lookup_error is not None:
                return callback(lookup_error, now_ms)
            if (
                cache_now is None
                or txn_now is None
                or cache_now.coordinator_epoch != coordinator_epoch
            ):
                return callback(E.not_coordinator, now_ms)
            if txn_now.producer_id != producer_id:
                return callback(E.invalid_producer_id_mapping, now_ms)
            if txn_now.producer_epoch != producer_epoch:
                return callback(E.producer_fenced, now_ms)
            if txn_now.pending:
                return callback(E.concurrent_transactions, now_ms)
            if txn_now.state is not next_state:
                return callback(E.invalid_txn_state, now_ms)
            complete = txn_now.prepare_complete(now_ms)
            # The client hears of success now; the markers and the completion record
            # follow, and a new coordinator would finish them from the log.
            out = callback(E.none, now_ms)
            return out + self._start_markers(txn_now, coordinator_epoch, commit, complete, now_ms)

        return self._append(transactional_id, coordinator_epoch, transit, after_prepare, now_ms)

    # == markers ==============================================================================

    def _start_markers(
        self,
        txn: TransactionMetadata,
        coordinator_epoch: int,
        commit: bool,
        complete: TxnTransit,
        now_ms: int,
    ) -> list[Effect]:
        txn_id = txn.transactional_id
        self._completions[txn_id] = _PendingCompletion(txn_id, coordinator_epoch, commit, complete)
        if not txn.partitions:
            return self._maybe_write_completion(txn_id, now_ms)
        return [
            SendMarkers(
                txn_id,
                txn.producer_id,
                txn.producer_epoch,
                coordinator_epoch,
                commit,
                frozenset(txn.partitions),
            )
        ]

    def markers_written(
        self,
        transactional_id: str,
        coordinator_epoch: int,
        results: dict[TopicPartition, ErrorCode],
        now_ms: int,
        deleted: Iterable[TopicPartition] = (),
    ) -> list[Effect]:
        """The outcome of a `SendMarkers`: each partition's error code, and the partitions
        whose topic no longer exists (they need no marker)."""
        pending = self._completions.get(transactional_id)
        if pending is None or pending.coordinator_epoch != coordinator_epoch:
            return []
        error, cache, txn = self._lookup(transactional_id)
        if error is not None or cache is None or txn is None:
            self._completions.pop(transactional_id, None)
            return []
        if cache.coordinator_epoch != coordinator_epoch:
            self._completions.pop(transactional_id, None)
            return []
        for tp in deleted:
            log.info("no marker for %s of %r: its topic is gone", tp, transactional_id)
            txn.remove_partition(tp)
        retry: set[TopicPartition] = set()
        for tp, code in results.items():
            if code in _MARKER_NOT_NEEDED:
                txn.remove_partition(tp)
            elif code in _MARKER_FENCED:
                log.info(
                    "marker of %r for %s refused with %s: another epoch owns it; "
                    "no more markers for this transaction",
                    transactional_id,
                    tp,
                    code.name,
                )
                self._completions.pop(transactional_id, None)
                return []
            else:
                if code not in _MARKER_RETRIABLE:
                    log.warning(
                        "marker of %r for %s failed with %s; retrying",
                        transactional_id,
                        tp,
                        code.name,
                    )
                retry.add(tp)
        if retry:
            return [
                SendMarkers(
                    transactional_id,
                    pending.transit.producer_id,
                    pending.transit.producer_epoch,
                    coordinator_epoch,
                    pending.commit,
                    frozenset(retry),
                    delay_ms=self.config.retry_backoff_ms,
                )
            ]
        return self._maybe_write_completion(transactional_id, now_ms)

    def _maybe_write_completion(self, transactional_id: str, now_ms: int) -> list[Effect]:
        pending = self._completions.get(transactional_id)
        if pending is None:
            return []
        error, cache, txn = self._lookup(transactional_id)
        if error is not None or cache is None or txn is None:
            del self._completions[transactional_id]
            return []
        if cache.coordinator_epoch != pending.coordinator_epoch:
            del self._completions[transactional_id]
            return []
        if txn.partitions:
            return []
        del self._completions[transactional_id]
        return self._append_completion(pending, now_ms)

    def _append_completion(self, pending: _PendingCompletion, now_ms: int) -> list[Effect]:
        def after(error: ErrorCode, now_ms: int) -> list[Effect]:
            if error is E.coordinator_not_available:
                due = now_ms + self.config.retry_backoff_ms
                self._completion_retries.append((due, pending))
            elif error is not E.none:
                log.info(
                    "completion of %r not written (%s); whoever loads the partition finishes it",
                    pending.transactional_id,
                    error.name,
                )
            return []

        return self._append(
            pending.transactional_id,
            pending.coordinator_epoch,
            pending.transit,
            after,
            now_ms,
            retry_on=frozenset({E.coordinator_not_available}),
        )

    # == the log ==============================================================================

    def _append(
        self,
        transactional_id: str,
        coordinator_epoch: int,
        transit: TxnTransit,
        callback: Callback,
        now_ms: int,
        retry_on: frozenset[ErrorCode] = frozenset(),
    ) -> list[Effect]:
        error, cache, txn = self._lookup(transactional_id)
        if error is not None:
            return callback(error, now_ms)
        if cache is None or txn is None or cache.coordinator_epoch != coordinator_epoch:
            return callback(E.not_coordinator, now_ms)
        append_id = next(self._append_ids)
        self._appends[append_id] = _PendingAppend(
            transactional_id, coordinator_epoch, transit, callback, retry_on
        )
        value = None if transit.state is S.DEAD else encode_value(transit.log_value())
        return [
            AppendToTxnLog(
                append_id,
                self.partition_for(transactional_id),
                ((encode_key(transactional_id), value),),
            )
        ]

    def append_done(self, append_id: int, error: ErrorCode, now_ms: int) -> list[Effect]:
        pending = self._appends.pop(append_id, None)
        if pending is None:
            return []
        error = _APPEND_ERRORS.get(error, error)
        lookup_error, cache, txn = self._lookup(pending.transactional_id)
        same_epoch = (
            lookup_error is None
            and cache is not None
            and txn is not None
            and cache.coordinator_epoch == pending.coordinator_epoch
        )
        if error is E.none:
            if lookup_error is not None:
                error = lookup_error
            elif not same_epoch:
                # Leadership moved (and maybe came back) while the record was in flight.
                error = E.not_coordinator
            else:
                assert cache is not None and txn is not None
                if pending.transit.state is S.DEAD:
                    if txn.pending_state is S.DEAD:
                        del cache.txns[pending.transactional_id]
                else:
                    txn.complete_transition(pending.transit)
        elif same_epoch and error not in pending.retry_on:
            assert txn is not None
            txn.pending_state = None
        if error is not E.none:
            log.info(
                "append of %r's %s failed: %s",
                pending.transactional_id,
                pending.transit.state.display_name,
                error.name,
            )
        return pending.callback(error, now_ms)

    # == timers ===============================================================================

    def next_deadline_ms(self) -> int | None:
        deadlines = [due for due, _ in self._completion_retries]
        if self._caches:
            deadlines += [self._next_abort_check_ms, self._next_expiration_check_ms]
        return min(deadlines, default=None)

    def tick(self, now_ms: int) -> list[Effect]:
        out: list[Effect] = []
        due = [pc for at, pc in self._completion_retries if at <= now_ms]
        self._completion_retries = [(at, pc) for at, pc in self._completion_retries if at > now_ms]
        for pending in due:
            out += self._append_completion(pending, now_ms)
        if now_ms >= self._next_abort_check_ms:
            self._next_abort_check_ms = now_ms + self.config.abort_timed_out_interval_ms
            out += self._abort_timed_out(now_ms)
        if now_ms >= self._next_expiration_check_ms:
            self._next_expiration_check_ms = now_ms + self.config.remove_expired_interval_ms
            out += self._expire_transactional_ids(now_ms)
        return out

    def _abort_timed_out(self, now_ms: int) -> list[Effect]:
        """Abort every transaction open for longer than its timeout, fencing its producer
        (Kafka's abortTimedOutTransactions)."""
        out: list[Effect] = []
        for cache in list(self._caches.values()):
            for txn in list(cache.txns.values()):
                if txn.pending or txn.state is not S.ONGOING:
                    continue
                if txn.start_timestamp_ms + txn.timeout_ms >= now_ms:
                    continue
                log.info(
                    "aborting transaction of %r (producer %d epoch %d): open for %d ms, "
                    "longer than its timeout of %d ms",
                    txn.transactional_id,
                    txn.producer_id,
                    txn.producer_epoch,
                    now_ms - txn.start_timestamp_ms,
                    txn.timeout_ms,
                )
                transit = txn.prepare_fence_producer_epoch()
                out += self._end_transaction(
                    txn.transactional_id,
                    transit.producer_id,
                    transit.producer_epoch,
                    False,
                    False,
                    _no_follow_up,
                    now_ms,
                )
        return out

    def _expire_transactional_ids(self, now_ms: int) -> list[Effect]:
        """Tombstone ids idle for transactional.id.expiration.ms (Kafka's
        removeExpiredTransactionalIds)."""
        out: list[Effect] = []
        horizon = now_ms - self.config.transactional_id_expiration_ms
        for cache in list(self._caches.values()):
            for txn in list(cache.txns.values()):
                if txn.pending or not txn.state.expiration_allowed:
                    continue
                if txn.last_update_timestamp_ms > horizon:
                    continue
                log.info(
                    "expiring transactional id %r, idle since %d",
                    txn.transactional_id,
                    txn.last_update_timestamp_ms,
                )
                transit = txn.prepare_dead()
                out += self._append(
                    txn.transactional_id, cache.coordinator_epoch, transit, _no_follow_up, now_ms
                )
        return out

    # == DescribeTransactions / ListTransactions ==============================================

    def describe(self, transactional_id: str) -> DescribedTxn:
        if not transactional_id:
            return DescribedTxn(transactional_id, E.invalid_request)
        error, _, txn = self._lookup(transactional_id)
        if error is not None:
            return DescribedTxn(transactional_id, error)
        if txn is None or txn.state is S.DEAD:
            return DescribedTxn(transactional_id, E.transactional_id_not_found)
        return DescribedTxn(
            transactional_id,
            E.none,
            txn.state.display_name,
            txn.producer_id,
            txn.producer_epoch,
            txn.timeout_ms,
            txn.start_timestamp_ms,
            tuple(sorted(txn.partitions)),
        )

    def list_transactions(
        self,
        state_filters: Iterable[str],
        producer_id_filters: Iterable[int],
        duration_filter_ms: int,
        now_ms: int,
    ) -> ListedTxns:
        if self._loading:
            return ListedTxns(E.coordinator_load_in_progress)
        names = list(state_filters)
        states = {s for s in (TxnState.from_name(n) for n in names) if s is not None}
        unknown = tuple(n for n in names if TxnState.from_name(n) is None)
        producer_ids = set(producer_id_filters)
        found = []
        for cache in self._caches.values():
            for txn in cache.txns.values():
                if txn.state is S.DEAD:
                    continue
                if producer_ids and txn.producer_id not in producer_ids:
                    continue
                if names and txn.state not in states:
                    continue
                if duration_filter_ms >= 0 and now_ms - txn.start_timestamp_ms < duration_filter_ms:
                    continue
                found.append(
                    ListedTxn(
                        txn.transactional_id,
                        txn.producer_id,
                        txn.state.display_name,
                        txn.start_timestamp_ms,
                    )
                )
        found.sort(key=lambda t: t.transactional_id)
        return ListedTxns(E.none, tuple(found), unknown)
