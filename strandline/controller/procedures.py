"""The controller's procedures (Kafka's KafkaController), pure: one generator per event.

`ControllerCore.handle(event)` returns a generator that yields effects (`effects.py`)
and receives their results: ZooKeeper reads and conditional writes, LeaderAndIsr /
UpdateMetadata / StopReplica per broker, state-change log lines. Its return value is
the answer to the event (ControlledShutdown, AlterPartitionReassignments,
ElectLeaders); a KafkaError it raises is the error answer. All controller state lives
in the `ControllerContext` (None while this broker is not the controller). Decisions
are the functions of `decisions.py` and `reassignment.py`; this module sequences them
as Kafka's KafkaController does, one event at a time.

No I/O, no clock, no asyncio: the broker (`controller.py`) and the simulator
(`strandline.sim.cluster_controller`) carry the effects out, each in its own way.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from strandline.controller import decisions, reassignment
from strandline.controller import effects as fx
from strandline.controller.context import ControllerContext, Reassignment
from strandline.controller.decisions import Election
from strandline.coordination import znodes
from strandline.coordination.znodes import BrokerRegistration, LeaderAndIsr
from strandline.errors import (
    InvalidRequestError,
    KafkaError,
    NotControllerError,
    StaleBrokerEpochError,
)
from strandline.protocol.controller_requests import (
    BrokerInfo,
    Endpoint,
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from strandline.types import TopicPartition

# A procedure yields effects, is sent each effect's result, and returns its answer.
Procedure = Generator[fx.Effect, Any, Any]
# Per-partition answer of ElectLeaders / AlterPartitionReassignments.
PartitionResults = dict[TopicPartition, tuple[ErrorCode, str | None]]
UncleanPolicy = Callable[[str], bool]  # topic -> unclean.leader.election.enable


@dataclass(frozen=True)
class RebalanceSettings:
    """`auto.leader.rebalance.enable`, `leader.imbalance.check.interval.seconds`,
    `leader.imbalance.per.broker.percentage` (Kafka's defaults)."""

    enable: bool = True
    check_interval_s: float = 300.0
    per_broker_percentage: int = 10


def broker_info(reg: BrokerRegistration, inter_broker_listener: str) -> BrokerInfo:
    """A registration as requests carry it: host and port are the inter-broker
    listener's (what followers and the controller connect to), plus every listener."""
    endpoints = tuple(Endpoint(*e) for e in reg.parsed_endpoints())
    host, port = reg.host, reg.port
    for e in endpoints:
        if e.listener == inter_broker_listener:
            host, port = e.host, e.port
    return BrokerInfo(reg.broker_id, host, port, reg.rack, endpoints)


def _log(kind: str, **fields: Any) -> fx.StateChange:
    return fx.StateChange(kind, fields)


class ControllerCore:
    """One broker's controller: `ctx` is set while it is the active controller."""

    def __init__(
        self,
        broker_id: int,
        unclean_leader_election: UncleanPolicy,
        rebalance: RebalanceSettings | None = None,
        inter_broker_listener: str = "PLAINTEXT",
    ) -> None:
        self.broker_id = broker_id
        self.inter_broker_listener = inter_broker_listener
        self.unclean = unclean_leader_election
        self.rebalance = rebalance or RebalanceSettings()
        self.ctx: ControllerContext | None = None
        # False from the start of a failover until it completed: a failover that an
        # effect's failure ended half-way (a lost ZooKeeper reply) left a context that
        # must not be acted on.
        self._failover_complete = True

    @property
    def is_active(self) -> bool:
        return self.ctx is not None

    def handle(self, event: fx.ControllerEvent) -> Procedure:
        """The procedure for `event`. A broker that is not the controller only acts on
        election events; any other answers NotControllerError."""
        if self.ctx is not None and not self._failover_complete:
            return self._move_controller(event)
        if isinstance(event, fx.ELECTION_EVENTS):
            return self._maybe_elect()
        if self.ctx is None:
            return self._refuse()
        match event:
            case fx.BrokerChange():
                return self._on_broker_change()
            case fx.TopicChange():
                return self._on_topic_change()
            case fx.PartitionModifications(topic):
                return self._on_partition_modifications(topic)
            case fx.TopicDeletion():
                return self._on_topic_deletion()
            case fx.StopReplicaAnswered():
                return self._on_stop_replica_answer(event)
            case fx.IsrChangeNotification():
                return self._on_isr_change_notification()
            case fx.PreferredReplicaElection():
                return self._on_preferred_replica_election()
            case fx.ControlledShutdown(broker_id, broker_epoch):
                return self._on_controlled_shutdown(broker_id, broker_epoch)
            case fx.PartitionReassignment():
                return self._on_partition_reassignment()
            case fx.AlterReassignments(wanted):
                return self._on_alter_reassignments(wanted)
            case fx.ElectLeaders(tps, election_type):
                return self._on_elect_leaders(tps, election_type)
            case fx.AutoLeaderRebalance():
                return self._on_auto_leader_rebalance()
        raise TypeError(f"not a controller event: {event!r}")

    def _refuse(self) -> Procedure:
        raise NotControllerError("this broker is not the controller")
        yield  # a generator: the error comes when the shell runs it

    def _ctx(self) -> ControllerContext:
        if self.ctx is None:
            # Resigned in the middle of a procedure (a ControllerChange ran meanwhile
            # in a shell that interleaves): stop here rather than act on no context.
            raise NotControllerError("this broker is no longer the controller")
        return self.ctx

    # -- election and failover -------------------------------------------------------

    def _maybe_elect(self) -> Procedure:
        current = yield fx.ReadController()
        if current == self.broker_id and self.ctx is not None:
            return None
        if current is not None and current != self.broker_id:
            if self.ctx is not None:
                yield from self.resign()
            return None
        epoch = yield fx.ElectController(self.broker_id)
        if epoch is None:
            if self.ctx is not None:
                yield from self.resign()
            return None
        yield from self._on_controller_failover(epoch)
        return None

    def _move_controller(self, event: fx.ControllerEvent) -> Procedure:
        """Kafka's triggerControllerMove: after a failover that did not complete (its
        context may lack topics, and a deletion would then find no replicas to wait
        for), give up /controller so an election starts again, from a fresh read."""
        yield _log(
            "controller-move", reason="failover did not complete", event=type(event).__name__
        )
        yield fx.ResignController(self.broker_id)
        yield from self.resign()
        yield from self._maybe_elect()

    def resign(self) -> Procedure:
        yield _log("controller-resigned", controller_epoch=self.ctx.epoch if self.ctx else -1)
        self.ctx = None
        yield fx.Resigned()

    def _on_controller_failover(self, epoch: int) -> Procedure:
        """Kafka's onControllerFailover: register watches, load the context from
        ZooKeeper, finish half-done work, and tell every live broker the state."""
        ctx = ControllerContext(broker_id=self.broker_id, epoch=epoch)
        self.ctx = ctx
        self._failover_complete = False
        yield _log("controller-elected", controller_epoch=epoch)
        yield from self._load_context(ctx)
        yield fx.WatchChildren(znodes.BROKER_IDS_PATH, fx.BrokerChange())
        yield fx.WatchChildren(znodes.BROKER_TOPICS_PATH, fx.TopicChange())
        yield fx.WatchChildren(znodes.DELETE_TOPICS_PATH, fx.TopicDeletion())
        yield fx.WatchChildren(znodes.ISR_CHANGE_NOTIFICATION_PATH, fx.IsrChangeNotification())
        yield fx.WatchData(znodes.PREFERRED_REPLICA_ELECTION_PATH, fx.PreferredReplicaElection())
        yield fx.WatchData(znodes.REASSIGN_PARTITIONS_PATH, fx.PartitionReassignment())
        # Replicas on brokers that died while no controller watched (or with the old
        # one) go offline: new leaders for what they led, out of the ISRs they were in.
        dead = (
            {r for s in ctx.partition_states.values() for r in (*s.isr, s.leader)}
            - set(ctx.live_brokers)
            - {-1}
        )
        yield from self._apply(decisions.on_brokers_failed(ctx, dead, self.unclean))
        # Partitions without a state (a topic created while no controller ran).
        new = [tp for tp in ctx.assignments if tp not in ctx.partition_states]
        yield from self._apply(decisions.elect_new_partitions(ctx, new), new_partitions=True)
        yield from self._apply(decisions.elect_offline_partitions(ctx, self.unclean))
        yield from self._send_update_metadata(sorted(ctx.live_brokers), sorted(ctx.assignments))
        yield from self._send_leader_and_isr(sorted(ctx.partition_states))
        yield fx.BecameController(epoch)
        self._failover_complete = True
        if ctx.replicas_to_delete:
            # Deletions a previous controller left pending start over: every replica is
            # asked again (deleting what is gone already is a no-op on the broker).
            deleting = sorted(ctx.replicas_to_delete)
            yield from self._send_update_metadata(
                sorted(ctx.live_brokers), [], deleted_topics=tuple(deleting)
            )
            yield from self._resume_topic_deletions(deleting)
        # Reassignments a previous controller left half done resume through the
        # /admin/reassign_partitions watch registered above (its first firing).

    def _load_context(self, ctx: ControllerContext) -> Procedure:
        ctx.live_brokers = dict((yield fx.ReadLiveBrokers()))
        for topic in (yield fx.ReadTopics()):
            yield from self._load_topic(ctx, topic)
        for topic in (yield fx.ReadTopicsToDelete()):
            ctx.begin_topic_deletion(topic)

    def _load_topic(self, ctx: ControllerContext, topic: str) -> Procedure:
        """Read a topic's assignment and partition states; return partitions new to ctx."""
        loaded = yield fx.LoadTopic(topic)
        if loaded is None:
            return []
        assignment, topic_id = loaded
        ctx.topic_ids[topic] = topic_id
        added = [
            TopicPartition(topic, p)
            for p in sorted(assignment)
            if TopicPartition(topic, p) not in ctx.assignments
        ]
        if len(added) == len(assignment):  # new to this term: watch it for new partitions
            yield fx.WatchData(znodes.topic_path(topic), fx.PartitionModifications(topic))
        for p, replicas in assignment.items():
            ctx.assignments[TopicPartition(topic, p)] = tuple(replicas)
        tps = tuple(TopicPartition(topic, p) for p in assignment)
        found = yield fx.ReadPartitionStates(tps)
        for tp, (state, version) in found.items():
            ctx.partition_states[tp] = state.at_version(version)
        return added

    # -- brokers and topics ------------------------------------------------------------

    def _on_broker_change(self) -> Procedure:
        current = dict((yield fx.ReadLiveBrokers()))
        ctx = self._ctx()
        previous = ctx.live_brokers
        dead = {b for b in previous if b not in current}
        # A broker that restarted within one watch period shows up with a new epoch.
        bounced = {b for b in current if b in previous and current[b].epoch != previous[b].epoch}
        started = {b for b in current if b not in previous} | bounced
        if not dead and not started:
            return
        yield _log("broker-change", new_brokers=sorted(started), dead_brokers=sorted(dead))
        ctx.live_brokers = current
        ctx.shutting_down_brokers -= dead | started
        # Their StopReplica answers will never come (the sender drops requests to a
        # dead broker): the replicas are asked again when the broker is back.
        ctx.deletions_in_flight = {
            (t, b) for t, b in ctx.deletions_in_flight if b not in dead | started
        }
        if dead:
            yield fx.ForgetBrokers(frozenset(dead))
            yield from self._apply(decisions.on_brokers_failed(ctx, dead, self.unclean))
        if started:
            # onBrokerStartup: tell everyone about the new brokers, give the new brokers
            # their replicas, and try to bring offline partitions online.
            yield from self._send_update_metadata(sorted(ctx.live_brokers), sorted(ctx.assignments))
            on_new = [tp for b in started for tp in ctx.partitions_on_broker(b)]
            new_parts = [tp for tp in ctx.assignments if tp not in ctx.partition_states]
            yield from self._apply(
                decisions.elect_new_partitions(ctx, new_parts), new_partitions=True
            )
            yield from self._apply(decisions.elect_offline_partitions(ctx, self.unclean))
            yield from self._refresh_for_started_brokers(on_new)
            yield from self._send_leader_and_isr(sorted(set(on_new)), only_brokers=started)
            # Topic deletions waiting for these brokers' replicas go on.
            yield from self._resume_topic_deletions(sorted(ctx.replicas_to_delete), started)
        yield from self._complete_reassignments(sorted(ctx.reassignments))

    def _on_topic_change(self) -> Procedure:
        ctx = self._ctx()
        topics = set((yield fx.ReadTopics()))
        new_topics = topics - ctx.topics() - ctx.topics_to_delete
        added: list[TopicPartition] = []
        for topic in sorted(new_topics):
            added += yield from self._load_topic(ctx, topic)
        for gone in ctx.topics() - topics:
            ctx.remove_topic(gone)
        if added:
            yield _log("new-topics", topics=sorted(new_topics))
            yield from self._apply(decisions.elect_new_partitions(ctx, added), new_partitions=True)

    def _on_partition_modifications(self, topic: str) -> Procedure:
        ctx = self._ctx()
        if topic in ctx.topics_to_delete:
            return
        added = yield from self._load_topic(ctx, topic)
        if added:
            yield _log("new-partitions", topic=topic, partitions=[tp.partition for tp in added])
            yield from self._apply(decisions.elect_new_partitions(ctx, added), new_partitions=True)

    # -- topic deletion ------------------------------------------------------------------

    def _on_topic_deletion(self) -> Procedure:
        """Kafka's TopicDeletionManager: a topic marked in /admin/delete_topics leaves
        the brokers' metadata at once; every replica gets StopReplica(delete=true); the
        znodes go only once every replica's broker answered, so a replica on an offline
        broker keeps the deletion pending until that broker is back."""
        ctx = self._ctx()
        marked = set((yield fx.ReadTopicsToDelete()))
        started = []
        for topic in sorted(marked - set(ctx.replicas_to_delete)):
            replicas = ctx.begin_topic_deletion(topic)
            moving = {tp for tp in ctx.reassignments if tp.topic == topic}
            for tp in moving:
                del ctx.reassignments[tp]
            if moving:  # or the entry would block the tool until the next failover
                yield from self._write_reassignment_znode(drop=moving)
            yield _log(
                "topic-deletion-started",
                topic=topic,
                replicas={str(b): [tp.partition for tp in tps] for b, tps in replicas.items()},
            )
            started.append(topic)
        if started:
            # Brokers forget the topic now (Kafka sends LeaderDuringDelete): DeleteTopics
            # answers and clients stop using it while replicas are still being deleted.
            yield from self._send_update_metadata(
                sorted(ctx.live_brokers), [], deleted_topics=tuple(started)
            )
        yield from self._resume_topic_deletions(started)

    def _resume_topic_deletions(
        self, topics: list[str], only_brokers: set[int] | None = None
    ) -> Procedure:
        """Send StopReplica(delete=true) for the replicas of `topics` still on disk, to
        live brokers (only `only_brokers` if given); log the ones waiting for a broker."""
        ctx = self._ctx()
        for topic in topics:
            pending = ctx.replicas_to_delete.get(topic)
            if pending is None:
                continue
            if not pending:
                yield from self._complete_topic_deletion(topic)
                continue
            offline = sorted(b for b in pending if b not in ctx.live_brokers)
            if offline:
                yield _log(
                    "topic-deletion-pending",
                    topic=topic,
                    offline_replicas={str(b): [tp.partition for tp in pending[b]] for b in offline},
                )
            for broker_id, tps in sorted(pending.items()):
                live = ctx.live_brokers.get(broker_id)
                if live is None or (only_brokers is not None and broker_id not in only_brokers):
                    continue
                if (topic, broker_id) in ctx.deletions_in_flight:
                    continue
                ctx.deletions_in_flight.add((topic, broker_id))
                yield fx.SendStopReplica(
                    broker_id,
                    StopReplicaRequest(
                        self.broker_id, ctx.epoch, live.epoch, tps, delete_partitions=True
                    ),
                    deleting=topic,
                )

    def _on_stop_replica_answer(self, answer: fx.StopReplicaAnswered) -> Procedure:
        ctx = self._ctx()
        ctx.deletions_in_flight.discard((answer.topic, answer.broker_id))
        if answer.topic not in ctx.replicas_to_delete:
            return
        if answer.error != ErrorCode.none:
            # Kafka's ReplicaDeletionIneligible: retried when the broker starts again.
            yield _log(
                "topic-deletion-replica-failed",
                topic=answer.topic,
                broker_id=answer.broker_id,
                error=answer.error.name,
            )
            return
        if ctx.replica_deleted(answer.topic, answer.broker_id):
            yield from self._complete_topic_deletion(answer.topic)

    def _complete_topic_deletion(self, topic: str) -> Procedure:
        ctx = self._ctx()
        yield fx.DeleteTopicZnodes(topic)
        ctx.finish_topic_deletion(topic)
        yield _log("topic-deleted", topic=topic)
        yield from self._send_update_metadata(sorted(ctx.live_brokers), [], deleted_topics=(topic,))

    # -- ISR changes, elections, shutdown --------------------------------------------------

    def _on_isr_change_notification(self) -> Procedure:
        """A leader changed an ISR in ZooKeeper: reload those states and propagate."""
        ctx = self._ctx()
        notifications = yield fx.ReadIsrChangeNotifications()
        yield fx.DeleteIsrChangeNotifications(tuple(notifications))
        tps = tuple(sorted({tp for tps in notifications.values() for tp in tps}))
        found = yield fx.ReadPartitionStates(tps)
        changed = []
        for tp in tps:
            if tp not in found or tp not in ctx.assignments:
                continue
            state, version = found[tp]
            ctx.partition_states[tp] = state.at_version(version)
            changed.append(tp)
        if changed:
            yield from self._send_update_metadata(sorted(ctx.live_brokers), changed)
        yield from self._complete_reassignments([tp for tp in changed if tp in ctx.reassignments])

    def _on_preferred_replica_election(self) -> Procedure:
        ctx = self._ctx()
        requested = yield fx.ReadPreferredElection()
        tps = [tp for tp in requested if tp not in ctx.reassignments]
        yield from self._refresh_states(tps)
        elections = decisions.elect_preferred_leaders(ctx, tps)
        written = set((yield from self._apply(elections)))
        # A partition whose state write lost to a leader's ISR write stays in the znode
        # (the write below fires its watch again, and it is decided from a fresh read).
        lost = {e.tp for e in elections if e.tp not in written}
        yield fx.DeletePreferredElection(tuple(tp for tp in requested if tp not in lost))

    def _refresh_for_started_brokers(self, tps: Iterable[TopicPartition]) -> Procedure:
        """The states started brokers are told are ZooKeeper's, not the ones we last
        heard of: an ISR change whose notification's read lost its reply would hand a
        restarted leader an ISR without a member ZooKeeper counts, and it would
        acknowledge acks=all writes without that member."""
        yield from self._refresh_states(tps)

    def _refresh_states(self, tps: Iterable[TopicPartition]) -> Procedure:
        """Read the partitions' states from ZooKeeper before a decision or a
        LeaderAndIsr that rests on their ISR: a leader's ISR write reaches ZooKeeper before
        its notification reaches us (and a notification's read may lose its reply), so the
        ISR we last heard of may be stale — a preferred election refused wrongly, or a
        restarted broker handed an ISR smaller than ZooKeeper's."""
        ctx = self._ctx()
        wanted = tuple(sorted(tp for tp in tps if tp in ctx.partition_states))
        if not wanted:
            return
        found = yield fx.ReadPartitionStates(wanted)
        for tp, (state, version) in found.items():
            if tp in ctx.partition_states:
                ctx.partition_states[tp] = state.at_version(version)

    def _on_controlled_shutdown(self, broker_id: int, broker_epoch: int) -> Procedure:
        ctx = self._ctx()
        live = ctx.live_brokers.get(broker_id)
        if live is None or broker_epoch not in (-1, live.epoch):
            raise StaleBrokerEpochError(
                f"broker {broker_id} epoch {broker_epoch} is not the live one"
            )
        ctx.shutting_down_brokers.add(broker_id)
        yield _log("controlled-shutdown", broker_id=broker_id)
        yield from self._apply(decisions.controlled_shutdown(ctx, broker_id))
        return ctx.partitions_led_by(broker_id)

    def _on_elect_leaders(
        self, tps: tuple[TopicPartition, ...] | None, election_type: int
    ) -> Procedure:
        ctx = self._ctx()
        every = tps is None
        if election_type == decisions.PREFERRED_ELECTION:
            yield from self._refresh_states(sorted(ctx.assignments) if tps is None else tps)
        outcome = decisions.elect_leaders_on_request(
            ctx,
            sorted(ctx.assignments) if tps is None else tps,
            election_type,
            excluded=set(ctx.reassignments),
        )
        written = set((yield from self._apply(outcome.elections)))
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
        return results

    def _on_auto_leader_rebalance(self) -> Procedure:
        ctx = self._ctx()
        # The ISRs of partitions led by another than their preferred replica, as
        # ZooKeeper holds them now (leaders only change by us; ISRs by their leaders).
        yield from self._refresh_states(
            tp
            for tp, replicas in ctx.assignments.items()
            if replicas
            and tp in ctx.partition_states
            and ctx.partition_states[tp].leader != replicas[0]
            and replicas[0] in ctx.live_broker_ids
        )
        elections = decisions.auto_rebalance(
            ctx, self.rebalance.per_broker_percentage, excluded=set(ctx.reassignments)
        )
        if elections:
            yield _log("auto-leader-rebalance", partitions=[e.tp for e in elections])
            yield from self._apply(elections)

    # -- partition reassignment (Kafka's onPartitionReassignment) ----------------------------

    def _on_partition_reassignment(self) -> Procedure:
        """/admin/reassign_partitions changed (a tool wrote it, or we did): start what is
        new there. On failover its first firing resumes a previous controller's work."""
        ctx = self._ctx()
        wanted = yield fx.ReadReassignment()
        fresh = {
            tp: tuple(replicas)
            for tp, replicas in wanted.items()
            if tp not in ctx.reassignments or ctx.reassignments[tp].target != tuple(replicas)
        }
        if not fresh:
            return
        results = yield from self._start_reassignments(fresh)
        rejected = [tp for tp, (code, _msg) in results.items() if code != ErrorCode.none]
        for tp in rejected:
            yield _log("reassignment-rejected", tp=tp, error=results[tp][1])
        if rejected:
            # Like Kafka: an invalid entry is dropped so it cannot block the others.
            yield from self._write_reassignment_znode(drop=set(rejected))

    def _on_alter_reassignments(
        self, wanted: dict[TopicPartition, tuple[int, ...] | None]
    ) -> Procedure:
        ctx = self._ctx()
        results: PartitionResults = {}
        targets: dict[TopicPartition, tuple[int, ...]] = {}
        for tp, target in wanted.items():
            if target is not None:
                targets[tp] = target
            elif tp in ctx.reassignments:
                # Cancel: move back to the replicas the partition had before.
                targets[tp] = ctx.reassignments[tp].original
            else:
                results[tp] = (ErrorCode.no_reassignment_in_progress, f"{tp} is not moving")
        results.update((yield from self._start_reassignments(targets)))
        return results

    def list_reassignments(
        self, tps: list[TopicPartition] | None
    ) -> dict[TopicPartition, Reassignment]:
        """ListPartitionReassignments (46): the reassignments in progress."""
        ctx = self._ctx()
        if tps is None:
            return dict(sorted(ctx.reassignments.items()))
        return {tp: ctx.reassignments[tp] for tp in tps if tp in ctx.reassignments}

    def _start_reassignments(self, targets: dict[TopicPartition, tuple[int, ...]]) -> Procedure:
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
            if reassignment.is_noop(ctx, tp, target) and tp not in ctx.reassignments:
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
            yield from self._write_assignment(
                topic, {p.reassignment.tp: p.assignment for p in plans}
            )
            for plan in plans:
                ctx.reassignments[plan.reassignment.tp] = plan.reassignment
                yield _log(
                    "reassignment-started",
                    tp=plan.reassignment.tp,
                    original=list(plan.reassignment.original),
                    target=list(plan.reassignment.target),
                    assignment=list(plan.assignment),
                )
                if plan.election is not None:
                    elections.append(plan.election)
        # The epoch bump reaches every replica of AR, so the new ones start fetching.
        yield from self._bump_leader_epochs(elections)
        yield from self._write_reassignment_znode(drop=finished_already)
        yield from self._complete_reassignments([r.tp for r in started])
        return results

    def _bump_leader_epochs(self, elections: list[Election]) -> Procedure:
        """Write the reassignment's leader-epoch bumps. One that lost to a leader's ISR
        write is planned again from the reloaded state and retried (Kafka's
        updateLeaderEpoch loops too): without its LeaderAndIsr the new replicas would
        never start fetching and the move would never end."""
        ctx = self._ctx()
        for _attempt in range(5):
            if not elections:
                return
            written = set((yield from self._apply(elections)))
            elections = [
                plan.election
                for e in elections
                if e.tp not in written
                and (r := ctx.reassignments.get(e.tp)) is not None
                and (plan := reassignment.plan_start(ctx, r)).election is not None
            ]

    def _complete_reassignments(self, tps: list[TopicPartition]) -> Procedure:
        """Steps 4-11 for every partition whose target replicas are all in the ISR."""
        ctx = self._ctx()
        done: set[TopicPartition] = set()
        for tp in tps:
            r = ctx.reassignments.get(tp)
            if r is None:
                continue
            for _attempt in range(3):  # a conflicting ISR write reloads the state
                plan = reassignment.plan_completion(ctx, r)
                if plan is None:
                    break
                # In memory first (Kafka's B2), so LeaderAndIsr carries RAR and only
                # reaches RAR; ZooKeeper's assignment changes last (step 10).
                ctx.assignments[tp] = r.target
                if (yield from self._apply([plan.election])):
                    yield from self._remove_replicas(tp, r.removing)
                    yield from self._write_assignment(tp.topic, {tp: r.target})
                    del ctx.reassignments[tp]
                    done.add(tp)
                    yield _log("reassignment-completed", tp=tp, replicas=list(r.target))
                    break
                ctx.assignments[tp] = r.all_replicas
        if done:
            yield from self._write_reassignment_znode(drop=done)

    def _remove_replicas(self, tp: TopicPartition, removing: tuple[int, ...]) -> Procedure:
        """Steps 8-9: stop and delete the replicas that are not in the target. A dead
        broker's copy is deleted by that broker when it starts again (a stray log)."""
        ctx = self._ctx()
        for broker_id in removing:
            live = ctx.live_brokers.get(broker_id)
            if live is None:
                yield _log("reassignment-replica-offline", tp=tp, broker_id=broker_id)
                continue
            yield fx.SendStopReplica(
                broker_id,
                StopReplicaRequest(
                    self.broker_id, ctx.epoch, live.epoch, (tp,), delete_partitions=True
                ),
            )

    def _write_assignment(
        self, topic: str, replicas: dict[TopicPartition, tuple[int, ...]]
    ) -> Procedure:
        """Read-modify-write /brokers/topics/<topic> for the given partitions."""
        ctx = self._ctx()
        current = yield fx.ReadAssignment(topic)
        if current is None:
            raise InvalidRequestError(f"topic {topic!r} has no assignment znode")
        for tp, rs in replicas.items():
            current[tp.partition] = list(rs)
            ctx.assignments[tp] = rs
        yield fx.WriteAssignment(topic, current, ctx.topic_ids.get(topic))

    def _write_reassignment_znode(self, drop: set[TopicPartition]) -> Procedure:
        """/admin/reassign_partitions := the reassignments in progress; deleted when none
        are left (step 11). Entries a tool wrote that we have not read yet are kept."""
        ctx = self._ctx()
        on_znode = yield fx.ReadReassignment()
        merged = {tp: r for tp, r in on_znode.items() if tp not in drop}
        merged.update({tp: list(r.target) for tp, r in ctx.reassignments.items()})
        if merged != on_znode:
            yield fx.WriteReassignment(merged)

    # -- effects on partition states and brokers ----------------------------------------------

    def _apply(
        self, elections: list[Election], new_partitions: bool = False, retries: int = 3
    ) -> Procedure:
        """Write the elected states (conditionally, fenced by our controller epoch) and
        send LeaderAndIsr + UpdateMetadata for the ones written, which it returns. A
        conflict reloads the partition's state; one whose leader or ISR still names a
        dead broker is elected again from the fresh state (Kafka's
        PartitionStateMachine retries the same way), the others are left out."""
        if not elections:
            return []
        ctx = self._ctx()

        def as_znode(e: Election) -> LeaderAndIsr:
            return LeaderAndIsr(e.state.leader, e.state.leader_epoch, e.state.isr, ctx.epoch)

        def logged(e: Election) -> fx.StateChange:
            return _log(
                "unclean-leader-election" if e.unclean else "leader-election",
                tp=e.tp,
                leader=e.state.leader,
                leader_epoch=e.state.leader_epoch,
                isr=list(e.state.isr),
                reason=e.reason,
                controller_epoch=ctx.epoch,
            )

        # An unclean election is logged when decided, before the write, as Kafka does:
        # a write whose reply is lost may still have been applied, and the records it
        # gives up must not go unexplained (the whole-cluster explorer found one: a
        # ConnectionLoss after ZooKeeper applied the state left no line).
        for e in elections:
            if e.unclean:
                yield logged(e)
        results = yield fx.WritePartitionStates(
            {e.tp: as_znode(e) for e in elections if e.create},
            {e.tp: (as_znode(e), e.state.zk_version) for e in elections if not e.create},
        )
        written = []
        stale = []
        retried: list[TopicPartition] = []
        for e in elections:
            outcome = results[e.tp]
            if isinstance(outcome, Exception):
                yield _log("partition-state-write-failed", tp=e.tp, error=str(outcome))
                stale.append(e.tp)
                continue
            ctx.partition_states[e.tp] = as_znode(e).at_version(outcome)
            written.append(e.tp)
            if not e.unclean:
                yield logged(e)
        if stale:
            # A conflict means our view is stale (a leader changed the ISR, or another
            # controller was elected and fenced us): reload.
            found = yield fx.ReadPartitionStates(tuple(stale))
            for tp, (s, version) in found.items():
                if tp in ctx.assignments:
                    ctx.partition_states[tp] = s.at_version(version)
            if retries > 0 and self.ctx is not None:
                # A leader that wrote an ISR change just before its broker died: the
                # partition still needs a new leader (or a smaller ISR) from the state
                # read now, or it stays offline until the next broker change.
                live = ctx.live_broker_ids
                dead = (
                    {
                        r
                        for tp in stale
                        if (state := ctx.partition_states.get(tp)) is not None
                        for r in (*state.isr, state.leader)
                    }
                    - live
                    - {-1}
                )
                conflicted = set(stale)
                again = [
                    e
                    for e in decisions.on_brokers_failed(ctx, dead, self.unclean)
                    if e.tp in conflicted
                ]
                retried = yield from self._apply(again, new_partitions, retries - 1)
        yield from self._send_leader_and_isr(written, is_new=new_partitions)
        yield from self._send_update_metadata(sorted(ctx.live_brokers), written)
        return written + retried

    def _broker_infos(self) -> tuple[BrokerInfo, ...]:
        ctx = self._ctx()
        return tuple(
            broker_info(b, self.inter_broker_listener)
            for b in sorted(ctx.live_brokers.values(), key=lambda b: b.broker_id)
        )

    def _send_leader_and_isr(
        self,
        tps: list[TopicPartition],
        is_new: bool = False,
        only_brokers: set[int] | None = None,
    ) -> Procedure:
        ctx = self._ctx()
        leaders = self._broker_infos()
        targets = decisions.leader_and_isr_targets(ctx, tps, is_new)
        # The local broker goes last: it applies in-process, so it must not hold up
        # the requests queued for the others (Kafka: a queue per broker).
        for broker_id, states in sorted(targets.items(), key=lambda t: t[0] == self.broker_id):
            if only_brokers is not None and broker_id not in only_brokers:
                continue
            yield fx.SendLeaderAndIsr(
                broker_id,
                LeaderAndIsrRequest(
                    self.broker_id,
                    ctx.epoch,
                    ctx.live_brokers[broker_id].epoch,
                    tuple(states),
                    leaders,
                    topic_ids=ctx.topic_ids_of(s.tp for s in states),
                ),
            )

    def _send_update_metadata(
        self,
        broker_ids: list[int],
        tps: list[TopicPartition],
        deleted_topics: tuple[str, ...] = (),
    ) -> Procedure:
        ctx = self._ctx()
        states = tuple(
            decisions.partition_state(ctx, tp) for tp in tps if tp in ctx.partition_states
        )
        brokers = self._broker_infos()
        for broker_id in sorted(broker_ids, key=lambda b: b == self.broker_id):
            if broker_id not in ctx.live_brokers:
                continue
            yield fx.SendUpdateMetadata(
                broker_id,
                UpdateMetadataRequest(
                    self.broker_id,
                    ctx.epoch,
                    ctx.live_brokers[broker_id].epoch,
                    states,
                    brokers,
                    deleted_topics,
                    topic_ids=ctx.topic_ids_of(s.tp for s in states),
                ),
            )
