"""The I/O shell around the pure TransactionCoordinator (Kafka's TransactionCoordinator
runtime, the log parts of TransactionStateManager and TransactionMarkerChannelManager).

It answers parked requests (`Respond`), appends to `__transaction_state` with acks=all
and reports the outcome (`AppendToTxnLog` -> `append_done`), sends WriteTxnMarkers to the
leaders of a transaction's partitions, itself included, over the inter-broker listener
(`SendMarkers` -> `markers_written`), fires the timer (`tick` by `next_deadline_ms`:
timed-out transactions, expired ids, retries) and follows leadership of the
`__transaction_state` partitions: a new leader replays the partition, and resumes the
commits and aborts the previous coordinator had prepared; a former leader unloads it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from kafka.record import MemoryRecords, MemoryRecordsBuilder
from kazoo.exceptions import KazooException
from kio.schema.errors import ErrorCode

from strandline.client.connection import KafkaConnection
from strandline.errors import KafkaError
from strandline.protocol.messages import build, request_module
from strandline.server.coordinator_shell import CoordinatorShell, read_log_chunks
from strandline.transaction.coordinator import ProducerIdAndEpoch, TransactionCoordinator
from strandline.transaction.model import (
    AppendToTxnLog,
    Effect,
    InitProducerIdResult,
    Respond,
    SendMarkers,
    Token,
    TxnConfig,
)
from strandline.transaction.partitioning import TRANSACTION_STATE_TOPIC
from strandline.types import TopicPartition

if TYPE_CHECKING:
    from strandline.client.security import ClientSecurity
    from strandline.server.metadata_cache import MetadataCache
    from strandline.server.producer_ids import ProducerIdManager
    from strandline.server.replica_manager import ReplicaManager
    from strandline.server.topic_admin import TopicAdmin

log = logging.getLogger(__name__)

WRITE_TXN_MARKERS = 27
WRITE_TXN_MARKERS_VERSION = 1
MARKER_REQUEST_TIMEOUT_S = 30.0
APPEND_TIMEOUT_S = 30.0
_LOAD_READ_BYTES = 5 << 20  # transaction.state.log.load.buffer.size
_RawRecord = tuple[bytes, bytes | None]


def txn_config_from_props(props: Mapping[str, str]) -> TxnConfig:
    """Kafka's broker keys for the transaction coordinator, defaults from TxnConfig."""
    defaults = TxnConfig()

    def get(key: str, default: int) -> int:
        value = int(props.get(key, str(default)))
        if value <= 0:
            raise ValueError(f"{key}={value} must be positive")
        return value

    return TxnConfig(
        num_partitions=get("transaction.state.log.num.partitions", defaults.num_partitions),
        replication_factor=get(
            "transaction.state.log.replication.factor", defaults.replication_factor
        ),
        min_isr=get("transaction.state.log.min.isr", defaults.min_isr),
        segment_bytes=get("transaction.state.log.segment.bytes", defaults.segment_bytes),
        max_timeout_ms=get("transaction.max.timeout.ms", defaults.max_timeout_ms),
        abort_timed_out_interval_ms=get(
            "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            defaults.abort_timed_out_interval_ms,
        ),
        transactional_id_expiration_ms=get(
            "transactional.id.expiration.ms", defaults.transactional_id_expiration_ms
        ),
        remove_expired_interval_ms=get(
            "transaction.remove.expired.transaction.cleanup.interval.ms",
            defaults.remove_expired_interval_ms,
        ),
    )


def build_batch(records: tuple[_RawRecord, ...], timestamp_ms: int) -> bytes:
    """A v2 record batch (base offset 0, uncompressed as Kafka enforces for this topic)."""
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 30)
    for key, value in records:
        builder.append(timestamp=timestamp_ms, key=key, value=value, headers=[])
    builder.close()
    return bytes(builder.buffer())


def iter_records(log_bytes: bytes) -> list[_RawRecord]:
    """The (key, value) records of a run of v2 batches; control batches carry none."""
    out: list[_RawRecord] = []
    batches = MemoryRecords(log_bytes)
    while batches.has_next():
        batch = batches.next_batch()
        if batch is None:
            break
        if getattr(batch, "is_control_batch", False):
            continue
        for record in batch:
            if record.key is not None:
                value = None if record.value is None else bytes(record.value)
                out.append((bytes(record.key), value))
    return out


