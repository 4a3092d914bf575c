"""Conversion between the controller's plain requests and their Kafka wire classes.

The controller and the broker work with the plain dataclasses of
`strandline.protocol.controller_requests`; on the wire those travel as LeaderAndIsr (4),
StopReplica (5), UpdateMetadata (6) and ControlledShutdown (7), whose kio-style
classes live in `strandline.protocol.controller_schema`. This module maps one onto
the other in both directions, and defines the plain form of the responses (a
top-level error code plus per-partition error codes) and of ControlledShutdown, which
`requests.py` does not carry.

What the wire carries and the plain form does not (and how it is filled in):
- topic ids (LeaderAndIsr v5+, UpdateMetadata v7): the plain requests carry them in
  `topic_ids` (topic -> id); a topic without one goes out as the zero UUID, which
  Kafka treats as "no id", and a zero id read from the wire is left out. A
  LeaderAndIsr v5+ *response* names topics only by id, so decoding one needs
  `topic_names` (from `leader_and_isr_topic_ids` of the request).
- StopReplica v3 per-partition leader epochs: unless given, -2 (EpochDuringDelete)
  for a delete and -1 (NoEpoch) otherwise, the sentinels Kafka's controller sends and
  that make the broker skip its epoch check.
- UpdateMetadata deleted topics: Kafka marks a deleted partition with leader -2
  (LeaderDuringDelete). A deleted topic goes out as one topic state whose partitions
  (from `deleted_topic_partitions`, or none) all have that leader, and any topic state
  made only of such partitions comes back as a deleted topic.
- UpdateMetadata endpoints: one endpoint per broker, for `listener`.
- Fields the plain form lacks come back as their defaults: LeaderAndIsr has no
  offline replicas, UpdateMetadata no is_new, LeaderAndIsr live leaders no rack.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId, TopicName
from kio.static.constants import uuid_zero
from kio.static.primitive import i8, i16, i32, i64

from strandline.errors import InvalidRequestError
from strandline.protocol.controller_requests import (
    BrokerInfo,
    Endpoint,
    LeaderAndIsrRequest,
    PartitionState,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from strandline.protocol.controller_schema import (
    CONTROLLED_SHUTDOWN,
    LEADER_AND_ISR,
    STOP_REPLICA,
    UPDATE_METADATA,
    controlled_shutdown_v3,
    leader_and_isr_v4,
    leader_and_isr_v5,
    leader_and_isr_v6,
    stop_replica_v3,
    update_metadata_v7,
)
from strandline.types import TopicPartition

# Kafka's sentinels (kafka.api.LeaderAndIsr).
LEADER_DURING_DELETE = -2
EPOCH_DURING_DELETE = -2
NO_EPOCH = -1

# LeaderAndIsr v5+ `Type` (LeaderAndIsrRequest.Type in Kafka): the ZooKeeper controller
# leaves it UNKNOWN; FULL exists for the KRaft migration.
LEADER_AND_ISR_TYPE_UNKNOWN = 0
LEADER_AND_ISR_TYPE_INCREMENTAL = 1
LEADER_AND_ISR_TYPE_FULL = 2

# SecurityProtocol.PLAINTEXT's id in UpdateMetadata endpoints.
PLAINTEXT_SECURITY_PROTOCOL = 0
# Kafka's SecurityProtocol ids in UpdateMetadata endpoints.
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
SECURITY_PROTOCOL_NAMES = {v: k for k, v in SECURITY_PROTOCOL_IDS.items()}
DEFAULT_LISTENER = "PLAINTEXT"

# The version each API is sent at between Strandline brokers: LeaderAndIsr v5 is the
# first to carry topic ids (KIP-516), as Kafka 2.8+'s ZooKeeper controller sends it.
DEFAULT_VERSIONS: dict[int, int] = {
    LEADER_AND_ISR: 5,
    STOP_REPLICA: 3,
    UPDATE_METADATA: 7,
    CONTROLLED_SHUTDOWN: 3,
}

WireLeaderAndIsrRequest: TypeAlias = (
    leader_and_isr_v4.LeaderAndIsrRequest
    | leader_and_isr_v5.LeaderAndIsrRequest
    | leader_and_isr_v6.LeaderAndIsrRequest
)
WireLeaderAndIsrResponse: TypeAlias = (
    leader_and_isr_v4.LeaderAndIsrResponse
    | leader_and_isr_v5.LeaderAndIsrResponse
    | leader_and_isr_v6.LeaderAndIsrResponse
)


# -- plain forms the controller package does not define ---------------------------------


@dataclass(frozen=True)
class LeaderAndIsrResponse:
    error_code: ErrorCode
    partition_errors: Mapping[TopicPartition, ErrorCode] = field(default_factory=dict)


@dataclass(frozen=True)
class StopReplicaResponse:
    error_code: ErrorCode
    partition_errors: Mapping[TopicPartition, ErrorCode] = field(default_factory=dict)


@dataclass(frozen=True)
class UpdateMetadataResponse:
    error_code: ErrorCode


@dataclass(frozen=True)
class ControlledShutdownRequest:
    broker_id: int
    broker_epoch: int  # the shutting-down broker's own epoch (KIP-380)


@dataclass(frozen=True)
class ControlledShutdownResponse:
    error_code: ErrorCode
    remaining_partitions: tuple[TopicPartition, ...] = ()


def leader_and_isr_error_response(
    request: LeaderAndIsrRequest, error_code: ErrorCode
) -> LeaderAndIsrResponse:
    """The answer to a request refused as a whole: every partition gets the error too,
    as Kafka's LeaderAndIsrRequest.getErrorResponse does."""
    return LeaderAndIsrResponse(error_code, {p.tp: error_code for p in request.partitions})


