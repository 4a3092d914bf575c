"""The controller shell: election through ZooKeeper and one event queue (seed 001).

Every broker runs one. The broker that creates the ephemeral /controller znode
becomes controller, bumps /controller_epoch, loads a ControllerContext from
ZooKeeper and from then on processes events one at a time, in order (Kafka's
ControllerEventManager). Decisions are the pure functions of `decisions.py`; this
module only reads and writes ZooKeeper and hands requests to the channel.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from strandline.controller import decisions, reassignment
from strandline.controller.channel import ControllerChannel
from strandline.controller.context import ControllerContext, LeaderIsr, LiveBroker
from strandline.controller.decisions import Election
from strandline.controller.reassignment import Reassignment
from strandline.coordination import znodes
from strandline.coordination.zk_client import ZkClient
from strandline.errors import (
    InvalidRequestError,
    KafkaError,
    NotControllerError,
    StaleBrokerEpochError,
)
from strandline.protocol.controller_requests import (
    BrokerInfo,
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from strandline.state_change_log import StateChangeLog
from strandline.types import TopicPartition

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ControllerEvent:
    """A named event; `Startup`, `ControllerChange`, `BrokerChange`, `TopicChange`,
    `PartitionModifications`, `TopicDeletion`, `IsrChangeNotification`,
    `PreferredReplicaElection`, `ControlledShutdown`, `PartitionReassignment`,
    `ApiPartitionReassignment`, `ElectLeaders`, `AutoLeaderRebalance`."""

    name: str
    topic: str | None = None
    broker_id: int | None = None
    broker_epoch: int = -1
    reply: asyncio.Future[Any] | None = field(default=None, compare=False)
    payload: Any = field(default=None, compare=False)


def _refuse(event: ControllerEvent) -> None:
    """Answer an event that will never run: this broker is no longer the controller."""
    if event.reply is not None and not event.reply.done():
        event.reply.set_exception(NotControllerError("this broker is not the controller"))


@dataclass(frozen=True)
class RebalanceSettings:
    """`auto.leader.rebalance.enable`, `leader.imbalance.check.interval.seconds`,
    `leader.imbalance.per.broker.percentage` (Kafka's defaults)."""

    enable: bool = True
    check_interval_s: float = 300.0
    per_broker_percentage: int = 10


# Per-partition answer of ElectLeaders / AlterPartitionReassignments.
PartitionResults = dict[TopicPartition, tuple[ErrorCode, str | None]]


class Controller:
    def __init__(
        self,
        broker_id: int,
        zk: ZkClient,
        channel: ControllerChannel,
        state_change_log: StateChangeLog,
        unclean_leader_election: Callable[[str], bool],
        rebalance: RebalanceSettings | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.zk = zk
        self.channel = channel
        self.state_change_log = state_change_log
        self.unclean = unclean_leader_election
        self.ctx: ControllerContext | None = None
        self._events: asyncio.Queue[ControllerEvent] = asyncio.Queue()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._watched_topics: set[str] = set()
        self.on_elected: Callable[[int], Awaitable[None]] | None = None
        self.rebalance = rebalance or RebalanceSettings()
        # Reassignments in progress (Kafka's partitionsBeingReassigned); rebuilt from
        # /admin/reassign_partitions on failover.
        self.reassignments: dict[TopicPartition, Reassignment] = {}
        # (topic, broker) whose StopReplica(delete=true) awaits its answer.
        self._deletions_in_flight: set[tuple[str, int]] = set()
        self._rebalance_task: asyncio.Task[None] | None = None

    @property
    def is_active(self) -> bool:
        return self.ctx is not None

    # -- lifecycle -------------------------------------------------------------

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.create_task(self._run(), name="controller-events")
        self.zk.watch_data(
            znodes.CONTROLLER_PATH,
            lambda _data, _stat: self.put(ControllerEvent("ControllerChange")),
        )
        self.put(ControllerEvent("Startup"))

    async def stop(self) -> None:
        self._stop_rebalance_timer()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        if self.is_active:
            await asyncio.to_thread(self.zk.resign_controller, self.broker_id)
        self.ctx = None
        # Brokers waiting on an answer (ControlledShutdown while the whole cluster stops)
        # must hear NOT_CONTROLLER now rather than wait out their request timeout.
        while not self._events.empty():
            _refuse(self._events.get_nowait())

    def put(self, event: ControllerEvent) -> None:
        """Thread-safe: ZooKeeper watches fire on kazoo's thread."""
        if self._loop is None:
            return
        self._loop.call_soon_threadsafe(self._events.put_nowait, event)

    async def _run(self) -> None:
        while True:
            event = await self._events.get()
            try:
                await self._process(event)
            except asyncio.CancelledError:
                _refuse(event)
                raise
            except Exception:
                log.exception("controller event %s failed", event)

    async def _process(self, event: ControllerEvent) -> None:
        if event.name in ("Startup", "ControllerChange"):
            await self._maybe_elect()
            return
        if self.ctx is None:
            _refuse(event)
            return  # not the controller: only election events matter
        handler = {
            "BrokerChange": self._on_broker_change,
            "TopicChange": self._on_topic_change,
            "PartitionModifications": self._on_partition_modifications,
            "TopicDeletion": self._on_topic_deletion,
            "TopicDeletionStopReplicaResponse": self._on_stop_replica_answer,
            "IsrChangeNotification": self._on_isr_change_notification,
            "PreferredReplicaElection": self._on_preferred_replica_election,
            "ControlledShutdown": self._on_controlled_shutdown,
            "PartitionReassignment": self._on_partition_reassignment,
            "ApiPartitionReassignment": self._on_api_partition_reassignment,
            "ElectLeaders": self._on_elect_leaders,
            "AutoLeaderRebalance": self._on_auto_leader_rebalance,
        }.get(event.name)
        if handler is not None:
            await handler(event)

    # -- election and failover -------------------------------------------------

    async def _maybe_elect(self) -> None:
        current = await asyncio.to_thread(self.zk.get_controller)
        if current == self.broker_id and self.ctx is not None:
            return
        if current is not None and current != self.broker_id:
            if self.ctx is not None:
                self._resign()
            return
        epoch = await asyncio.to_thread(self.zk.try_elect_controller, self.broker_id)
        if epoch is None:
            if self.ctx is not None:
                self._resign()
            return
        await self._on_controller_failover(epoch)

    def endpoint_of(self, broker_id: int) -> tuple[str, int] | None:
        """Where a live broker listens, as this controller knows it."""
        if self.ctx is None:
            return None
        live = self.ctx.live_brokers.get(broker_id)
        return None if live is None else (live.host, live.port)

    def _resign(self) -> None:
        self.state_change_log.record(
            "controller-resigned", controller_epoch=self.ctx.epoch if self.ctx else -1
        )
        self.ctx = None
        self.reassignments = {}
        self._deletions_in_flight = set()
        self._stop_rebalance_timer()

    async def _on_controller_failover(self, epoch: int) -> None:
        """Seed 001's onControllerFailover: register watches, load the context from
        ZooKeeper, finish half-done work, and tell every live broker the state."""
        ctx = ControllerContext(broker_id=self.broker_id, epoch=epoch)
        self.ctx = ctx
        self._deletions_in_flight = set()
        self.state_change_log.record("controller-elected", controller_epoch=epoch)
        log.info("broker %d is now the controller (epoch %d)", self.broker_id, epoch)
        await self._load_context(ctx)
        self._watch_children(znodes.BROKER_IDS_PATH, "BrokerChange")
        self._watch_children(znodes.BROKER_TOPICS_PATH, "TopicChange")
        self._watch_children(znodes.DELETE_TOPICS_PATH, "TopicDeletion")
        self._watch_children(znodes.ISR_CHANGE_NOTIFICATION_PATH, "IsrChangeNotification")
        self.zk.watch_data(
            znodes.PREFERRED_REPLICA_ELECTION_PATH,
            self._when_present(ControllerEvent("PreferredReplicaElection")),
        )
        self.reassignments = {}
        self.zk.watch_data(
            znodes.REASSIGN_PARTITIONS_PATH,
            self._when_present(ControllerEvent("PartitionReassignment")),
        )
        # Replicas on brokers that died while no controller watched (or with the old
        # one) go offline: new leaders for what they led, out of the ISRs they were in.
        dead = (
            {r for s in ctx.partition_states.values() for r in (*s.isr, s.leader)}
            - set(ctx.live_brokers)
            - {-1}
        )
        await self._apply(decisions.on_brokers_failed(ctx, dead, self.unclean))
        # Partitions without a state (a topic created while no controller ran).
        new = [tp for tp in ctx.assignments if tp not in ctx.partition_states]
        await self._apply(decisions.elect_new_partitions(ctx, new), new_partitions=True)
        await self._apply(decisions.elect_offline_partitions(ctx, self.unclean))
        await self._send_update_metadata(sorted(ctx.live_brokers), sorted(ctx.assignments))
        await self._send_leader_and_isr(sorted(ctx.partition_states))
        if self.on_elected is not None:
            await self.on_elected(epoch)
        if ctx.replicas_to_delete:
            # Deletions a previous controller left pending start over: every replica is
            # asked again (deleting what is gone already is a no-op on the broker).
            deleting = sorted(ctx.replicas_to_delete)
            await self._send_update_metadata(
                sorted(ctx.live_brokers), [], deleted_topics=tuple(deleting)
            )
            await self._resume_topic_deletions(deleting)
        # Reassignments a previous controller left half done resume through the
        # /admin/reassign_partitions watch registered above (its first firing).
        if self.rebalance.enable:
            self._start_rebalance_timer()

    def _watch_children(self, path: str, event: str) -> None:
        # A watch fires once at registration too; every handler diffs against the
        # context, so the extra event is harmless. Events of a resigned controller
        # are dropped by `_process`.
        self.zk.watch_children(path, lambda _children: self.put(ControllerEvent(event)))

    def _when_present(self, event: ControllerEvent) -> Callable[[bytes | None, object], None]:
        """A data-watch callback that queues `event` while the znode exists."""

        def fire(data: bytes | None, _stat: object) -> None:
            if data is not None:
                self.put(event)

        return fire

    async def _load_context(self, ctx: ControllerContext) -> None:
        brokers = await asyncio.to_thread(self.zk.get_live_brokers)
        ctx.live_brokers = {
            b.broker_id: LiveBroker(b.broker_id, b.host, b.port, b.rack, b.epoch)
            for b in brokers.values()
        }
        for topic in await asyncio.to_thread(self.zk.get_all_topics):
            await self._load_topic(ctx, topic)
        for topic in await asyncio.to_thread(self.zk.get_topics_marked_for_deletion):
            ctx.begin_topic_deletion(topic)

    async def _load_topic(self, ctx: ControllerContext, topic: str) -> list[TopicPartition]:
        """Read a topic's assignment and partition states; return partitions new to ctx."""
        assignment = await asyncio.to_thread(self.zk.get_topic_assignment, topic)
        if assignment is None:
            return []
        if topic not in self._watched_topics:
            self._watched_topics.add(topic)
            self.zk.watch_data(
                znodes.topic_path(topic),
                self._when_present(ControllerEvent("PartitionModifications", topic=topic)),
            )
        added = []
        for p, replicas in sorted(assignment.items()):
            tp = TopicPartition(topic, p)
            if tp not in ctx.assignments:
                added.append(tp)
            ctx.assignments[tp] = tuple(replicas)
        tps = [TopicPartition(topic, p) for p in assignment]
        found = await asyncio.to_thread(self.zk.get_partition_states, tps)
        for tp, (state, version) in found.items():
            ctx.partition_states[tp] = LeaderIsr(
                state.leader, state.leader_epoch, tuple(state.isr), state.controller_epoch, version
            )
        return added

    # -- events -----------------------------------------------------------------

    async def _on_broker_change(self, event: ControllerEvent) -> None:
        ctx = self._ctx()
        brokers = await asyncio.to_thread(self.zk.get_live_brokers)
        current = {
            b.broker_id: LiveBroker(b.broker_id, b.host, b.port, b.rack, b.epoch)
            for b in brokers.values()
        }
        previous = ctx.live_brokers
        dead = {b for b in previous if b not in current}
        # A broker that restarted within one watch period shows up with a new epoch.
        bounced = {
            b
            for b in current
            if b in previous and current[b].broker_epoch != previous[b].broker_epoch
        }
        started = {b for b in current if b not in previous} | bounced
        if not dead and not started:
            return
        self.state_change_log.record(
            "broker-change", new_brokers=sorted(started), dead_brokers=sorted(dead)
        )
        ctx.live_brokers = current
        ctx.shutting_down_brokers -= dead | started
        # Their StopReplica answers will never come (the sender drops requests to a
        # dead broker): the replicas are asked again when the broker is back.
        self._deletions_in_flight = {
            (t, b) for t, b in self._deletions_in_flight if b not in dead | started
        }
        if dead:
            await self.channel.remove_brokers(dead)
            await self._apply(decisions.on_brokers_failed(ctx, dead, self.unclean))
        if started:
            # onBrokerStartup: tell everyone about the new brokers, give the new brokers
            # their replicas, and try to bring offline partitions online.
            await self._send_update_metadata(sorted(ctx.live_brokers), sorted(ctx.assignments))
            on_new = [tp for b in started for tp in ctx.partitions_on_broker(b)]
            new_parts = [tp for tp in ctx.assignments if tp not in ctx.partition_states]
            await self._apply(decisions.elect_new_partitions(ctx, new_parts), new_partitions=True)
            await self._apply(decisions.elect_offline_partitions(ctx, self.unclean))
            await self._send_leader_and_isr(sorted(set(on_new)), only_brokers=started)
            # Topic deletions waiting for these brokers' replicas go on.
            await self._resume_topic_deletions(sorted(ctx.replicas_to_delete), started)
        await self._complete_reassignments(sorted(self.reassignments))

    async def _on_topic_change(self, event: ControllerEvent) -> None:
        ctx = self._ctx()
        topics = set(await asyncio.to_thread(self.zk.get_all_topics))
        new_topics = topics - ctx.topics() - ctx.topics_to_delete
        added: list[TopicPartition] = []
        for topic in sorted(new_topics):
            added += await self._load_topic(ctx, topic)
        for gone in ctx.topics() - topics:
            ctx.remove_topic(gone)
        if added:
            self.state_change_log.record("new-topics", topics=sorted(new_topics))
            await self._apply(decisions.elect_new_partitions(ctx, added), new_partitions=True)

    async def _on_partition_modifications(self, event: ControllerEvent) -> None:
        ctx = self._ctx()
        assert event.topic is not None
        if event.topic in ctx.topics_to_delete:
            return
        added = await self._load_topic(ctx, event.topic)
        if added:
            self.state_change_log.record(
                "new-partitions", topic=event.topic, partitions=[tp.partition for tp in added]
            )
            await self._apply(decisions.elect_new_partitions(ctx, added), new_partitions=True)

    async def _on_topic_deletion(self, event: ControllerEvent) -> None:
        """Kafka's TopicDeletionManager: a topic marked in /admin/delete_topics leaves
        the brokers' metadata at once; every replica gets StopReplica(delete=true); the
        znodes go only once every replica's broker answered, so a replica on an offline
        broker keeps the deletion pending until that broker is back."""
        ctx = self._ctx()
        marked = set(await asyncio.to_thread(self.zk.get_topics_marked_for_deletion))
        started = []
        for topic in sorted(marked - set(ctx.replicas_to_delete)):
            replicas = ctx.begin_topic_deletion(topic)
            for tp in [tp for tp in self.reassignments if tp.topic == topic]:
                del self.reassignments[tp]
            self.state_change_log.record(
                "topic-deletion-started",
                topic=topic,
                replicas={str(b): [tp.partition for tp in tps] for b, tps in replicas.items()},
            )
            started.append(topic)
        if started:
            # Brokers forget the topic now (Kafka sends LeaderDuringDelete): DeleteTopics
            # answers and clients stop using it while replicas are still being deleted.
            await self._send_update_metadata(
                sorted(ctx.live_brokers), [], deleted_topics=tuple(started)
            )
        await self._resume_topic_deletions(started)

    async def _resume_topic_deletions(
        self, topics: list[str], only_brokers: set[int] | None = None
    ) -> None:
        """Send StopReplica(delete=true) for the replicas of `topics` still on disk, to
        live brokers (only `only_brokers` if given); log the ones waiting for a broker."""
        ctx = self._ctx()
        for topic in topics:
            pending = ctx.replicas_to_delete.get(topic)
            if pending is None:
                continue
            if not pending:
                await self._complete_topic_deletion(topic)
                continue
            offline = sorted(b for b in pending if b not in ctx.live_brokers)
            if offline:
                self.state_change_log.record(
                    "topic-deletion-pending",
                    topic=topic,
                    offline_replicas={str(b): [tp.partition for tp in pending[b]] for b in offline},
                )
            for broker_id, tps in sorted(pending.items()):
                live = ctx.live_brokers.get(broker_id)
                if live is None or (only_brokers is not None and broker_id not in only_brokers):
                    continue
                if (topic, broker_id) in self._deletions_in_flight:
                    continue
                self._deletions_in_flight.add((topic, broker_id))
                await self.channel.send_stop_replica(
                    broker_id,
                    StopReplicaRequest(
                        self.broker_id, ctx.epoch, live.broker_epoch, tps, delete_partitions=True
                    ),
                    on_answer=self._stop_replica_answered(topic, broker_id),
                )

    def _stop_replica_answered(self, topic: str, broker_id: int) -> Callable[[ErrorCode], None]:
        def answered(code: ErrorCode) -> None:
            self.put(
                ControllerEvent(
                    "TopicDeletionStopReplicaResponse",
                    topic=topic,
                    broker_id=broker_id,
                    payload=code,
                )
            )

        return answered

    async def _on_stop_replica_answer(self, event: ControllerEvent) -> None:
        ctx = self._ctx()
        assert event.topic is not None and event.broker_id is not None
        self._deletions_in_flight.discard((event.topic, event.broker_id))
        if event.topic not in ctx.replicas_to_delete:
            return
        code: ErrorCode = event.payload
        if code != ErrorCode.none:
            # Kafka's ReplicaDeletionIneligible: retried when the broker starts again.
            self.state_change_log.record(
                "topic-deletion-replica-failed",
                topic=event.topic,
                broker_id=event.broker_id,
                error=code.name,
            )
            return
        if ctx.replica_deleted(event.topic, event.broker_id):
            await self._complete_topic_deletion(event.topic)

    async def _complete_topic_deletion(self, topic: str) -> None:
        ctx = self._ctx()
        await asyncio.to_thread(self.zk.delete_topic_znodes, topic)
        ctx.finish_topic_deletion(topic)
        self._watched_topics.discard(topic)
        self.state_change_log.record("topic-deleted", topic=topic)
        await self._send_update_metadata(sorted(ctx.live_brokers), [], deleted_topics=(topic,))

    async def _on_isr_change_notification(self, event: ControllerEvent) -> None:
        """A leader changed an ISR in ZooKeeper: reload those states and propagate."""
        ctx = self._ctx()
        notifications = await asyncio.to_thread(self.zk.get_isr_change_notifications)
        await asyncio.to_thread(self.zk.delete_isr_change_notifications, list(notifications))
        tps = sorted({tp for tps in notifications.values() for tp in tps})
        changed = []
        for tp in tps:
            found = await asyncio.to_thread(self.zk.get_partition_state, tp)
            if found is None or tp not in ctx.assignments:
                continue
            state, version = found
            ctx.partition_states[tp] = LeaderIsr(
                state.leader, state.leader_epoch, tuple(state.isr), state.controller_epoch, version
            )
            changed.append(tp)
        if changed:
            await self._send_update_metadata(sorted(ctx.live_brokers), changed)
        await self._complete_reassignments([tp for tp in changed if tp in self.reassignments])

    async def _on_preferred_replica_election(self, event: ControllerEvent) -> None:
        ctx = self._ctx()
        tps = await asyncio.to_thread(self.zk.get_preferred_replica_election)
        tps = [tp for tp in tps if tp not in self.reassignments]
        await self._apply(decisions.elect_preferred_leaders(ctx, tps))
        await asyncio.to_thread(self.zk.delete_preferred_replica_election)

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> list[TopicPartition]:
        """A broker asks to stop: returns the partitions it still leads (none when all
        leadership could move). Runs through the event queue like every other event."""
        assert self._loop is not None
        reply: asyncio.Future[list[TopicPartition]] = self._loop.create_future()
        self._events.put_nowait(
            ControllerEvent(
                "ControlledShutdown", broker_id=broker_id, broker_epoch=broker_epoch, reply=reply
            )
        )
        return await reply

    async def _on_controlled_shutdown(self, event: ControllerEvent) -> None:
        ctx = self._ctx()
        assert event.broker_id is not None and event.reply is not None
        live = ctx.live_brokers.get(event.broker_id)
        if live is None or event.broker_epoch not in (-1, live.broker_epoch):
            event.reply.set_exception(
                StaleBrokerEpochError(
                    f"broker {event.broker_id} epoch {event.broker_epoch} is not the live one"
                )
            )
            return
        ctx.shutting_down_brokers.add(event.broker_id)
        self.state_change_log.record("controlled-shutdown", broker_id=event.broker_id)
        await self._apply(decisions.controlled_shutdown(ctx, event.broker_id))
        if not event.reply.done():
            event.reply.set_result(ctx.partitions_led_by(event.broker_id))

    async def elect_preferred(self, tps: list[TopicPartition]) -> list[Election]:
        elections = decisions.elect_preferred_leaders(self._ctx(), tps)
        await self._apply(elections)
        return elections

    # -- partition reassignment (seed 001) ----------------------------------------

    async def _on_partition_reassignment(self, event: ControllerEvent) -> None:
        """/admin/reassign_partitions changed (a tool wrote it, or we did): start what is
        new there. On failover its first firing resumes a previous controller's work."""
        wanted = await asyncio.to_thread(self.zk.get_partition_reassignment)
        fresh = {
            tp: tuple(replicas)
            for tp, replicas in wanted.items()
            if tp not in self.reassignments or self.reassignments[tp].target != tuple(replicas)
        }
        if not fresh:
            return
        results = await self._start_reassignments(fresh)
        rejected = [tp for tp, (code, _msg) in results.items() if code != ErrorCode.none]
        for tp in rejected:
            log.warning("reassignment of %s rejected: %s", tp, results[tp][1])
        if rejected:
            # Like Kafka: an invalid entry is dropped so it cannot block the others.
            await self._write_reassignment_znode(drop=set(rejected))

    async def alter_partition_reassignments(
        self, wanted: dict[TopicPartition, tuple[int, ...] | None]
    ) -> PartitionResults:
        """AlterPartitionReassignments (45): start, change or (None) cancel reassignments;
        answers once they are started, not finished."""
        return await self._ask("ApiPartitionReassignment", wanted)

    async def _on_api_partition_reassignment(self, event: ControllerEvent) -> None:
        assert event.reply is not None
        wanted: dict[TopicPartition, tuple[int, ...] | None] = event.payload
        results: PartitionResults = {}
        targets: dict[TopicPartition, tuple[int, ...]] = {}
        for tp, target in wanted.items():
            if target is not None:
                targets[tp] = target
            elif tp in self.reassignments:
                # Cancel: move back to the replicas the partition had before.
                targets[tp] = self.reassignments[tp].original
            else:
                results[tp] = (ErrorCode.no_reassignment_in_progress, f"{tp} is not moving")
        results.update(await self._start_reassignments(targets))
        if not event.reply.done():
            event.reply.set_result(results)

    def list_partition_reassignments(
        self, tps: list[TopicPartition] | None
    ) -> dict[TopicPartition, Reassignment]:
        """ListPartitionReassignments (46): the reassignments in progress."""
        if self.ctx is None:
            raise NotControllerError("this broker is not the controller")
        if tps is None:
            return dict(sorted(self.reassignments.items()))
        return {tp: self.reassignments[tp] for tp in tps if tp in self.reassignments}

    async def _start_reassignments(
        self, targets: dict[TopicPartition, tuple[int, ...]]
    ) -> PartitionResults:
        """Steps 1-3 for each partition, then record them in /admin/reassign_partitions
        (so a new controller resumes them) and try to complete the ones already in sync."""
        ctx = self._ctx()
        results: PartitionResults = {}
        started: list[Reassignment] = []
        finished_already: set[TopicPartition] = set()
        for tp, target in sorted(targets.items()):
            try:
                reassignment.validate_target(ctx, tp, list(target))
            except KafkaError as e:
                results[tp] = (e.code, str(e))
                continue
            results[tp] = (ErrorCode.none, None)
            if reassignment.is_noop(ctx, tp, target) and tp not in self.reassignments:
                finished_already.add(tp)
                continue
            # The current AR counts as the original: right both for a fresh start and
            # for one resumed after failover (AR is then OAR + RAR already), since the
            # replicas to delete are AR - RAR either way.
            started.append(Reassignment(tp, ctx.assignments[tp], target))
        by_topic: dict[str, list[Reassignment]] = {}
        for r in started:
            by_topic.setdefault(r.tp.topic, []).append(r)
        elections = []
        for topic, moves in sorted(by_topic.items()):
            plans = [reassignment.plan_start(ctx, r) for r in moves]
            await self._write_assignment(topic, {p.reassignment.tp: p.assignment for p in plans})
            for plan in plans:
                self.reassignments[plan.reassignment.tp] = plan.reassignment
                self.state_change_log.record(
                    "reassignment-started",
                    tp=plan.reassignment.tp,
                    original=list(plan.reassignment.original),
                    target=list(plan.reassignment.target),
                    assignment=list(plan.assignment),
                )
                if plan.election is not None:
                    elections.append(plan.election)
        # The epoch bump reaches every replica of AR, so the new ones start fetching.
        await self._apply(elections)
        await self._write_reassignment_znode(drop=finished_already)
        await self._complete_reassignments([r.tp for r in started])
        return results

    async def _complete_reassignments(self, tps: list[TopicPartition]) -> None:
        """Steps 4-11 for every partition whose target replicas are all in the ISR."""
        ctx = self._ctx()
        done: set[TopicPartition] = set()
        for tp in tps:
            r = self.reassignments.get(tp)
            if r is None:
                continue
            for _attempt in range(3):  # a conflicting ISR write reloads the state
                plan = reassignment.plan_completion(ctx, r)
                if plan is None:
                    break
                # In memory first (Kafka's B2), so LeaderAndIsr carries RAR and only
                # reaches RAR; ZooKeeper's assignment changes last (step 10).
                ctx.assignments[tp] = r.target
                if await self._apply([plan.election]):
                    await self._remove_replicas(tp, r.removing)
                    await self._write_assignment(tp.topic, {tp: r.target})
                    del self.reassignments[tp]
                    done.add(tp)
                    self.state_change_log.record(
                        "reassignment-completed", tp=tp, replicas=list(r.target)
                    )
                    break
                ctx.assignments[tp] = r.all_replicas
        if done:
            await self._write_reassignment_znode(drop=done)

    async def _remove_replicas(self, tp: TopicPartition, removing: tuple[int, ...]) -> None:
        """Steps 8-9: stop and delete the replicas that are not in the target. A dead
        broker's copy is deleted by that broker when it starts again (a stray log)."""
        ctx = self._ctx()
        for broker_id in removing:
            live = ctx.live_brokers.get(broker_id)
            if live is None:
                log.warning("replica %d of %s is offline; its files stay", broker_id, tp)
                continue
            await self.channel.send_stop_replica(
                broker_id,
                StopReplicaRequest(
                    self.broker_id, ctx.epoch, live.broker_epoch, (tp,), delete_partitions=True
                ),
            )

    async def _write_assignment(
        self, topic: str, replicas: dict[TopicPartition, tuple[int, ...]]
    ) -> None:
        """Read-modify-write /brokers/topics/<topic> for the given partitions."""
        ctx = self._ctx()
        current = await asyncio.to_thread(self.zk.get_topic_assignment, topic)
        if current is None:
            raise InvalidRequestError(f"topic {topic!r} has no assignment znode")
        for tp, rs in replicas.items():
            current[tp.partition] = list(rs)
            ctx.assignments[tp] = rs
        await asyncio.to_thread(self.zk.set_topic_assignment, topic, current)

    async def _write_reassignment_znode(self, drop: set[TopicPartition]) -> None:
        """/admin/reassign_partitions := the reassignments in progress; deleted when none
        are left (step 11). Entries a tool wrote that we have not read yet are kept."""
        on_znode = await asyncio.to_thread(self.zk.get_partition_reassignment)
        merged = {tp: r for tp, r in on_znode.items() if tp not in drop}
        merged.update({tp: list(r.target) for tp, r in self.reassignments.items()})
        if merged != on_znode:
            await asyncio.to_thread(self.zk.set_partition_reassignment, merged)

    # -- ElectLeaders (43) and auto leader rebalance ------------------------------------

    async def elect_leaders(
        self, tps: list[TopicPartition] | None, election_type: int
    ) -> PartitionResults:
        """ElectLeaders: `tps` None means every partition (answers leave out the ones
        that needed no election)."""
        return await self._ask("ElectLeaders", (tps, election_type))

    async def _on_elect_leaders(self, event: ControllerEvent) -> None:
        ctx = self._ctx()
        assert event.reply is not None
        tps, election_type = event.payload
        every = tps is None
        outcome = decisions.elect_leaders_on_request(
            ctx,
            sorted(ctx.assignments) if every else tps,
            election_type,
            excluded=set(self.reassignments),
        )
        written = set(await self._apply(outcome.elections))
        results: PartitionResults = {}
        for tp, (code, message) in outcome.errors.items():
            if not (every and code == ErrorCode.election_not_needed):
                results[tp] = (code, message)
        for e in outcome.elections:
            results[e.tp] = (
                (ErrorCode.none, None)
                if e.tp in written
                else (ErrorCode.request_timed_out, f"{e.tp}: state changed meanwhile; retry")
            )
        if not event.reply.done():
            event.reply.set_result(results)

    def _start_rebalance_timer(self) -> None:
        self._stop_rebalance_timer()

        async def tick() -> None:
            while True:
                await asyncio.sleep(self.rebalance.check_interval_s)
                self.put(ControllerEvent("AutoLeaderRebalance"))

        self._rebalance_task = asyncio.create_task(tick(), name="auto-leader-rebalance")

    def _stop_rebalance_timer(self) -> None:
        if self._rebalance_task is not None:
            self._rebalance_task.cancel()
            self._rebalance_task = None

    async def _on_auto_leader_rebalance(self, event: ControllerEvent) -> None:
        ctx = self._ctx()
        elections = decisions.auto_rebalance(
            ctx, self.rebalance.per_broker_percentage, excluded=set(self.reassignments)
        )
        if elections:
            self.state_change_log.record(
                "auto-leader-rebalance", partitions=[e.tp for e in elections]
            )
            await self._apply(elections)

    async def _ask(self, name: str, payload: object) -> Any:
        """Queue an event that answers through a future (NotControllerError if we are
        not, or stop being, the controller before it runs)."""
        if self.ctx is None or self._loop is None:
            raise NotControllerError("this broker is not the controller")
        reply: asyncio.Future[Any] = self._loop.create_future()
        self._events.put_nowait(ControllerEvent(name, reply=reply, payload=payload))
        return await reply

    # -- effects ------------------------------------------------------------------

    def _ctx(self) -> ControllerContext:
        assert self.ctx is not None
        return self.ctx

    async def _apply(
        self, elections: list[Election], new_partitions: bool = False
    ) -> list[TopicPartition]:
        """Write the elected states (conditionally, pipelined, fenced by our controller
        epoch) and send LeaderAndIsr + UpdateMetadata for the ones written, which it
        returns (a conflict leaves a partition out, with its state reloaded)."""
        if not elections:
            return []
        ctx = self._ctx()

        def as_znode(e: Election) -> znodes.LeaderAndIsr:
            return znodes.LeaderAndIsr(
                leader=e.state.leader,
                leader_epoch=e.state.leader_epoch,
                isr=list(e.state.isr),
                controller_epoch=ctx.epoch,
            )

        creates = {e.tp: as_znode(e) for e in elections if e.create}
        updates = {e.tp: (as_znode(e), e.state.zk_version) for e in elections if not e.create}
        results: dict[TopicPartition, int | Exception] = {}
        if creates:
            results.update(await asyncio.to_thread(self.zk.create_partition_states, creates, True))
        if updates:
            results.update(await asyncio.to_thread(self.zk.update_partition_states, updates, True))
        written = []
        stale = []
        for e in elections:
            outcome = results[e.tp]
            if isinstance(outcome, Exception):
                log.warning("writing state of %s failed (%s); reloading it", e.tp, outcome)
                stale.append(e.tp)
                continue
            ctx.partition_states[e.tp] = LeaderIsr(
                e.state.leader, e.state.leader_epoch, e.state.isr, ctx.epoch, outcome
            )
            written.append(e.tp)
            self.state_change_log.record(
                "unclean-leader-election" if e.unclean else "leader-election",
                tp=e.tp,
                leader=e.state.leader,
                leader_epoch=e.state.leader_epoch,
                isr=list(e.state.isr),
                reason=e.reason,
                controller_epoch=ctx.epoch,
            )
            if e.unclean:
                log.warning(
                    "unclean leader election for %s: broker %d leads; records not on it are lost",
                    e.tp,
                    e.state.leader,
                )
        if stale:
            # A conflict means our view is stale (a leader changed the ISR): reload.
            found = await asyncio.to_thread(self.zk.get_partition_states, stale)
            for tp, (s, version) in found.items():
                ctx.partition_states[tp] = LeaderIsr(
                    s.leader, s.leader_epoch, tuple(s.isr), s.controller_epoch, version
                )
        await self._send_leader_and_isr(written, is_new=new_partitions)
        await self._send_update_metadata(sorted(ctx.live_brokers), written)
        return written

    def _broker_infos(self) -> tuple[BrokerInfo, ...]:
        ctx = self._ctx()
        return tuple(
            BrokerInfo(b.broker_id, b.host, b.port, b.rack)
            for b in sorted(ctx.live_brokers.values(), key=lambda b: b.broker_id)
        )

    async def _send_leader_and_isr(
        self,
        tps: list[TopicPartition],
        is_new: bool = False,
        only_brokers: set[int] | None = None,
    ) -> None:
        ctx = self._ctx()
        leaders = self._broker_infos()
        targets = decisions.leader_and_isr_targets(ctx, tps, is_new)
        # Remote sends only enqueue; the local broker applies in-process on this loop,
        # so it goes last and never holds up the others (Kafka: a queue per broker).
        for broker_id, states in sorted(targets.items(), key=lambda t: t[0] == self.broker_id):
            if only_brokers is not None and broker_id not in only_brokers:
                continue
            await self.channel.send_leader_and_isr(
                broker_id,
                LeaderAndIsrRequest(
                    self.broker_id,
                    ctx.epoch,
                    ctx.live_brokers[broker_id].broker_epoch,
                    tuple(states),
                    leaders,
                ),
            )

    async def _send_update_metadata(
        self,
        broker_ids: list[int],
        tps: list[TopicPartition],
        deleted_topics: tuple[str, ...] = (),
    ) -> None:
        ctx = self._ctx()
        states = tuple(
            decisions.partition_state(ctx, tp) for tp in tps if tp in ctx.partition_states
        )
        brokers = self._broker_infos()
        for broker_id in sorted(broker_ids, key=lambda b: b == self.broker_id):
            if broker_id not in ctx.live_brokers:
                continue
            await self.channel.send_update_metadata(
                broker_id,
                UpdateMetadataRequest(
                    self.broker_id,
                    ctx.epoch,
                    ctx.live_brokers[broker_id].broker_epoch,
                    states,
                    brokers,
                    deleted_topics,
                ),
            )
