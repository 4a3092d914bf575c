"""A deterministic simulator of a whole ZooKeeper-era cluster (docs/replication.md).

Several brokers, each with a ZooKeeper session on a `SimZooKeeper`, a broker epoch, a
controller (the real `ControllerCore`, driven one effect per step so a controller can be
mid-procedure while everything else moves), per-(controller, broker) FIFO request
channels that can be held back or lose messages, and per-partition replicas whose
replication decisions (HW, ISR, follower truncation) come from `strandline.replication`.

This module is the simulator's *shell*: it carries out the controller core's effects
the way `strandline.controller.controller` does with real ZooKeeper and sockets, and it
applies controller requests the way `server/broker.py` and `server/replica_manager.py`
do, through the same fencing rules (`strandline.replication.controller_fencing`). No
election, fetch, HW or ISR rule lives here: elections come only from the controller
core, replication decisions only from `strandline.replication`.

Everything is deterministic for a given schedule: no clock, no randomness, no hash
ordering of strings. The books the invariants need (acks, leaders per epoch, state-change
log, topic incarnations) are kept beside the model; `cluster_invariants` judges them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from kio.schema.errors import ErrorCode

from strandline.controller import effects as fx
from strandline.controller import zk_effects
from strandline.controller.procedures import ControllerCore, Procedure, RebalanceSettings
from strandline.coordination import znodes
from strandline.coordination.errors import ControllerMovedError
from strandline.coordination.znodes import LeaderAndIsr
from strandline.errors import KafkaError
from strandline.protocol.controller_requests import (
    LeaderAndIsrRequest,
    PartitionState,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from strandline.replication import controller_fencing, isr_update, leader_and_isr
from strandline.replication.follower import FetchState, FollowerState, follower_high_watermark
from strandline.replication.truncation import (
    EpochEndOffset,
    TruncationMode,
    truncation_on_offset_out_of_range,
)
from strandline.sim.simulator import Replica
from strandline.sim.zookeeper import (
    ReplyFault,
    SimZkClient,
    SimZooKeeper,
    ZkError,
    classify_sim_failure,
)
from strandline.types import TopicPartition

NO_LEADER = -1
ControllerRequest = LeaderAndIsrRequest | UpdateMetadataRequest | StopReplicaRequest


@dataclass(frozen=True)
class ClusterConfig:
    brokers: tuple[int, ...] = (0, 1, 2)
    # Topics created at start: (name, partitions, replication factor).
    topics: tuple[tuple[str, int, int], ...] = (("t", 2, 3),)
    min_insync_replicas: int = 2
    unclean_leader_election: bool = False
    replica_lag_time_max_ms: int = 500
    step_ms: int = 10  # every event lets this much time pass
    tick_ms: int = 250  # a Tick: half of replica.lag.time.max.ms, as Kafka checks
    session_timeout_ms: int = 600  # a crashed broker's session expires this much later
    truncation: TruncationMode = TruncationMode.KIP279
    auto_leader_rebalance: bool = False
    # replica.high.watermark.checkpoint.interval.ms (Kafka and our broker: 5000; here
    # four ticks, a schedule is a few seconds): a restarted broker starts from the HW
    # its last checkpoint holds, which trails the HW it had in memory.
    hw_checkpoint_interval_ms: int = 1000


# -- schedule events ------------------------------------------------------------------


class Run(NamedTuple):
    """`rounds` rounds of background work: watch notifications run, every controller
    carries out one effect, every channel not held delivers one request, every live
    follower fetches once."""

    rounds: int = 1

    def describe(self) -> str:
        return f"run {self.rounds} round(s)"


class ControllerStep(NamedTuple):
    """Broker `broker`'s controller carries out one effect (or starts its next event)."""

    broker: int

    def describe(self) -> str:
        return f"controller step on {self.broker}"


class Notify(NamedTuple):
    """The pending ZooKeeper watch notifications are delivered."""

    def describe(self) -> str:
        return "deliver ZooKeeper watch notifications"


class Deliver(NamedTuple):
    """The oldest request from controller `controller` to broker `broker` arrives."""

    controller: int
    broker: int

    def describe(self) -> str:
        return f"deliver one request {self.controller} -> {self.broker}"


class Hold(NamedTuple):
    """Requests from `controller` to `broker` are delayed for `rounds` Run rounds."""

    controller: int
    broker: int
    rounds: int = 3

    def describe(self) -> str:
        return f"delay requests {self.controller} -> {self.broker} for {self.rounds} rounds"


class LoseRequest(NamedTuple):
    """The oldest request from `controller` to `broker` is lost."""

    controller: int
    broker: int

    def describe(self) -> str:
        return f"lose one request {self.controller} -> {self.broker}"


class Fetch(NamedTuple):
    """Broker `broker` runs one fetch round for every partition it follows; with `lose`
    the leaders process the fetches but the responses are lost."""

    broker: int
    lose: bool = False

    def describe(self) -> str:
        return f"fetch round on {self.broker}" + (" (responses lost)" if self.lose else "")


class Produce(NamedTuple):
    """A producer sends `value` to the leader broker `via`'s metadata names."""

    topic: str
    partition: int
    value: str
    acks_all: bool
    via: int

    def describe(self) -> str:
        acks = "all" if self.acks_all else "1"
        return (
            f"produce {self.value} to {self.topic}-{self.partition} (acks={acks}, via {self.via})"
        )


class Crash(NamedTuple):
    """The broker process dies; its ZooKeeper session lives on until it expires."""

    broker: int

    def describe(self) -> str:
        return f"crash broker {self.broker}"


class Restart(NamedTuple):
    """A crashed broker starts again (after its old session expired)."""

    broker: int

    def describe(self) -> str:
        return f"restart broker {self.broker}"


class PauseFetcher(NamedTuple):
    """Broker `broker`'s replica fetchers stall for `ms` of simulated time (a GC pause,
    a slow disk or link): its followers fall behind, their leaders drop them from the
    ISR at the next checks and take them back once they catch up (ISR shrink and expand)."""

    broker: int
    ms: int = 600

    def describe(self) -> str:
        return f"broker {self.broker}'s fetchers stall for {self.ms} ms"


class Bounce(NamedTuple):
    """The broker process restarts faster than its ZooKeeper session times out (KIP-380's
    case): the controller sees one broker change, the same broker with a new broker
    epoch, and it stays in every ISR it was in. Its fetchers start `slow_ms` later (log
    recovery, many partitions to resume): a follower that truncated on the
    LeaderAndIsr stays behind that long, KIP-101's window."""

    broker: int
    slow_ms: int = 0

    def describe(self) -> str:
        slow = f", fetching {self.slow_ms} ms later" if self.slow_ms else ""
        return f"bounce broker {self.broker} (restart within the session timeout{slow})"