def stop_replica_error_response(
    request: StopReplicaRequest, error_code: ErrorCode
) -> StopReplicaResponse:
    return StopReplicaResponse(error_code, dict.fromkeys(request.partitions, error_code))


# -- shared helpers -------------------------------------------------------------------------


def _broker_ids(ids: Iterable[int]) -> tuple[BrokerId, ...]:
    return tuple(BrokerId(i) for i in ids)


def _group_by_topic(tps: Iterable[TopicPartition]) -> dict[str, list[TopicPartition]]:
    """Partitions grouped by topic, topics in order of first appearance."""
    grouped: dict[str, list[TopicPartition]] = {}
    for tp in tps:
        grouped.setdefault(tp.topic, []).append(tp)
    return grouped


def _wire_topic_id(topic: str, topic_ids: Mapping[str, uuid.UUID] | None) -> uuid.UUID:
    return (topic_ids or {}).get(topic, uuid_zero)


def _plain_topic_ids(topic_states: Iterable[Any]) -> dict[str, uuid.UUID]:
    """topic -> id of the wire topic states that carry a real (non-zero) id (none in
    LeaderAndIsr v4)."""
    ids: dict[str, uuid.UUID] = {}
    for t in topic_states:
        topic_id = getattr(t, "topic_id", None)
        if topic_id is not None and topic_id != uuid_zero:
            ids[str(t.topic_name)] = topic_id
    return ids


def _topic_name_for_id(topic_id: uuid.UUID | None, topic_names: Mapping[uuid.UUID, str]) -> str:
    key = uuid_zero if topic_id is None else topic_id
    try:
        return topic_names[key]
    except KeyError:
        raise InvalidRequestError(
            f"LeaderAndIsr response names unknown topic id {key}; the request did not name it"
        ) from None


# -- LeaderAndIsr (4) -----------------------------------------------------------------------


