"""The I/O shell around the pure GroupCoordinator (Kafka's GroupCoordinator + the parts
of GroupMetadataManager that touch the log).

It owns the coordinator and does what the core only asks for: answers parked requests
(`Respond`), appends to `__consumer_offsets` with acks=all and reports the outcome
(`AppendToOffsetsTopic` -> `append_done`), fires the single timer (`tick` by
`next_deadline_ms`), and follows leadership of `__consumer_offsets` partitions: a new
leader replays the partition before serving it, a former leader unloads it.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from strandline.group.coordinator import Effect, GroupCoordinator
from strandline.group.model import AppendToOffsetsTopic, GroupConfig, Respond, Token
from strandline.group.partitioning import OFFSETS_TOPIC
from strandline.group.records import OffsetsBatch, build_batch, iter_batches
from strandline.server.coordinator_shell import CoordinatorShell, read_log_chunks
from strandline.storage.log import AppendOrigin
from strandline.types import TopicPartition

if TYPE_CHECKING:
    from strandline.server.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

_LOAD_READ_BYTES = 1 << 20


def group_config_from_props(props: dict[str, str]) -> GroupConfig:
    """Kafka's broker keys for the group coordinator, defaults from GroupConfig."""
    defaults = GroupConfig()

    def get(key: str, default: int) -> int:
        return int(props.get(key, str(default)))

    return GroupConfig(
        group_min_session_timeout_ms=get(
            "group.min.session.timeout.ms", defaults.group_min_session_timeout_ms
        ),
        group_max_session_timeout_ms=get(
            "group.max.session.timeout.ms", defaults.group_max_session_timeout_ms
        ),
        group_initial_rebalance_delay_ms=get(
            "group.initial.rebalance.delay.ms", defaults.group_initial_rebalance_delay_ms
        ),
        group_max_size=get("group.max.size", defaults.group_max_size),
        offsets_retention_minutes=get(
            "offsets.retention.minutes", defaults.offsets_retention_minutes
        ),
        offsets_retention_check_interval_ms=get(
            "offsets.retention.check.interval.ms", defaults.offsets_retention_check_interval_ms
        ),
        offset_metadata_max_bytes=get(
            "offset.metadata.max.bytes", defaults.offset_metadata_max_bytes
        ),
    )


