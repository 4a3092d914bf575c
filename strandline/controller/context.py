"""ControllerContext: the controller's in-memory picture of the cluster (Kafka's ControllerContext).

Initialised from ZooKeeper when a broker becomes controller, then kept current by
the controller's own decisions and by ZooKeeper watch events. Pure data: decisions
over it live in `decisions.py`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from strandline.coordination.znodes import BrokerRegistration, LeaderAndIsr
from strandline.types import TopicPartition


@dataclass(frozen=True)
class Reassignment:
    """One partition's reassignment in progress: OAR -> RAR."""

    tp: TopicPartition
    original: tuple[int, ...]  # OAR
    target: tuple[int, ...]  # RAR

    @property
    def adding(self) -> tuple[int, ...]:
        """RAR - OAR: the replicas being created."""
        return tuple(r for r in self.target if r not in self.original)

    @property
    def removing(self) -> tuple[int, ...]:
        """OAR - RAR: the replicas to stop and delete at the end."""
        return tuple(r for r in self.original if r not in self.target)

    @property
    def all_replicas(self) -> tuple[int, ...]:
        """AR while the reassignment runs: OAR + (RAR - OAR), original order first so
        the preferred replica does not change until the move completes."""
        return self.original + self.adding


NO_LEADER = -1


@dataclass
class ControllerContext:
    broker_id: int
    epoch: int = 0
    epoch_zk_version: int = -1
    live_brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    assignments: dict[TopicPartition, tuple[int, ...]] = field(default_factory=dict)
    partition_states: dict[TopicPartition, LeaderAndIsr] = field(default_factory=dict)
    topics_to_delete: set[str] = field(default_factory=set)
    # KIP-516: every live topic's id, from its znode (the controller assigns one to a
    # topic that has none when it loads it).
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)
    # Topics being deleted (Kafka's TopicDeletionManager): per topic and broker, the
    # replicas whose StopReplica(delete=true) has not been answered with success yet.
    # A deleted topic's partitions leave `assignments` and `partition_states` at once,
    # so no election, LeaderAndIsr or UpdateMetadata brings them back.
    replicas_to_delete: dict[str, dict[int, tuple[TopicPartition, ...]]] = field(
        default_factory=dict
    )
    shutting_down_brokers: set[int] = field(default_factory=set)
    # Reassignments in progress (Kafka's partitionsBeingReassigned); rebuilt from
    # /admin/reassign_partitions after a failover.
    reassignments: dict[TopicPartition, Reassignment] = field(default_factory=dict)
    # (topic, broker) whose StopReplica(delete=true) awaits its answer.
    deletions_in_flight: set[tuple[str, int]] = field(default_factory=set)

    @property
    def live_broker_ids(self) -> set[int]:
        return set(self.live_brokers) - self.shutting_down_brokers

    def topics(self) -> set[str]:
        return {tp.topic for tp in self.assignments}

    def topic_ids_of(self, tps: Iterable[TopicPartition]) -> dict[str, uuid.UUID]:
        """topic -> id for the topics of `tps` that have one (requests carry these)."""
        return {tp.topic: self.topic_ids[tp.topic] for tp in tps if tp.topic in self.topic_ids}

    def partitions_of(self, topic: str) -> list[TopicPartition]:
        return sorted(tp for tp in self.assignments if tp.topic == topic)

    def partitions_on_broker(self, broker_id: int) -> list[TopicPartition]:
        return sorted(tp for tp, replicas in self.assignments.items() if broker_id in replicas)

    def partitions_led_by(self, broker_id: int) -> list[TopicPartition]:
        return sorted(tp for tp, s in self.partition_states.items() if s.leader == broker_id)

    def is_online(self, tp: TopicPartition) -> bool:
        state = self.partition_states.get(tp)
        return state is not None and state.leader in self.live_brokers

    def begin_topic_deletion(self, topic: str) -> dict[int, tuple[TopicPartition, ...]]:
        """Take `topic` out of the live assignment; returns its replicas per broker."""
        pending = self.replicas_to_delete.get(topic)
        if pending is not None:
            return pending
        per_broker: dict[int, list[TopicPartition]] = {}
        for tp in self.partitions_of(topic):
            for broker_id in self.assignments[tp]:
                per_broker.setdefault(broker_id, []).append(tp)
        self.remove_topic(topic)
        self.topics_to_delete.add(topic)
        pending = {b: tuple(tps) for b, tps in sorted(per_broker.items())}
        self.replicas_to_delete[topic] = pending
        return pending

    def replica_deleted(self, topic: str, broker_id: int) -> bool:
        """A broker confirmed its replicas of `topic` gone; True once none is left."""
        pending = self.replicas_to_delete.get(topic)
        if pending is None:
            return False
        pending.pop(broker_id, None)
        return not pending

    def finish_topic_deletion(self, topic: str) -> None:
        self.replicas_to_delete.pop(topic, None)
        self.topics_to_delete.discard(topic)

    def remove_topic(self, topic: str) -> None:
        for tp in self.partitions_of(topic):
            self.assignments.pop(tp, None)
            self.partition_states.pop(tp, None)
        self.topic_ids.pop(topic, None)
        self.topics_to_delete.discard(topic)