def leader_and_isr_request_to_wire(
    request: LeaderAndIsrRequest,
    version: int = DEFAULT_VERSIONS[LEADER_AND_ISR],
    *,
    topic_ids: Mapping[str, uuid.UUID] | None = None,
) -> WireLeaderAndIsrRequest:
    """The wire form of `request` at `version` (4, 5 or 6); `topic_ids` overrides the
    request's own."""
    if topic_ids is None:
        topic_ids = request.topic_ids
    by_topic: dict[str, list[PartitionState]] = {}
    for state in request.partitions:
        by_topic.setdefault(state.tp.topic, []).append(state)
    if version == 4:
        return leader_and_isr_v4.LeaderAndIsrRequest(
            controller_id=BrokerId(request.controller_id),
            controller_epoch=i32(request.controller_epoch),
            broker_epoch=i64(request.broker_epoch),
            topic_states=tuple(
                leader_and_isr_v4.LeaderAndIsrTopicState(
                    topic_name=TopicName(topic),
                    partition_states=tuple(
                        leader_and_isr_v4.LeaderAndIsrPartitionState(
                            partition_index=i32(s.tp.partition),
                            controller_epoch=i32(s.controller_epoch),
                            leader=BrokerId(s.leader),
                            leader_epoch=i32(s.leader_epoch),
                            isr=_broker_ids(s.isr),
                            partition_epoch=i32(s.zk_version),
                            replicas=_broker_ids(s.replicas),
                            is_new=s.is_new,
                        )
                        for s in states
                    ),
                )
                for topic, states in by_topic.items()
            ),
            live_leaders=tuple(
                leader_and_isr_v4.LeaderAndIsrLiveLeader(
                    broker_id=BrokerId(b.broker_id), host_name=b.host, port=i32(b.port)
                )
                for b in request.live_leaders
            ),
        )
    if version == 5:
        return leader_and_isr_v5.LeaderAndIsrRequest(
            controller_id=BrokerId(request.controller_id),
            controller_epoch=i32(request.controller_epoch),
            broker_epoch=i64(request.broker_epoch),
            type=i8(LEADER_AND_ISR_TYPE_UNKNOWN),
            topic_states=tuple(
                leader_and_isr_v5.LeaderAndIsrTopicState(
                    topic_name=TopicName(topic),
                    topic_id=_wire_topic_id(topic, topic_ids),
                    partition_states=tuple(
                        leader_and_isr_v5.LeaderAndIsrPartitionState(
                            partition_index=i32(s.tp.partition),
                            controller_epoch=i32(s.controller_epoch),
                            leader=BrokerId(s.leader),
                            leader_epoch=i32(s.leader_epoch),
                            isr=_broker_ids(s.isr),
                            partition_epoch=i32(s.zk_version),
                            replicas=_broker_ids(s.replicas),
                            is_new=s.is_new,
                        )
                        for s in states
                    ),
                )
                for topic, states in by_topic.items()
            ),
            live_leaders=tuple(
                leader_and_isr_v5.LeaderAndIsrLiveLeader(
                    broker_id=BrokerId(b.broker_id), host_name=b.host, port=i32(b.port)
                )
                for b in request.live_leaders
            ),
        )
    if version == 6:
        return leader_and_isr_v6.LeaderAndIsrRequest(
            controller_id=BrokerId(request.controller_id),
            controller_epoch=i32(request.controller_epoch),
            broker_epoch=i64(request.broker_epoch),
            type=i8(LEADER_AND_ISR_TYPE_UNKNOWN),
            topic_states=tuple(
                leader_and_isr_v6.LeaderAndIsrTopicState(
                    topic_name=TopicName(topic),
                    topic_id=_wire_topic_id(topic, topic_ids),
                    partition_states=tuple(
                        leader_and_isr_v6.LeaderAndIsrPartitionState(
                            partition_index=i32(s.tp.partition),
                            controller_epoch=i32(s.controller_epoch),
                            leader=BrokerId(s.leader),
                            leader_epoch=i32(s.leader_epoch),
                            isr=_broker_ids(s.isr),
                            partition_epoch=i32(s.zk_version),
                            replicas=_broker_ids(s.replicas),
                            is_new=s.is_new,
                        )
                        for s in states
                    ),
                )
                for topic, states in by_topic.items()
            ),
            live_leaders=tuple(
                leader_and_isr_v6.LeaderAndIsrLiveLeader(
                    broker_id=BrokerId(b.broker_id), host_name=b.host, port=i32(b.port)
                )
                for b in request.live_leaders
            ),
        )
    raise LookupError(f"LeaderAndIsr v{version} is not defined (4-6 are)")


