"""What this broker knows of the cluster: live brokers, the controller, partition states.

Filled by UpdateMetadata from the controller (in a one-broker cluster the broker is
its own controller and updates it in-process). Handlers read it; only the controller
channel writes it.
"""

from __future__ import annotations

from dataclasses import dataclass

from strandline.protocol.controller_requests import BrokerInfo
from strandline.types import TopicPartition


@dataclass(frozen=True)
class PartitionMetadata:
    tp: TopicPartition
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()


class MetadataCache:
    def __init__(self, cluster_id: str) -> None:
        self.cluster_id = cluster_id
        self.controller_id = -1
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[str, dict[int, PartitionMetadata]] = {}

    def update_brokers(self, brokers: list[BrokerInfo], controller_id: int) -> None:
        self.brokers = {b.broker_id: b for b in brokers}
        self.controller_id = controller_id

    def update_partitions(self, partitions: list[PartitionMetadata]) -> None:
        for p in partitions:
            self.topics.setdefault(p.tp.topic, {})[p.tp.partition] = p

    def remove_topic(self, topic: str) -> None:
        self.topics.pop(topic, None)

    def partition(self, tp: TopicPartition) -> PartitionMetadata | None:
        return self.topics.get(tp.topic, {}).get(tp.partition)

    def has_topic(self, topic: str) -> bool:
        return topic in self.topics

    def partition_count(self, topic: str) -> int:
        return len(self.topics.get(topic, {}))