class TxnService(CoordinatorShell):
    name = "txn-coordinator"

    def __init__(
        self,
        config: TxnConfig,
        broker_id: int,
        replica_manager: ReplicaManager,
        metadata_cache: MetadataCache,
        producer_ids: ProducerIdManager,
        now_ms: Callable[[], int],
        security: ClientSecurity | None = None,
    ) -> None:
        super().__init__(replica_manager, now_ms)
        self.config = config
        self.coordinator = self.core = TransactionCoordinator(config)
        self.broker_id = broker_id
        self.metadata_cache = metadata_cache
        self.producer_ids = producer_ids
        self.security = security
        self._connections: dict[int, KafkaConnection] = {}
        self._connect_locks: dict[int, asyncio.Lock] = {}
        # FindCoordinator's creation of __transaction_state, shared by concurrent requests.
        self.topic_creation: asyncio.Task[None] | None = None

    async def stop(self, *more_tasks: asyncio.Task[None] | None) -> None:
        await super().stop(self.topic_creation, *more_tasks)
        for connection in self._connections.values():
            await connection.close()
        self._connections.clear()

    async def ask(self, request: Callable[[Token, int], list[Effect]]) -> object:
        return await super().ask(request)

    async def init_producer_id(
        self, transactional_id: str, timeout_ms: int, expected: ProducerIdAndEpoch | None
    ) -> InitProducerIdResult:
        fresh: int | None = None
        if self.coordinator.needs_producer_id(transactional_id, expected):
            try:
                fresh = await self.producer_ids.generate()
            except (KazooException, OSError) as exc:
                log.warning("cannot claim a producer id block: %s", exc)
                return InitProducerIdResult(ErrorCode.coordinator_load_in_progress)
        answer = await self.ask(
            lambda token, now: self.coordinator.init_producer_id(
                token, transactional_id, timeout_ms, expected, now, fresh
            )
        )
        if isinstance(answer, InitProducerIdResult):
            return answer
        return InitProducerIdResult(ErrorCode.coordinator_not_available)

    def execute(self, effects: list[Effect]) -> None:
        for effect in effects:
            if isinstance(effect, Respond):
                self.respond(effect.token, effect.response)
            elif isinstance(effect, AppendToTxnLog):
                self.spawn(self._append(effect), f"txn-append-{effect.append_id}")
            elif isinstance(effect, SendMarkers):
                self.spawn(self._send_markers(effect), f"txn-markers-{effect.transactional_id}")
        self._wake.set()  # deadlines may have moved

    async def _append(self, effect: AppendToTxnLog) -> None:
        tp = TopicPartition(TRANSACTION_STATE_TOPIC, effect.partition)
        batch = build_batch(effect.records, self.now_ms())
        try:
            error, _ = await self.replica_manager.append_and_wait(tp, batch, APPEND_TIMEOUT_S)
        except Exception:
            log.exception("append to %s failed", tp)
            error = ErrorCode.unknown_server_error
        self.execute(self.coordinator.append_done(effect.append_id, error, self.now_ms()))

    # -- markers -------------------------------------------------------------------------

    async def _send_markers(self, effect: SendMarkers) -> None:
        if effect.delay_ms > 0:
            await asyncio.sleep(effect.delay_ms / 1000)
        results: dict[TopicPartition, ErrorCode] = {}
        deleted: list[TopicPartition] = []
        by_leader: dict[int, list[TopicPartition]] = {}
        cache = self.metadata_cache
        for tp in effect.partitions:
            state = cache.partition(tp)
            if state is None:
                if not cache.has_topic(tp.topic):
                    deleted.append(tp)  # Kafka: no leader endpoint, the topic is gone
                else:
                    results[tp] = ErrorCode.unknown_topic_or_partition
            elif state.leader not in cache.brokers:
                results[tp] = ErrorCode.not_leader_or_follower
            else:
                by_leader.setdefault(state.leader, []).append(tp)
        answers = await asyncio.gather(
            *(self._write_markers(leader, effect, tps) for leader, tps in by_leader.items())
        )
        for answer in answers:
            results.update(answer)
        self.execute(
            self.coordinator.markers_written(
                effect.transactional_id,
                effect.coordinator_epoch,
                results,
                self.now_ms(),
                deleted,
            )
        )

    async def _write_markers(
        self, broker_id: int, effect: SendMarkers, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        module = request_module(WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION)
        topics: dict[str, list[int]] = {}
        for tp in sorted(partitions):
            topics.setdefault(tp.topic, []).append(tp.partition)
        request = build(
            module.WriteTxnMarkersRequest,
            markers=(
                build(
                    module.WritableTxnMarker,
                    producer_id=effect.producer_id,
                    producer_epoch=effect.producer_epoch,
                    transaction_result=effect.commit,
                    topics=tuple(
                        build(module.WritableTxnMarkerTopic, name=t, partition_indexes=tuple(ps))
                        for t, ps in topics.items()
                    ),
                    coordinator_epoch=effect.coordinator_epoch,
                ),
            ),
        )
        failed = dict.fromkeys(partitions, ErrorCode.not_leader_or_follower)
        try:
            connection = await self._connection(broker_id)
            if connection is None:
                return failed
            response = await connection.send(request, timeout=MARKER_REQUEST_TIMEOUT_S)
        except (TimeoutError, OSError) as e:
            # KafkaConnectionError is an OSError too: reconnect on the next attempt.
            log.info("WriteTxnMarkers to broker %d failed: %s", broker_id, e)
            await self._drop_connection(broker_id)
            return dict.fromkeys(partitions, ErrorCode.request_timed_out)
        out: dict[TopicPartition, ErrorCode] = {}
        for marker in response.markers:
            if marker.producer_id != effect.producer_id:
                continue
            for topic in marker.topics:
                for p in topic.partitions:
                    out[TopicPartition(topic.name, p.partition_index)] = ErrorCode(p.error_code)
        # A partition the answer leaves out was not handled: try it again.
        return {tp: out.get(tp, ErrorCode.unknown_server_error) for tp in partitions}

    async def _connection(self, broker_id: int) -> KafkaConnection | None:
        lock = self._connect_locks.setdefault(broker_id, asyncio.Lock())
        async with lock:
            connection = self._connections.get(broker_id)
            if connection is not None and not connection.closed:
                return connection
            broker = self.metadata_cache.brokers.get(broker_id)
            if broker is None:
                return None
            # BrokerInfo's host/port is the inter-broker listener.
            connection = await KafkaConnection.open(
                broker.host,
                broker.port,
                client_id=f"txn-coordinator-{self.broker_id}",
                security=self.security,
            )
            self._connections[broker_id] = connection
            return connection

    async def _drop_connection(self, broker_id: int) -> None:
        connection = self._connections.pop(broker_id, None)
        if connection is not None:
            await connection.close()

    # -- leadership of __transaction_state -------------------------------------------------

    def on_leadership(self, tp: TopicPartition, is_leader: bool, leader_epoch: int) -> None:
        if tp.topic != TRANSACTION_STATE_TOPIC:
            return
        partition = tp.partition
        if is_leader:
            if self._serving.get(partition) == leader_epoch:
                return
            # A new coordinator epoch, as Kafka: reload, and resume prepared transactions
            # with markers carrying the new epoch.
            self._serving[partition] = leader_epoch
            log.info("elected transaction coordinator for %s at epoch %d", tp, leader_epoch)
            self.coordinator.begin_loading(partition, leader_epoch)
            self.spawn(self._load(tp, leader_epoch), f"txn-load-{partition}")
        elif partition in self._serving:
            del self._serving[partition]
            log.info("resigned as transaction coordinator for %s", tp)
            self.coordinator.unload(partition)

    async def _load(self, tp: TopicPartition, leader_epoch: int) -> None:
        try:
            await self._load_partition(tp, leader_epoch)
        except Exception:
            # Left loading, the partition would answer COORDINATOR_LOAD_IN_PROGRESS
            # forever; unloaded, clients are sent to look for the coordinator again.
            log.exception("loading %s failed", tp)
            if self._serving.get(tp.partition) == leader_epoch:
                del self._serving[tp.partition]
                self.coordinator.unload(tp.partition)

    async def _load_partition(self, tp: TopicPartition, leader_epoch: int) -> None:
        started = self.now_ms()
        hosted = self.replica_manager.partitions.get(tp)
        if hosted is None:
            raise RuntimeError(f"{tp} is not hosted here")
        records: list[_RawRecord] = []
        async for chunk in read_log_chunks(hosted.log, _LOAD_READ_BYTES):
            records.extend(iter_records(chunk))
        if self._serving.get(tp.partition) != leader_epoch:
            return
        self.execute(self.coordinator.load(tp.partition, leader_epoch, records, self.now_ms()))
        log.info(
            "loaded %d records of %s up to offset %d in %d ms",
            len(records),
            tp,
            hosted.log.log_end_offset,
            self.now_ms() - started,
        )

    # -- __transaction_state creation ----------------------------------------------------

    def ensure_topic(self, topic_admin: TopicAdmin) -> None:
        """Create `__transaction_state` in the background, as Kafka does on the first
        FindCoordinator for a transactional id (the client retries meanwhile)."""
        task = self.topic_creation
        if task is None or task.done():
            self.topic_creation = asyncio.get_running_loop().create_task(
                self._create_topic(topic_admin), name="create-transaction-state"
            )

    async def _create_topic(self, topic_admin: TopicAdmin) -> None:
        cfg = self.config
        live = len(self.metadata_cache.brokers)
        replication_factor = max(1, min(cfg.replication_factor, live))
        try:
            await topic_admin.create_topic(
                TRANSACTION_STATE_TOPIC,
                num_partitions=cfg.num_partitions,
                replication_factor=replication_factor,
                configs={
                    "cleanup.policy": "compact",
                    "segment.bytes": str(cfg.segment_bytes),
                    "min.insync.replicas": str(min(cfg.min_isr, replication_factor)),
                    "unclean.leader.election.enable": "false",
                },
            )
            log.info(
                "created %s with %d partitions, replication factor %d",
                TRANSACTION_STATE_TOPIC,
                cfg.num_partitions,
                replication_factor,
            )
        except KafkaError as e:
            if e.code is not ErrorCode.topic_already_exists:
                log.warning("cannot create %s: %s", TRANSACTION_STATE_TOPIC, e)