def leader_and_isr_request_from_wire(wire: WireLeaderAndIsrRequest) -> LeaderAndIsrRequest:
    return LeaderAndIsrRequest(
        controller_id=wire.controller_id,
        controller_epoch=wire.controller_epoch,
        broker_epoch=wire.broker_epoch,
        partitions=tuple(
            PartitionState(
                tp=TopicPartition(topic.topic_name, s.partition_index),
                controller_epoch=s.controller_epoch,
                leader=s.leader,
                leader_epoch=s.leader_epoch,
                isr=tuple(s.isr),
                zk_version=s.partition_epoch,
                replicas=tuple(s.replicas),
                is_new=s.is_new,
            )
            for topic in wire.topic_states
            for s in topic.partition_states
        ),
        live_leaders=tuple(
            BrokerInfo(broker_id=b.broker_id, host=b.host_name, port=b.port, rack=None)
            for b in wire.live_leaders
        ),
        topic_ids=_plain_topic_ids(wire.topic_states),
    )


def leader_and_isr_topic_ids(wire: WireLeaderAndIsrRequest) -> dict[uuid.UUID, str]:
    """topic id -> name as a v5+ request states them, to decode its response; {} for v4."""
    if isinstance(wire, leader_and_isr_v4.LeaderAndIsrRequest):
        return {}
    return {
        (uuid_zero if t.topic_id is None else t.topic_id): t.topic_name for t in wire.topic_states
    }


def leader_and_isr_response_to_wire(
    response: LeaderAndIsrResponse,
    version: int = DEFAULT_VERSIONS[LEADER_AND_ISR],
    *,
    topic_ids: Mapping[str, uuid.UUID] | None = None,
) -> WireLeaderAndIsrResponse:
    error_code = response.error_code
    if version == 4:
        return leader_and_isr_v4.LeaderAndIsrResponse(
            error_code=error_code,
            partition_errors=tuple(
                leader_and_isr_v4.LeaderAndIsrPartitionError(
                    topic_name=TopicName(tp.topic),
                    partition_index=i32(tp.partition),
                    error_code=code,
                )
                for tp, code in response.partition_errors.items()
            ),
        )
    grouped = _group_by_topic(response.partition_errors)
    if version == 5:
        return leader_and_isr_v5.LeaderAndIsrResponse(
            error_code=error_code,
            topics=tuple(
                leader_and_isr_v5.LeaderAndIsrTopicError(
                    topic_id=_wire_topic_id(topic, topic_ids),
                    partition_errors=tuple(
                        leader_and_isr_v5.LeaderAndIsrPartitionError(
                            partition_index=i32(tp.partition),
                            error_code=response.partition_errors[tp],
                        )
                        for tp in tps
                    ),
                )
                for topic, tps in grouped.items()
            ),
        )
    if version == 6:
        return leader_and_isr_v6.LeaderAndIsrResponse(
            error_code=error_code,
            topics=tuple(
                leader_and_isr_v6.LeaderAndIsrTopicError(
                    topic_id=_wire_topic_id(topic, topic_ids),
                    partition_errors=tuple(
                        leader_and_isr_v6.LeaderAndIsrPartitionError(
                            partition_index=i32(tp.partition),
                            error_code=response.partition_errors[tp],
                        )
                        for tp in tps
                    ),
                )
                for topic, tps in grouped.items()
            ),
        )
    raise LookupError(f"LeaderAndIsr v{version} is not defined (4-6 are)")


