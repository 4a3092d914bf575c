"""ReplicaFetcher: one task per (follower broker, leader broker) pulling its partitions.

Each partition first settles where its log ends relative to the leader's
(OffsetForLeaderEpoch, KIP-101/KIP-279: truncate by leader epoch, never blindly to the
HW), then fetches from its LEO in multi-partition Fetch requests with this broker's
replica id. The decisions come from the pure `FollowerState`; this module does I/O.
"""

from __future__ import annotations

import asyncio
import logging
from functools import partial
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode
from kio.schema.list_offsets.v7 import request as list_offsets_v7
from kio.schema.offset_for_leader_epoch.v4 import request as epoch_v4
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i32, i64

from strandline.client.connection import KafkaConnection
from strandline.client.fetch_session import FetchSessionHandler
from strandline.client.security import ClientSecurity
from strandline.errors import KafkaError, StorageError
from strandline.protocol.controller_requests import BrokerInfo
from strandline.protocol.fetch_codec import (
    FetchResponse,
    decode_fetch_response_v12,
    encode_fetch_request_v12,
)
from strandline.replication.follower import FetchState
from strandline.replication.truncation import EpochEndOffset, truncation_on_offset_out_of_range
from strandline.server import clock
from strandline.server.fetch_session import PartitionPosition
from strandline.server.metrics import NoMetrics
from strandline.server.replica_manager import HostedPartition, ReplicaManager
from strandline.types import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, TopicPartition

log = logging.getLogger(__name__)
_T = TypeVar("_T")

FETCH_MAX_WAIT_MS = 500
PARTITION_MAX_BYTES = 1 << 20
RESPONSE_MAX_BYTES = 10 << 20
BACKOFF_S = 0.1
# A partition whose log dir refused a write (full disk) waits this long before its
# next fetch, as Kafka's replica.fetch.backoff.ms: the fetched bytes would fail again,
# and every other partition of this fetcher keeps going meanwhile.
STORAGE_BACKOFF_S = 0.5
REQUEST_TIMEOUT_S = 10.0

# Our leader epoch is older than the leader's: this partition waits for the
# controller's next LeaderAndIsr. Other errors (the leader has not heard of its
# leadership yet: NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH, ...) are retried after
# a back-off, as Kafka's fetcher delays a failed partition.
_STALE_EPOCH_ERRORS = {ErrorCode.fenced_leader_epoch}


