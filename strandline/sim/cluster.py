"""A deterministic simulator of a whole ZooKeeper-era cluster (docs/replication.md).

Several brokers, each with a ZooKeeper session on a `SimZooKeeper`, a broker epoch, a
controller (the real `ControllerCore`, driven one effect per step so a controller can be
mid-procedure while everything else moves), per-(controller, broker) FIFO request
channels that can be held back or lose messages, and per-partition replicas whose
replication decisions (HW, ISR, follower truncation) come from `strandline.replication`.

`ClusterSim` is the coordinator: it applies one schedule event at a time
(`cluster_events`), runs the background rounds, time and the end-of-schedule settle,
and answers the views the invariants and tests read. The parts it drives act on one
`ClusterState` (`cluster_state`):

- `cluster_controller`: the controller shell, carrying out the core's effects the way
  `strandline.controller.controller` does with real ZooKeeper and sockets;
- `cluster_broker`: the broker side of controller requests, as `server/broker.py` and
  `server/replica_manager.py` apply them, through the same fencing rules;
- `cluster_datapath`: produce, acks, fetch rounds, the leader's ISR writes;
- `cluster_lifecycle`: broker processes starting, crashing, restarting, losing sessions;
- `cluster_admin`: the admin tools' ZooKeeper writes.

No election, fetch, HW or ISR rule lives in the simulator: elections come only from the
controller core, replication decisions only from `strandline.replication`.
"""

from __future__ import annotations

from collections.abc import Iterable

from strandline.coordination.znodes import LeaderAndIsr
from strandline.replication.follower import FetchState
from strandline.sim import cluster_controller
from strandline.sim.cluster_admin import create_topic, delete_topic, preferred_election, reassign
from strandline.sim.cluster_datapath import (
    checkpoint_high_watermarks,
    fetch_round,
    isr_expiration,
    produce,
)
from strandline.sim.cluster_events import (
    Bounce,
    ClusterEvent,
    ControllerStep,
    Crash,
    CreateTopic,
    DeleteTopic,
    Deliver,
    ExpireSession,
    Fetch,
    Hold,
    LoseRequest,
    LoseZkReply,
    Notify,
    PauseFetcher,
    PreferredElection,
    Produce,
    Reassign,
    Restart,
    Run,
    Tick,
    ZkBlip,
)
from strandline.sim.cluster_lifecycle import (
    crash,
    expire_session,
    renew_expired_sessions,
    restart,
    start_broker,
)
from strandline.sim.cluster_state import (
    NO_LEADER,
    Books,
    Channel,
    ClusterConfig,
    ClusterState,
    SimBroker,
)
from strandline.sim.zk_client import ReplyFault, SimZkClient
from strandline.sim.zookeeper import SimZooKeeper
from strandline.types import TopicPartition


