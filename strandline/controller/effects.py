"""What the controller core asks its shell to do, and the events it answers to.

The controller's procedures (`procedures.py`) are generators: they yield an effect,
the shell carries it out (a ZooKeeper read or conditional write, a request to a
broker, a state-change log line) and sends the result back in. Events are what starts
a procedure: a ZooKeeper watch fired, a broker asked something, a timer ran out.
The real broker (`controller.py`) and the simulator (`strandline.sim.cluster_controller`)
are two shells around the same core.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from strandline.coordination.znodes import LeaderAndIsr
from strandline.protocol.controller_requests import (
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from strandline.types import TopicPartition

# -- events ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Startup:
    """The broker started: try to become controller."""


@dataclass(frozen=True)
class ControllerChange:
    """/controller changed (created, deleted, or another broker holds it)."""


@dataclass(frozen=True)
class BrokerChange:
    """/brokers/ids children changed."""


@dataclass(frozen=True)
class TopicChange:
    """/brokers/topics children changed."""


@dataclass(frozen=True)
class PartitionModifications:
    """/brokers/topics/<topic> changed (partitions added)."""

    topic: str


@dataclass(frozen=True)
class TopicDeletion:
    """/admin/delete_topics children changed."""


@dataclass(frozen=True)
class StopReplicaAnswered:
    """A broker answered the StopReplica(delete=true) of a topic deletion."""

    topic: str
    broker_id: int
    error: ErrorCode


@dataclass(frozen=True)
class IsrChangeNotification:
    """A leader wrote /isr_change_notification/isr_change_<n>."""


@dataclass(frozen=True)
class PreferredReplicaElection:
    """/admin/preferred_replica_election was written."""


@dataclass(frozen=True)
class PartitionReassignment:
    """/admin/reassign_partitions was written."""


@dataclass(frozen=True)
class AutoLeaderRebalance:
    """`leader.imbalance.check.interval.seconds` passed."""


@dataclass(frozen=True)
class ControlledShutdown:
    """A broker asks to stop (answer: the partitions it still leads)."""

    broker_id: int
    broker_epoch: int


@dataclass(frozen=True)
class AlterReassignments:
    """AlterPartitionReassignments (45); a None target cancels (answer: per partition)."""

    wanted: dict[TopicPartition, tuple[int, ...] | None] = field(hash=False)


@dataclass(frozen=True)
class ElectLeaders:
    """ElectLeaders (43); `tps` None means every partition (answer: per partition)."""

    tps: tuple[TopicPartition, ...] | None
    election_type: int


ControllerEvent = (
    Startup
    | ControllerChange
    | BrokerChange
    | TopicChange
    | PartitionModifications
    | TopicDeletion
    | StopReplicaAnswered
    | IsrChangeNotification
    | PreferredReplicaElection
    | PartitionReassignment
    | AutoLeaderRebalance
    | ControlledShutdown
    | AlterReassignments
    | ElectLeaders
)

# Events a broker that is not the controller still acts on.
ELECTION_EVENTS = (Startup, ControllerChange)

# -- ZooKeeper effects (carried out by `zk_effects.perform`) ----------------------------


@dataclass(frozen=True)
class ReadController:
    """-> the broker id in /controller, or None."""


@dataclass(frozen=True)
class ElectController:
    """Create /controller and bump /controller_epoch in one multi-op -> the new epoch,
    or None when another broker won."""

    broker_id: int


@dataclass(frozen=True)
class ResignController:
    broker_id: int


@dataclass(frozen=True)
class ReadLiveBrokers:
    """-> {broker id: BrokerRegistration}."""


@dataclass(frozen=True)
class ReadTopics:
    """-> the topic names under /brokers/topics."""


@dataclass(frozen=True)
class ReadAssignment:
    """-> {partition: replicas} of /brokers/topics/<topic>, or None."""

    topic: str


@dataclass(frozen=True)
class LoadTopic:
    """-> ({partition: replicas}, topic id) of /brokers/topics/<topic>, or None. A topic
    without an id gets a new one written to its znode first (fenced, conditional on the
    read), as Kafka's controller does for topics created before 2.8 or by old tools;
    the shell draws the id, so the core stays free of randomness."""

    topic: str


@dataclass(frozen=True)
class WriteAssignment:
    """/brokers/topics/<topic> := `assignment`, keeping `topic_id` (None: the one the
    znode holds)."""

    topic: str
    assignment: dict[int, list[int]] = field(hash=False)
    topic_id: uuid.UUID | None = None


@dataclass(frozen=True)
class ReadPartitionStates:
    """-> {tp: (LeaderAndIsr, zkVersion)} for the partitions that have a state znode."""

    tps: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class WritePartitionStates:
    """Create and conditionally update state znodes, every write fenced by our
    controller epoch -> {tp: new zkVersion or the exception that write met}."""

    creates: dict[TopicPartition, LeaderAndIsr] = field(hash=False)
    updates: dict[TopicPartition, tuple[LeaderAndIsr, int]] = field(hash=False)


@dataclass(frozen=True)
class ReadTopicsToDelete:
    """-> the topic names under /admin/delete_topics."""


@dataclass(frozen=True)
class DeleteTopicZnodes:
    topic: str


@dataclass(frozen=True)
class ReadIsrChangeNotifications:
    """-> {notification name: [tp]}."""


@dataclass(frozen=True)
class DeleteIsrChangeNotifications:
    names: tuple[str, ...]


@dataclass(frozen=True)
class ReadPreferredElection:
    """-> [tp] in /admin/preferred_replica_election."""


@dataclass(frozen=True)
class DeletePreferredElection:
    """Remove `handled` (acted on or answered) from /admin/preferred_replica_election;
    the znode goes once nothing is left in it (None: all of it)."""

    handled: tuple[TopicPartition, ...] | None = None


@dataclass(frozen=True)
class ReadReassignment:
    """-> {tp: target replicas} in /admin/reassign_partitions."""


@dataclass(frozen=True)
class WriteReassignment:
    """/admin/reassign_partitions := `reassignment` (deleted when empty)."""

    reassignment: dict[TopicPartition, list[int]] = field(hash=False)


ZkEffect = (
    ReadController
    | ElectController
    | ResignController
    | ReadLiveBrokers
    | ReadTopics
    | ReadAssignment
    | LoadTopic
    | WriteAssignment
    | ReadPartitionStates
    | WritePartitionStates
    | ReadTopicsToDelete
    | DeleteTopicZnodes
    | ReadIsrChangeNotifications
    | DeleteIsrChangeNotifications
    | ReadPreferredElection
    | DeletePreferredElection
    | ReadReassignment
    | WriteReassignment
)

# -- watches, brokers, log ----------------------------------------------------------------


@dataclass(frozen=True)
class WatchChildren:
    """Queue `event` whenever the children of `path` change."""

    path: str
    event: ControllerEvent


@dataclass(frozen=True)
class WatchData:
    """Queue `event` whenever `path` is written (while it exists), and once now:
    a procedure registered it to learn what the znode holds at this moment."""

    path: str
    event: ControllerEvent


@dataclass(frozen=True)
class SendLeaderAndIsr:
    broker_id: int
    request: LeaderAndIsrRequest


@dataclass(frozen=True)
class SendUpdateMetadata:
    broker_id: int
    request: UpdateMetadataRequest


@dataclass(frozen=True)
class SendStopReplica:
    """`deleting` names the topic whose deletion waits for the answer: the shell queues
    StopReplicaAnswered when it comes (never when the broker dies first)."""

    broker_id: int
    request: StopReplicaRequest
    deleting: str | None = None


@dataclass(frozen=True)
class ForgetBrokers:
    """Drop the request queues of brokers that died."""

    broker_ids: frozenset[int]


@dataclass(frozen=True)
class StateChange:
    """One line of state-change.log."""

    kind: str
    fields: dict[str, Any] = field(hash=False)


@dataclass(frozen=True)
class BecameController:
    """The failover procedure is done: start the leader-rebalance timer, tell the
    broker (the group coordinator's hooks)."""

    epoch: int


@dataclass(frozen=True)
class Resigned:
    """This broker is no longer the controller."""


Effect = (
    ZkEffect
    | WatchChildren
    | WatchData
    | SendLeaderAndIsr
    | SendUpdateMetadata
    | SendStopReplica
    | ForgetBrokers
    | StateChange
    | BecameController
    | Resigned
)
