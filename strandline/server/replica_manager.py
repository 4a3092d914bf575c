"""The broker's hosted partitions: leadership changes, appends, reads, purgatories.

This is the I/O shell around each partition's log (Kafka's ReplicaManager). The
replication rules themselves (HW, ISR, follower truncation) live in the pure
`strandline.replication` core; this module feeds it events with `now` and carries
out its decisions: appends, ZooKeeper ISR writes, purgatory wake-ups.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import uuid
from collections.abc import Awaitable, Callable, Container, Generator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, NamedTuple

from kio.schema.errors import ErrorCode

from strandline.errors import (
    InconsistentTopicIdError,
    KafkaError,
    NotEnoughReplicasError,
    NotLeaderError,
    OffsetOutOfRangeError,
    StorageError,
    UnknownTopicOrPartitionError,
)
from strandline.protocol.control_batch import build_marker_batch
from strandline.protocol.controller_requests import BrokerInfo, PartitionState
from strandline.protocol.file_region import Records
from strandline.replication import isr_update, leader_and_isr
from strandline.replication.follower import FollowerState, follower_high_watermark
from strandline.replication.partition import Partition
from strandline.replication.truncation import TruncationMode
from strandline.server import clock
from strandline.server.fetch_session import DEFAULT_CACHE_SLOTS, FetchSessionCache, session_key
from strandline.server.purgatory import Purgatory
from strandline.server.replication_throttle import ReplicationThrottle
from strandline.state_change_log import StateChangeLog
from strandline.storage.config import LogConfig
from strandline.storage.log import AppendInfo, AppendOrigin, Log
from strandline.storage.log_manager import LogManager
from strandline.storage.producer_state import OutOfOrderSequenceError, UnknownProducerIdError
from strandline.storage.txn_index import AbortedTxn
from strandline.topic_ids import topic_id_to_str
from strandline.types import (
    CONSUMER_REPLICA_ID,
    DEBUGGING_REPLICA_ID,
    UNDEFINED_EPOCH,
    UNDEFINED_OFFSET,
    TopicPartition,
)

log = logging.getLogger(__name__)

# Leader-epoch checkpoints written at once when one LeaderAndIsr makes many leaders.
CHECKPOINT_WRITER_THREADS = 16
# How long a transaction marker waits for the ISR (Kafka: the request timeout, 30 s).
MARKER_TIMEOUT_S = 30.0
READ_UNCOMMITTED = 0
READ_COMMITTED = 1

# Carries out an ISR update procedure (replication/isr_update.py) and returns its result.
IsrWriter = Callable[[Generator[isr_update.IsrEffect, Any, Any]], Awaitable[Any]]


class HostedPartition:
    """One partition replica on this broker, as leader or follower."""

    def __init__(self, tp: TopicPartition, log: Log, high_watermark: int) -> None:
        self.tp = tp
        self.log = log
        self.leader = -1
        self.leader_epoch = -1
        self.controller_epoch = -1
        self.replicas: tuple[int, ...] = ()
        self.zk_version = 0
        self.min_insync_replicas = 1
        self.leader_state: Partition | None = None  # set while this broker leads
        # While leading: each follower's log start offset as its last fetch (v5+) said
        # (Kafka's Replica.logStartOffset), for DeleteRecords' low watermark.
        self.follower_log_starts: dict[int, int] = {}
        self.follower_state: FollowerState | None = None  # set while it follows
        self._follower_high_watermark = high_watermark
        self._isr: tuple[int, ...] = ()
        self.isr_write_in_flight = False

    def is_leader(self, broker_id: int) -> bool:
        return self.leader == broker_id and self.leader_state is not None

    @property
    def isr(self) -> tuple[int, ...]:
        if self.leader_state is not None:
            return tuple(sorted(self.leader_state.isr))
        return self._isr

    @isr.setter
    def isr(self, value: tuple[int, ...]) -> None:
        self._isr = value

    @property
    def high_watermark(self) -> int:
        if self.leader_state is not None:
            return self.leader_state.high_watermark
        return self._follower_high_watermark

    def set_follower_high_watermark(self, hw: int) -> None:
        self._follower_high_watermark = hw

    @property
    def last_stable_offset(self) -> int:
        """min(high watermark, first offset of a transaction that is open or whose marker
        the HW has not passed): read_committed consumers read below it. Followers keep
        the producer state too, so a new leader starts with the right LSO."""
        return self.log.last_stable_offset(self.high_watermark)


@dataclass
class StorageFailure:
    """A partition whose log directory refuses writes, from its first failure on."""

    role: str
    since_ms: int
    failed_writes: int = 1


_FULL_DISK_ERRNOS = {errno.ENOSPC, errno.EDQUOT}


def _errno_of(exc: BaseException) -> int | None:
    cause = exc.__cause__
    return cause.errno if isinstance(cause, OSError) else None


class FetchResult(NamedTuple):
    # A tuple, not a frozen dataclass: one is built per partition of every fetch.
    tp: TopicPartition
    records: Records  # a FileRegion of the segment file when read with as_region
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    last_stable_offset: int = -1
    # read_committed: the aborted transactions overlapping `records`; else None.
    aborted_transactions: list[AbortedTxn] | None = None
    # (epoch, end offset) when the fetcher's last fetched epoch diverges from this log
    # (Fetch v12+): no records then, the fetcher truncates to it.
    diverging_epoch: tuple[int, int] | None = None


class ReplicaManager:
    def __init__(
        self,
        broker_id: int,
        log_manager: LogManager,
        log_config_for: Callable[[str], LogConfig],
        state_change_log: StateChangeLog,
        replica_lag_time_max_ms: int,
        isr_writer: IsrWriter | None = None,
        truncation_mode: TruncationMode = TruncationMode.KIP279,
        fetch_session_slots: int = DEFAULT_CACHE_SLOTS,
    ) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.log_config_for = log_config_for
        self.state_change_log = state_change_log
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.isr_writer = isr_writer
        self.truncation_mode = truncation_mode
        self.partitions: dict[TopicPartition, HostedPartition] = {}
        self.throttle = ReplicationThrottle(broker_id, log_config_for)
        self.fetch_sessions = FetchSessionCache(fetch_session_slots)
        self.fetch_purgatory = Purgatory("Fetch", on_notify=self._touch_fetch_sessions)
        # Each follower's current fetch session with us (one fetcher per leader).
        self._follower_sessions: dict[int, int] = {}
        # Led partitions whose ISR followers may be behind our LEO: the only ones the
        # periodic ISR check looks at (an append puts a partition here).
        self._replicating: set[TopicPartition] = set()
        # Led partitions whose ISR expansion must be asked again by the periodic check
        # (a proposal deferred or refused, or an ISR just written smaller than maximal).
        self._isr_recheck: set[TopicPartition] = set()
        # ISR changes written whose notification could not be created yet: sent again
        # by the periodic check, so the controller learns of every change.
        self._isr_notify_pending: set[TopicPartition] = set()
        self._isr_notify_in_flight: set[TopicPartition] = set()
        self.produce_purgatory = Purgatory("Produce")
        # DeleteRecords waiting for every live replica's log start (DelayedDeleteRecords).
        self.delete_records_purgatory = Purgatory("DeleteRecords")
        self.controller_epoch = -1
        self._checkpoint_writers: ThreadPoolExecutor | None = None
        # Partitions whose last write failed (a full or broken log dir): the
        # state-change log gets one line when a partition enters this map and one
        # when it leaves, not one per refused request.
        self.storage_failures: dict[TopicPartition, StorageFailure] = {}
        # LeaderAndIsr states whose log could not be created (full disk), retried by
        # `retry_unopened` until space returns or a newer state replaces them.
        # Also those whose dir held a stale replica of a deleted topic of the same name
        # (another topic id): that dir is deleted and the retry creates a fresh log.
        self.unopened: dict[
            TopicPartition, tuple[int, PartitionState, tuple[BrokerInfo, ...], uuid.UUID | None]
        ] = {}
        self._checkpoint_failing = False
        # Set by the broker: start/stop replica fetchers for follower partitions.
        self.on_become_follower: Callable[[dict[TopicPartition, BrokerInfo]], None] = lambda _p: (
            None
        )
        self.on_stop_following: Callable[[set[TopicPartition]], None] = lambda _p: None
        # Called after a partition's role changes: (tp, is_leader now, leader epoch).
        # The group coordinator uses it to load and unload __consumer_offsets partitions.
        self.leadership_listeners: list[Callable[[TopicPartition, bool, int], None]] = []

    # -- leadership -----------------------------------------------------------

    def become_leader_or_follower(
        self,
        controller_epoch: int,
        states: list[PartitionState],
        live_leaders: tuple[BrokerInfo, ...],
        now_ms: int,
        topic_ids: Mapping[str, uuid.UUID] | None = None,
    ) -> dict[TopicPartition, ErrorCode]:
        """Apply LeaderAndIsr partition states; a state whose leader epoch is not newer
        than the one we hold is ignored (a stale controller decision). `topic_ids` are
        the request's (KIP-516): each partition's dir records its topic's id, and a dir
        of another id is a stale replica that is not reused."""
        self.controller_epoch = max(self.controller_epoch, controller_epoch)
        results: dict[TopicPartition, ErrorCode] = {}
        ids = topic_ids or {}
        states = self._drop_stale_replicas(controller_epoch, states, live_leaders, ids, results)
        hws = self.log_manager.read_high_watermarks()
        leaders = {b.broker_id: b for b in live_leaders}
        new_followers: dict[TopicPartition, BrokerInfo] = {}
        stopped: set[TopicPartition] = set()
        accepted: list[tuple[PartitionState, HostedPartition]] = []
        # The logs this request creates are opened side by side first (a new topic of
        # thousands of partitions: mkdir and file creates one after another took seconds).
        created = self.log_manager.get_or_create_logs(
            {
                state.tp: self.log_config_for(state.tp.topic)
                for state in states
                if state.tp not in self.partitions
                and self.broker_id in state.replicas
                and self.log_manager.get_log(state.tp) is None
            },
            now_ms,
        )
        for state in states:
            hosted = self.partitions.get(state.tp)
            error, _leads = leader_and_isr.decide(
                self.broker_id,
                state.leader,
                state.replicas,
                state.leader_epoch,
                None if hosted is None else hosted.leader_epoch,
            )
            if error == ErrorCode.stale_controller_epoch:
                assert hosted is not None
                self.state_change_log.record(
                    "ignored-stale-leader-epoch",
                    tp=state.tp,
                    leader_epoch=state.leader_epoch,
                    current_epoch=hosted.leader_epoch,
                )
            if error is not None:
                results[state.tp] = error
                continue
            config = self.log_config_for(state.tp.topic)
            retrying = self.unopened.pop(state.tp, None) is not None
            if hosted is None:
                try:
                    opened = created.get(state.tp)
                    if isinstance(opened, StorageError):
                        raise opened
                    plog = opened or self.log_manager.get_or_create_log(state.tp, config, now_ms)
                except StorageError as e:
                    # One partition's log dir refusing must not fail the whole request
                    # (a controller applying it locally would abort its event half-way):
                    # answer KAFKA_STORAGE_ERROR for it and try again when space returns.
                    self.unopened[state.tp] = (
                        controller_epoch,
                        state,
                        live_leaders,
                        ids.get(state.tp.topic),
                    )
                    if not retrying:  # one line per failure, not one per retry
                        self.state_change_log.record(
                            "log-create-failed", tp=state.tp, leader=state.leader, error=str(e)
                        )
                    results[state.tp] = ErrorCode.kafka_storage_error
                    continue
                hw = min(hws.get(state.tp, 0), plog.log_end_offset)
                hosted = HostedPartition(state.tp, plog, max(hw, plog.log_start_offset))
                self.partitions[state.tp] = hosted
            hosted.leader = state.leader
            hosted.leader_epoch = state.leader_epoch
            hosted.controller_epoch = state.controller_epoch
            hosted.replicas = state.replicas
            hosted.isr = state.isr
            hosted.zk_version = state.zk_version
            hosted.min_insync_replicas = config.min_insync_replicas
            accepted.append((state, hosted))
        self._record_topic_ids(
            [
                (hosted, topic_id)
                for state, hosted in accepted
                if (topic_id := ids.get(state.tp.topic)) is not None
                and hosted.log.topic_id != topic_id
            ]
        )
        self._start_leader_epochs([h for s, h in accepted if s.leader == self.broker_id])
        for state, hosted in accepted:
            if state.leader == self.broker_id:
                self._make_leader(hosted, state.isr, now_ms)
                stopped.add(state.tp)
                role = "leader"
            else:
                self._make_follower(hosted)
                if state.leader in leaders:
                    new_followers[state.tp] = leaders[state.leader]
                else:
                    stopped.add(state.tp)
                role = "follower"
            self.state_change_log.record(
                f"become-{role}",
                tp=state.tp,
                leader=state.leader,
                leader_epoch=state.leader_epoch,
                isr=list(state.isr),
                replicas=list(state.replicas),
                controller_epoch=controller_epoch,
                log_end_offset=hosted.log.log_end_offset,
                high_watermark=hosted.high_watermark,
            )
            results[state.tp] = ErrorCode.none
            self.fetch_purgatory.notify(state.tp)
            self.produce_purgatory.notify(state.tp)
            self.delete_records_purgatory.notify(state.tp)
            self._notify_leadership(state.tp, role == "leader", state.leader_epoch)
        if stopped:
            self.on_stop_following(stopped)
        if new_followers:
            self.on_become_follower(new_followers)
        return results

    def _drop_stale_replicas(
        self,
        controller_epoch: int,
        states: list[PartitionState],
        live_leaders: tuple[BrokerInfo, ...],
        topic_ids: Mapping[str, uuid.UUID],
        results: dict[TopicPartition, ErrorCode],
    ) -> list[PartitionState]:
        """The states left once those whose dir holds another topic id are answered
        INCONSISTENT_TOPIC_ID (Kafka's answer): such a dir is a replica of a deleted
        topic of the same name that this broker never got to delete. It is deleted now,
        as a stray log is at start-up, and the state is retried with a fresh log on the
        next tick (`retry_unopened`), so the replica comes back empty and catches up."""
        kept: list[PartitionState] = []
        for state in states:
            topic_id = topic_ids.get(state.tp.topic)
            log = self.log_manager.get_log(state.tp)
            if (
                topic_id is None
                or log is None
                or log.topic_id is None
                or log.topic_id == topic_id
                or self.broker_id not in state.replicas
            ):
                kept.append(state)
                continue
            # Requests that got here passed the controller-epoch fence, and one
            # controller's requests to a broker arrive in order: the request's id is the
            # controller's current one, so the dir is the stale side.
            hosted = self.partitions.get(state.tp)
            self.state_change_log.record(
                "inconsistent-topic-id",
                tp=state.tp,
                topic_id=topic_id_to_str(topic_id),
                dir_topic_id=topic_id_to_str(log.topic_id),
                action="stale replica deleted",
            )
            if hosted is not None:
                self.stop_replica(state.tp, delete=True)
            else:
                self.log_manager.delete_log(state.tp)
            results[state.tp] = ErrorCode.inconsistent_topic_id
            self.unopened[state.tp] = (controller_epoch, state, live_leaders, topic_id)
        return kept

    def retry_unopened(self, now_ms: int) -> None:
        """Apply again the LeaderAndIsr states whose log could not be created."""
        pending, self.unopened = self.unopened, {}
        # One call per LeaderAndIsr they came in, not one per partition: each call reads
        # the high-watermark checkpoint, and thousands may wait (docs/scaling.md).
        batches: dict[tuple[int, tuple[BrokerInfo, ...]], list[PartitionState]] = {}
        ids: dict[str, uuid.UUID] = {}
        for controller_epoch, state, live_leaders, topic_id in pending.values():
            if state.tp not in self.partitions:
                batches.setdefault((controller_epoch, live_leaders), []).append(state)
                if topic_id is not None:
                    ids[state.tp.topic] = topic_id
        for (controller_epoch, live_leaders), states in batches.items():
            results = self.become_leader_or_follower(
                controller_epoch, states, live_leaders, now_ms, ids
            )
            for state in states:
                if results.get(state.tp) == ErrorCode.none:
                    self.state_change_log.record("log-created-after-failure", tp=state.tp)

    def _record_topic_ids(self, pending: list[tuple[HostedPartition, uuid.UUID]]) -> None:
        """Write `partition.metadata` for the dirs that have none yet, side by side (a
        new topic of thousands of partitions: one fsync after another took seconds).
        A failed write is logged and tried again by the next LeaderAndIsr; the replica
        serves meanwhile, as Kafka's (which flushes the file lazily) does."""

        def record(entry: tuple[HostedPartition, uuid.UUID]) -> KafkaError | None:
            try:
                entry[0].log.assign_topic_id(entry[1])
            except (StorageError, InconsistentTopicIdError) as e:
                return e
            return None

        if len(pending) <= 1:
            failures = [record(entry) for entry in pending]
        else:
            if self._checkpoint_writers is None:
                self._checkpoint_writers = ThreadPoolExecutor(
                    CHECKPOINT_WRITER_THREADS, thread_name_prefix="epoch-checkpoint"
                )
            failures = list(self._checkpoint_writers.map(record, pending))
        for (hosted, _), failure in zip(pending, failures, strict=True):
            if failure is not None:
                self.state_change_log.record(
                    "partition-metadata-write-failed", tp=hosted.tp, error=str(failure)
                )

    def _start_leader_epochs(self, new_leaders: list[HostedPartition]) -> None:
        """A new leader starts its epoch at its log end (KIP-101), durably before it
        leads. Each checkpoint write waits on its own fsyncs, so those of one
        LeaderAndIsr run side by side: a controller failover that moves hundreds of
        leaders to this broker would otherwise wait for them one after another."""

        def start(hosted: HostedPartition) -> StorageError | None:
            try:
                hosted.log.assign_leader_epoch(
                    *leader_and_isr.leader_epoch_start(
                        hosted.leader_epoch, hosted.log.log_end_offset
                    )
                )
            except StorageError as e:
                # Leading without the entry on disk is safe: the cache in memory stays
                # without it too, and the first append in this epoch writes it before
                # any data (and fails, answered KAFKA_STORAGE_ERROR, while the disk is
                # full). Failing the whole LeaderAndIsr would leave every partition in
                # it half-applied.
                return e
            return None

        if len(new_leaders) <= 1:
            failures = [start(hosted) for hosted in new_leaders]
        else:
            if self._checkpoint_writers is None:
                self._checkpoint_writers = ThreadPoolExecutor(
                    CHECKPOINT_WRITER_THREADS, thread_name_prefix="epoch-checkpoint"
                )
            # The event loop waits here as it did for one write: no request sees a
            # leader whose epoch is not on disk yet.
            failures = list(self._checkpoint_writers.map(start, new_leaders))
        for hosted, failure in zip(new_leaders, failures, strict=True):
            if failure is not None:
                self.on_storage_error(hosted, "leader", failure)

    def _make_leader(self, hosted: HostedPartition, isr: tuple[int, ...], now_ms: int) -> None:
        hosted.follower_state = None
        start = leader_and_isr.become_leader(
            self.broker_id,
            hosted.leader_epoch,
            isr,
            hosted.replicas,
            hosted.log.log_end_offset,
            hosted.high_watermark,
            self.replica_lag_time_max_ms,
            now_ms,
        )
        hosted.leader_state = start.partition
        hosted.follower_log_starts = {}  # unknown until each follower fetches (as Kafka)
        self._replicating.add(hosted.tp)  # its followers' positions are not known yet

    def _make_follower(self, hosted: HostedPartition) -> None:
        start = leader_and_isr.become_follower(
            self.truncation_mode,
            hosted.leader,
            hosted.leader_epoch,
            hosted.log.log_end_offset,
            hosted.high_watermark,
            hosted.leader_state,
        )
        hosted.set_follower_high_watermark(start.high_watermark)
        hosted.leader_state = None
        if start.truncate_to is not None:  # the pre-KIP-101 mode truncates to its HW at once
            self.truncate(hosted, start.truncate_to)
        hosted.follower_state = start.follower

    def _notify_leadership(self, tp: TopicPartition, is_leader: bool, leader_epoch: int) -> None:
        for listener in self.leadership_listeners:
            try:
                listener(tp, is_leader, leader_epoch)
            except Exception:
                log.exception("leadership listener failed for %s", tp)

    def stop_replica(self, tp: TopicPartition, delete: bool) -> None:
        self.on_stop_following({tp})
        self._notify_leadership(tp, False, -1)
        self.partitions.pop(tp, None)
        if delete:
            self.log_manager.delete_log(tp)
        self.state_change_log.record("stop-replica", tp=tp, delete=delete)
        self.fetch_purgatory.notify(tp)
        self.produce_purgatory.notify(tp)

    def update_log_config(self, topic: str) -> None:
        config = self.log_config_for(topic)
        for tp, hosted in self.partitions.items():
            if tp.topic == topic:
                hosted.log.update_config(config)
                hosted.min_insync_replicas = config.min_insync_replicas

    # -- lookups --------------------------------------------------------------

    def get_partition(self, tp: TopicPartition) -> HostedPartition:
        hosted = self.partitions.get(tp)
        if hosted is None:
            raise UnknownTopicOrPartitionError(f"this broker does not host {tp}")
        return hosted

    def leader_partition(
        self, tp: TopicPartition, current_leader_epoch: int = -1
    ) -> HostedPartition:
        hosted = self.get_partition(tp)
        if not hosted.is_leader(self.broker_id):
            raise NotLeaderError(f"broker {self.broker_id} is not the leader of {tp}")
        check_leader_epoch(hosted, current_leader_epoch)
        return hosted

    # -- produce --------------------------------------------------------------

    def append_as_leader(
        self,
        tp: TopicPartition,
        records: bytes,
        acks: int,
        now_ms: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> AppendInfo:
        hosted = self.leader_partition(tp)
        leader_state = hosted.leader_state
        assert leader_state is not None
        if leader_state.check_produce(acks, hosted.min_insync_replicas) != ErrorCode.none:
            raise NotEnoughReplicasError(
                f"{tp}: ISR {sorted(leader_state.isr)} is smaller than "
                f"min.insync.replicas={hosted.min_insync_replicas}"
            )
        try:
            info = hosted.log.append_as_leader(records, hosted.leader_epoch, now_ms, origin)
        except StorageError as e:
            self.on_storage_error(hosted, "leader", e)
            raise
        except (OutOfOrderSequenceError, UnknownProducerIdError) as e:
            if tp in self.storage_failures:
                # The gap is an earlier batch of this producer that the full log dir
                # refused. Answered OUT_OF_ORDER_SEQUENCE (or UNKNOWN_PRODUCER_ID for a
                # new producer), librdkafka would drain, bump its epoch and renumber every
                # batch it had in flight to any partition, writing again those appended
                # but not yet acknowledged (duplicates; chaos seed 2210). The storage
                # error is the true cause, and is retried with sequences unchanged.
                raise StorageError(f"{tp}: log dir is failing ({e})") from e
            # A client reacts by bumping its epoch and renumbering what it had in flight;
            # when a duplicate shows up later, this line says who refused what.
            log.info("produce to %s refused: %s", tp, e)
            raise
        self.on_storage_ok(hosted, now_ms)
        advanced = leader_state.on_append(
            hosted.log.log_end_offset, now_ms, self._session_fetch_times(hosted)
        )
        self._replicating.add(tp)
        self._on_high_watermark(hosted, advanced)
        self.fetch_purgatory.notify(tp)
        return info

    async def append_and_wait(
        self,
        tp: TopicPartition,
        records: bytes,
        timeout_s: float,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> tuple[ErrorCode, AppendInfo | None]:
        """An internal acks=all append (the group coordinator's writes to
        __consumer_offsets, transaction markers): returns once the HW passes it, or the
        error."""
        try:
            info = self.append_as_leader(tp, records, -1, clock.now_ms(), origin)
        except KafkaError as e:
            return e.code, None

        def done(_key: object) -> bool:
            return self.produce_completion(tp, info.last_offset) is not None

        await self.produce_purgatory.wait([tp], done, timeout_s)
        answer = self.produce_completion(tp, info.last_offset)
        return (ErrorCode.request_timed_out if answer is None else answer), info

    async def write_txn_marker(
        self,
        tp: TopicPartition,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
        *,
        timeout_s: float = MARKER_TIMEOUT_S,
    ) -> ErrorCode:
        """Append a COMMIT or ABORT marker for the producer's transaction as leader
        (coordinator origin) and wait until the ISR has it, like acks=all. Refusals as
        Kafka's: NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS,
        INVALID_PRODUCER_EPOCH (an epoch older than the producer's),
        TRANSACTION_COORDINATOR_FENCED (an older coordinator epoch than the last marker's),
        KAFKA_STORAGE_ERROR, REQUEST_TIMED_OUT."""
        batch = build_marker_batch(
            producer_id, producer_epoch, coordinator_epoch, commit, clock.now_ms()
        )
        error, _ = await self.append_and_wait(tp, batch, timeout_s, origin=AppendOrigin.COORDINATOR)
        if error != ErrorCode.none:
            log.info(
                "%s marker for producer %d epoch %d on %s: %s",
                "commit" if commit else "abort",
                producer_id,
                producer_epoch,
                tp,
                error.name,
            )
        return error

    def produce_completion(self, tp: TopicPartition, last_offset: int) -> ErrorCode | None:
        """None while an acks=all produce must still wait, else its answer."""
        hosted = self.partitions.get(tp)
        if hosted is None or hosted.leader_state is None:
            return ErrorCode.not_leader_or_follower
        return hosted.leader_state.produce_completion(last_offset, hosted.min_insync_replicas)

    def _session_fetch_times(self, hosted: HostedPartition) -> dict[int, int] | None:
        """When each follower's fetch session last asked for this partition."""
        leader_state = hosted.leader_state
        if not self._follower_sessions or leader_state is None:
            return None
        times = {}
        leader_log_end_offset = leader_state.log_end_offset  # before this append
        for broker_id, replica in leader_state.remote_replicas.items():
            if replica.log_end_offset != leader_log_end_offset:
                continue  # not at our LEO: a session fetch cannot show it caught up
            session_id = self._follower_sessions.get(broker_id)
            if session_id is not None:
                fetched = self.fetch_sessions.last_fetch_ms(session_id, hosted.tp)
                if fetched is not None:
                    times[broker_id] = fetched
        return times

    def note_session_fetch(self, replica_id: int, session_id: int) -> None:
        if replica_id >= 0:
            self._follower_sessions[replica_id] = session_id

    def _touch_fetch_sessions(self, key: object) -> None:
        if isinstance(key, TopicPartition):
            for session_id in self.fetch_sessions.touch(key):
                self.fetch_purgatory.notify(session_key(session_id))

    def _on_high_watermark(self, hosted: HostedPartition, advanced: int | None) -> None:
        if advanced is not None:
            self.produce_purgatory.notify(hosted.tp)
            self.fetch_purgatory.notify(hosted.tp)

    # -- follower fetches arriving at the leader --------------------------------

    def on_follower_fetch(
        self,
        tp: TopicPartition,
        follower_id: int,
        fetch_offset: int,
        now_ms: int,
        log_start_offset: int = -1,
    ) -> None:
        """Record a follower's fetch position (its LEO) after the response's data and HW
        were read, so the response carries the HW from before this update (docs/replication.md),
        and its log start offset (Fetch v5+) for DeleteRecords."""
        hosted = self.partitions.get(tp)
        if hosted is None or hosted.leader_state is None:
            return
        if (
            log_start_offset >= 0
            and hosted.follower_log_starts.get(follower_id) != log_start_offset
        ):
            hosted.follower_log_starts[follower_id] = log_start_offset
            self.delete_records_purgatory.notify(tp)
        outcome = hosted.leader_state.on_follower_fetch(follower_id, fetch_offset, now_ms)
        self._on_high_watermark(hosted, outcome.high_watermark_advanced)
        if outcome.isr_expand is not None:
            self._spawn_isr_write(hosted, tuple(sorted(outcome.isr_expand)), "expand")

    def maybe_shrink_isr(self, now_ms: int) -> None:
        """Periodic: followers not caught up within replica.lag.time.max.ms leave the ISR.

        Only partitions appended to since their ISR was last seen caught up are looked
        at: an idle partition whose followers are at its LEO cannot lag. Expansions that
        could not be written are proposed again here, and notifications left pending."""
        if self.isr_writer is not None:
            for tp in sorted(self._isr_notify_pending - self._isr_notify_in_flight):
                self._isr_notify_in_flight.add(tp)
                asyncio.get_running_loop().create_task(self._notify_isr_change(tp))
        for tp in list(self._isr_recheck):
            hosted = self.partitions.get(tp)
            if hosted is None or hosted.leader_state is None:
                self._isr_recheck.discard(tp)
                continue
            if hosted.isr_write_in_flight:
                continue
            self._isr_recheck.discard(tp)
            expansion = hosted.leader_state.isr_expansion()
            if expansion is not None:
                self._spawn_isr_write(hosted, tuple(sorted(expansion)), "expand")
        for tp in list(self._replicating):
            hosted = self.partitions.get(tp)
            leader_state = hosted.leader_state if hosted is not None else None
            if hosted is None or leader_state is None:
                self._replicating.discard(tp)
                continue
            if leader_state.isr_followers_caught_up():
                self._replicating.discard(tp)
                continue
            if hosted.isr_write_in_flight:
                continue
            proposal = leader_state.isr_shrink_proposal(now_ms)
            if proposal is not None:
                self._spawn_isr_write(hosted, tuple(sorted(proposal)), "shrink")

    def _spawn_isr_write(self, hosted: HostedPartition, new_isr: tuple[int, ...], why: str) -> None:
        if self.isr_writer is None or hosted.isr_write_in_flight:
            self.state_change_log.record(
                f"isr-{why}-deferred", tp=hosted.tp, proposed=list(new_isr), isr=list(hosted.isr)
            )
            self._isr_recheck.add(hosted.tp)
            return
        hosted.isr_write_in_flight = True
        asyncio.get_running_loop().create_task(self._write_isr(hosted, new_isr, why))

    async def _write_isr(self, hosted: HostedPartition, new_isr: tuple[int, ...], why: str) -> None:
        """Persist an ISR change (`replication/isr_update.py`): the leader acts on what
        ZooKeeper holds once it is known, and meanwhile never on an ISR smaller than
        one ZooKeeper may hold."""
        assert self.isr_writer is not None
        leader_epoch, old_isr = hosted.leader_epoch, hosted.isr
        update = isr_update.isr_update(
            hosted.tp,
            hosted.leader,
            leader_epoch,
            hosted.controller_epoch,
            hosted.zk_version,
            frozenset(old_isr),
            frozenset(new_isr),
        )
        try:
            result: isr_update.IsrUpdateResult = await self.isr_writer(update)
        finally:
            hosted.isr_write_in_flight = False
        if hosted.leader_state is None or hosted.leader_epoch != leader_epoch:
            return  # a LeaderAndIsr replaced this term meanwhile; it carries the ISR
        hosted.zk_version = result.zk_version
        advanced = hosted.leader_state.apply_isr(result.isr, clock.now_ms())
        if result.notify_pending:
            self._isr_notify_pending.add(hosted.tp)
        self._replicating.add(hosted.tp)
        # A follower removed (or left out) may already be back at the LEO, and an idle
        # partition's session fetches would never name it again to show it.
        self._isr_recheck.add(hosted.tp)
        self.state_change_log.record(
            f"isr-{why}" if result.known else f"isr-{why}-{result.outcome.value}",
            tp=hosted.tp,
            old_isr=list(old_isr),
            proposed=list(new_isr),
            new_isr=sorted(result.isr),
            zk_version=result.zk_version,
            detail=result.detail,
        )
        self._on_high_watermark(hosted, advanced)
        self.produce_purgatory.notify(hosted.tp)

    async def _notify_isr_change(self, tp: TopicPartition) -> None:
        """An ISR change notification that could not be created with its write."""
        assert self.isr_writer is not None
        try:
            pending = await self.isr_writer(isr_update.notify_again(tp))
        finally:
            self._isr_notify_in_flight.discard(tp)
        if not pending:
            self._isr_notify_pending.discard(tp)

    # -- follower side ----------------------------------------------------------

    def truncate(self, hosted: HostedPartition, offset: int) -> None:
        if offset < hosted.log.log_end_offset:
            self.state_change_log.record(
                "truncate", tp=hosted.tp, to=offset, log_end_offset=hosted.log.log_end_offset
            )
        # Always: even at the LEO an epoch entry starting there may have to go.
        hosted.log.truncate_to(offset)
        hosted.set_follower_high_watermark(min(hosted.high_watermark, hosted.log.log_end_offset))

    def append_as_follower(
        self,
        hosted: HostedPartition,
        records: bytes | memoryview,
        leader_high_watermark: int,
        leader_log_start_offset: int,
        now_ms: int,
    ) -> None:
        try:
            if records:
                hosted.log.append_as_follower(records, now_ms)
            if leader_log_start_offset > hosted.log.log_start_offset:
                hosted.log.delete_records_before(
                    min(leader_log_start_offset, hosted.log.log_end_offset)
                )
        except StorageError as e:
            self.on_storage_error(hosted, "follower", e)
            raise
        if records:
            self.on_storage_ok(hosted, now_ms)
        hosted.set_follower_high_watermark(
            follower_high_watermark(hosted.log.log_end_offset, leader_high_watermark)
        )

    # -- a failing log directory --------------------------------------------------

    def on_storage_error(self, hosted: HostedPartition, role: str, exc: StorageError) -> None:
        """A write to this partition's log failed; the log is as before the write.

        Kafka would take the whole log dir offline until a restart; we keep the replica
        (reads still work, the leader answers KAFKA_STORAGE_ERROR, which clients retry)
        so that it serves again as soon as space returns, without a restart.
        """
        failure = self.storage_failures.get(hosted.tp)
        if failure is not None:
            failure.failed_writes += 1
            return
        self.storage_failures[hosted.tp] = StorageFailure(role, clock.now_ms())
        code = _errno_of(exc)
        log.error("writes to %s fail: %s", hosted.tp, exc)
        self.state_change_log.record(
            "log-dir-full" if code in _FULL_DISK_ERRNOS else "append-failed",
            tp=hosted.tp,
            role=role,
            log_dir=str(hosted.log.dir.parent),
            errno=errno.errorcode.get(code, str(code)) if code is not None else None,
            error=str(exc),
            log_end_offset=hosted.log.log_end_offset,
            high_watermark=hosted.high_watermark,
        )

    def on_storage_ok(self, hosted: HostedPartition, now_ms: int) -> None:
        failure = self.storage_failures.pop(hosted.tp, None)
        if failure is None:
            return
        log.warning("writes to %s succeed again", hosted.tp)
        self.state_change_log.record(
            "log-dir-recovered",
            tp=hosted.tp,
            role=failure.role,
            log_dir=str(hosted.log.dir.parent),
            failed_writes=failure.failed_writes,
            failed_for_ms=now_ms - failure.since_ms,
            log_end_offset=hosted.log.log_end_offset,
        )

    # -- fetch ----------------------------------------------------------------

    def read(
        self,
        tp: TopicPartition,
        fetch_offset: int,
        max_bytes: int,
        replica_id: int = CONSUMER_REPLICA_ID,
        min_one_batch: bool = True,
        current_leader_epoch: int = -1,
        isolation_level: int = READ_UNCOMMITTED,
        as_region: bool = False,
        last_fetched_epoch: int = -1,
    ) -> FetchResult:
        """`as_region`: the records as a FileRegion of the segment file (or b"" when
        none), for a response sent with sendfile; the same batches as bytes otherwise."""
        if replica_id == DEBUGGING_REPLICA_ID:
            hosted = self.get_partition(tp)
        else:
            hosted = self.leader_partition(tp, current_leader_epoch)
            if replica_id != CONSUMER_REPLICA_ID and replica_id not in hosted.replicas:
                raise NotLeaderError(f"broker {replica_id} is not a replica of {tp}")
        plog = hosted.log
        hw = hosted.high_watermark
        lso = plog.last_stable_offset(hw)
        read_committed = isolation_level == READ_COMMITTED and replica_id < 0
        if replica_id >= 0:
            upper = plog.log_end_offset
        else:
            upper = lso if read_committed else hw
        if last_fetched_epoch >= 0:
            diverging = _diverging_epoch(tp, plog, fetch_offset, last_fetched_epoch)
            if diverging is not None:
                return FetchResult(
                    tp,
                    b"",
                    hw,
                    plog.log_start_offset,
                    plog.log_end_offset,
                    lso,
                    [] if read_committed else None,
                    diverging,
                )
        if fetch_offset < plog.log_start_offset or fetch_offset > plog.log_end_offset:
            raise OffsetOutOfRangeError(
                f"{tp}: fetch offset {fetch_offset} outside "
                f"[{plog.log_start_offset}, {plog.log_end_offset}]"
            )
        data: Records = b""
        aborted: list[AbortedTxn] | None = None
        if fetch_offset < upper:
            read = plog.read_region if as_region else plog.read
            got = read(fetch_offset, max_bytes, max_offset=upper, min_one_batch=min_one_batch)
            data = got.records
            if read_committed and data:
                aborted = plog.collect_aborted_transactions(fetch_offset, got.next_offset)
        if read_committed and aborted is None:
            aborted = []
        return FetchResult(tp, data, hw, plog.log_start_offset, plog.log_end_offset, lso, aborted)

    def available_bytes(
        self,
        tp: TopicPartition,
        fetch_offset: int,
        replica_id: int,
        wanted: int,
        isolation_level: int = READ_UNCOMMITTED,
    ) -> int:
        """How many bytes (up to `wanted`) a fetch at `fetch_offset` could return now."""
        hosted = self.partitions.get(tp)
        if hosted is None or not hosted.is_leader(self.broker_id):
            return wanted  # an error is an answer: complete the fetch
        plog = hosted.log
        upper = plog.log_end_offset if replica_id >= 0 else hosted.high_watermark
        if isolation_level == READ_COMMITTED and replica_id < 0:
            lso = plog.last_stable_offset(upper)
            if lso <= fetch_offset <= upper:
                # Between the LSO and the HW: nothing readable until a transaction ends
                # (the marker's replication moves the HW, which wakes this fetch).
                return 0
            upper = lso
        if fetch_offset > upper or fetch_offset < plog.log_start_offset:
            return wanted
        if fetch_offset == upper:
            return 0
        if wanted <= 1:
            return 1  # the common min_bytes=1: any data will do, no need to read it
        return plog.read(fetch_offset, wanted, max_offset=upper).size

    def delete_records(self, tp: TopicPartition, offset: int) -> int:
        """DeleteRecords on the leader: advance the log start offset; returns the new
        low watermark. Followers follow through the log start offset in fetch responses."""
        hosted = self.leader_partition(tp)
        low = hosted.log.delete_records_before(offset)
        self.fetch_purgatory.notify(tp)
        return low

    def low_watermark(self, tp: TopicPartition, live_brokers: Container[int]) -> int:
        """Kafka's Partition.lowWatermarkIfLeader: the smallest log start offset of the
        leader and its live followers (-1 for a follower that has not fetched yet)."""
        hosted = self.leader_partition(tp)
        low = hosted.log.log_start_offset
        starts = hosted.follower_log_starts
        for replica in hosted.replicas:
            if replica != self.broker_id and replica in live_brokers:
                low = min(low, starts.get(replica, -1))
        return low

    def high_watermarks(self) -> dict[TopicPartition, int]:
        return {tp: p.high_watermark for tp, p in self.partitions.items()}

    def checkpoint(self) -> None:
        """Write the offset checkpoints. A failure (a full log dir) is logged once and
        retried on the next call: a stale checkpoint only makes a restart recover from
        an older point (the HW is never above the true one), it never loses data."""
        try:
            self.log_manager.checkpoint_high_watermarks(self.high_watermarks())
            self.log_manager.checkpoint_recovery_points()
            self.log_manager.checkpoint_log_start_offsets()
        except StorageError as e:
            if not self._checkpoint_failing:
                self._checkpoint_failing = True
                log.error("offset checkpoints fail: %s", e)
                self.state_change_log.record("checkpoint-failed", error=str(e))
            return
        if self._checkpoint_failing:
            self._checkpoint_failing = False
            self.state_change_log.record("checkpoint-recovered")


def _diverging_epoch(
    tp: TopicPartition, plog: Log, fetch_offset: int, last_fetched_epoch: int
) -> tuple[int, int] | None:
    """Kafka's Partition.readRecords with a last fetched epoch: the (epoch, end offset)
    this log has for it when the fetcher's log diverges from it there (the epoch ends
    before the fetch offset, or only an older epoch is known), else None."""
    epoch, end = plog.leader_epoch_cache.end_offset_for(last_fetched_epoch, plog.log_end_offset)
    if epoch == UNDEFINED_EPOCH or end == UNDEFINED_OFFSET:
        raise OffsetOutOfRangeError(
            f"{tp}: could not determine the end offset of the last fetched epoch "
            f"{last_fetched_epoch} from the request"
        )
    if fetch_offset < plog.log_start_offset:
        # Whether or not the epochs diverge, as Kafka.
        raise OffsetOutOfRangeError(
            f"{tp}: fetch offset {fetch_offset} is below the log start offset "
            f"{plog.log_start_offset}"
        )
    if epoch < last_fetched_epoch or end < fetch_offset:
        return epoch, end
    return None


def check_leader_epoch(hosted: HostedPartition, current_leader_epoch: int) -> None:
    """KIP-320: a request naming an older leader epoch is fenced; a newer one means this
    broker has not heard of the new leadership yet."""
    if current_leader_epoch < 0 or current_leader_epoch == hosted.leader_epoch:
        return
    if current_leader_epoch < hosted.leader_epoch:
        raise KafkaError(
            f"{hosted.tp}: request leader epoch {current_leader_epoch} < {hosted.leader_epoch}",
            code=ErrorCode.fenced_leader_epoch,
        )
    raise KafkaError(
        f"{hosted.tp}: request leader epoch {current_leader_epoch} > {hosted.leader_epoch}",
        code=ErrorCode.unknown_leader_epoch,
    )