class LoseZkReply(NamedTuple):
    """The reply to one of broker `broker`'s next ZooKeeper requests (its broker side
    or its controller) is lost: the request fails before or after ZooKeeper applied it,
    and the client sees ConnectionLoss; with `expire` the session expires meanwhile."""

    broker: int
    skip: int = 0  # requests that go through first
    after_apply: bool = False
    expire: bool = False

    def describe(self) -> str:
        when = "after" if self.after_apply else "before"
        which = "next" if self.skip == 0 else f"{self.skip + 1}th next"
        expiry = ", and its session expires" if self.expire else ""
        return (
            f"broker {self.broker}'s {which} ZooKeeper request fails {when} it is "
            f"applied (ConnectionLoss){expiry}"
        )


class ZkBlip(NamedTuple):
    """Broker `broker` is cut from ZooKeeper on and off for `ms` (under the session
    timeout): each of its requests meanwhile loses its reply with probability 1/2,
    before or after being applied (drawn from `seed`)."""

    broker: int
    ms: int
    seed: int

    def describe(self) -> str:
        return f"broker {self.broker}'s ZooKeeper connection blips for {self.ms} ms"


class ExpireSession(NamedTuple):
    """ZooKeeper expires a live broker's session (a long GC pause): it registers again
    with a new broker epoch and runs the controller election again."""

    broker: int

    def describe(self) -> str:
        return f"expire the ZooKeeper session of broker {self.broker}"


class Tick(NamedTuple):
    """Time passes (tick_ms): leaders check for lagging followers; crashed brokers'
    sessions expire once session_timeout_ms passed."""

    def describe(self) -> str:
        return "tick"


class CreateTopic(NamedTuple):
    topic: str
    partitions: int = 1
    replication_factor: int = 3

    def describe(self) -> str:
        return (
            f"create topic {self.topic} ({self.partitions} partitions, "
            f"replication factor {self.replication_factor})"
        )


class DeleteTopic(NamedTuple):
    topic: str

    def describe(self) -> str:
        return f"delete topic {self.topic}"


class Reassign(NamedTuple):
    """kafka-reassign-partitions.sh --execute: write /admin/reassign_partitions (refused
    while a reassignment is in progress, as the tool does)."""

    topic: str
    partition: int
    target: tuple[int, ...]

    def describe(self) -> str:
        return f"reassign {self.topic}-{self.partition} to {list(self.target)}"


class PreferredElection(NamedTuple):
    """kafka-preferred-replica-election.sh for one partition."""

    topic: str
    partition: int

    def describe(self) -> str:
        return f"preferred replica election for {self.topic}-{self.partition}"


ClusterEvent = (
    Run
    | ControllerStep
    | Notify
    | Deliver
    | Hold
    | LoseRequest
    | Fetch
    | Produce
    | Crash
    | Restart
    | ExpireSession
    | Bounce
    | PauseFetcher
    | LoseZkReply
    | ZkBlip
    | Tick
    | CreateTopic
    | DeleteTopic
    | Reassign
    | PreferredElection
)

# -- the model ------------------------------------------------------------------------


class ClusterReplica(Replica):
    """A broker's copy of one partition: the log on disk (Replica's epochs/values, HW,
    epoch cache) and, while hosted, what the last LeaderAndIsr it accepted said."""

    __slots__ = (
        "tp",
        "incarnation",
        "hosted",
        "leader",
        "leader_epoch",
        "isr",
        "assigned",
        "zk_version",
        "controller_epoch",
        "waiting",
        "notify_pending",
        "checkpointed_hw",
    )

    def __init__(
        self, broker_id: int, mode: TruncationMode, tp: TopicPartition, incarnation: int
    ) -> None:
        super().__init__(broker_id, mode)
        self.tp = tp
        # Which creation of the topic name this log belongs to: the simulator's label
        # for the invariants; the broker itself only knows the name (as Kafka's disk).
        self.incarnation = incarnation
        self.hosted = False
        self.leader = NO_LEADER
        self.leader_epoch = -1
        self.isr: tuple[int, ...] = ()
        self.assigned: tuple[int, ...] = ()
        self.zk_version = -1
        self.controller_epoch = -1
        # acks=all produces waiting for the HW: (offset, value, epoch).
        self.waiting: list[tuple[int, str, int]] = []
        # An ISR change written whose notification is still to be created.
        self.notify_pending = False
        # The HW in the last high-watermark checkpoint: what a restart reads back.
        self.checkpointed_hw = 0


class Message(NamedTuple):
    request: ControllerRequest
    deleting: str | None  # SendStopReplica's topic: answer with StopReplicaAnswered


class Channel:
    """One controller's ordered request queue to one broker (Kafka's per-broker queue)."""

    __slots__ = ("queue", "held")

    def __init__(self) -> None:
        self.queue: deque[Message] = deque()
        self.held = 0


class ControllerShell:
    """The simulator's controller shell for one broker process: an event queue and at
    most one procedure in progress, carried one effect per step."""

    __slots__ = (
        "core",
        "events",
        "proc",
        "result",
        "watched_data",
        "watches",
        "incarnation",
        "preferred_seen",
    )

    def __init__(self, core: ControllerCore, incarnation: int) -> None:
        self.core = core
        self.events: deque[fx.ControllerEvent] = deque()
        self.proc: Procedure | None = None
        self.result: Any = None
        # As controller.py: one data watch per path for the life of the process
        # (kazoo's watch outlives a failover).
        self.watched_data: set[str] = set()
        # Every watch registered, so a new session can register them again (kazoo
        # re-arms its recipes on a new session).
        self.watches: list[tuple[str, str, fx.ControllerEvent]] = []
        self.incarnation = incarnation
        # Preferred elections electable when the procedure read the admin znode.
        self.preferred_seen: set[TopicPartition] = set()

    @property
    def idle(self) -> bool:
        return self.proc is None and not self.events


class SimBroker:
    __slots__ = (
        "broker_id",
        "alive",
        "incarnation",
        "zk",
        "broker_epoch",
        "controller_epoch",
        "applied_controller_epoch",
        "metadata",
        "metadata_controller",
        "replicas",
        "shell",
        "crashed_at_ms",
        "fetch_paused_until_ms",
        "hw_checkpointed_at_ms",
    )

    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.alive = False
        self.incarnation = 0  # process starts (restarts) so far
        self.zk: SimZkClient | None = None
        self.broker_epoch = -1
        # The newest controller epoch heard from (replica_manager.controller_epoch).
        self.controller_epoch = 0
        # Controller epoch of the last request this process applied (the invariants
        # check it never goes back within one process lifetime).
        self.applied_controller_epoch = 0
        self.metadata: dict[TopicPartition, PartitionState] = {}
        self.metadata_controller = -1
        self.replicas: dict[TopicPartition, ClusterReplica] = {}
        self.shell: ControllerShell | None = None
        self.crashed_at_ms = 0
        self.fetch_paused_until_ms = 0
        self.hw_checkpointed_at_ms = 0


class AckedWrite(NamedTuple):
    tp: TopicPartition
    incarnation: int
    offset: int
    value: str
    epoch: int
    acks_all: bool
    leader: int
    isr: frozenset[int]
    holders: frozenset[int]
    # The topic was marked for deletion when the ack went out: its replicas are being
    # deleted, so no durability promise is left to keep.
    deleting: bool = False