def leader_and_isr_response_from_wire(
    wire: WireLeaderAndIsrResponse, *, topic_names: Mapping[uuid.UUID, str] | None = None
) -> LeaderAndIsrResponse:
    """Plain response; a v5+ response needs `topic_names` (see `leader_and_isr_topic_ids`)."""
    if isinstance(wire, leader_and_isr_v4.LeaderAndIsrResponse):
        return LeaderAndIsrResponse(
            wire.error_code,
            {
                TopicPartition(p.topic_name, p.partition_index): p.error_code
                for p in wire.partition_errors
            },
        )
    names = topic_names or {}
    errors: dict[TopicPartition, ErrorCode] = {}
    for topic in wire.topics:
        name = _topic_name_for_id(topic.topic_id, names)
        for p in topic.partition_errors:
            errors[TopicPartition(name, p.partition_index)] = p.error_code
    return LeaderAndIsrResponse(wire.error_code, errors)


# -- StopReplica (5) ------------------------------------------------------------------------


def stop_replica_request_to_wire(
    request: StopReplicaRequest,
    *,
    leader_epochs: Mapping[TopicPartition, int] | None = None,
) -> stop_replica_v3.StopReplicaRequest:
    default_epoch = EPOCH_DURING_DELETE if request.delete_partitions else NO_EPOCH
    epochs = leader_epochs or {}
    return stop_replica_v3.StopReplicaRequest(
        controller_id=BrokerId(request.controller_id),
        controller_epoch=i32(request.controller_epoch),
        broker_epoch=i64(request.broker_epoch),
        topic_states=tuple(
            stop_replica_v3.StopReplicaTopicState(
                topic_name=TopicName(topic),
                partition_states=tuple(
                    stop_replica_v3.StopReplicaPartitionState(
                        partition_index=i32(tp.partition),
                        leader_epoch=i32(epochs.get(tp, default_epoch)),
                        delete_partition=request.delete_partitions,
                    )
                    for tp in tps
                ),
            )
            for topic, tps in _group_by_topic(request.partitions).items()
        ),
    )


def stop_replica_request_from_wire(
    wire: stop_replica_v3.StopReplicaRequest,
) -> tuple[StopReplicaRequest, ...]:
    """One plain request per delete flag present (v3 carries the flag per partition):
    the stop-only partitions first, then those to delete; () for an empty request."""
    split: dict[bool, list[TopicPartition]] = {False: [], True: []}
    for topic in wire.topic_states:
        for p in topic.partition_states:
            split[p.delete_partition].append(TopicPartition(topic.topic_name, p.partition_index))
    return tuple(
        StopReplicaRequest(
            controller_id=wire.controller_id,
            controller_epoch=wire.controller_epoch,
            broker_epoch=wire.broker_epoch,
            partitions=tuple(tps),
            delete_partitions=delete,
        )
        for delete, tps in split.items()
        if tps
    )


def stop_replica_leader_epochs(
    wire: stop_replica_v3.StopReplicaRequest,
) -> dict[TopicPartition, int]:
    """The leader epoch sent for each partition (-1/-2: do not check, KIP-570)."""
    return {
        TopicPartition(topic.topic_name, p.partition_index): p.leader_epoch
        for topic in wire.topic_states
        for p in topic.partition_states
    }


def stop_replica_response_to_wire(
    response: StopReplicaResponse,
) -> stop_replica_v3.StopReplicaResponse:
    return stop_replica_v3.StopReplicaResponse(
        error_code=response.error_code,
        partition_errors=tuple(
            stop_replica_v3.StopReplicaPartitionError(
                topic_name=TopicName(tp.topic), partition_index=i32(tp.partition), error_code=code
            )
            for tp, code in response.partition_errors.items()
        ),
    )


