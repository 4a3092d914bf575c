"""The broker's hosted partitions: leadership changes, appends, reads, purgatories.

This is the I/O shell around each partition's log (Kafka's ReplicaManager). It
decides nothing about replication itself; the high-watermark and ISR rules live in
`strandline.replication` and are applied here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from strandline.controller.requests import PartitionState
from strandline.errors import (
    KafkaError,
    NotEnoughReplicasError,
    NotLeaderError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
)
from strandline.server.purgatory import Purgatory
from strandline.server.state_change_log import StateChangeLog
from strandline.storage.log import AppendInfo, Log
from strandline.storage.config import LogConfig
from strandline.storage.log_manager import LogManager
from strandline.types import CONSUMER_REPLICA_ID, TopicPartition

log = logging.getLogger(__name__)


@dataclass
class HostedPartition:
    tp: TopicPartition
    log: Log
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    zk_version: int
    high_watermark: int
    min_insync_replicas: int = 1
    remote_leos: dict[int, int] = field(default_factory=dict)

    def is_leader(self, broker_id: int) -> bool:
        return self.leader == broker_id


@dataclass(frozen=True)
class FetchResult:
    tp: TopicPartition
    records: bytes
    high_watermark: int
    log_start_offset: int
    log_end_offset: int


class ReplicaManager:
    def __init__(
        self,
        broker_id: int,
        log_manager: LogManager,
        log_config_for: Callable[[str], LogConfig],
        state_change_log: StateChangeLog,
    ) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.log_config_for = log_config_for
        self.state_change_log = state_change_log
        self.partitions: dict[TopicPartition, HostedPartition] = {}
        self.fetch_purgatory = Purgatory("Fetch")
        self.produce_purgatory = Purgatory("Produce")
        self.controller_epoch = -1

    # -- leadership -----------------------------------------------------------

    def become_leader_or_follower(
        self, controller_epoch: int, states: list[PartitionState], now_ms: int
    ) -> dict[TopicPartition, KafkaError | None]:
        """Apply LeaderAndIsr partition states; a state whose leader epoch is not
        newer than the one we hold is ignored (stale controller decisions)."""
        self.controller_epoch = max(self.controller_epoch, controller_epoch)
        results: dict[TopicPartition, KafkaError | None] = {}
        hws = self.log_manager.read_high_watermarks()
        for state in states:
            current = self.partitions.get(state.tp)
            if current is not None and state.leader_epoch <= current.leader_epoch:
                self.state_change_log.record(
                    "ignored-stale-leader-epoch",
                    tp=state.tp,
                    leader_epoch=state.leader_epoch,
                    current_epoch=current.leader_epoch,
                )
                results[state.tp] = None
                continue
            config = self.log_config_for(state.tp.topic)
            plog = self.log_manager.get_or_create_log(state.tp, config, now_ms)
            hw = current.high_watermark if current else min(hws.get(state.tp, 0), plog.log_end_offset)
            hosted = HostedPartition(
                tp=state.tp,
                log=plog,
                leader=state.leader,
                leader_epoch=state.leader_epoch,
                isr=state.isr,
                replicas=state.replicas,
                zk_version=state.zk_version,
                high_watermark=max(hw, plog.log_start_offset),
                min_insync_replicas=config.min_insync_replicas,
            )
            self.partitions[state.tp] = hosted
            if state.leader == self.broker_id:
                # A new leader starts its epoch at its log end (KIP-101).
                plog.leader_epoch_cache.assign(state.leader_epoch, plog.log_end_offset)
                self._maybe_advance_high_watermark(hosted)
                role = "leader"
            else:
                role = "follower"
            self.state_change_log.record(
                f"become-{role}",
                tp=state.tp,
                leader=state.leader,
                leader_epoch=state.leader_epoch,
                isr=list(state.isr),
                replicas=list(state.replicas),
                controller_epoch=controller_epoch,
            )
            results[state.tp] = None
            self.fetch_purgatory.notify(state.tp)
        return results

    def stop_replica(self, tp: TopicPartition, delete: bool) -> None:
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

    def leader_partition(self, tp: TopicPartition) -> HostedPartition:
        hosted = self.get_partition(tp)
        if not hosted.is_leader(self.broker_id):
            raise NotLeaderError(f"broker {self.broker_id} is not the leader of {tp}")
        return hosted

    # -- produce --------------------------------------------------------------

    def append_as_leader(
        self, tp: TopicPartition, records: bytes, acks: int, now_ms: int
    ) -> AppendInfo:
        hosted = self.leader_partition(tp)
        if acks == -1 and len(hosted.isr) < hosted.min_insync_replicas:
            raise NotEnoughReplicasError(
                f"{tp}: ISR {list(hosted.isr)} is smaller than "
                f"min.insync.replicas={hosted.min_insync_replicas}"
            )
        info = hosted.log.append_as_leader(records, hosted.leader_epoch, now_ms)
        self._maybe_advance_high_watermark(hosted)
        self.fetch_purgatory.notify(tp)
        return info

    def is_committed(self, tp: TopicPartition, offset: int) -> bool:
        hosted = self.partitions.get(tp)
        return hosted is None or hosted.high_watermark > offset or not hosted.is_leader(self.broker_id)

    def _maybe_advance_high_watermark(self, hosted: HostedPartition) -> None:
        # With the ISR being only this broker the HW is the LEO; replicated
        # partitions take the minimum over the ISR's LEOs (replication core).
        leos = [hosted.log.log_end_offset]
        leos += [hosted.remote_leos.get(r, 0) for r in hosted.isr if r != self.broker_id]
        new_hw = min(leos)
        if new_hw > hosted.high_watermark:
            hosted.high_watermark = new_hw
            self.produce_purgatory.notify(hosted.tp)
            self.fetch_purgatory.notify(hosted.tp)

    # -- fetch ----------------------------------------------------------------

    def read(
        self,
        tp: TopicPartition,
        fetch_offset: int,
        max_bytes: int,
        replica_id: int = CONSUMER_REPLICA_ID,
        min_one_batch: bool = True,
    ) -> FetchResult:
        hosted = self.leader_partition(tp)
        plog = hosted.log
        is_consumer = replica_id == CONSUMER_REPLICA_ID
        upper = hosted.high_watermark if is_consumer else plog.log_end_offset
        if fetch_offset < plog.log_start_offset or fetch_offset > plog.log_end_offset:
            raise OffsetOutOfRangeError(
                f"{tp}: fetch offset {fetch_offset} outside "
                f"[{plog.log_start_offset}, {plog.log_end_offset}]"
            )
        if fetch_offset >= upper:
            data = b""
        else:
            data = plog.read(fetch_offset, max_bytes, max_offset=upper, min_one_batch=min_one_batch).records
        return FetchResult(tp, data, hosted.high_watermark, plog.log_start_offset, plog.log_end_offset)

    def available_bytes(
        self, tp: TopicPartition, fetch_offset: int, replica_id: int, wanted: int
    ) -> int:
        """How many bytes (up to `wanted`) a fetch at `fetch_offset` could return now."""
        hosted = self.partitions.get(tp)
        if hosted is None or not hosted.is_leader(self.broker_id):
            return wanted  # an error is an answer: complete the fetch
        plog = hosted.log
        upper = hosted.high_watermark if replica_id == CONSUMER_REPLICA_ID else plog.log_end_offset
        if fetch_offset >= upper or fetch_offset < plog.log_start_offset:
            return wanted if fetch_offset > upper or fetch_offset < plog.log_start_offset else 0
        if wanted <= 1:
            return 1  # the common min_bytes=1: any data will do, no need to read it
        return plog.read(fetch_offset, wanted, max_offset=upper).size

    def delete_records(self, tp: TopicPartition, offset: int) -> int:
        """DeleteRecords on the leader: advance the log start offset; returns the new
        low watermark."""
        hosted = self.leader_partition(tp)
        low = hosted.log.delete_records_before(offset)
        self.fetch_purgatory.notify(tp)
        return low

    def high_watermarks(self) -> dict[TopicPartition, int]:
        return {tp: p.high_watermark for tp, p in self.partitions.items()}

    def checkpoint(self) -> None:
        self.log_manager.checkpoint_high_watermarks(self.high_watermarks())
        self.log_manager.checkpoint_recovery_points()
        self.log_manager.checkpoint_log_start_offsets()