class StateChangeLine(NamedTuple):
    now_ms: int
    broker: int
    kind: str
    fields: dict[str, Any]


@dataclass
class Books:
    """What the invariants need beyond the model itself."""

    # (topic, incarnation, partition, leader epoch) -> the broker that led it.
    leaders: dict[tuple[str, int, int, int], int] = field(default_factory=dict)
    acked: list[AckedWrite] = field(default_factory=list)
    acked_checked: int = 0
    failed_produces: list[tuple[str, str]] = field(default_factory=list)
    state_changes: list[StateChangeLine] = field(default_factory=list)
    state_changes_checked: int = 0
    # (topic, incarnation, partition) that had an unclean election.
    unclean: set[tuple[str, int, int]] = field(default_factory=set)
    # (topic, incarnation) whose deletion completed (its znodes were deleted) -> the
    # (broker, partition) replicas it was assigned then.
    deleted: dict[tuple[str, int], set[tuple[int, int]]] = field(default_factory=dict)
    # (topic, incarnation, partition) -> the target of the latest accepted request.
    reassignments: dict[tuple[str, int, int], tuple[int, ...]] = field(default_factory=dict)
    # Problems the model itself detected while acting (e.g. a lagging ack).
    problems: list[str] = field(default_factory=list)
    fenced_requests: int = 0