def stop_replica_response_from_wire(
    wire: stop_replica_v3.StopReplicaResponse,
) -> StopReplicaResponse:
    return StopReplicaResponse(
        wire.error_code,
        {
            TopicPartition(p.topic_name, p.partition_index): p.error_code
            for p in wire.partition_errors
        },
    )


# -- UpdateMetadata (6) ---------------------------------------------------------------------


def _update_metadata_state(s: PartitionState) -> update_metadata_v7.UpdateMetadataPartitionState:
    return update_metadata_v7.UpdateMetadataPartitionState(
        partition_index=i32(s.tp.partition),
        controller_epoch=i32(s.controller_epoch),
        leader=BrokerId(s.leader),
        leader_epoch=i32(s.leader_epoch),
        isr=_broker_ids(s.isr),
        zk_version=i32(s.zk_version),
        replicas=_broker_ids(s.replicas),
        offline_replicas=_broker_ids(s.offline_replicas),
    )


def update_metadata_request_to_wire(
    request: UpdateMetadataRequest,
    *,
    topic_ids: Mapping[str, uuid.UUID] | None = None,
    deleted_topic_partitions: Mapping[str, Sequence[int]] | None = None,
    listener: str = DEFAULT_LISTENER,
    security_protocol: int = PLAINTEXT_SECURITY_PROTOCOL,
) -> update_metadata_v7.UpdateMetadataRequest:
    if topic_ids is None:
        topic_ids = request.topic_ids
    by_topic: dict[str, list[PartitionState]] = {}
    for state in request.partitions:
        by_topic.setdefault(state.tp.topic, []).append(state)
    topic_states = [
        update_metadata_v7.UpdateMetadataTopicState(
            topic_name=TopicName(topic),
            topic_id=_wire_topic_id(topic, topic_ids),
            partition_states=tuple(_update_metadata_state(s) for s in states),
        )
        for topic, states in by_topic.items()
    ]
    deleted_partitions = deleted_topic_partitions or {}
    for topic in request.deleted_topics:
        topic_states.append(
            update_metadata_v7.UpdateMetadataTopicState(
                topic_name=TopicName(topic),
                topic_id=_wire_topic_id(topic, topic_ids),
                partition_states=tuple(
                    update_metadata_v7.UpdateMetadataPartitionState(
                        partition_index=i32(partition),
                        controller_epoch=i32(request.controller_epoch),
                        leader=BrokerId(LEADER_DURING_DELETE),
                        leader_epoch=i32(NO_EPOCH),
                        isr=(),
                        zk_version=i32(-1),
                        replicas=(),
                    )
                    for partition in deleted_partitions.get(topic, ())
                ),
            )
        )
    return update_metadata_v7.UpdateMetadataRequest(
        controller_id=BrokerId(request.controller_id),
        controller_epoch=i32(request.controller_epoch),
        broker_epoch=i64(request.broker_epoch),
        topic_states=tuple(topic_states),
        live_brokers=tuple(
            update_metadata_v7.UpdateMetadataBroker(
                id=BrokerId(b.broker_id),
                endpoints=tuple(
                    update_metadata_v7.UpdateMetadataEndpoint(
                        port=i32(e.port),
                        host=e.host,
                        listener=e.listener,
                        security_protocol=i16(SECURITY_PROTOCOL_IDS.get(e.security_protocol, 0)),
                    )
                    for e in b.endpoints
                )
                or (
                    update_metadata_v7.UpdateMetadataEndpoint(
                        port=i32(b.port),
                        host=b.host,
                        listener=listener,
                        security_protocol=i16(security_protocol),
                    ),
                ),
                rack=b.rack,
            )
            for b in request.live_brokers
        ),
    )


def _pick_endpoint(
    broker: update_metadata_v7.UpdateMetadataBroker, listener: str | None
) -> update_metadata_v7.UpdateMetadataEndpoint:
    for endpoint in broker.endpoints:
        if listener is None or endpoint.listener == listener:
            return endpoint
    raise InvalidRequestError(
        f"UpdateMetadata lists broker {broker.id} without an endpoint for listener {listener}"
    )