class GroupService(CoordinatorShell):
    name = "group-coordinator"

    def __init__(
        self,
        config: GroupConfig,
        offsets_topic_num_partitions: int,
        replica_manager: ReplicaManager,
        now_ms: Callable[[], int],
        offsets_commit_timeout_ms: int = 5_000,
    ) -> None:
        super().__init__(replica_manager, now_ms)
        self.coordinator = self.core = GroupCoordinator(config, offsets_topic_num_partitions)
        self.offsets_commit_timeout_s = offsets_commit_timeout_ms / 1000
        # Bumped on every new load of a partition, so a load that lost the race is dropped.
        self._load_generation = itertools.count(1)
        self._current_load: dict[int, int] = {}
        # FindCoordinator's creation of __consumer_offsets, shared by concurrent requests.
        self.offsets_topic_creation: asyncio.Task[None] | None = None

    async def ask(self, request: Callable[[Token, int], list[Effect]]) -> object:
        return await super().ask(request)

    def execute(self, effects: list[Effect]) -> None:
        for effect in effects:
            if isinstance(effect, Respond):
                self.respond(effect.token, effect.response)
            else:
                self.spawn(self._append(effect), f"offsets-append-{effect.append_id}")
        self._wake.set()  # deadlines may have moved

    async def _append(self, effect: AppendToOffsetsTopic) -> None:
        tp = TopicPartition(OFFSETS_TOPIC, effect.partition)
        # A TxnOffsetCommit's batch is transactional and carries the producer's id and
        # epoch: the leader's producer state opens (or continues) its transaction.
        batch = build_batch(
            effect.records, self.now_ms(), effect.producer_id, effect.producer_epoch
        )
        base_offset: int | None = None
        try:
            # Coordinator origin, as Kafka's appendForGroup: the producer's epoch is
            # checked, its sequences are not (every TxnOffsetCommit batch starts at 0).
            error, info = await self.replica_manager.append_and_wait(
                tp, batch, self.offsets_commit_timeout_s, AppendOrigin.COORDINATOR
            )
            if info is not None:
                base_offset = info.first_offset
                if info.duplicate and effect.transactional and error is ErrorCode.none:
                    # The log took our batch for a client's retry and wrote nothing: the
                    # offsets would live in memory only and vanish on the next load.
                    # Coordinator-origin batches must bypass duplicate detection (Kafka).
                    log.error(
                        "%s answered the TxnOffsetCommit batch of producer %d as a "
                        "duplicate of offset %d; nothing was written",
                        tp,
                        effect.producer_id,
                        info.first_offset,
                    )
                    error = ErrorCode.unknown_server_error
        except Exception:
            log.exception("append to %s failed", tp)
            error = ErrorCode.unknown_server_error
        self.execute(
            self.coordinator.append_done(effect.append_id, error, self.now_ms(), base_offset)
        )

    def complete_txn_offsets(self, partition: int, producer_id: int, commit: bool) -> None:
        """A transaction marker of `producer_id` is written (and replicated) on
        `__consumer_offsets`-`partition`: WriteTxnMarkers' report (Kafka's
        onTransactionCompleted). Its pending offsets there become committed, or vanish."""
        self.execute(
            self.coordinator.complete_txn_offsets(partition, producer_id, commit, self.now_ms())
        )

    # -- timer ---------------------------------------------------------------------------

    def tick_due(self, deadline: int | None, now: int, slept_full: bool) -> bool:
        # Also once a second with no deadline due: offsets retention runs on the clock.
        return deadline is None or deadline <= now or slept_full

    # -- leadership of __consumer_offsets -------------------------------------------------

    def use_partition_count(self, count: int) -> None:
        """`__consumer_offsets` has `count` partitions (the metadata says so): map groups
        over that many, as Kafka does from the topic's real count, not the config. Groups
        of partitions already served are loaded again under the new mapping."""
        if count <= 0 or count == self.coordinator.num_partitions:
            return
        log.warning(
            "%s has %d partitions, not offsets.topic.num.partitions=%d: groups are mapped over %d",
            OFFSETS_TOPIC,
            count,
            self.coordinator.num_partitions,
            count,
        )
        self.coordinator.num_partitions = count
        for partition, epoch in sorted(self._serving.items()):
            tp = TopicPartition(OFFSETS_TOPIC, partition)
            self.on_leadership(tp, False, epoch)
            if partition < count:
                self.on_leadership(tp, True, epoch)

    def on_leadership(self, tp: TopicPartition, is_leader: bool, leader_epoch: int) -> None:
        if tp.topic != OFFSETS_TOPIC:
            return
        partition = tp.partition
        if is_leader:
            if partition in self._serving:
                # Still the leader in a newer epoch: the in-memory groups stay valid
                # (Kafka keeps existing groups when it loads an owned partition again).
                self._serving[partition] = leader_epoch
                return
            self._serving[partition] = leader_epoch
            generation = self._current_load[partition] = next(self._load_generation)
            self.coordinator.begin_loading(partition)
            self.spawn(self._load(tp, generation), f"offsets-load-{partition}")
        elif partition in self._serving:
            del self._serving[partition]
            self._current_load.pop(partition, None)
            log.info("unloading groups of %s", tp)
            self.execute(self.coordinator.unload(partition))

    async def _load(self, tp: TopicPartition, generation: int) -> None:
        """Replay the partition from its start to its log end, like Kafka's
        doLoadGroupsAndOffsets: a leader's log is what will be committed."""
        started = self.now_ms()
        hosted = self.replica_manager.partitions.get(tp)
        if hosted is None:
            return
        batches: list[OffsetsBatch] = []
        records = 0
        # Up to the log end as it is when the replay ends, with no await between the last
        # read and `load`: a transaction marker written meanwhile (whose
        # `complete_txn_offsets` the loading core ignores) is replayed.
        async for chunk in read_log_chunks(hosted.log, _LOAD_READ_BYTES):
            for batch in iter_batches(chunk):
                batches.append(batch)
                records += len(batch.records)
        if self._current_load.get(tp.partition) != generation:
            return  # leadership moved on while we read; the listener already acted
        self.coordinator.load(tp.partition, batches, self.now_ms())
        self._wake.set()
        log.info(
            "loaded %d records of %s up to offset %d in %d ms",
            records,
            tp,
            hosted.log.log_end_offset,
            self.now_ms() - started,
        )
