"""One broker process: wires the shell's parts together and runs the event loop.

Start-up order follows Kafka's KafkaServer: ZooKeeper session, log recovery, the
socket server, broker registration (ephemeral /brokers/ids/<id>), then the
controller election. Shutdown reverses it and leaves clean checkpoints.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import signal
import sys
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

from kazoo.protocol.states import KazooState
from kio.schema.errors import ErrorCode

from strandline.client.connection import KafkaConnection
from strandline.controller import effects as controller_events
from strandline.controller.channel import ControllerChannel, ControllerRequest
from strandline.controller.controller import Controller, RebalanceSettings
from strandline.controller.remote_sender import BrokerRequestSender
from strandline.coordination import znodes
from strandline.coordination.cluster_id import get_or_create_cluster_id
from strandline.coordination.errors import classify_zk_failure
from strandline.coordination.zk_client import ZkClient, on_loop
from strandline.errors import StaleBrokerEpochError, StaleControllerEpochError
from strandline.group.partitioning import OFFSETS_TOPIC
from strandline.protocol import controller_messages as cm
from strandline.protocol.controller_requests import (
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from strandline.replication import isr_update
from strandline.replication.controller_fencing import controller_request_error
from strandline.security.acl_cache import AclCache
from strandline.security.authorizer import Authorizer
from strandline.security.credentials import CredentialCache
from strandline.security.sasl_server import SaslSettings
from strandline.server import clock
from strandline.server.config import BrokerConfig, ConfigError
from strandline.server.group_service import GroupService, group_config_from_props
from strandline.server.inter_broker import inter_broker_security
from strandline.server.logging_setup import configure_logging
from strandline.server.metadata_cache import MetadataCache, PartitionMetadata
from strandline.server.metrics import metrics_for
from strandline.server.network import SocketServer
from strandline.server.producer_ids import ProducerIdManager
from strandline.server.replica_fetcher import ReplicaFetcherManager
from strandline.server.replica_manager import ReplicaManager
from strandline.server.topic_admin import TopicAdmin
from strandline.server.topic_configs import TopicConfigs
from strandline.server.txn_service import TxnService, txn_config_from_props
from strandline.state_change_log import StateChangeLog
from strandline.storage.cleaner import clean as clean_segments
from strandline.storage.log_manager import LogManager
from strandline.types import TopicPartition

log = logging.getLogger(__name__)
# Every log keeps its active segment open (its indexes only once written to): 10,000
# partitions need 10,000+ descriptors, and a busy log more (docs/scaling.md). Kafka's docs ask
# for 100,000+; the broker raises its own soft limit as far as the hard one allows.
WANTED_OPEN_FILES = 262_144

TICK_INTERVAL_S = 0.5
HW_CHECKPOINT_INTERVAL_MS = 5000


class Broker:
    controller: Controller  # set in startup(), after the channel it needs

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.broker_epoch = -1
        self.state_change_log = StateChangeLog(
            config.logs_dir / "state-change.log", config.broker_id
        )
        self.metrics = metrics_for(self, config.metrics_port)
        self.state_change_log.listeners.append(self.metrics.state_change)
        self.zk = ZkClient(
            config.zookeeper_connect, session_timeout_ms=config.zookeeper_session_timeout_ms
        )
        self._stopping = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._last_hw_checkpoint_ms = 0
        try:
            self.authorizer = Authorizer.from_config(config.props)
        except ValueError as e:
            raise ConfigError(str(e)) from e
        self.acl_cache: AclCache | None = None
        self.credentials = CredentialCache()
        listeners = config.listeners
        for listener in listeners.listeners:
            if listener.security_protocol.uses_sasl:
                try:  # a bad SASL setting fails start-up, not the first client
                    SaslSettings.from_props(config.props, listener.name)
                except ValueError as e:
                    raise ConfigError(f"listener {listener.name}: {e}") from e
        try:
            self.inter_broker_security = inter_broker_security(
                config.props, listeners.inter_broker_listener, listeners.inter_broker_protocol
            )
        except ValueError as e:
            raise ConfigError(
                f"inter-broker listener {listeners.inter_broker_listener}: {e}"
            ) from e

        # Built now: a listener it cannot serve (TLS without a keystore) fails start-up
        # before anything touches ZooKeeper.
        self.server = SocketServer(self, config)

    @staticmethod
    def now_ms() -> int:
        return clock.now_ms()

    def _delete_stray_logs(self) -> list[TopicPartition]:
        """Logs on disk whose partition ZooKeeper no longer assigns to this broker, or
        whose `partition.metadata` names another topic id than the topic's znode (a
        replica of a deleted topic, the name since created again: KIP-516). A topic
        still marked for deletion keeps its znodes, so its replicas stay for the
        controller's StopReplica (which completes the deletion)."""
        logs = self.log_manager.all_logs()
        znodes = {topic: self.zk.get_topic_znode(topic) for topic in {tp.topic for tp in logs}}

        def is_hosted(tp: TopicPartition) -> bool:
            found = znodes[tp.topic]
            if found is None:
                return False
            assignment, topic_id, _ = found
            dir_id = logs[tp].topic_id
            if topic_id is not None and dir_id is not None and dir_id != topic_id:
                return False
            return self.config.broker_id in assignment.get(tp.partition, ())

        return self.log_manager.delete_stray_logs(is_hosted)

    async def startup(self) -> None:
        cfg = self.config
        raise_open_files_limit(WANTED_OPEN_FILES)
        await asyncio.to_thread(self.zk.connect)
        cluster_id = await asyncio.to_thread(get_or_create_cluster_id, self.zk)
        await asyncio.to_thread(self.credentials.load_all, self.zk)
        if self.authorizer is not None:
            # Every ACL is loaded before the first request is served.
            self.acl_cache = AclCache(self.zk, self.authorizer)
            await asyncio.to_thread(self.acl_cache.start)
        self.metadata_cache = MetadataCache(cluster_id)
        self.topic_configs = TopicConfigs(cfg, self.zk, on_change=self._on_topic_config_change)
        self.log_manager = LogManager(
            cfg.log_dirs,
            self.topic_configs.default_log_config(),
            cfg.broker_id,
            retention_check_interval_ms=cfg.log_retention_check_interval_ms,
            on_flushed=self.metrics.log_flushed if self.metrics.enabled else None,
        )
        await asyncio.to_thread(
            self.log_manager.load_all, self.now_ms(), self.topic_configs.log_config_for
        )
        # Before registering, so no LeaderAndIsr can hand an old replica's files to a
        # new topic of the same name.
        for tp in await asyncio.to_thread(self._delete_stray_logs):
            self.state_change_log.record("stray-replica-deleted", tp=tp)
        self.replica_manager = ReplicaManager(
            cfg.broker_id,
            self.log_manager,
            self.topic_configs.log_config_for,
            self.state_change_log,
            replica_lag_time_max_ms=cfg.replica_lag_time_max_ms,
            isr_writer=self._write_isr,
            fetch_session_slots=cfg.max_incremental_fetch_session_cache_slots,
        )
        # The replication throttle's rates follow the broker's dynamic configs.
        self.replica_manager.throttle.set_rates(self.topic_configs.broker_effective)
        self.topic_configs.broker_listeners.append(self.replica_manager.throttle.set_rates)
        self.fetcher_manager = ReplicaFetcherManager(
            cfg.broker_id, self.replica_manager, self.metrics, self.inter_broker_security
        )
        self.replica_manager.on_become_follower = self.fetcher_manager.add_partitions
        self.replica_manager.on_stop_following = self.fetcher_manager.remove_partitions
        self.topic_admin = TopicAdmin(cfg, self.zk, self.metadata_cache)
        self.producer_ids = ProducerIdManager(self.zk, cfg.broker_id)
        self.group_service = GroupService(
            group_config_from_props(cfg.props),
            cfg.offsets_topic_num_partitions,
            self.replica_manager,
            self.now_ms,
            offsets_commit_timeout_ms=int(cfg.props.get("offsets.commit.timeout.ms", "5000")),
        )
        self.group_service.start()
        try:
            txn_config = txn_config_from_props(cfg.props)
        except ValueError as e:
            raise ConfigError(str(e)) from e
        self.txn_service = TxnService(
            txn_config,
            cfg.broker_id,
            self.replica_manager,
            self.metadata_cache,
            self.producer_ids,
            self.now_ms,
            self.inter_broker_security,
        )
        self.txn_service.start()
        await self.server.start()
        # register_broker waits out the ephemeral znode of a crashed previous incarnation.
        self.broker_epoch = await self._register()
        self._session_lost = False
        self.zk.add_state_listener(on_loop(asyncio.get_running_loop(), self._on_zk_state))
        self._seen_config_changes: set[str] = set()
        self.zk.watch_children(
            znodes.CONFIG_CHANGES_PATH, on_loop(asyncio.get_running_loop(), self._on_config_changes)
        )
        self.request_sender = BrokerRequestSender(
            cfg.broker_id,
            lambda broker_id: self.controller.endpoint_of(broker_id),
            self.inter_broker_security,
        )
        channel = ControllerChannel(
            cfg.broker_id, self, remote=self.request_sender, queue_local=True
        )
        self.controller = Controller(
            cfg.broker_id,
            self.zk,
            channel,
            self.state_change_log,
            unclean_leader_election=lambda topic: (
                self.topic_configs.log_config_for(topic).unclean_leader_election_enable
            ),
            rebalance=RebalanceSettings(
                enable=cfg.auto_leader_rebalance_enable,
                check_interval_s=cfg.leader_imbalance_check_interval_seconds,
                per_broker_percentage=cfg.leader_imbalance_per_broker_percentage,
            ),
            inter_broker_listener=cfg.listeners.inter_broker_listener,
        )
        self.controller.start()
        if cfg.metrics_port is not None:
            await self.metrics.serve(cfg.host, cfg.metrics_port)
        self._tasks.append(asyncio.create_task(self._tick_loop(), name="log-manager-tick"))
        self._tasks.append(asyncio.create_task(self._isr_shrink_loop(), name="isr-expiration"))
        if cfg.log_cleaner_enable:
            self._tasks.append(asyncio.create_task(self._cleaner_loop(), name="log-cleaner"))
        log.info(
            "broker %d started on %s:%d (epoch %d, cluster %s)",
            cfg.broker_id,
            cfg.host,
            cfg.port,
            self.broker_epoch,
            cluster_id,
        )

    async def _register(self) -> int:
        cfg = self.config
        return await asyncio.to_thread(
            self.zk.register_broker,
            cfg.broker_id,
            cfg.advertised_host,
            cfg.advertised_port,
            cfg.rack,
            [str(listener) for listener in cfg.listeners.advertised],
            None,
            {name: protocol.value for name, protocol in cfg.listeners.protocol_map.items()},
        )

    def _on_zk_state(self, state: KazooState) -> None:
        """After an expired session our ephemeral znodes are gone: register again with
        a new broker epoch once kazoo has a new session (Kafka's re-registration)."""
        if state == KazooState.LOST:
            log.warning("ZooKeeper session expired; will register again")
            self._session_lost = True
        elif state == KazooState.CONNECTED and self._session_lost:
            self._session_lost = False
            self._tasks.append(asyncio.create_task(self._reregister(), name="re-register"))

    async def _reregister(self) -> None:
        self.broker_epoch = await self._register()
        log.info("registered again with broker epoch %d", self.broker_epoch)
        self.controller.put(controller_events.ControllerChange())

    async def _tick_loop(self) -> None:
        while True:
            await asyncio.sleep(TICK_INTERVAL_S)
            now = self.now_ms()
            try:
                self.log_manager.tick(now)
                if self.replica_manager.unopened:
                    self.replica_manager.retry_unopened(now)
                if now - self._last_hw_checkpoint_ms >= HW_CHECKPOINT_INTERVAL_MS:
                    self.replica_manager.checkpoint()
                    self._last_hw_checkpoint_ms = now
            except Exception:
                log.exception("periodic log maintenance failed")

    async def _cleaner_loop(self) -> None:
        """Kafka's log cleaner thread: compacts `cleanup.policy=compact` logs below their
        high watermark. The rewriting runs in a worker thread; the swap on this loop."""
        while True:
            await asyncio.sleep(self.config.log_cleaner_backoff_ms / 1000)
            for tp, hosted in list(self.replica_manager.partitions.items()):
                try:
                    plan = hosted.log.cleaning_plan(self.now_ms(), hosted.high_watermark)
                    if plan is None:
                        continue
                    cleaned = await asyncio.to_thread(clean_segments, plan)
                    hosted.log.swap_cleaned(plan, cleaned)
                except Exception:  # noqa: BLE001 - one bad log must not stop the cleaner
                    log.exception("compaction of %s failed", tp)

    async def _isr_shrink_loop(self) -> None:
        # Kafka checks every replica.lag.time.max.ms / 2.
        interval = max(self.config.replica_lag_time_max_ms / 2000, 0.05)
        while True:
            await asyncio.sleep(interval)
            self.replica_manager.maybe_shrink_isr(self.now_ms())

    async def _write_isr(self, update: Generator[isr_update.IsrEffect, Any, Any]) -> Any:
        """Carry out a leader's ISR update (`replication/isr_update.py`: conditional
        write of the state znode, read-back on BADVERSION or ConnectionLoss, the ISR
        change notification) on a worker thread, as kazoo's calls block."""

        delay_s = self.config.isr_change_notification_delay_ms / 1000

        def perform_one(effect: isr_update.IsrEffect) -> Any:
            if delay_s > 0 and isinstance(effect, isr_update.NotifyIsrChange):
                time.sleep(delay_s)  # on the worker thread: the event loop runs on
            return isr_update.perform(effect, self.zk, classify_zk_failure)

        return await asyncio.to_thread(isr_update.run, update, perform_one)

    def _on_config_changes(self, children: list[str]) -> None:
        """Reload the topics named by change notifications we have not seen yet."""
        new = [c for c in children if c not in self._seen_config_changes]
        if not new:
            return
        self._seen_config_changes.update(new)
        changes = self.zk.get_config_changes()
        for name in new:
            entity = changes.get(name, "")
            if self.credentials.refresh_from_change(self.zk, entity):
                continue  # users/<name>: SCRAM credentials, no restart needed
            if entity.startswith("topics/"):
                self.topic_configs.reload(entity.removeprefix("topics/"))
            elif entity.startswith("brokers/") and self.topic_configs.reload_broker(
                entity.removeprefix("brokers/")
            ):
                # New broker defaults reach every hosted log without its own override.
                for topic in {tp.topic for tp in self.replica_manager.partitions}:
                    self._on_topic_config_change(topic)

    def _on_topic_config_change(self, topic: str) -> None:
        self.replica_manager.update_log_config(topic)

    # -- controller requests (from the channel: in-process or over the wire) --------

    async def apply_controller_request(
        self, request: ControllerRequest
    ) -> dict[TopicPartition, ErrorCode] | None:
        """Apply a LeaderAndIsr/UpdateMetadata/StopReplica from the controller, fenced by
        controller epoch and (KIP-380) by this broker's epoch."""
        error = controller_request_error(
            request.controller_epoch,
            self.replica_manager.controller_epoch,
            request.broker_epoch,
            self.broker_epoch,
        )
        if error == ErrorCode.stale_broker_epoch:
            self.state_change_log.record(
                "rejected-stale-broker-epoch",
                request=type(request).__name__,
                broker_epoch=request.broker_epoch,
                current=self.broker_epoch,
            )
            raise StaleBrokerEpochError(
                f"request for broker epoch {request.broker_epoch}; "
                f"this broker is at {self.broker_epoch}"
            )
        if error == ErrorCode.stale_controller_epoch:
            self.state_change_log.record(
                "rejected-stale-controller",
                request=type(request).__name__,
                controller_epoch=request.controller_epoch,
                current=self.replica_manager.controller_epoch,
            )
            raise StaleControllerEpochError(
                f"controller epoch {request.controller_epoch} is older than "
                f"{self.replica_manager.controller_epoch}"
            )
        if isinstance(request, LeaderAndIsrRequest):
            self.state_change_log.record(
                "leader-and-isr-received",
                controller=request.controller_id,
                controller_epoch=request.controller_epoch,
                partitions=len(request.partitions),
            )
            return self.replica_manager.become_leader_or_follower(
                request.controller_epoch,
                list(request.partitions),
                request.live_leaders,
                self.now_ms(),
                request.topic_ids,
            )
        elif isinstance(request, UpdateMetadataRequest):
            self._apply_update_metadata(request)
            return None
        elif isinstance(request, StopReplicaRequest):
            for tp in request.partitions:
                self.replica_manager.stop_replica(tp, request.delete_partitions)
        return None

    def _apply_update_metadata(self, request: UpdateMetadataRequest) -> None:
        cache = self.metadata_cache
        self.replica_manager.controller_epoch = max(
            self.replica_manager.controller_epoch, request.controller_epoch
        )
        cache.update_brokers(
            list(request.live_brokers),
            request.controller_id,
        )
        cache.update_partitions(
            [
                PartitionMetadata(
                    p.tp, p.leader, p.leader_epoch, p.replicas, p.isr, p.offline_replicas
                )
                for p in request.partitions
            ],
            request.topic_ids,
        )
        for topic in request.deleted_topics:
            cache.remove_topic(topic)
            self.topic_configs.forget(topic)
            self.metrics.topic_deleted(topic)
        self.state_change_log.record(
            "update-metadata-received",
            controller=request.controller_id,
            controller_epoch=request.controller_epoch,
            partitions=len(request.partitions),
            brokers=[b.broker_id for b in request.live_brokers],
        )
        topics = {p.tp.topic for p in request.partitions} | set(request.deleted_topics)
        if OFFSETS_TOPIC in topics and cache.has_topic(OFFSETS_TOPIC):
            self.group_service.use_partition_count(cache.partition_count(OFFSETS_TOPIC))
        for topic in topics:
            self.topic_admin.metadata_purgatory.notify(topic)

    # -- shutdown ----------------------------------------------------------------------

    async def run_until_stopped(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stopping.set)
        await self._stopping.wait()
        await self.shutdown()

    async def _controlled_shutdown(self) -> None:
        """Ask the controller to move leadership away first, so clients fail over
        before the listener closes instead of after a session timeout."""
        for _attempt in range(3):
            controller_id = self.metadata_cache.controller_id
            try:
                if controller_id == self.broker_id and self.controller.is_active:
                    remaining = await self.controller.controlled_shutdown(
                        self.broker_id, self.broker_epoch
                    )
                elif controller_id in self.metadata_cache.brokers:
                    remaining = await self._ask_controller_to_shut_down(controller_id)
                else:
                    return
            except Exception as e:  # noqa: BLE001 - shutdown goes on regardless
                log.warning("controlled shutdown attempt failed: %s", e)
                await asyncio.sleep(0.2)
                continue
            if not remaining:
                log.info("controlled shutdown complete")
                return
            log.info("controlled shutdown: still leading %d partitions", len(remaining))
            await asyncio.sleep(0.2)

    async def _ask_controller_to_shut_down(self, controller_id: int) -> list[TopicPartition]:
        endpoint = self.metadata_cache.brokers[controller_id]
        request = cm.controlled_shutdown_request_to_wire(
            cm.ControlledShutdownRequest(self.broker_id, self.broker_epoch)
        )
        async with await KafkaConnection.open(
            endpoint.host, endpoint.port, security=self.inter_broker_security
        ) as conn:
            wire = await conn.send(request, timeout=10)
        response = cm.controlled_shutdown_response_from_wire(wire)
        if response.error_code != ErrorCode.none:
            raise RuntimeError(f"controller answered {response.error_code.name}")
        return list(response.remaining_partitions)

    async def shutdown(self) -> None:
        log.info("broker %d shutting down", self.broker_id)
        await self._controlled_shutdown()
        for task in self._tasks:
            task.cancel()
        await self.controller.stop()
        await self.request_sender.close()
        await self.fetcher_manager.shutdown()
        await self.group_service.stop()
        await self.txn_service.stop()
        await self.server.stop()
        await self.metrics.stop()
        self.replica_manager.checkpoint()
        self.log_manager.shutdown()
        await asyncio.to_thread(self.zk.close)
        self.state_change_log.close()
        log.info("broker %d stopped cleanly", self.broker_id)


def raise_open_files_limit(wanted: int) -> int:
    """Raise RLIMIT_NOFILE towards `wanted` (the hard limit too, if privileged);
    returns the soft limit in force afterwards. Never lowers it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return soft
    # Raising the hard limit needs CAP_SYS_RESOURCE; without it, soft up to hard.
    for new_soft, new_hard in ((wanted, max(hard, wanted)), (min(wanted, hard), hard)):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (new_soft, new_hard))
            return new_soft
        except (ValueError, OSError):
            continue
    return soft


def run(config_path: Path) -> int:
    """Run the broker until it is stopped. A setting it cannot serve (an unknown
    listener scheme, TLS without a keystore, a bad SASL setting) is one clear line on
    stderr, no traceback, and exit code 1."""
    try:
        main(config_path)
    except ConfigError as e:
        print(f"error: {config_path}: {e}", file=sys.stderr)
        return 1
    return 0


def main(config_path: Path) -> None:
    config = BrokerConfig.from_file(config_path)
    configure_logging(config.logs_dir, config.broker_id)

    async def run() -> None:
        broker = Broker(config)
        await broker.startup()
        await broker.run_until_stopped()

    asyncio.run(run())