def update_metadata_request_from_wire(
    wire: update_metadata_v7.UpdateMetadataRequest, *, listener: str | None = None
) -> UpdateMetadataRequest:
    """Plain request; each broker's address is its endpoint for `listener` (None: first)."""
    partitions: list[PartitionState] = []
    deleted: list[str] = []
    for topic in wire.topic_states:
        live = [s for s in topic.partition_states if s.leader != LEADER_DURING_DELETE]
        if not live:
            deleted.append(topic.topic_name)
        partitions.extend(
            PartitionState(
                tp=TopicPartition(topic.topic_name, s.partition_index),
                controller_epoch=s.controller_epoch,
                leader=s.leader,
                leader_epoch=s.leader_epoch,
                isr=tuple(s.isr),
                zk_version=s.zk_version,
                replicas=tuple(s.replicas),
                offline_replicas=tuple(s.offline_replicas),
            )
            for s in live
        )
    brokers = []
    for b in wire.live_brokers:
        endpoint = _pick_endpoint(b, listener)
        brokers.append(
            BrokerInfo(
                broker_id=b.id,
                host=endpoint.host,
                port=endpoint.port,
                rack=b.rack,
                endpoints=tuple(
                    Endpoint(
                        e.listener,
                        e.host,
                        e.port,
                        SECURITY_PROTOCOL_NAMES.get(e.security_protocol, "PLAINTEXT"),
                    )
                    for e in b.endpoints
                ),
            )
        )
    return UpdateMetadataRequest(
        controller_id=wire.controller_id,
        controller_epoch=wire.controller_epoch,
        broker_epoch=wire.broker_epoch,
        partitions=tuple(partitions),
        live_brokers=tuple(brokers),
        deleted_topics=tuple(deleted),
        topic_ids={
            t: i for t, i in _plain_topic_ids(wire.topic_states).items() if t not in deleted
        },
    )


def update_metadata_response_to_wire(
    response: UpdateMetadataResponse,
) -> update_metadata_v7.UpdateMetadataResponse:
    return update_metadata_v7.UpdateMetadataResponse(error_code=response.error_code)


def update_metadata_response_from_wire(
    wire: update_metadata_v7.UpdateMetadataResponse,
) -> UpdateMetadataResponse:
    return UpdateMetadataResponse(wire.error_code)


# -- ControlledShutdown (7) -----------------------------------------------------------------


def controlled_shutdown_request_to_wire(
    request: ControlledShutdownRequest,
) -> controlled_shutdown_v3.ControlledShutdownRequest:
    return controlled_shutdown_v3.ControlledShutdownRequest(
        broker_id=BrokerId(request.broker_id), broker_epoch=i64(request.broker_epoch)
    )


def controlled_shutdown_request_from_wire(
    wire: controlled_shutdown_v3.ControlledShutdownRequest,
) -> ControlledShutdownRequest:
    return ControlledShutdownRequest(broker_id=wire.broker_id, broker_epoch=wire.broker_epoch)


def controlled_shutdown_response_to_wire(
    response: ControlledShutdownResponse,
) -> controlled_shutdown_v3.ControlledShutdownResponse:
    return controlled_shutdown_v3.ControlledShutdownResponse(
        error_code=response.error_code,
        remaining_partitions=tuple(
            controlled_shutdown_v3.RemainingPartition(
                topic_name=TopicName(tp.topic), partition_index=i32(tp.partition)
            )
            for tp in response.remaining_partitions
        ),
    )


def controlled_shutdown_response_from_wire(
    wire: controlled_shutdown_v3.ControlledShutdownResponse,
) -> ControlledShutdownResponse:
    return ControlledShutdownResponse(
        wire.error_code,
        tuple(TopicPartition(p.topic_name, p.partition_index) for p in wire.remaining_partitions),
    )
