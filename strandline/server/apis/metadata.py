"""Metadata (3): brokers, controller, and each topic's partitions with leader and ISR."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.constants import uuid_zero

from strandline.errors import KafkaError
from strandline.group.partitioning import OFFSETS_TOPIC
from strandline.internal_topics import is_internal
from strandline.protocol.codec import RequestHeader
from strandline.protocol.messages import build, response_class
from strandline.security.acl import AclOperation, ResourceType
from strandline.server.apis.api_versions import NO_THROTTLE
from strandline.server.apis.groups import ensure_offsets_topic
from strandline.server.apis.registry import api
from strandline.server.authz import (
    AUTHORIZED_OPERATIONS_OMITTED,
    CLUSTER_NAME,
    authorized,
    authorized_names,
    authorized_operations,
    cluster_authorized,
)
from strandline.server.context import BrokerContext
from strandline.server.session import current_session
from strandline.transaction.partitioning import TRANSACTION_STATE_TOPIC

API_KEY = 3
log = logging.getLogger(__name__)


@api(API_KEY, 1, 12)
async def handle(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    v = header.api_version
    cache = ctx.metadata_cache
    broker_cls = response_class(API_KEY, v, "MetadataResponseBroker")
    topic_cls = response_class(API_KEY, v, "MetadataResponseTopic")
    partition_cls = response_class(API_KEY, v, "MetadataResponsePartition")

    unknown_ids: list[Any] = []
    from_id: dict[str, Any] = {}  # names looked up by id: a denied one stays unnamed
    by_id: list[Any] = []
    if request.topics is None:
        # Kafka lists only the topics the principal may describe, silently.
        names = sorted(
            authorized_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, cache.topics)
        )
        denied: set[str] = set()
    else:
        names = [t.name for t in request.topics if t.name is not None]
        # v10+ may name a topic by id alone (KIP-516); an id nobody knows is answered
        # UNKNOWN_TOPIC_ID, and no topic is auto-created for an id.
        by_id = [
            t.topic_id
            for t in request.topics
            if t.name is None and getattr(t, "topic_id", None) not in (None, uuid_zero)
        ]
        for topic_id in by_id:
            found = cache.topic_name(topic_id)
            if found is None:
                unknown_ids.append(topic_id)
            else:
                from_id[found] = topic_id
                if found not in names:
                    names.append(found)
        denied = set(names) - authorized_names(
            ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names
        )
    allow_auto_create = getattr(request, "allow_auto_topic_creation", True)

    auto_create = request.topics is not None and allow_auto_create and not by_id
    auto_create = auto_create and ctx.config.auto_create_topics_enable
    creation_errors = {
        name: await _auto_create(ctx, name)
        for name in names
        if auto_create
        and name not in denied
        and not cache.has_topic(name)
        and (
            cluster_authorized(ctx, AclOperation.CREATE)
            or authorized(ctx, AclOperation.CREATE, ResourceType.TOPIC, name)
        )
    }
    topics = []
    for name in names:
        if name in denied:
            topics.append(
                build(
                    topic_cls,
                    error_code=ErrorCode.topic_authorization_failed,
                    name=None if name in from_id else name,
                    topic_id=from_id.get(name, uuid_zero),
                    partitions=(),
                )
            )
            continue
        if not cache.has_topic(name):
            error = creation_errors.get(name, ErrorCode.unknown_topic_or_partition)
            topics.append(
                build(topic_cls, error_code=error, name=name, topic_id=uuid_zero, partitions=())
            )
            continue
        partitions = []
        for index, p in sorted(cache.topics[name].items()):
            leader_alive = p.leader in cache.brokers
            partitions.append(
                build(
                    partition_cls,
                    error_code=ErrorCode.none if leader_alive else ErrorCode.leader_not_available,
                    partition_index=index,
                    leader_id=p.leader if leader_alive else -1,
                    leader_epoch=p.leader_epoch,
                    replica_nodes=p.replicas,
                    isr_nodes=p.isr,
                    offline_replicas=tuple(r for r in p.replicas if r not in cache.brokers),
                )
            )
        topics.append(
            build(
                topic_cls,
                error_code=ErrorCode.none,
                name=name,
                topic_id=cache.topic_id(name) or uuid_zero,
                is_internal=is_internal(name),
                partitions=tuple(partitions),
            )
        )
    topics.extend(
        build(
            topic_cls,
            error_code=ErrorCode.unknown_topic_id,
            name=None,
            topic_id=topic_id,
            partitions=(),
        )
        for topic_id in unknown_ids
    )
    topics = _with_authorized_operations(ctx, request, topics)
    # Each broker's address on the listener this client connected to (Kafka leaves out
    # brokers without that listener).
    listener = current_session().listener
    addresses = {b.broker_id: b.address_for(listener) for b in cache.brokers.values()}
    brokers = tuple(
        build(broker_cls, node_id=b.broker_id, host=address[0], port=address[1], rack=b.rack)
        for b in sorted(cache.brokers.values(), key=lambda b: b.broker_id)
        if (address := addresses[b.broker_id]) is not None
    )
    return build(
        response_class(API_KEY, v, "MetadataResponse"),
        throttle_time=NO_THROTTLE,
        brokers=brokers,
        cluster_id=cache.cluster_id,
        controller_id=cache.controller_id,
        topics=tuple(topics),
        cluster_authorized_operations=(
            authorized_operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME)
            if getattr(request, "include_cluster_authorized_operations", False)
            else AUTHORIZED_OPERATIONS_OMITTED
        ),
    )


def _with_authorized_operations(ctx: BrokerContext, request: Any, topics: list[Any]) -> list[Any]:
    """KIP-430 (v8+): each topic's operations for the principal, when asked for, as
    Kafka does for every topic of the answer (errors included); else the 'omitted' marker
    kio already sets."""
    if not getattr(request, "include_topic_authorized_operations", False):
        return topics
    return [
        dataclasses.replace(
            t,
            topic_authorized_operations=authorized_operations(ctx, ResourceType.TOPIC, t.name),
        )
        if t.name is not None  # an unknown topic id names no resource
        else t
        for t in topics
    ]


async def _auto_create(ctx: BrokerContext, name: str) -> ErrorCode:
    """Create a missing topic with the broker defaults; like Kafka, answer
    LEADER_NOT_AVAILABLE this time and let the client's metadata retry find it.

    An internal topic is created as its coordinator creates it (its partition count,
    replication factor, compaction), never with the defaults of an ordinary topic:
    groups are mapped over offsets.topic.num.partitions partitions."""
    if name == OFFSETS_TOPIC:
        await ensure_offsets_topic(ctx)
        return ErrorCode.leader_not_available
    if name == TRANSACTION_STATE_TOPIC:
        ctx.txn_service.ensure_topic(ctx.topic_admin)
        return ErrorCode.leader_not_available
    try:
        await ctx.topic_admin.create_topic(
            name,
            num_partitions=ctx.config.num_partitions,
            replication_factor=ctx.config.default_replication_factor,
            configs={},
        )
    except KafkaError as e:
        if e.code == ErrorCode.topic_already_exists:
            return ErrorCode.leader_not_available
        log.warning("auto-create of topic %r failed: %s", name, e)
        return e.code
    return ErrorCode.leader_not_available
