"""What this broker knows of the cluster: live brokers, the controller, partition states.

Filled by UpdateMetadata from the controller (in a one-broker cluster the broker is
its own controller and updates it in-process). Handlers read it; only the controller
channel writes it.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
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
        self.topic_ids: dict[str, uuid.UUID] = {}

    def update_brokers(self, brokers: list[BrokerInfo], controller_id: int) -> None:
        self.brokers = {b.broker_id: b for b in brokers}
        self.controller_id = controller_id

    def update_partitions(
        self,
        partitions: list[PartitionMetadata],
        topic_ids: Mapping[str, uuid.UUID] | None = None,
    ) -> None:
        for topic, topic_id in (topic_ids or {}).items():
            known = self.topic_ids.get(topic)
            if known is not None and known != topic_id:
                # Deleted and created again while this broker missed the deletion: the
                # old topic's partitions (maybe more of them) must not linger.
                self.topics.pop(topic, None)
            self.topic_ids[topic] = topic_id
        for p in partitions:
            self.topics.setdefault(p.tp.topic, {})[p.tp.partition] = p

    def remove_topic(self, topic: str) -> None:
        self.topics.pop(topic, None)
        self.topic_ids.pop(topic, None)

    def topic_id(self, topic: str) -> uuid.UUID | None:
        """The topic's id (KIP-516) as the controller sent it; None when unknown."""
        return self.topic_ids.get(topic)

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        for name, known in self.topic_ids.items():
            if known == topic_id:
                return name
        return None

    def partition(self, tp: TopicPartition) -> PartitionMetadata | None:
        return self.topics.get(tp.topic, {}).get(tp.partition)

    def has_topic(self, topic: str) -> bool:
        return topic in self.topics

    def partition_count(self, topic: str) -> int:
        return len(self.topics.get(topic, {}))