class ClusterSim:
    """The whole cluster. `step(event)` applies one schedule event."""

    def __init__(
        self, config: ClusterConfig | None = None, record: bool = False, settled: bool = True
    ) -> None:
        """Brokers start, topics are created; with `settled` the cluster then runs until
        quiet (a controller elected, every partition online and in sync), so schedules
        start from a healthy cluster."""
        self.config = config or ClusterConfig()
        self.record = record
        self.now_ms = 0
        self.zk = SimZooKeeper(now_ms=lambda: self.now_ms)
        self.admin = SimZkClient(self.zk, self.zk.new_session())
        self.brokers: dict[int, SimBroker] = {b: SimBroker(b) for b in self.config.brokers}
        self.channels: dict[tuple[int, int], Channel] = {}
        # topic -> how many times it has been created (its current incarnation).
        self.incarnations: dict[str, int] = {}
        self.books = Books()
        self.notes: list[str] = []
        self.steps = 0
        for broker_id in self.config.brokers:
            self._start_broker(self.brokers[broker_id])
        for name, partitions, rf in self.config.topics:
            self._create_topic(CreateTopic(name, partitions, rf))
        if settled:
            self.settle()
            self._checkpoint_high_watermarks(force=True)

    # -- helpers ------------------------------------------------------------------

    def _note(self, text: str) -> None:
        if self.record:
            self.notes.append(text)

    def _unclean(self, _topic: str) -> bool:
        return self.config.unclean_leader_election

    def incarnation_of(self, topic: str) -> int:
        return self.incarnations.get(topic, 0)

    def live_broker_ids(self) -> list[int]:
        return [b for b, broker in self.brokers.items() if broker.alive]

    # -- broker lifecycle -----------------------------------------------------------

    def _start_broker(self, broker: SimBroker) -> None:
        """KafkaServer.startup: a new ZooKeeper session, stray logs deleted, registration
        (the broker epoch), the controller's /controller watch and its Startup event."""
        broker.alive = True
        broker.incarnation += 1
        broker.controller_epoch = 0
        broker.applied_controller_epoch = 0
        broker.metadata = {}
        broker.metadata_controller = -1
        zk = SimZkClient(self.zk, self.zk.new_session())
        broker.zk = zk
        for replica in broker.replicas.values():
            self._reload_from_disk(replica)
        self._delete_stray_logs(broker)
        broker.broker_epoch = zk.register_broker(broker.broker_id, f"b{broker.broker_id}", 9092)
        core = ControllerCore(
            broker.broker_id,
            self._unclean,
            RebalanceSettings(enable=self.config.auto_leader_rebalance),
        )
        shell = ControllerShell(core, broker.incarnation)
        broker.shell = shell
        self._watch_controller(broker)
        shell.events.append(fx.Startup())
        self._note(f"broker {broker.broker_id} starts, broker epoch {broker.broker_epoch}")

    def _reload_from_disk(self, replica: ClusterReplica) -> None:
        # What survives a restart: the log, the HW checkpoint and the epoch cache; the
        # role comes again from the controller's LeaderAndIsr.
        replica.hosted = False
        replica.partition = None
        replica.held_response = None
        replica.leader = NO_LEADER
        replica.leader_epoch = -1
        replica.waiting = []
        replica.high_watermark = min(replica.checkpointed_hw, replica.log_end_offset)
        replica.epoch_cache.truncate_from_end(replica.log_end_offset)
        replica.follower = FollowerState(self.config.truncation)

    def _delete_stray_logs(self, broker: SimBroker) -> None:
        """As Broker._delete_stray_logs: a log whose partition ZooKeeper no longer assigns
        to this broker goes (a topic still marked for deletion keeps its znodes, so its
        replicas stay for the controller's StopReplica)."""
        assert broker.zk is not None
        assignments: dict[str, dict[int, list[int]] | None] = {}
        for tp in sorted(broker.replicas):
            if tp.topic not in assignments:
                assignments[tp.topic] = broker.zk.get_topic_assignment(tp.topic)
            assignment = assignments[tp.topic]
            if assignment is None or broker.broker_id not in assignment.get(tp.partition, ()):
                del broker.replicas[tp]
                self._log(broker.broker_id, "stray-replica-deleted", tp=tp)

    def _watch_controller(self, broker: SimBroker) -> None:
        assert broker.zk is not None and broker.shell is not None
        shell = broker.shell

        def on_controller(_data: bytes | None, _stat: object) -> None:
            shell.events.append(fx.ControllerChange())

        broker.zk.watch_data(znodes.CONTROLLER_PATH, on_controller)

    def _crash(self, broker: SimBroker) -> None:
        if not broker.alive:
            return
        broker.alive = False
        broker.crashed_at_ms = self.now_ms
        if broker.shell is not None:
            if broker.shell.proc is not None:
                broker.shell.proc.close()
            broker.shell = None
        for replica in broker.replicas.values():
            self._fail_waiting(replica, "NOT_LEADER_OR_FOLLOWER")
            replica.partition = None
            replica.hosted = False
        # The process's outgoing request queues die with it; requests to it are lost.
        for (src, dst), channel in self.channels.items():
            if src == broker.broker_id or dst == broker.broker_id:
                channel.queue.clear()
                channel.held = 0
        self._note(f"broker {broker.broker_id} crashes (its session lives until it expires)")

    def _restart(self, broker: SimBroker) -> None:
        if broker.alive:
            return
        # register_broker would fail while the old ephemeral znode exists: the broker
        # waits that long (the old session expires first).
        if broker.zk is not None:
            broker.zk.close()
        self._start_broker(broker)

    def _expire_session(self, broker: SimBroker) -> None:
        """The session expires while the process lives: Kafka's re-registration. The
        controller keeps its context (a zombie) until it processes ControllerChange."""
        if not broker.alive or broker.zk is None or broker.shell is None:
            return
        old = broker.zk
        old.close()
        zk = SimZkClient(self.zk, self.zk.new_session())
        # The same ZkClient object lives on in a real broker: it keeps the fencing
        # version of its last won election.
        zk.controller_epoch_zk_version = old.controller_epoch_zk_version
        broker.zk = zk
        broker.broker_epoch = zk.register_broker(broker.broker_id, f"b{broker.broker_id}", 9092)
        self._watch_controller(broker)
        shell = broker.shell
        for path, kind, event in shell.watches:
            self._register_watch(broker, path, kind, event)
        shell.events.append(fx.ControllerChange())
        self._note(
            f"broker {broker.broker_id}: ZooKeeper session expired; registered again with "
            f"broker epoch {broker.broker_epoch}"
        )

    # -- the controller shell -------------------------------------------------------------

    def _register_watch(
        self, broker: SimBroker, path: str, kind: str, event: fx.ControllerEvent
    ) -> None:
        assert broker.zk is not None and broker.shell is not None
        events = broker.shell.events
        if kind == "children":

            def on_children(_children: list[str]) -> None:
                events.append(event)

            broker.zk.watch_children(path, on_children)
        else:

            def when_present(data: bytes | None, _stat: object) -> None:
                if data is not None:
                    events.append(event)

            broker.zk.watch_data(path, when_present)

    def controller_step(self, broker: SimBroker) -> bool:
        """Carry out one effect of the broker's controller; False when it had nothing."""
        shell = broker.shell
        if not broker.alive or shell is None:
            return False
        if shell.proc is None:
            if not shell.events:
                return False
            event = shell.events.popleft()
            shell.proc = shell.core.handle(event)
            shell.result = None
        proc = shell.proc
        try:
            effect = proc.send(shell.result)
        except StopIteration:
            shell.proc = None
            return True
        except KafkaError:
            # The error answer (NotControllerError for a broker that is not the
            # controller): nobody waits for it in the simulator.
            shell.proc = None
            return True
        if self.record:
            self._note_effect(broker, effect)
        try:
            shell.result = self._carry_out(broker, shell, effect)
        except (ZkError, KafkaError) as e:
            # As controller.py: an effect that raises ends the procedure (logged there);
            # a fenced write makes the controller look at /controller again.
            proc.close()
            shell.proc = None
            if isinstance(e, ControllerMovedError):
                shell.events.append(fx.ControllerChange())
            self._note(f"controller {broker.broker_id}: {type(e).__name__} ends the procedure")
        return True

    def _note_effect(self, broker: SimBroker, effect: fx.Effect) -> None:
        """The controller's steps, as Kafka's controller runs them (state-change lines are noted
        when they are logged)."""
        if isinstance(effect, fx.StateChange):
            return
        ctx = broker.shell.core.ctx if broker.shell is not None else None
        epoch = f"epoch {ctx.epoch}" if ctx is not None else "not controller"
        match effect:
            case fx.SendLeaderAndIsr(broker_id, request) | fx.SendUpdateMetadata(
                broker_id, request
            ):
                what = (
                    f"{type(effect).__name__[4:]} -> broker {broker_id} "
                    f"(controller epoch {request.controller_epoch})"
                )
            case fx.SendStopReplica(broker_id, request, _deleting):
                what = (
                    f"StopReplica{list(map(str, request.partitions))} -> broker {broker_id} "
                    f"(delete={request.delete_partitions})"
                )
            case fx.WatchChildren(path, _) | fx.WatchData(path, _):
                what = f"watch {path}"
            case _:
                fields = ", ".join(f"{v}" for v in vars(effect).values())
                what = f"{type(effect).__name__}({fields})" if fields else type(effect).__name__
        self._note(f"controller {broker.broker_id} ({epoch}): {what}")

    def _carry_out(self, broker: SimBroker, shell: ControllerShell, effect: fx.Effect) -> Any:
        assert broker.zk is not None
        match effect:
            case fx.SendLeaderAndIsr(broker_id, request):
                self._send(broker, broker_id, request, None)
            case fx.SendUpdateMetadata(broker_id, request):
                self._send(broker, broker_id, request, None)
            case fx.SendStopReplica(broker_id, request, deleting):
                self._send(broker, broker_id, request, deleting)
            case fx.ForgetBrokers(broker_ids):
                for dead in broker_ids:
                    channel = self.channels.get((broker.broker_id, dead))
                    if channel is not None:
                        channel.queue.clear()
            case fx.StateChange(kind, fields):
                self._state_change(broker.broker_id, kind, fields)
            case fx.WatchChildren(path, event):
                shell.watches.append((path, "children", event))
                self._register_watch(broker, path, "children", event)
            case fx.WatchData(path, event):
                if path not in shell.watched_data:
                    shell.watched_data.add(path)
                    shell.watches.append((path, "data", event))
                    self._register_watch(broker, path, "data", event)
                else:  # as controller.py: the watch's first firing, for this term
                    shell.events.append(event)
            case fx.BecameController(epoch):
                self._note(f"broker {broker.broker_id} is the controller (epoch {epoch})")
            case fx.Resigned():
                self._note(f"broker {broker.broker_id} resigned as controller")
            case fx.ReadPreferredElection():
                requested = zk_effects.perform(effect, broker.zk)
                shell.preferred_seen = self._preferred_candidates(broker, requested)
                return requested
            case fx.DeletePreferredElection(handled):
                self._check_preferred_answers(broker, handled)
                return zk_effects.perform(effect, broker.zk)
            case fx.DeleteTopicZnodes(topic):
                # The replicas the deletion waited for: ZooKeeper's assignment now, read
                # by the simulator's books (the admin session), not by the broker.
                assignment = self.admin.get_topic_assignment(topic) or {}
                result = zk_effects.perform(effect, broker.zk)
                key = (topic, self.incarnation_of(topic))
                self.books.deleted[key] = {
                    (b, p) for p, replicas in assignment.items() for b in replicas
                }
                return result
            case _:
                return zk_effects.perform(effect, broker.zk)
        return None

    def _preferred_candidates(
        self, broker: SimBroker, tps: list[TopicPartition]
    ) -> set[TopicPartition]:
        """The requested partitions whose preferred replica the controller could elect
        from what ZooKeeper holds now: live in its context and in ZooKeeper's ISR."""
        ctx = broker.shell.core.ctx if broker.shell is not None else None
        if ctx is None:
            return set()
        out = set()
        for tp in tps:
            assignment = self.admin.get_topic_assignment(tp.topic) or {}
            found = self.admin.get_partition_state(tp)
            replicas = assignment.get(tp.partition)
            if not replicas or found is None:
                continue
            state, preferred = found[0], replicas[0]
            if (
                state.leader != preferred
                and preferred in ctx.live_broker_ids
                and preferred in state.isr
                and tp not in ctx.reassignments
                and tp.topic not in ctx.topics_to_delete
            ):
                out.add(tp)
        return out

    def _check_preferred_answers(
        self, broker: SimBroker, handled: tuple[TopicPartition, ...] | None
    ) -> None:
        """A preferred election taken off /admin/preferred_replica_election was acted on
        or rightly refused: not refused while its preferred replica was live and in
        ZooKeeper's ISR from the request's read until now."""
        shell = broker.shell
        if shell is None:
            return
        seen, shell.preferred_seen = shell.preferred_seen, set()
        still = self._preferred_candidates(broker, sorted(seen))
        for tp in sorted(seen & still):
            if handled is None or tp in handled:
                self.books.problems.append(
                    f"{tp}: preferred replica election dropped by controller "
                    f"{broker.broker_id} although the preferred replica was live and in "
                    "ZooKeeper's ISR"
                )

    def _log(self, who: int, kind: str, **fields: Any) -> None:
        self._state_change(who, kind, fields)

    def _state_change(self, who: int, kind: str, fields: dict[str, Any]) -> None:
        """One line of the (cluster-wide, merged) state-change log."""
        self.books.state_changes.append(StateChangeLine(self.now_ms, who, kind, fields))
        if kind == "unclean-leader-election":
            tp = fields["tp"]
            self.books.unclean.add((tp.topic, self.incarnation_of(tp.topic), tp.partition))
        if self.record:
            shown = ", ".join(f"{k}={v}" for k, v in fields.items())
            self.notes.append(f"[{who}] {kind} {shown}")

    def _send(
        self,
        controller: SimBroker,
        broker_id: int,
        request: ControllerRequest,
        deleting: str | None,
    ) -> None:
        if broker_id == controller.broker_id:
            # As ControllerChannel: the controller's own broker applies it in-process.
            self._apply_request(controller, controller, Message(request, deleting))
            return
        key = (controller.broker_id, broker_id)
        channel = self.channels.get(key)
        if channel is None:
            channel = self.channels[key] = Channel()
        channel.queue.append(Message(request, deleting))

    def deliver(self, controller_id: int, broker_id: int) -> bool:
        channel = self.channels.get((controller_id, broker_id))
        if channel is None or not channel.queue:
            return False
        message = channel.queue.popleft()
        target = self.brokers[broker_id]
        if not target.alive:
            return True  # lost with the connection; never answered
        self._apply_request(self.brokers[controller_id], target, message)
        return True

    # -- the broker side of controller requests ----------------------------------------

    def _apply_request(self, controller: SimBroker, broker: SimBroker, message: Message) -> None:
        request = message.request
        error = controller_fencing.controller_request_error(
            request.controller_epoch,
            broker.controller_epoch,
            request.broker_epoch,
            broker.broker_epoch,
        )
        kind = type(request).__name__
        if error is not None:
            self.books.fenced_requests += 1
            self._log(
                broker.broker_id,
                "rejected-stale-controller"
                if error == ErrorCode.stale_controller_epoch
                else "rejected-stale-broker-epoch",
                request=kind,
                controller=request.controller_id,
                controller_epoch=request.controller_epoch,
                current=broker.controller_epoch,
            )
        else:
            broker.controller_epoch = max(broker.controller_epoch, request.controller_epoch)
            if request.controller_epoch < broker.applied_controller_epoch:
                self.books.problems.append(
                    f"broker {broker.broker_id} applied a {kind} of controller epoch "
                    f"{request.controller_epoch} after one of epoch "
                    f"{broker.applied_controller_epoch}"
                )
            broker.applied_controller_epoch = max(
                broker.applied_controller_epoch, request.controller_epoch
            )
            if isinstance(request, LeaderAndIsrRequest):
                self._leader_and_isr(broker, request)
            elif isinstance(request, UpdateMetadataRequest):
                self._update_metadata(broker, request)
            else:
                for tp in request.partitions:
                    self._stop_replica(broker, tp, request.delete_partitions)
        if message.deleting is not None:
            # The answer goes back to the controller process that asked, if it still runs.
            shell = controller.shell
            if controller.alive and shell is not None:
                shell.events.append(
                    fx.StopReplicaAnswered(
                        message.deleting, broker.broker_id, error or ErrorCode.none
                    )
                )

    def _leader_and_isr(self, broker: SimBroker, request: LeaderAndIsrRequest) -> None:
        """ReplicaManager.become_leader_or_follower: the decisions are
        `replication/leader_and_isr.py`'s, as the broker's; this is the simulated I/O."""
        for state in request.partitions:
            tp = state.tp
            replica = broker.replicas.get(tp)
            current = replica.leader_epoch if replica is not None and replica.hosted else None
            error, leads = leader_and_isr.decide(
                broker.broker_id, state.leader, state.replicas, state.leader_epoch, current
            )
            if error is not None:
                continue
            if replica is None:
                replica = ClusterReplica(
                    broker.broker_id, self.config.truncation, tp, self.incarnation_of(tp.topic)
                )
                broker.replicas[tp] = replica
            replica.hosted = True
            replica.leader = state.leader
            replica.leader_epoch = state.leader_epoch
            replica.isr = state.isr
            replica.assigned = state.replicas
            replica.zk_version = state.zk_version
            replica.controller_epoch = state.controller_epoch
            if leads:
                self._make_leader(broker, replica)
            else:
                self._make_follower(replica)

    def _make_leader(self, broker: SimBroker, replica: ClusterReplica) -> None:
        tp = replica.tp
        key = (tp.topic, replica.incarnation, tp.partition, replica.leader_epoch)
        previous = self.books.leaders.setdefault(key, broker.broker_id)
        if previous != broker.broker_id:
            self.books.problems.append(
                f"{tp} leader epoch {replica.leader_epoch}: both broker {previous} and "
                f"broker {broker.broker_id} led it"
            )
        self._fail_waiting(replica, "NOT_LEADER_OR_FOLLOWER")
        replica.held_response = None
        start = leader_and_isr.become_leader(
            broker.broker_id,
            replica.leader_epoch,
            replica.isr,
            replica.assigned,
            replica.log_end_offset,
            replica.high_watermark,
            self.config.replica_lag_time_max_ms,
            self.now_ms,
        )
        replica.epoch_cache.assign(*start.epoch_start)
        replica.partition = start.partition
        replica.high_watermark = start.partition.high_watermark
        self._note(
            f"broker {broker.broker_id} leads {tp} in epoch {replica.leader_epoch}, "
            f"ISR {list(replica.isr)}"
        )

    def _make_follower(self, replica: ClusterReplica) -> None:
        start = leader_and_isr.become_follower(
            self.config.truncation,
            replica.leader,
            replica.leader_epoch,
            replica.log_end_offset,
            replica.high_watermark,
            replica.partition,
        )
        replica.high_watermark = start.high_watermark
        replica.partition = None
        self._fail_waiting(replica, "NOT_LEADER_OR_FOLLOWER")
        if start.truncate_to is not None:
            replica.truncate_to(start.truncate_to)
        replica.follower = start.follower
        replica.held_response = None

    def _update_metadata(self, broker: SimBroker, request: UpdateMetadataRequest) -> None:
        broker.metadata_controller = request.controller_id
        for state in request.partitions:
            broker.metadata[state.tp] = state
        if request.deleted_topics:
            gone = set(request.deleted_topics)
            for tp in [tp for tp in broker.metadata if tp.topic in gone]:
                del broker.metadata[tp]

    def _stop_replica(self, broker: SimBroker, tp: TopicPartition, delete: bool) -> None:
        replica = broker.replicas.get(tp)
        if replica is None:
            return
        self._fail_waiting(replica, "NOT_LEADER_OR_FOLLOWER")
        if delete:
            del broker.replicas[tp]
            self._note(f"broker {broker.broker_id} deletes its replica of {tp}")
        else:
            replica.hosted = False
            replica.partition = None
            replica.leader_epoch = -1

    # -- produce ----------------------------------------------------------------------

    def _fail_waiting(self, replica: ClusterReplica, error: str) -> None:
        if replica.waiting:
            for _offset, value, _epoch in replica.waiting:
                self.books.failed_produces.append((value, error))
            replica.waiting = []

    def _produce(self, event: Produce) -> None:
        tp = TopicPartition(event.topic, event.partition)
        meta = None
        # As a client with a bootstrap list: `via` first, then any other live broker
        # that knows the partition (a restarted broker's metadata is empty until the
        # controller's UpdateMetadata arrives).
        for broker_id in [event.via, *sorted(b for b in self.brokers if b != event.via)]:
            via = self.brokers.get(broker_id)
            if via is not None and via.alive and via.metadata.get(tp) is not None:
                meta = via.metadata[tp]
                break
        if meta is None or meta.leader == NO_LEADER:
            self.books.failed_produces.append((event.value, "UNKNOWN_TOPIC_OR_PARTITION"))
            return
        leader = self.brokers[meta.leader]
        replica = leader.replicas.get(tp) if leader.alive else None
        partition = replica.partition if replica is not None else None
        if replica is None or partition is None:
            self.books.failed_produces.append((event.value, "NOT_LEADER_OR_FOLLOWER"))
            return
        acks = -1 if event.acks_all else 1
        error = partition.check_produce(acks, self.config.min_insync_replicas)
        if error != ErrorCode.none:
            self.books.failed_produces.append((event.value, error.name))
            self._note(f"{event.value} refused: {error.name}")
            return
        offset = replica.log_end_offset
        epoch = replica.leader_epoch
        replica.epochs.append(epoch)
        replica.values.append(event.value)
        self._note(f"broker {leader.broker_id} appends {event.value} to {tp} at offset {offset}")
        if event.acks_all:
            replica.waiting.append((offset, event.value, epoch))
        else:
            self._ack(leader, replica, offset, event.value, epoch, acks_all=False)
        self._hw_moved(leader, replica, partition.on_append(replica.log_end_offset, self.now_ms))

    def _ack(
        self,
        leader: SimBroker,
        replica: ClusterReplica,
        offset: int,
        value: str,
        epoch: int,
        acks_all: bool,
    ) -> None:
        assert replica.partition is not None
        isr = replica.partition.isr
        if acks_all:
            self._check_isr_against_zookeeper(leader, replica, offset)
        holders = []
        for broker_id in sorted(isr):
            other = self.brokers[broker_id].replicas.get(replica.tp)
            if (
                other is not None
                and other.log_end_offset > offset
                and other.values[offset] == value
                and other.epochs[offset] == epoch
            ):
                holders.append(broker_id)
        self.books.acked.append(
            AckedWrite(
                replica.tp,
                replica.incarnation,
                offset,
                value,
                epoch,
                acks_all,
                leader.broker_id,
                isr,
                frozenset(holders),
                replica.tp.topic in self.admin.get_topics_marked_for_deletion(),
            )
        )

    def _check_isr_against_zookeeper(
        self, leader: SimBroker, replica: ClusterReplica, offset: int
    ) -> None:
        """Every replica in ZooKeeper's ISR of this leader's term can be elected
        cleanly, so the leader must wait for it: whenever it acknowledges a write,
        ZooKeeper's ISR is within the leader's ISR (not only its maximal ISR, which a
        follower still fetching keeps re-entering: the divergence must not hide until
        that follower stalls)."""
        assert replica.partition is not None
        found = self.admin.get_partition_state(replica.tp)
        if found is None:
            return
        state = found[0]
        if state.leader != leader.broker_id or state.leader_epoch != replica.leader_epoch:
            return  # a newer decision; the LeaderAndIsr carrying it is on its way
        outside = set(state.isr) - replica.partition.isr
        if outside:
            self.books.problems.append(
                f"{replica.tp}: leader {leader.broker_id} acknowledged offset {offset} "
                f"with ISR {sorted(replica.partition.isr)} while ZooKeeper's ISR is "
                f"{list(state.isr)} ({sorted(outside)} could be elected without it)"
            )

    def _hw_moved(self, broker: SimBroker, replica: ClusterReplica, advanced: int | None) -> None:
        if advanced is None:
            return
        replica.high_watermark = advanced
        partition = replica.partition
        if not replica.waiting or partition is None:
            return
        still = []
        for offset, value, epoch in replica.waiting:
            answer = partition.produce_completion(offset, self.config.min_insync_replicas)
            if answer is None:
                still.append((offset, value, epoch))
            elif answer == ErrorCode.none:
                self._ack(broker, replica, offset, value, epoch, acks_all=True)
                self._note(f"{value} acknowledged (acks=all) at offset {offset}")
            else:
                self.books.failed_produces.append((value, answer.name))
        replica.waiting = still

    # -- ISR changes by the leader ----------------------------------------------------------

    def _write_isr(
        self, broker: SimBroker, replica: ClusterReplica, new_isr: frozenset[int]
    ) -> None:
        """The leader's ISR update, the broker's own (`replication/isr_update.py`),
        carried out on this broker's ZooKeeper session."""
        partition = replica.partition
        assert partition is not None and broker.zk is not None
        old_isr = partition.isr
        update = isr_update.isr_update(
            replica.tp,
            broker.broker_id,
            replica.leader_epoch,
            replica.controller_epoch,
            replica.zk_version,
            old_isr,
            new_isr,
        )
        result: isr_update.IsrUpdateResult = isr_update.run(update, self._isr_effect(broker))
        replica.zk_version = result.zk_version
        replica.isr = tuple(sorted(result.isr))
        replica.notify_pending = result.notify_pending
        self._log(
            broker.broker_id,
            "isr-change" if result.known else f"isr-change-{result.outcome.value}",
            tp=replica.tp,
            old_isr=sorted(old_isr),
            proposed=sorted(new_isr),
            new_isr=list(replica.isr),
            zk_version=result.zk_version,
        )
        self._hw_moved(broker, replica, partition.apply_isr(result.isr, self.now_ms))

    def _isr_effect(self, broker: SimBroker) -> Callable[[isr_update.IsrEffect], Any]:
        def perform_one(effect: isr_update.IsrEffect) -> Any:
            zk = broker.zk
            assert zk is not None
            return isr_update.perform(effect, zk, classify_sim_failure)

        return perform_one

    def _notify_pending(self, broker: SimBroker) -> None:
        """ISR change notifications left pending are sent again (the broker's periodic
        ISR check does the same)."""
        for tp in sorted(broker.replicas):
            replica = broker.replicas[tp]
            if replica.notify_pending and replica.partition is not None:
                replica.notify_pending = isr_update.run(
                    isr_update.notify_again(tp), self._isr_effect(broker)
                )

    def _isr_expiration(self) -> None:
        for broker in self.brokers.values():
            if not broker.alive:
                continue
            for tp in sorted(broker.replicas):
                replica = broker.replicas[tp]
                partition = replica.partition
                if partition is None:
                    continue
                proposal = partition.isr_shrink_proposal(self.now_ms)
                if proposal is not None:
                    self._write_isr(broker, replica, proposal)
                elif (expansion := partition.isr_expansion()) is not None:
                    # As the broker's periodic check: an expansion not written before
                    # (a lost reply left the ISR unknown) is proposed again.
                    self._write_isr(broker, replica, expansion)
            self._notify_pending(broker)

    # -- fetch ------------------------------------------------------------------------------

    def _fetch_round(self, broker: SimBroker, lose: bool) -> bool:
        """One fetcher round trip for every partition the broker follows."""
        if not broker.alive or self.now_ms < broker.fetch_paused_until_ms:
            return False
        moved = False
        for tp in sorted(broker.replicas):
            follower = broker.replicas[tp]
            if not follower.hosted or follower.partition is not None:
                continue
            if follower.leader == NO_LEADER or follower.leader == broker.broker_id:
                continue
            leader_broker = self.brokers[follower.leader]
            if not leader_broker.alive:
                continue
            leader = leader_broker.replicas.get(tp)
            # KIP-320: a fetch names the leader epoch it expects; any other answers
            # FENCED/UNKNOWN_LEADER_EPOCH or NOT_LEADER and the follower waits.
            if (
                leader is None
                or leader.partition is None
                or leader.leader_epoch != follower.leader_epoch
            ):
                continue
            if self._fetch_one(leader_broker, leader, follower, lose):
                moved = True
        return moved

    def _fetch_one(
        self,
        leader_broker: SimBroker,
        leader: ClusterReplica,
        follower: ClusterReplica,
        lose: bool,
    ) -> bool:
        state = follower.follower
        if state.fetch_state is FetchState.TRUNCATING:
            if lose:
                return False
            answer = EpochEndOffset(
                *leader.epoch_cache.end_offset_for(
                    follower.epoch_cache.latest_epoch, leader.log_end_offset
                )
            )
            decision = state.on_epoch_answer(
                follower.epoch_cache, follower.log_end_offset, follower.high_watermark, answer
            )
            follower.truncate_to(decision.offset)
            return True
        partition = leader.partition
        assert partition is not None
        fetch_offset = follower.log_end_offset
        if fetch_offset > leader.log_end_offset:
            if not lose:
                cut, _next = truncation_on_offset_out_of_range(
                    follower.log_end_offset, 0, leader.log_end_offset
                )
                follower.truncate_to(cut)
            return True
        outcome = partition.on_follower_fetch(follower.broker_id, fetch_offset, self.now_ms)
        epochs = leader.epochs[fetch_offset:]
        values = leader.values[fetch_offset:]
        leader_epoch = leader.leader_epoch
        self._hw_moved(leader_broker, leader, outcome.high_watermark_advanced)
        if outcome.isr_expand is not None:
            self._write_isr(leader_broker, leader, outcome.isr_expand)
        if lose:
            return True
        if not state.accepts_fetch_response(fetch_offset, leader_epoch, follower.log_end_offset):
            return True
        if values:
            follower.append(epochs, values)
        follower.high_watermark = follower_high_watermark(
            follower.log_end_offset, outcome.response_high_watermark
        )
        return bool(values) or outcome.high_watermark_advanced is not None

    # -- admin tools --------------------------------------------------------------------------

    def _create_topic(self, event: CreateTopic) -> None:
        """kafka-topics.sh --create: replicas spread round-robin over the registered
        brokers, written to /brokers/topics/<t> (the controller does the rest)."""
        live = sorted(self.admin.get_live_brokers())
        if len(live) < event.replication_factor or event.topic in self.admin.get_all_topics():
            self._note(f"create {event.topic} refused")
            return
        assignment = {
            p: [live[(p + i) % len(live)] for i in range(event.replication_factor)]
            for p in range(event.partitions)
        }
        self.admin.create_topic(event.topic, assignment)
        self.incarnations[event.topic] = self.incarnation_of(event.topic) + 1
        self._note(f"topic {event.topic} created with assignment {assignment}")

    def _delete_topic(self, event: DeleteTopic) -> None:
        if event.topic in self.admin.get_all_topics():
            self.admin.mark_topic_for_deletion(event.topic)
            self._note(f"topic {event.topic} marked for deletion")

    def _reassign(self, event: Reassign) -> None:
        tp = TopicPartition(event.topic, event.partition)
        assignment = self.admin.get_topic_assignment(event.topic)
        if assignment is None or event.partition not in assignment:
            return
        if event.topic in self.admin.get_topics_marked_for_deletion():
            return
        try:
            self.admin.create_partition_reassignment({tp: list(event.target)})
        except ZkError:
            self._note("reassignment refused: one is in progress")
            return
        key = (event.topic, self.incarnation_of(event.topic), event.partition)
        self.books.reassignments[key] = tuple(event.target)
        self._note(f"/admin/reassign_partitions := {{{tp}: {list(event.target)}}}")

    def _preferred_election(self, event: PreferredElection) -> None:
        tp = TopicPartition(event.topic, event.partition)
        try:
            self.admin.create_preferred_replica_election([tp])
        except ZkError:
            return

    # -- stepping ---------------------------------------------------------------------------

    def run_notifications(self) -> bool:
        pending = self.zk.take_notifications()
        for notification in pending:
            notification.run()
        return bool(pending)

    def round(self) -> bool:
        """One round of background work; returns whether anything happened."""
        moved = self.run_notifications()
        for broker in self.brokers.values():
            if self.controller_step(broker):
                moved = True
        # Followers fetch before this round's requests arrive: a follower that a
        # LeaderAndIsr made truncate fetches again only in the next round, as a real
        # fetcher's next round trip comes after the request was handled (a leader
        # dying in between is the KIP-101 data-loss scenario).
        for broker in self.brokers.values():
            if self._fetch_round(broker, lose=False):
                moved = True
        for key in sorted(self.channels):
            channel = self.channels[key]
            if channel.held > 0:
                channel.held -= 1
                moved = True
                continue
            if self.deliver(*key):
                moved = True
        return moved

    def step(self, event: ClusterEvent) -> None:
        self.steps += 1
        self.now_ms += self.config.step_ms
        if self.record:
            self.notes = []
        match event:
            case Run(rounds):
                for _ in range(rounds):
                    self.round()
            case ControllerStep(broker_id):
                self.controller_step(self.brokers[broker_id])
            case Notify():
                self.run_notifications()
            case Deliver(controller_id, broker_id):
                self.deliver(controller_id, broker_id)
            case Hold(controller_id, broker_id, rounds):
                key = (controller_id, broker_id)
                channel = self.channels.get(key)
                if channel is None:
                    channel = self.channels[key] = Channel()
                channel.held = max(channel.held, rounds)
            case LoseRequest(controller_id, broker_id):
                channel = self.channels.get((controller_id, broker_id))
                if channel is not None and channel.queue:
                    channel.queue.popleft()
            case Fetch(broker_id, lose):
                self._fetch_round(self.brokers[broker_id], lose)
            case Produce():
                self._produce(event)
            case Crash(broker_id):
                self._crash(self.brokers[broker_id])
            case Restart(broker_id):
                self._restart(self.brokers[broker_id])
            case ExpireSession(broker_id):
                self._expire_session(self.brokers[broker_id])
            case Bounce(broker_id, slow_ms):
                bounced = self.brokers[broker_id]
                if bounced.alive:
                    self._crash(bounced)
                    self._restart(bounced)
                    bounced.fetch_paused_until_ms = self.now_ms + slow_ms
            case ZkBlip(broker_id, ms, blip_seed):
                blipped = self.brokers[broker_id]
                if blipped.alive and blipped.zk is not None:
                    blipped.zk.blip(self.now_ms + ms, blip_seed)
            case PauseFetcher(broker_id, ms):
                self.brokers[broker_id].fetch_paused_until_ms = self.now_ms + ms
            case LoseZkReply(broker_id, skip, after_apply, expire):
                target = self.brokers[broker_id]
                if target.alive and target.zk is not None:
                    target.zk.lose_reply(ReplyFault(skip, after_apply, expire))
            case Tick():
                self._tick()
            case CreateTopic():
                self._create_topic(event)
            case DeleteTopic():
                self._delete_topic(event)
            case Reassign():
                self._reassign(event)
            case PreferredElection():
                self._preferred_election(event)
            case _:
                raise TypeError(f"not a cluster event: {event!r}")
        self._renew_expired_sessions()

    def _renew_expired_sessions(self) -> None:
        """A live broker whose session expired under it (a lost reply's fault) registers
        again, as kazoo's session listener makes the broker do."""
        for broker in self.brokers.values():
            if broker.alive and broker.zk is not None and not broker.zk.alive:
                self._expire_session(broker)

    def _tick(self) -> None:
        self.now_ms += self.config.tick_ms
        self._isr_expiration()
        self._checkpoint_high_watermarks()
        for broker in self.brokers.values():
            if (
                not broker.alive
                and broker.zk is not None
                and broker.zk.alive
                and self.now_ms - broker.crashed_at_ms >= self.config.session_timeout_ms
            ):
                broker.zk.close()
                self._note(f"the session of crashed broker {broker.broker_id} expires")

    def _checkpoint_high_watermarks(self, force: bool = False) -> None:
        """As the broker's tick loop: every hw_checkpoint_interval_ms, each live broker
        writes the HW of every replica it holds."""
        for broker in self.brokers.values():
            if not broker.alive:
                continue
            if not force and (
                self.now_ms - broker.hw_checkpointed_at_ms < self.config.hw_checkpoint_interval_ms
            ):
                continue
            broker.hw_checkpointed_at_ms = self.now_ms
            for replica in broker.replicas.values():
                replica.checkpointed_hw = replica.high_watermark

    def run(self, events: Iterable[ClusterEvent]) -> None:
        for event in events:
            self.step(event)

    # -- settling ---------------------------------------------------------------------------

    def quiescent(self) -> bool:
        """Nothing left to do: no notification, controller work or request pending, no
        deletion or reassignment unfinished, and every assigned replica of every online
        partition in sync with the leader ZooKeeper names, at its leader epoch."""
        if self.zk.pending_notifications:
            return False
        for broker in self.brokers.values():
            if broker.alive and broker.shell is not None and not broker.shell.idle:
                return False
        if any(channel.queue for channel in self.channels.values()):
            return False
        admin = self.admin
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
                leader = self.brokers[state.leader].replicas.get(tp)
                if (
                    leader is None
                    or leader.partition is None
                    or leader.leader_epoch != state.leader_epoch
                ):
                    return False
                for broker_id in assignment[tp.partition]:
                    if broker_id == state.leader:
                        continue
                    replica = self.brokers[broker_id].replicas.get(tp)
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
        for broker in self.brokers.values():
            if not broker.alive:
                continue
            for tp in sorted(broker.replicas):
                assignment = self.admin.get_topic_assignment(tp.topic)
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
            (b for b in self.brokers.values() if not b.alive),
            key=lambda b: (b.crashed_at_ms, b.broker_id),
        )
        for index, broker in enumerate(down):
            self._restart(broker)
            if index < len(down) - 1:
                self._outage(max_rounds // 3)
        for channel in self.channels.values():
            channel.held = 0
        for broker in self.brokers.values():
            broker.fetch_paused_until_ms = 0
        for _ in range(max_rounds):
            if self.quiescent():
                return True
            self.now_ms += self.config.step_ms
            self.round()
            if self.steps % 4 == 0:
                self._isr_expiration()
            self.steps += 1
        return self.quiescent()

    def _outage(self, max_rounds: int) -> None:
        """The dead brokers' sessions expire; rounds run (with the periodic ISR checks)
        until the controllers, channels and watches are idle."""
        down = [b for b in self.brokers.values() if not b.alive]
        for broker in down:
            if broker.zk is not None and broker.zk.alive:
                broker.zk.close()
        for rounds in range(max_rounds):
            self.now_ms += self.config.step_ms
            moved = self.round()
            if rounds % 4 == 3:
                self.now_ms += self.config.tick_ms
                self._isr_expiration()
            self.steps += 1
            if not moved and not self.zk.pending_notifications and rounds >= 4:
                return

    # -- views ------------------------------------------------------------------------------

    def controller_id(self) -> int | None:
        return self.admin.get_controller()

    def controller_epoch(self) -> int:
        found = self.admin.get_controller_epoch()
        return 0 if found is None else found[0]

    def partition_state(self, tp: TopicPartition) -> LeaderAndIsr | None:
        found = self.admin.get_partition_state(tp)
        return None if found is None else found[0]

    def assignment(self, topic: str) -> dict[int, list[int]] | None:
        return self.admin.get_topic_assignment(topic)

    def topics(self) -> list[str]:
        return self.admin.get_all_topics()

    def active_controllers(self) -> list[int]:
        """Brokers whose controller core holds a context (more than one: a zombie)."""
        return [
            b
            for b, broker in self.brokers.items()
            if broker.alive and broker.shell is not None and broker.shell.core.is_active
        ]
