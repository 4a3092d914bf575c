"""The whole-cluster simulator's state: the brokers, their replicas and controller
shells, the request channels, the simulated ZooKeeper, and the books the invariants
read (docs/replication.md).

`ClusterState` is what every part of the simulator acts on: the broker side
(`cluster_broker`), the controller shell (`cluster_controller`), the data path
(`cluster_datapath`), process lifecycles (`cluster_lifecycle`), the admin tools
(`cluster_admin`), driven by `cluster.ClusterSim`. No rule lives here.

Everything is deterministic for a given schedule: no clock, no randomness, no hash
ordering of strings. The books the invariants need (acks, leaders per epoch, state-change
log, topic incarnations) are kept beside the model; `cluster_invariants` judges them.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from strandline.controller import effects as fx
from strandline.controller.procedures import ControllerCore, Procedure
from strandline.protocol.controller_requests import (
    LeaderAndIsrRequest,
    PartitionState,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from strandline.replication.truncation import TruncationMode
from strandline.sim.simulator import Replica
from strandline.sim.zk_client import SimZkClient
from strandline.sim.zookeeper import SimZooKeeper
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


class ClusterState:
    """The whole cluster's state, shared by the parts of the simulator that act on it."""

    def __init__(self, config: ClusterConfig, record: bool) -> None:
        self.config = config
        self.record = record
        self.now_ms = 0
        self.zk = SimZooKeeper(now_ms=lambda: self.now_ms)
        # The simulator's own session: the admin tools' and the books' reads.
        self.admin = SimZkClient(self.zk, self.zk.new_session())
        self.brokers: dict[int, SimBroker] = {b: SimBroker(b) for b in config.brokers}
        self.channels: dict[tuple[int, int], Channel] = {}
        # topic -> how many times it has been created (its current incarnation).
        self.incarnations: dict[str, int] = {}
        self.books = Books()
        self.notes: list[str] = []

    def note(self, text: str) -> None:
        if self.record:
            self.notes.append(text)

    def unclean(self, _topic: str) -> bool:
        return self.config.unclean_leader_election

    def incarnation_of(self, topic: str) -> int:
        return self.incarnations.get(topic, 0)

    def log(self, who: int, kind: str, **fields: Any) -> None:
        self.state_change(who, kind, fields)

    def state_change(self, who: int, kind: str, fields: dict[str, Any]) -> None:
        """One line of the (cluster-wide, merged) state-change log."""
        self.books.state_changes.append(StateChangeLine(self.now_ms, who, kind, fields))
        if kind == "unclean-leader-election":
            tp = fields["tp"]
            self.books.unclean.add((tp.topic, self.incarnation_of(tp.topic), tp.partition))
        if self.record:
            shown = ", ".join(f"{k}={v}" for k, v in fields.items())
            self.notes.append(f"[{who}] {kind} {shown}")

    def channel(self, controller_id: int, broker_id: int) -> Channel:
        """The request channel from a controller to a broker, opened on first use."""
        key = (controller_id, broker_id)
        channel = self.channels.get(key)
        if channel is None:
            channel = self.channels[key] = Channel()
        return channel