class ClusterSim:
    """The whole cluster. `step(event)` applies one schedule event."""

    def __init__(
        self, config: ClusterConfig | None = None, record: bool = False, settled: bool = True
    ) -> None:
        """Brokers start, topics are created; with `settled` the cluster then runs until
        quiet (a controller elected, every partition online and in sync), so schedules
        start from a healthy cluster."""
        self.state = ClusterState(config or ClusterConfig(), record)
        self.steps = 0
        for broker_id in self.state.config.brokers:
            start_broker(self.state, self.state.brokers[broker_id])
        for name, partitions, rf in self.state.config.topics:
            create_topic(self.state, CreateTopic(name, partitions, rf))
        if settled:
            self.settle()
            checkpoint_high_watermarks(self.state, force=True)

    # -- the state, as the invariants and tests read it ------------------------------------

    @property
    def config(self) -> ClusterConfig:
        return self.state.config

    @property
    def record(self) -> bool:
        return self.state.record

    @property
    def now_ms(self) -> int:
        return self.state.now_ms

    @property
    def zk(self) -> SimZooKeeper:
        return self.state.zk

    @property
    def admin(self) -> SimZkClient:
        """The simulator's own ZooKeeper session (the admin tools', the books' reads)."""
        return self.state.admin

    @property
    def brokers(self) -> dict[int, SimBroker]:
        return self.state.brokers

    @property
    def channels(self) -> dict[tuple[int, int], Channel]:
        return self.state.channels

    @property
    def books(self) -> Books:
        return self.state.books

    @property
    def notes(self) -> list[str]:
        """What the last step did, in words (with `record`)."""
        return self.state.notes

    def incarnation_of(self, topic: str) -> int:
        return self.state.incarnation_of(topic)

    def live_broker_ids(self) -> list[int]:
        return [b for b, broker in self.state.brokers.items() if broker.alive]

    # -- stepping ---------------------------------------------------------------------------

    def run_notifications(self) -> bool:
        pending = self.state.zk.take_notifications()
        for notification in pending:
            notification.run()
        return bool(pending)

    def controller_step(self, broker: SimBroker) -> bool:
        """Carry out one effect of the broker's controller; False when it had nothing."""
        return cluster_controller.controller_step(self.state, broker)

    def deliver(self, controller_id: int, broker_id: int) -> bool:
        """The oldest request from the controller to the broker arrives (if any)."""
        return cluster_controller.deliver(self.state, controller_id, broker_id)

    def round(self) -> bool:
        """One round of background work; returns whether anything happened."""
        moved = self.run_notifications()
        for broker in self.state.brokers.values():
            if self.controller_step(broker):
                moved = True
        # Followers fetch before this round's requests arrive: a follower that a
        # LeaderAndIsr made truncate fetches again only in the next round, as a real
        # fetcher's next round trip comes after the request was handled (a leader
        # dying in between is the KIP-101 data-loss scenario).
        for broker in self.state.brokers.values():
            if fetch_round(self.state, broker, lose=False):
                moved = True
        for key in sorted(self.state.channels):
            channel = self.state.channels[key]
            if channel.held > 0:
                channel.held -= 1
                moved = True
                continue
            if self.deliver(*key):
                moved = True
        return moved

    def step(self, event: ClusterEvent) -> None:
        self.steps += 1
        self.state.now_ms += self.state.config.step_ms
        if self.state.record:
            self.state.notes = []
        match event:
            case Run(rounds):
                for _ in range(rounds):
                    self.round()
            case ControllerStep(broker_id):
                self.controller_step(self.state.brokers[broker_id])
            case Notify():
                self.run_notifications()
            case Deliver(controller_id, broker_id):
                self.deliver(controller_id, broker_id)
            case Hold(controller_id, broker_id, rounds):
                delayed = self.state.channel(controller_id, broker_id)
                delayed.held = max(delayed.held, rounds)
            case LoseRequest(controller_id, broker_id):
                channel = self.state.channels.get((controller_id, broker_id))
                if channel is not None and channel.queue:
                    channel.queue.popleft()
            case Fetch(broker_id, lose):
                fetch_round(self.state, self.state.brokers[broker_id], lose)
            case Produce():
                produce(self.state, event)
            case Crash(broker_id):
                crash(self.state, self.state.brokers[broker_id])
            case Restart(broker_id):
                restart(self.state, self.state.brokers[broker_id])
            case ExpireSession(broker_id):
                expire_session(self.state, self.state.brokers[broker_id])
            case Bounce(broker_id, slow_ms):
                bounced = self.state.brokers[broker_id]
                if bounced.alive:
                    crash(self.state, bounced)
                    restart(self.state, bounced)
                    bounced.fetch_paused_until_ms = self.state.now_ms + slow_ms
            case ZkBlip(broker_id, ms, blip_seed):
                blipped = self.state.brokers[broker_id]
                if blipped.alive and blipped.zk is not None:
                    blipped.zk.blip(self.state.now_ms + ms, blip_seed)
            case PauseFetcher(broker_id, ms):
                self.state.brokers[broker_id].fetch_paused_until_ms = self.state.now_ms + ms
            case LoseZkReply(broker_id, skip, after_apply, expire):
                target = self.state.brokers[broker_id]
                if target.alive and target.zk is not None:
                    target.zk.lose_reply(ReplyFault(skip, after_apply, expire))
            case Tick():
                self._tick()
            case CreateTopic():
                create_topic(self.state, event)
            case DeleteTopic():
                delete_topic(self.state, event)
            case Reassign():
                reassign(self.state, event)
            case PreferredElection():
                preferred_election(self.state, event)
            case _:
                raise TypeError(f"not a cluster event: {event!r}")
        renew_expired_sessions(self.state)

    def _tick(self) -> None:
        self.state.now_ms += self.state.config.tick_ms
        isr_expiration(self.state)
        checkpoint_high_watermarks(self.state)
        for broker in self.state.brokers.values():
            if (
                not broker.alive
                and broker.zk is not None
                and broker.zk.alive
                and self.state.now_ms - broker.crashed_at_ms >= self.state.config.session_timeout_ms
            ):
                broker.zk.close()
                self.state.note(f"the session of crashed broker {broker.broker_id} expires")

    def run(self, events: Iterable[ClusterEvent]) -> None:
        for event in events:
            self.step(event)

    # -- settling ---------------------------------------------------------------------------

    def quiescent(self) -> bool:
        """Nothing left to do: no notification, controller work or request pending, no
        deletion or reassignment unfinished, and every assigned replica of every online
        partition in sync with the leader ZooKeeper names, at its leader epoch."""
        if self.state.zk.pending_notifications:
            return False
        for broker in self.state.brokers.values():
            if broker.alive and broker.shell is not None and not broker.shell.idle:
                return False
        if any(channel.queue for channel in self.state.channels.values()):
            return False
        admin = self.state.admin
        if admin.get_topics_marked_for_deletion():
            return False
        topics = admin.get_all_topics()
        if admin.get_partition_reassignment():  # a deletion removes its topic's entries
            return False
        for topic in topics:
            assignment = admin.get_topic_assignment(topic) or {}
            tps = [TopicPartition(topic, p) for p in sorted(assignment)]
            states = admin.get_partition_states(tps)
            for tp in tps:
                found = states.get(tp)
                if found is None:
                    return False
                state = found[0]
                if state.leader == NO_LEADER:
                    continue
                leader = self.state.brokers[state.leader].replicas.get(tp)
                if (
                    leader is None
                    or leader.partition is None
                    or leader.leader_epoch != state.leader_epoch
                ):
                    return False
                for broker_id in assignment[tp.partition]:
                    if broker_id == state.leader:
                        continue
                    replica = self.state.brokers[broker_id].replicas.get(tp)
                    if (
                        replica is None
                        or not replica.hosted
                        or replica.leader_epoch != state.leader_epoch
                        or replica.follower.fetch_state is not FetchState.FETCHING
                        or replica.log_end_offset != leader.log_end_offset
                        or replica.high_watermark != leader.high_watermark
                    ):
                        return False
        return True

    def stray_replicas(self) -> list[tuple[int, TopicPartition]]:
        """Replicas on live brokers that ZooKeeper does not assign to them (Kafka's stray
        logs: the broker deletes them at its next start)."""
        strays = []
        for broker in self.state.brokers.values():
            if not broker.alive:
                continue
            for tp in sorted(broker.replicas):
                assignment = self.state.admin.get_topic_assignment(tp.topic)
                if assignment is None or broker.broker_id not in assignment.get(tp.partition, ()):
                    strays.append((broker.broker_id, tp))
        return strays

    def settle(self, max_rounds: int = 300) -> bool:
        """End of a schedule: the brokers still down stay down until their sessions
        expired and the controller acted on it, then every broker is back, and rounds
        run until nothing is left to do. Returns whether it became quiescent.

        A crashed broker comes back after its session timeout far more often than
        within it; restarting it at once made every crash at the end of a schedule a
        bounce, and the failover a crash of the leader must cause (KIP-101's losses
        need the controller to elect the follower) never happened."""
        self._outage(max_rounds // 3)
        # They come back one at a time, in the order they went down (machines boot at
        # different speeds): after a power failure the first one back may be elected
        # uncleanly before the others return (KIP-279's divergence).
        down = sorted(
            (b for b in self.state.brokers.values() if not b.alive),
            key=lambda b: (b.crashed_at_ms, b.broker_id),
        )
        for index, broker in enumerate(down):
            restart(self.state, broker)
            if index < len(down) - 1:
                self._outage(max_rounds // 3)
        for channel in self.state.channels.values():
            channel.held = 0
        for broker in self.state.brokers.values():
            broker.fetch_paused_until_ms = 0
        for _ in range(max_rounds):
            if self.quiescent():
                return True
            self.state.now_ms += self.state.config.step_ms
            self.round()
            if self.steps % 4 == 0:
                isr_expiration(self.state)
            self.steps += 1
        return self.quiescent()

    def _outage(self, max_rounds: int) -> None:
        """The dead brokers' sessions expire; rounds run (with the periodic ISR checks)
        until the controllers, channels and watches are idle."""
        down = [b for b in self.state.brokers.values() if not b.alive]
        for broker in down:
            if broker.zk is not None and broker.zk.alive:
                broker.zk.close()
        for rounds in range(max_rounds):
            self.state.now_ms += self.state.config.step_ms
            moved = self.round()
            if rounds % 4 == 3:
                self.state.now_ms += self.state.config.tick_ms
                isr_expiration(self.state)
            self.steps += 1
            if not moved and not self.state.zk.pending_notifications and rounds >= 4:
                return

    # -- views ------------------------------------------------------------------------------

    def controller_id(self) -> int | None:
        return self.state.admin.get_controller()

    def controller_epoch(self) -> int:
        found = self.state.admin.get_controller_epoch()
        return 0 if found is None else found[0]

    def partition_state(self, tp: TopicPartition) -> LeaderAndIsr | None:
        found = self.state.admin.get_partition_state(tp)
        return None if found is None else found[0]

    def assignment(self, topic: str) -> dict[int, list[int]] | None:
        return self.state.admin.get_topic_assignment(topic)

    def topics(self) -> list[str]:
        return self.state.admin.get_all_topics()

    def active_controllers(self) -> list[int]:
        """Brokers whose controller core holds a context (more than one: a zombie)."""
        return [
            b
            for b, broker in self.state.brokers.items()
            if broker.alive and broker.shell is not None and broker.shell.core.is_active
        ]
