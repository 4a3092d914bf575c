"""Authorization of the request being handled (Kafka's KafkaApis.authorize).

Handlers ask here; the principal and host come from the connection's session. With no
authorizer configured (`authorizer.class.name` empty) everything is allowed, as in
Kafka. A denial is logged once per (principal, operation, resource) at INFO, like
Kafka's kafka-authorizer.log, so a client retrying in a loop does not flood the log.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from strandline.errors import (
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    TopicAuthorizationFailedError,
)
from strandline.security.acl import SUPPORTED_OPERATIONS, AclOperation, ResourceType
from strandline.server.context import BrokerContext
from strandline.server.session import current_session

log = logging.getLogger("strandline.authorizer")

CLUSTER_NAME = "kafka-cluster"
_logged: set[tuple[str, AclOperation, ResourceType, str]] = set()
_LOGGED_MAX = 10_000


def authorized(
    ctx: BrokerContext, operation: AclOperation, resource_type: ResourceType, name: str
) -> bool:
    authorizer = ctx.authorizer
    if authorizer is None:
        return True
    session = current_session()
    if authorizer.authorize(session.principal, session.peer_host, operation, resource_type, name):
        return True
    key = (str(session.principal), operation, resource_type, name)
    if key not in _logged:
        if len(_logged) >= _LOGGED_MAX:
            _logged.clear()
        _logged.add(key)
        log.info(
            "Principal = %s is Denied operation = %s from host = %s on resource = %s:%s",
            session.principal,
            operation.name,
            session.peer_host,
            resource_type.name,
            name,
        )
    return False


# Kafka's "authorized operations were not asked for" (Integer.MIN_VALUE, KIP-430).
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


def authorized_operations(ctx: BrokerContext, resource_type: ResourceType, name: str) -> int:
    """KIP-430: the operations the principal may perform on the resource, as Kafka's
    bitfield (bit `op.value` set for each allowed one, Utils.to32BitField): all that the
    resource type supports without an authorizer. Denials are not logged: nothing was
    refused (Kafka asks with logIfDenied=false)."""
    supported = sorted(SUPPORTED_OPERATIONS[resource_type], key=lambda op: op.value)
    authorizer = ctx.authorizer
    if authorizer is None:
        allowed = supported
    else:
        session = current_session()
        allowed = [
            op
            for op in supported
            if authorizer.authorize(session.principal, session.peer_host, op, resource_type, name)
        ]
    bits = 0
    for op in allowed:
        bits |= 1 << op.value
    return bits


def cluster_authorized(ctx: BrokerContext, operation: AclOperation) -> bool:
    return authorized(ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def any_authorized(
    ctx: BrokerContext, operation: AclOperation, resource_type: ResourceType
) -> bool:
    """Whether some resource of the type allows the operation (Kafka's
    authorizeByResourceType), e.g. WRITE on any topic for an idempotent producer."""
    authorizer = ctx.authorizer
    if authorizer is None:
        return True
    session = current_session()
    return bool(
        authorizer.authorize_any(session.principal, session.peer_host, operation, resource_type)
    )


def require_topic(ctx: BrokerContext, operation: AclOperation, topic: str) -> None:
    if not authorized(ctx, operation, ResourceType.TOPIC, topic):
        raise TopicAuthorizationFailedError(f"not authorized to {operation.name} topic {topic}")


def require_group(ctx: BrokerContext, operation: AclOperation, group: str) -> None:
    if not authorized(ctx, operation, ResourceType.GROUP, group):
        raise GroupAuthorizationFailedError(f"not authorized to {operation.name} group {group}")


def require_cluster(ctx: BrokerContext, operation: AclOperation) -> None:
    if not cluster_authorized(ctx, operation):
        raise ClusterAuthorizationFailedError(f"not authorized to {operation.name} the cluster")


def authorized_names(
    ctx: BrokerContext, operation: AclOperation, resource_type: ResourceType, names: Iterable[str]
) -> set[str]:
    """The subset of `names` the session may `operation` (each checked once)."""
    return {n for n in set(names) if authorized(ctx, operation, resource_type, n)}
