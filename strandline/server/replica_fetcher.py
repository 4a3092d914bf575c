"""ReplicaFetcher: one task per (follower broker, leader broker) pulling its partitions.

Each partition first settles where its log ends relative to the leader's
(OffsetForLeaderEpoch, KIP-101/KIP-279: truncate by leader epoch, never blindly to the
HW), then fetches from its LEO in multi-partition Fetch requests with this broker's
replica id. The decisions come from the pure `FollowerState`; this module does I/O.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12 import request as fetch_v12
from kio.schema.list_offsets.v7 import request as list_offsets_v7
from kio.schema.offset_for_leader_epoch.v4 import request as epoch_v4
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i32, i32Timedelta, i64

from strandline.client.connection import KafkaConnection
from strandline.client.security import ClientSecurity
from strandline.errors import KafkaError, StorageError
from strandline.protocol.controller_requests import BrokerInfo
from strandline.replication.follower import FetchState
from strandline.replication.truncation import EpochEndOffset, truncation_on_offset_out_of_range
from strandline.server import clock
from strandline.server.metrics import NoMetrics
from strandline.server.replica_manager import HostedPartition, ReplicaManager
from strandline.types import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, TopicPartition

log = logging.getLogger(__name__)

FETCH_MAX_WAIT = i32Timedelta.parse(datetime.timedelta(milliseconds=500))
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
        self._wakeup.set()

    async def stop(self) -> None:
        self._task.cancel()
        try:
            await self._task
        except (asyncio.CancelledError, Exception):  # noqa: BLE001 - stopping regardless
            pass
        if self._conn is not None:
            await self._conn.close()

    def _hosted(self) -> dict[TopicPartition, HostedPartition]:
        """Our partitions that still follow this leader (a LeaderAndIsr may have moved them)."""
        result = {}
        for tp in list(self.partitions):
            hosted = self.rm.partitions.get(tp)
            if (
                hosted is None
                or hosted.follower_state is None
                or hosted.leader != self.leader.broker_id
            ):
                self.partitions.discard(tp)
                continue
            result[tp] = hosted
        return result

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
                if self._conn is not None:
                    await self._conn.close()
                    self._conn = None
                await asyncio.sleep(BACKOFF_S)

    async def _truncate(self, conn: KafkaConnection) -> None:
        """OffsetForLeaderEpoch for every partition still settling its log end."""
        while True:
            now = clock.monotonic_s()
            pending = {
                tp: h
                for tp, h in self._hosted().items()
                if h.follower_state is not None
                and h.follower_state.fetch_state is FetchState.TRUNCATING
                and self._delayed_until.get(tp, 0.0) <= now
            }
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
                if not any(
                    h.follower_state is not None
                    and h.follower_state.fetch_state is FetchState.TRUNCATING
                    for h in self._hosted().values()
                ):
                    return

    def _ready(self, now: float) -> dict[TopicPartition, HostedPartition]:
        """Fetching partitions whose error back-off (if any) has passed."""
        for tp, until in list(self._delayed_until.items()):
            if until <= now:
                del self._delayed_until[tp]
        return {
            tp: h
            for tp, h in self._hosted().items()
            if h.follower_state is not None
            and h.follower_state.fetch_state is FetchState.FETCHING
            and tp not in self._delayed_until
        }

    async def _fetch(self, conn: KafkaConnection) -> None:
        hosted = self._ready(clock.monotonic_s())
        throttle = self.rm.throttle
        throttled = {tp for tp in hosted if throttle.follower_throttles(tp)}
        if throttled and throttle.follower.exceeded(throttle.clock()):
            # follower.replication.throttled.rate spent: fetch the others meanwhile.
            hosted = {tp: h for tp, h in hosted.items() if tp not in throttled}
            if not hosted:
                await asyncio.sleep(min(throttle.follower.delay_s(throttle.clock()), BACKOFF_S))
                return
        if not hosted:
            await asyncio.sleep(BACKOFF_S)
            return
        sent = {tp: (h.log.log_end_offset, h.leader_epoch) for tp, h in hosted.items()}
        request = fetch_v12.FetchRequest(
            replica_id=BrokerId(self.manager.broker_id),
            max_wait=FETCH_MAX_WAIT,
            min_bytes=i32(1),
            max_bytes=i32(RESPONSE_MAX_BYTES),
            isolation_level=i8(0),
            session_id=i32(0),
            session_epoch=i32(-1),
            topics=tuple(
                fetch_v12.FetchTopic(
                    topic=TopicName(topic),
                    partitions=tuple(
                        fetch_v12.FetchPartition(
                            partition=i32(tp.partition),
                            current_leader_epoch=i32(sent[tp][1]),
                            fetch_offset=i64(sent[tp][0]),
                            last_fetched_epoch=i32(-1),
                            log_start_offset=i64(h.log.log_start_offset),
                            partition_max_bytes=i32(PARTITION_MAX_BYTES),
                        )
                        for tp, h in hosted.items()
                        if tp.topic == topic
                    ),
                )
                for topic in sorted({tp.topic for tp in hosted})
            ),
            forgotten_topics_data=(),
            rack_id="",
        )
        response = await conn.send(request, timeout=REQUEST_TIMEOUT_S)
        now = clock.now_ms()
        for t in response.responses:
            for p in t.partitions:
                tp = TopicPartition(t.topic, p.partition_index)
                h = self.rm.partitions.get(tp)
                if h is None or h.follower_state is None or tp not in sent:
                    continue
                fetch_offset, epoch = sent[tp]
                if tp in throttled and p.records:
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
                        self.manager.metrics.replication_bytes_in(len(p.records))
                except StorageError:
                    # Already in the state-change log (once per failure, not per
                    # fetch); the log is unchanged, so this refetches the same offset.
                    self._delayed_until[tp] = clock.monotonic_s() + STORAGE_BACKOFF_S
                except KafkaError as e:
                    log.error("follower append to %s failed: %s", tp, e)

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
        if error in _STALE_EPOCH_ERRORS:
            log.info("fetcher: %s answered %s; waiting for new leadership", tp, error.name)
            self.partitions.discard(tp)
        else:
            log.debug("fetcher: %s answered %s; retrying after a back-off", tp, error.name)
            self._delayed_until[tp] = clock.monotonic_s() + BACKOFF_S


class ReplicaFetcherManager:
    def __init__(
        self,
        broker_id: int,
        replica_manager: ReplicaManager,
        metrics: NoMetrics | None = None,
        security: ClientSecurity | None = None,
    ) -> None:
        self.broker_id = broker_id
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
            fetcher.partitions -= tps
        for tp in tps:
            self.lags.pop(tp, None)

    async def shutdown(self) -> None:
        for fetcher in self.fetchers.values():
            await fetcher.stop()
        self.fetchers.clear()
