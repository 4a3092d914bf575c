"""DescribeCluster (60): the cluster id, the controller and the live brokers.

Admin clients (librdkafka's `describe_cluster`, Kafka's AdminClient) ask this instead of
Metadata. In the ZooKeeper design every broker endpoint is a broker, none is fenced,
and the controller is one of them. The cluster's authorized operations (KIP-430) are
computed when asked for.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from strandline.protocol.codec import RequestHeader
from strandline.protocol.messages import build, response_class
from strandline.security.acl import ResourceType
from strandline.server.apis.api_versions import NO_THROTTLE
from strandline.server.apis.registry import api
from strandline.server.authz import (
    AUTHORIZED_OPERATIONS_OMITTED,
    CLUSTER_NAME,
    authorized_operations,
)
from strandline.server.context import BrokerContext
from strandline.server.session import current_session

API_KEY = 60
ENDPOINT_TYPE_BROKER = 1


@api(API_KEY, 0, 2)
async def handle(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    v = header.api_version
    cache = ctx.metadata_cache
    error, message = ErrorCode.none, None
    endpoint_type = getattr(request, "endpoint_type", ENDPOINT_TYPE_BROKER)
    brokers: tuple[Any, ...] = ()
    if endpoint_type != ENDPOINT_TYPE_BROKER:
        # KRaft controllers (endpoint type 2) do not exist in the ZooKeeper design.
        error = ErrorCode.unsupported_endpoint_type
        message = f"endpoint type {endpoint_type} is not served; brokers are type 1"
    else:
        broker_cls = response_class(API_KEY, v, "DescribeClusterBroker")
        listener = current_session().listener
        brokers = tuple(
            build(
                broker_cls,
                broker_id=b.broker_id,
                host=address[0],
                port=address[1],
                rack=b.rack,
                is_fenced=False,
            )
            for b in sorted(cache.brokers.values(), key=lambda b: b.broker_id)
            if (address := b.address_for(listener)) is not None
        )
    return build(
        response_class(API_KEY, v, "DescribeClusterResponse"),
        throttle_time=NO_THROTTLE,
        error_code=error,
        error_message=message,
        endpoint_type=endpoint_type,
        cluster_id=cache.cluster_id,
        controller_id=cache.controller_id,
        brokers=brokers,
        cluster_authorized_operations=(
            authorized_operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME)
            if request.include_cluster_authorized_operations
            else AUTHORIZED_OPERATIONS_OMITTED
        ),
    )