class ReplicaFetcher:
    def __init__(self, manager: ReplicaFetcherManager, leader: BrokerInfo) -> None:
        self.manager = manager
        self.leader = leader
        self.partitions: set[TopicPartition] = set()
        self._conn: KafkaConnection | None = None
        self._delayed_until: dict[TopicPartition, float] = {}
        self._session = FetchSessionHandler(manager.fetch_sessions)
        # The positions of the partitions ready to fetch, kept up to date by looking
        # again only at the partitions that changed (`_stale`): a round of an idle
        # fetcher costs the same with ten partitions or ten thousand.
        self._positions: dict[TopicPartition, PartitionPosition] = {}
        self._stale: set[TopicPartition] = set()
        # Changed since the last request was planned (its candidates to send or forget).
        self._changed: set[TopicPartition] = set()
        # Partitions that may still have to settle their log end (KIP-279).
        self._truncating: set[TopicPartition] = set()
        self._wakeup = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"replica-fetcher-{manager.broker_id}-{leader.broker_id}"
        )

    @property
    def rm(self) -> ReplicaManager:
        return self.manager.replica_manager

    def add(self, tps: set[TopicPartition]) -> None:
        self.partitions |= tps
        for tp in tps:
            self._delayed_until.pop(tp, None)
        self._stale |= tps
        self._truncating |= tps
        self._wakeup.set()

    def remove(self, tps: set[TopicPartition]) -> None:
        self.partitions -= tps
        self._stale |= tps & self._positions.keys()

    async def stop(self) -> None:
        self._task.cancel()
        try:
            await self._task
        except (asyncio.CancelledError, Exception):  # noqa: BLE001 - stopping regardless
            pass
        if self._conn is not None:
            await self._conn.close()

    def _hosted(self, tp: TopicPartition) -> HostedPartition | None:
        """The partition if it still follows this leader (a LeaderAndIsr may have moved it)."""
        hosted = self.rm.partitions.get(tp)
        if (
            tp not in self.partitions
            or hosted is None
            or hosted.follower_state is None
            or hosted.leader != self.leader.broker_id
        ):
            self.partitions.discard(tp)
            return None
        return hosted

    async def _connection(self) -> KafkaConnection:
        if self._conn is None or self._conn.closed:
            self._conn = await KafkaConnection.open(
                self.leader.host,
                self.leader.port,
                client_id=f"replica-fetcher-{self.manager.broker_id}",
                security=self.manager.security,
            )
        return self._conn

    async def _run(self) -> None:
        while True:
            if not self.partitions:
                # A new partition starts a new session (the leader evicts the old one).
                self._session.reset()
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            try:
                conn = await self._connection()
                await self._truncate(conn)
                await self._fetch(conn)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - the leader may be gone: back off, retry
                log.debug("fetcher to broker %d: %s", self.leader.broker_id, e)
                self._session.reset()
                if self._conn is not None:
                    await self._conn.close()
                    self._conn = None
                await asyncio.sleep(BACKOFF_S)

    async def _truncate(self, conn: KafkaConnection) -> None:
        """OffsetForLeaderEpoch for every partition still settling its log end."""
        while True:
            now = clock.monotonic_s()
            pending = {}
            for tp in list(self._truncating):
                h = self._hosted(tp)
                if h is None or h.follower_state is None:
                    self._truncating.discard(tp)
                elif h.follower_state.fetch_state is not FetchState.TRUNCATING:
                    self._truncating.discard(tp)
                    self._stale.add(tp)  # ready to fetch now
                elif self._delayed_until.get(tp, 0.0) <= now:
                    pending[tp] = h
            if not pending:
                return
            asked_epochs = {tp: h.leader_epoch for tp, h in pending.items()}
            request = epoch_v4.OffsetForLeaderEpochRequest(
                replica_id=BrokerId(self.manager.broker_id),
                topics=tuple(
                    epoch_v4.OffsetForLeaderTopic(
                        topic=TopicName(topic),
                        partitions=tuple(
                            epoch_v4.OffsetForLeaderPartition(
                                partition=i32(tp.partition),
                                current_leader_epoch=i32(h.leader_epoch),
                                leader_epoch=i32(h.log.leader_epoch_cache.latest_epoch),
                            )
                            for tp, h in pending.items()
                            if tp.topic == topic
                        ),
                    )
                    for topic in sorted({tp.topic for tp in pending})
                ),
            )
            response = await conn.send(request, timeout=REQUEST_TIMEOUT_S)
            retry = False
            for t in response.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.topic, p.partition)
                    hosted = pending.get(tp)
                    if hosted is None or hosted.follower_state is None:
                        continue
                    if p.error_code != ErrorCode.none:
                        self._on_partition_error(tp, p.error_code, asked_epochs[tp])
                        retry = True
                        continue
                    decision = hosted.follower_state.on_epoch_answer(
                        hosted.log.leader_epoch_cache,
                        hosted.log.log_end_offset,
                        hosted.high_watermark,
                        EpochEndOffset(p.leader_epoch, p.end_offset),
                    )
                    asked_epoch = hosted.log.leader_epoch_cache.latest_epoch
                    end_before = hosted.log.log_end_offset
                    hw_before = hosted.high_watermark
                    bytes_before = hosted.log.size_in_bytes
                    try:
                        self.rm.truncate(hosted, decision.offset)
                    except StorageError as e:
                        # The log is as it was; this partition asks again after a
                        # back-off while the others go on fetching.
                        self.rm.on_storage_error(hosted, "follower", e)
                        self._delayed_until[tp] = clock.monotonic_s() + STORAGE_BACKOFF_S
                        continue
                    cut = decision.offset < end_before
                    details: dict[str, object] = {
                        "leader": self.leader.broker_id,
                        "asked_epoch": asked_epoch,
                        "leader_epoch": p.leader_epoch,
                        "leader_end_offset": p.end_offset,
                        "log_end_offset": end_before,
                        "high_watermark": hw_before,
                        "truncate_to": decision.offset,
                        "completed": decision.truncation_completed,
                    }
                    if cut:
                        # Only a real cut is an `epoch-truncation`: an operator grepping
                        # for it must find the replicas that lost a divergent tail, not
                        # every follower that merely confirmed its log end.
                        self.rm.state_change_log.record(
                            "epoch-truncation",
                            tp=tp,
                            **details,
                            removed_offsets=end_before - hosted.log.log_end_offset,
                            removed_bytes=bytes_before - hosted.log.size_in_bytes,
                        )
                    else:
                        self.rm.state_change_log.record("epoch-check", tp=tp, **details)
                    if not decision.truncation_completed:
                        retry = True
            if retry:
                # KIP-279 asks again with the epoch now latest; errors back off first.
                await asyncio.sleep(BACKOFF_S)

    def _ready(self, now: float) -> dict[TopicPartition, PartitionPosition]:
        """Fetching partitions whose error back-off (if any) has passed, with the
        position to fetch from; only the partitions that changed are looked at."""
        for tp, until in list(self._delayed_until.items()):
            if until <= now:
                del self._delayed_until[tp]
                self._stale.add(tp)
        for tp in self._stale:
            h = self._hosted(tp)
            if (
                h is None
                or h.follower_state is None
                or h.follower_state.fetch_state is not FetchState.FETCHING
                or tp in self._delayed_until
            ):
                self._positions.pop(tp, None)
            else:
                self._positions[tp] = PartitionPosition(
                    h.log.log_end_offset,
                    PARTITION_MAX_BYTES,
                    h.leader_epoch,
                    h.log.log_start_offset,
                )
        self._changed |= self._stale
        self._stale = set()
        return self._positions

    async def _fetch(self, conn: KafkaConnection) -> None:
        wanted = self._ready(clock.monotonic_s())
        throttle = self.rm.throttle
        if wanted and throttle.follower.exceeded(throttle.clock()):
            # follower.replication.throttled.rate spent: fetch the others meanwhile (and
            # look at the throttled ones again next round).
            held = {tp for tp in wanted if throttle.follower_throttles(tp)}
            if held:
                wanted = {tp: p for tp, p in wanted.items() if tp not in held}
                self._changed |= held
                self._stale |= held
                if not wanted:
                    await asyncio.sleep(min(throttle.follower.delay_s(throttle.clock()), BACKOFF_S))
                    return
        if not wanted:
            await asyncio.sleep(BACKOFF_S)
            return
        session = self._session
        plan = session.plan(wanted, self._changed)
        self._changed = set()
        to_send = [
            (
                topic,
                [
                    (
                        tp.partition,
                        p.leader_epoch,
                        p.fetch_offset,
                        -1,
                        p.log_start_offset,
                        p.max_bytes,
                    )
                    for tp, p in by_topic
                ],
            )
            for topic, by_topic in _group_by_topic(plan.to_send)
        ]
        forgotten = [
            (topic, [tp.partition for tp, _ in tps])
            for topic, tps in _group_by_topic(dict.fromkeys(plan.forgotten))
        ]
        encode = partial(
            encode_fetch_request_v12,
            client_id=conn.client_id,
            replica_id=self.manager.broker_id,
            max_wait_ms=FETCH_MAX_WAIT_MS,
            min_bytes=1,
            max_bytes=RESPONSE_MAX_BYTES,
            isolation_level=0,
            session_id=plan.session_id,
            session_epoch=plan.epoch,
            topics=to_send,
            forgotten=forgotten,
        )
        sent = clock.perf_s()
        try:
            response: FetchResponse = await conn.send_framed(
                encode, _decode_fetch_response, timeout=REQUEST_TIMEOUT_S
            )
        except BaseException:
            session.on_failure()
            raise
        session.on_response(plan, response.error_code, response.session_id)
        if response.error_code != ErrorCode.none:
            log.info(
                "fetch session with broker %d: %s; starting a new one",
                self.leader.broker_id,
                ErrorCode(response.error_code).name,
            )
            return
        now = clock.now_ms()
        fetched_bytes = 0
        for t in response.responses:
            for p in t.partitions:
                tp = TopicPartition(t.topic, p.partition_index)
                h = self.rm.partitions.get(tp)
                # What the leader read at: our position as its session holds it.
                position = session.position(tp) or plan.to_send.get(tp)
                if h is None or h.follower_state is None or position is None:
                    continue
                self._stale.add(tp)  # its position may move below
                fetch_offset, epoch = position.fetch_offset, position.leader_epoch
                if p.records and throttle.follower_throttles(tp):
                    throttle.follower.record(len(p.records), throttle.clock())
                if p.error_code == ErrorCode.offset_out_of_range:
                    await self._on_out_of_range(conn, h)
                    continue
                if p.error_code != ErrorCode.none:
                    self._on_partition_error(tp, p.error_code, epoch)
                    continue
                if not h.follower_state.accepts_fetch_response(
                    fetch_offset, epoch, h.log.log_end_offset
                ):
                    continue
                try:
                    self.rm.append_as_follower(
                        h, p.records or b"", p.high_watermark, p.log_start_offset, now
                    )
                    # Kafka's fetcher lag: the leader's HW minus our next fetch offset.
                    self.manager.lags[tp] = max(p.high_watermark - h.log.log_end_offset, 0)
                    if p.records:
                        fetched_bytes += len(p.records)
                except StorageError:
                    # Already in the state-change log (once per failure, not per
                    # fetch); the log is unchanged, so this refetches the same offset.
                    self._delayed_until[tp] = clock.monotonic_s() + STORAGE_BACKOFF_S
                except KafkaError as e:
                    log.error("follower append to %s failed: %s", tp, e)
        if fetched_bytes:
            self.manager.metrics.replication_bytes_in(fetched_bytes)
        self.manager.metrics.fetcher_round(clock.perf_s() - sent)

    async def _on_out_of_range(self, conn: KafkaConnection, hosted: HostedPartition) -> None:
        """Ask the leader for its log start and end, then truncate as Kafka does."""
        request = list_offsets_v7.ListOffsetsRequest(
            replica_id=BrokerId(self.manager.broker_id),
            isolation_level=i8(0),
            topics=(
                list_offsets_v7.ListOffsetsTopic(
                    name=TopicName(hosted.tp.topic),
                    partitions=tuple(
                        list_offsets_v7.ListOffsetsPartition(
                            partition_index=i32(hosted.tp.partition),
                            current_leader_epoch=i32(hosted.leader_epoch),
                            timestamp=i64(ts),
                        )
                        for ts in (EARLIEST_TIMESTAMP, LATEST_TIMESTAMP)
                    ),
                ),
            ),
        )
        response: Any = await conn.send(request, timeout=REQUEST_TIMEOUT_S)
        answers = response.topics[0].partitions
        if any(a.error_code != ErrorCode.none for a in answers):
            await asyncio.sleep(BACKOFF_S)
            return
        leader_start, leader_end = answers[0].offset, answers[1].offset
        truncate_to, next_offset = truncation_on_offset_out_of_range(
            hosted.log.log_end_offset, leader_start, leader_end
        )
        if next_offset > hosted.log.log_end_offset:
            self.rm.state_change_log.record(
                "follower-restart-at-leader-start", tp=hosted.tp, offset=next_offset
            )
            hosted.log.truncate_fully_and_start_at(next_offset)
            hosted.set_follower_high_watermark(next_offset)
        else:
            self.rm.truncate(hosted, truncate_to)

    def _on_partition_error(self, tp: TopicPartition, error: ErrorCode, sent_epoch: int) -> None:
        hosted = self.rm.partitions.get(tp)
        if hosted is None or hosted.leader_epoch != sent_epoch:
            return  # an answer about an epoch we have left behind meanwhile
        self._stale.add(tp)
        if error in _STALE_EPOCH_ERRORS:
            log.info("fetcher: %s answered %s; waiting for new leadership", tp, error.name)
            self.partitions.discard(tp)
        else:
            log.debug("fetcher: %s answered %s; retrying after a back-off", tp, error.name)
            self._delayed_until[tp] = clock.monotonic_s() + BACKOFF_S


