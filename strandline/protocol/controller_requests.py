"""Controller-to-broker requests as plain data: LeaderAndIsr, UpdateMetadata, StopReplica.

The controller decides these; the channel delivers them (in-process to its own
broker, over the wire as API keys 4-6 to others) and each broker applies them.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from strandline.types import TopicPartition


@dataclass(frozen=True)
class PartitionState:
    """One partition's entry of LeaderAndIsr / UpdateMetadata."""

    tp: TopicPartition
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int
    replicas: tuple[int, ...]
    is_new: bool = False
    offline_replicas: tuple[int, ...] = ()


@dataclass(frozen=True)
class Endpoint:
    """One listener of a broker, as advertised (`advertised.listeners`)."""

    listener: str
    host: str
    port: int
    security_protocol: str  # PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL


@dataclass(frozen=True)
class BrokerInfo:
    """A live broker as controller requests and the metadata cache carry it: `host` and
    `port` are its inter-broker listener; `endpoints` every advertised listener (empty
    means the one at host:port)."""

    broker_id: int
    host: str
    port: int
    rack: str | None
    endpoints: tuple[Endpoint, ...] = ()

    def address_for(self, listener: str) -> tuple[str, int] | None:
        """Where a client that connected on `listener` reaches this broker; None when
        the broker has no such listener (Kafka leaves it out of Metadata then)."""
        if not self.endpoints:
            return self.host, self.port
        for e in self.endpoints:
            if e.listener == listener:
                return e.host, e.port
        return None


@dataclass(frozen=True)
class LeaderAndIsrRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int  # the receiving broker's epoch the controller knows (KIP-380)
    partitions: tuple[PartitionState, ...]
    live_leaders: tuple[BrokerInfo, ...]
    # KIP-516: topic -> id for the topics of `partitions` (v5+ on the wire).
    topic_ids: Mapping[str, uuid.UUID] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class UpdateMetadataRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partitions: tuple[PartitionState, ...]
    live_brokers: tuple[BrokerInfo, ...]
    deleted_topics: tuple[str, ...] = ()
    topic_ids: Mapping[str, uuid.UUID] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class StopReplicaRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partitions: tuple[TopicPartition, ...]
    delete_partitions: bool
