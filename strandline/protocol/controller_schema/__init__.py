"""Wire classes for the controller-to-broker APIs that kio 0.6.5 lacks (API keys 4-7).

kio carries Kafka 4.x schemas, from which the ZooKeeper-era controller RPCs were
removed. These modules define them in exactly the shape of kio's generated classes
(frozen, slotted, kw_only dataclasses; ``__type__``, ``__version__``, ``__flexible__``,
``__api_key__``, ``__header_schema__`` class variables; ``kafka_type`` field metadata)
so that ``kio.serial.entity_reader`` / ``entity_writer`` read and write them.

Source of the field layouts: Kafka 3.x
``clients/src/main/resources/common/message/{LeaderAndIsr,StopReplica,UpdateMetadata}
{Request,Response}.json`` as stored at commit
``05780be62c002b063ec0425b57f73be71a7e5681`` and
``ControlledShutdown{Request,Response}.json`` at commit
``eb37e781f5b077509a51c0f8defb30100802b5ea`` of the ``muxun-research/kafka`` fork of
apache/kafka (Kafka 3.4+ schemas: LeaderAndIsr 0-7 flexible 4+, StopReplica 0-4
flexible 2+, UpdateMetadata 0-8 flexible 6+, ControlledShutdown 0-3 flexible 3+). The
LeaderAndIsr v4/v5 layout was cross-checked against apache/kafka commit
``21449ce80b5f09d7facd6bc9ac91619564e31f37``.

Versions defined: LeaderAndIsr 4, 5, 6; StopReplica 3; UpdateMetadata 7;
ControlledShutdown 3. All are flexible, so requests use request header v2 and
responses response header v1. The versions that add KIP-866 ``isKRaftController``
(LeaderAndIsr 7, StopReplica 4, UpdateMetadata 8) are not defined: a ZooKeeper
controller has no use for them.
"""

from __future__ import annotations

from typing import Any

from strandline.protocol.controller_schema import (
    controlled_shutdown_v3,
    leader_and_isr_v4,
    leader_and_isr_v5,
    leader_and_isr_v6,
    stop_replica_v3,
    update_metadata_v7,
)

LEADER_AND_ISR = 4
STOP_REPLICA = 5
UPDATE_METADATA = 6
CONTROLLED_SHUTDOWN = 7

_REQUESTS: dict[tuple[int, int], type[Any]] = {
    (LEADER_AND_ISR, 4): leader_and_isr_v4.LeaderAndIsrRequest,
    (LEADER_AND_ISR, 5): leader_and_isr_v5.LeaderAndIsrRequest,
    (LEADER_AND_ISR, 6): leader_and_isr_v6.LeaderAndIsrRequest,
    (STOP_REPLICA, 3): stop_replica_v3.StopReplicaRequest,
    (UPDATE_METADATA, 7): update_metadata_v7.UpdateMetadataRequest,
    (CONTROLLED_SHUTDOWN, 3): controlled_shutdown_v3.ControlledShutdownRequest,
}

_RESPONSES: dict[tuple[int, int], type[Any]] = {
    (LEADER_AND_ISR, 4): leader_and_isr_v4.LeaderAndIsrResponse,
    (LEADER_AND_ISR, 5): leader_and_isr_v5.LeaderAndIsrResponse,
    (LEADER_AND_ISR, 6): leader_and_isr_v6.LeaderAndIsrResponse,
    (STOP_REPLICA, 3): stop_replica_v3.StopReplicaResponse,
    (UPDATE_METADATA, 7): update_metadata_v7.UpdateMetadataResponse,
    (CONTROLLED_SHUTDOWN, 3): controlled_shutdown_v3.ControlledShutdownResponse,
}

# (min, max) per API key, for ApiVersions between our own brokers.
SUPPORTED_VERSIONS: dict[int, tuple[int, int]] = {
    LEADER_AND_ISR: (4, 6),
    STOP_REPLICA: (3, 3),
    UPDATE_METADATA: (7, 7),
    CONTROLLED_SHUTDOWN: (3, 3),
}


def request_type(api_key: int, version: int) -> type[Any]:
    """The request class for (api_key, version); LookupError when not defined here."""
    try:
        return _REQUESTS[(api_key, version)]
    except KeyError:
        raise LookupError(f"no controller schema for api_key={api_key} version={version}") from None


def response_type(api_key: int, version: int) -> type[Any]:
    """The response class for (api_key, version); LookupError when not defined here."""
    try:
        return _RESPONSES[(api_key, version)]
    except KeyError:
        raise LookupError(f"no controller schema for api_key={api_key} version={version}") from None


__all__ = [
    "CONTROLLED_SHUTDOWN",
    "LEADER_AND_ISR",
    "STOP_REPLICA",
    "SUPPORTED_VERSIONS",
    "UPDATE_METADATA",
    "controlled_shutdown_v3",
    "leader_and_isr_v4",
    "leader_and_isr_v5",
    "leader_and_isr_v6",
    "request_type",
    "response_type",
    "stop_replica_v3",
    "update_metadata_v7",
]