def _decode_fetch_response(payload: bytes) -> FetchResponse:
    return decode_fetch_response_v12(payload)[1]


def _group_by_topic(
    partitions: dict[TopicPartition, _T],
) -> list[tuple[str, list[tuple[TopicPartition, _T]]]]:
    by_topic: dict[str, list[tuple[TopicPartition, _T]]] = {}
    for tp, value in partitions.items():
        by_topic.setdefault(tp.topic, []).append((tp, value))
    return sorted(by_topic.items())


class ReplicaFetcherManager:
    def __init__(
        self,
        broker_id: int,
        replica_manager: ReplicaManager,
        metrics: NoMetrics | None = None,
        security: ClientSecurity | None = None,
        fetch_sessions: bool = True,
    ) -> None:
        self.broker_id = broker_id
        # KIP-227 sessions with each leader (off: every fetch names every partition).
        self.fetch_sessions = fetch_sessions
        self.security = security  # how to reach leaders on the inter-broker listener
        self.replica_manager = replica_manager
        self.metrics = metrics or NoMetrics()
        self.fetchers: dict[int, ReplicaFetcher] = {}
        # Per followed partition, records behind the leader's HW at the last fetch.
        self.lags: dict[TopicPartition, int] = {}

    def add_partitions(self, partitions: dict[TopicPartition, BrokerInfo]) -> None:
        self.remove_partitions(set(partitions))
        by_leader: dict[int, set[TopicPartition]] = {}
        for tp, leader in partitions.items():
            by_leader.setdefault(leader.broker_id, set()).add(tp)
            fetcher = self.fetchers.get(leader.broker_id)
            if fetcher is None or (fetcher.leader.host, fetcher.leader.port) != (
                leader.host,
                leader.port,
            ):
                if fetcher is not None:
                    asyncio.get_running_loop().create_task(fetcher.stop())
                self.fetchers[leader.broker_id] = ReplicaFetcher(self, leader)
        for leader_id, tps in by_leader.items():
            self.fetchers[leader_id].add(tps)

    def remove_partitions(self, tps: set[TopicPartition]) -> None:
        for fetcher in self.fetchers.values():
            fetcher.remove(tps)
        for tp in tps:
            self.lags.pop(tp, None)

    async def shutdown(self) -> None:
        for fetcher in self.fetchers.values():
            await fetcher.stop()
        self.fetchers.clear()
