"""Small value types shared by every layer."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import NamedTuple


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def dir_name(self) -> str:
        """The partition's directory name inside a log dir, as Kafka names it."""
        return f"{self.topic}-{self.partition}"


# Kafka's sentinels.
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1
NO_TIMESTAMP = -1
CONSUMER_REPLICA_ID = -1
# Kafka's DebuggingConsumerId: may read any replica, leader or not, up to its own HW
# (kafka-replica-verification.sh fetches every replica this way).
DEBUGGING_REPLICA_ID = -2
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3  # ListOffsets v7+ (KIP-734): the record with the largest timestamp
LATEST_TIMESTAMP = -1


@dataclass(frozen=True)
class PartitionInfo:
    """A partition's leader, replicas and ISR as a tool reads them, from a Metadata answer
    or ZooKeeper's state znode: the one place its health questions are answered (the
    broker's own view is `replication.Partition`, the controller's `LeaderAndIsr`).

    `offline` is decided against the live brokers when the info is built: metadata can
    name a dead leader until the controller has moved leadership, and Kafka's tools count
    that partition as unavailable."""

    tp: TopicPartition
    leader: int | None  # -1: no leader; None: no state read (the state znode is missing)
    leader_epoch: int | None  # None: not read (a Metadata answer without it)
    replicas: list[int]
    isr: list[int]
    offline: bool

    @classmethod
    def of(
        cls,
        tp: TopicPartition,
        leader: int | None,
        replicas: Sequence[int],
        isr: Sequence[int],
        live: Collection[int],
        leader_epoch: int | None = None,
    ) -> PartitionInfo:
        offline = leader is None or leader < 0 or leader not in live
        return cls(tp, leader, leader_epoch, list(replicas), list(isr), offline)

    @property
    def topic(self) -> str:
        return self.tp.topic

    @property
    def partition(self) -> int:
        return self.tp.partition

    @property
    def has_leader(self) -> bool:
        return self.leader is not None and self.leader >= 0

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)

    def under_min_isr(self, min_isr: int) -> bool:
        return len(self.isr) < min_isr
