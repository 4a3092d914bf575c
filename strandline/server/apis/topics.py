"""CreateTopics (19), DeleteTopics (20), CreatePartitions (37)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.constants import uuid_zero

from strandline.errors import KafkaError
from strandline.protocol.codec import RequestHeader
from strandline.protocol.messages import build, response_class
from strandline.security.acl import AclOperation
from strandline.server.apis.api_versions import NO_THROTTLE
from strandline.server.apis.registry import api
from strandline.server.authz import cluster_authorized, require_topic
from strandline.server.context import BrokerContext

CREATE_TOPICS = 19
DELETE_TOPICS = 20
CREATE_PARTITIONS = 37


@api(CREATE_TOPICS, 2, 7)
async def create_topics(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    v = header.api_version
    result_cls = response_class(CREATE_TOPICS, v, "CreatableTopicResult")
    timeout_s = max(request.timeout.total_seconds(), 0.0)
    results = []
    seen: set[str] = set()
    for topic in request.topics:
        error, message = ErrorCode.none, None
        num_partitions, rf, topic_id = -1, -1, uuid_zero
        if topic.name in seen:
            error, message = ErrorCode.invalid_request, f"topic {topic.name!r} is listed twice"
        else:
            seen.add(topic.name)
            try:
                if not cluster_authorized(ctx, AclOperation.CREATE):
                    require_topic(ctx, AclOperation.CREATE, topic.name)
                assignment = (
                    {a.partition_index: list(a.broker_ids) for a in topic.assignments}
                    if topic.assignments
                    else None
                )
                created = await ctx.topic_admin.create_topic(
                    topic.name,
                    topic.num_partitions,
                    topic.replication_factor,
                    {c.name: c.value for c in topic.configs if c.value is not None},
                    assignment=assignment,
                    validate_only=request.validate_only,
                    timeout_s=timeout_s,
                )
                num_partitions, rf = created.num_partitions, created.replication_factor
                topic_id = created.topic_id or uuid_zero
            except KafkaError as e:
                error, message = e.code, str(e)
        results.append(
            build(
                result_cls,
                name=topic.name,
                topic_id=topic_id,
                error_code=error,
                error_message=message,
                num_partitions=num_partitions,
                replication_factor=rf,
                configs=None,
            )
        )
    return build(
        response_class(CREATE_TOPICS, v, "CreateTopicsResponse"),
        throttle_time=NO_THROTTLE,
        topics=tuple(results),
    )


@api(DELETE_TOPICS, 1, 5)
async def delete_topics(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    v = header.api_version
    result_cls = response_class(DELETE_TOPICS, v, "DeletableTopicResult")
    timeout_s = max(request.timeout.total_seconds(), 0.0)
    results = []
    for name in request.topic_names:
        error, message = ErrorCode.none, None
        try:
            require_topic(ctx, AclOperation.DELETE, name)
            await ctx.topic_admin.delete_topic(name, timeout_s)
        except KafkaError as e:
            error, message = e.code, str(e)
        results.append(build(result_cls, name=name, error_code=error, error_message=message))
    return build(
        response_class(DELETE_TOPICS, v, "DeleteTopicsResponse"),
        throttle_time=NO_THROTTLE,
        responses=tuple(results),
    )


@api(CREATE_PARTITIONS, 0, 3)
async def create_partitions(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    v = header.api_version
    result_cls = response_class(CREATE_PARTITIONS, v, "CreatePartitionsTopicResult")
    timeout_s = max(request.timeout.total_seconds(), 0.0)
    results = []
    for topic in request.topics:
        error, message = ErrorCode.none, None
        try:
            require_topic(ctx, AclOperation.ALTER, topic.name)
            await ctx.topic_admin.create_partitions(
                topic.name,
                topic.count,
                [list(a.broker_ids) for a in topic.assignments] if topic.assignments else None,
                request.validate_only,
                timeout_s,
            )
        except KafkaError as e:
            error, message = e.code, str(e)
        results.append(build(result_cls, name=topic.name, error_code=error, error_message=message))
    return build(
        response_class(CREATE_PARTITIONS, v, "CreatePartitionsResponse"),
        throttle_time=NO_THROTTLE,
        results=tuple(results),
    )
