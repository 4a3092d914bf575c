"""The controller's requests to brokers, as a broker receives them over the wire:
LeaderAndIsr (4), StopReplica (5), UpdateMetadata (6); and ControlledShutdown (7),
which a broker sends to the controller before it stops."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from strandline.errors import KafkaError
from strandline.protocol import controller_messages as cm
from strandline.protocol.codec import RequestHeader
from strandline.protocol.controller_schema import (
    CONTROLLED_SHUTDOWN,
    LEADER_AND_ISR,
    STOP_REPLICA,
    SUPPORTED_VERSIONS,
    UPDATE_METADATA,
)
from strandline.security.acl import AclOperation
from strandline.server.apis.registry import api
from strandline.server.authz import cluster_authorized, require_cluster
from strandline.server.context import BrokerContext


@api(LEADER_AND_ISR, *SUPPORTED_VERSIONS[LEADER_AND_ISR])
async def leader_and_isr(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    plain = cm.leader_and_isr_request_from_wire(request)
    try:
        require_cluster(ctx, AclOperation.CLUSTER_ACTION)
        errors = await ctx.apply_controller_request(plain)
        assert isinstance(errors, dict)  # LeaderAndIsr answers per-partition errors
        response = cm.LeaderAndIsrResponse(ErrorCode.none, errors)
    except KafkaError as e:
        response = cm.leader_and_isr_error_response(plain, e.code)
    topic_ids = (
        {name: tid for tid, name in cm.leader_and_isr_topic_ids(request).items()}
        if header.api_version >= 5
        else None
    )
    return cm.leader_and_isr_response_to_wire(response, header.api_version, topic_ids=topic_ids)


@api(STOP_REPLICA, *SUPPORTED_VERSIONS[STOP_REPLICA])
async def stop_replica(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    errors: dict[Any, ErrorCode] = {}
    top = ErrorCode.none
    plains = cm.stop_replica_request_from_wire(request)
    # Authorized as a whole, before anything else (KafkaApis): a request naming no
    # partition from a principal without ClusterAction is refused too.
    if not cluster_authorized(ctx, AclOperation.CLUSTER_ACTION):
        refused = ErrorCode.cluster_authorization_failed
        for plain in plains:
            errors.update(cm.stop_replica_error_response(plain, refused).partition_errors)
        return cm.stop_replica_response_to_wire(cm.StopReplicaResponse(refused, errors))
    for plain in plains:
        try:
            await ctx.apply_controller_request(plain)
            errors.update(dict.fromkeys(plain.partitions, ErrorCode.none))
        except KafkaError as e:
            top = e.code
            errors.update(cm.stop_replica_error_response(plain, e.code).partition_errors)
    return cm.stop_replica_response_to_wire(cm.StopReplicaResponse(top, errors))


@api(UPDATE_METADATA, *SUPPORTED_VERSIONS[UPDATE_METADATA])
async def update_metadata(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    try:
        require_cluster(ctx, AclOperation.CLUSTER_ACTION)
        await ctx.apply_controller_request(cm.update_metadata_request_from_wire(request))
        code = ErrorCode.none
    except KafkaError as e:
        code = e.code
    return cm.update_metadata_response_to_wire(cm.UpdateMetadataResponse(code))


@api(CONTROLLED_SHUTDOWN, *SUPPORTED_VERSIONS[CONTROLLED_SHUTDOWN])
async def controlled_shutdown(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    plain = cm.controlled_shutdown_request_from_wire(request)
    if not cluster_authorized(ctx, AclOperation.CLUSTER_ACTION):
        response = cm.ControlledShutdownResponse(ErrorCode.cluster_authorization_failed)
    elif not ctx.controller.is_active:
        response = cm.ControlledShutdownResponse(ErrorCode.not_controller)
    else:
        try:
            remaining = await ctx.controller.controlled_shutdown(
                plain.broker_id, plain.broker_epoch
            )
            response = cm.ControlledShutdownResponse(ErrorCode.none, tuple(remaining))
        except KafkaError as e:
            response = cm.ControlledShutdownResponse(e.code)
    return cm.controlled_shutdown_response_to_wire(response)
