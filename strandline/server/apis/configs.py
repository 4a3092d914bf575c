"""DescribeConfigs (32), AlterConfigs (33) and IncrementalAlterConfigs (44), for
topics and brokers.

A BROKER resource names a broker id or, empty, the cluster-wide default; as in Kafka,
a request for a broker id must reach that broker (clients route it there), and one for
another id is INVALID_REQUEST. Unknown or read-only config names and bad values are
INVALID_CONFIG, per resource.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from kio.schema.errors import ErrorCode

from strandline.errors import KafkaError
from strandline.protocol.codec import RequestHeader
from strandline.protocol.messages import build, response_class
from strandline.security.acl import AclOperation
from strandline.server.apis.api_versions import NO_THROTTLE
from strandline.server.apis.registry import api
from strandline.server.authz import require_cluster, require_topic
from strandline.server.context import BrokerContext
from strandline.server.topic_configs import (
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    AlterOp,
    ConfigEntry,
)

DESCRIBE_CONFIGS = 32
ALTER_CONFIGS = 33
INCREMENTAL_ALTER_CONFIGS = 44


@api(DESCRIBE_CONFIGS, 1, 4)
async def describe_configs(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    v = header.api_version
    result_cls = response_class(DESCRIBE_CONFIGS, v, "DescribeConfigsResult")
    entry_cls = response_class(DESCRIBE_CONFIGS, v, "DescribeConfigsResourceResult")
    synonym_cls = response_class(DESCRIBE_CONFIGS, v, "DescribeConfigsSynonym")
    results = []
    for res in request.resources:
        error, message = ErrorCode.none, None
        entries: list[ConfigEntry] = []
        try:
            _require(ctx, AclOperation.DESCRIBE_CONFIGS, res)
            if res.resource_type == RESOURCE_TOPIC:
                entries = await ctx.topic_configs.describe_topic(res.resource_name)
            elif res.resource_type == RESOURCE_BROKER:
                entries = await ctx.topic_configs.describe_broker(res.resource_name)
            else:
                raise KafkaError(
                    f"resource type {res.resource_type} is not supported",
                    code=ErrorCode.invalid_request,
                )
        except KafkaError as e:
            error, message = e.code, str(e)
        wanted = set(res.configuration_keys) if res.configuration_keys else None
        configs = tuple(
            build(
                entry_cls,
                name=e.name,
                value=e.value,
                read_only=e.read_only,
                config_source=e.source,
                is_default=e.source == 5,
                is_sensitive=e.sensitive,
                synonyms=tuple(
                    build(synonym_cls, name=s.name, value=s.value, source=s.source)
                    for s in e.synonyms
                )
                if request.include_synonyms
                else (),
                config_type=e.config_type,
                documentation=e.documentation
                if getattr(request, "include_documentation", False)
                else None,
            )
            for e in entries
            if wanted is None or e.name in wanted
        )
        results.append(
            build(
                result_cls,
                error_code=error,
                error_message=message,
                resource_type=res.resource_type,
                resource_name=res.resource_name,
                configs=configs,
            )
        )
    return build(
        response_class(DESCRIBE_CONFIGS, v, "DescribeConfigsResponse"),
        throttle_time=NO_THROTTLE,
        results=tuple(results),
    )


@api(ALTER_CONFIGS, 0, 2)
async def alter_configs(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    async def alter(res: Any) -> None:
        _require(ctx, AclOperation.ALTER_CONFIGS, res)
        # A null value has no meaning in a full replacement: it is left out, as unset.
        configs = {c.name: c.value for c in res.configs if c.value is not None}
        if res.resource_type == RESOURCE_BROKER:
            await ctx.topic_configs.alter_broker(res.resource_name, configs, request.validate_only)
        else:
            await ctx.topic_configs.alter(res.resource_name, configs, request.validate_only)

    return await _alter(ALTER_CONFIGS, "AlterConfigsResponse", header, request, alter)


@api(INCREMENTAL_ALTER_CONFIGS, 0, 1)
async def incremental_alter_configs(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    async def alter(res: Any) -> None:
        _require(ctx, AclOperation.ALTER_CONFIGS, res)
        ops = [AlterOp(c.name, c.config_operation, c.value) for c in res.configs]
        if res.resource_type == RESOURCE_BROKER:
            await ctx.topic_configs.incremental_alter_broker(
                res.resource_name, ops, request.validate_only
            )
        else:
            await ctx.topic_configs.incremental_alter(res.resource_name, ops, request.validate_only)

    return await _alter(
        INCREMENTAL_ALTER_CONFIGS, "IncrementalAlterConfigsResponse", header, request, alter
    )


def _require(ctx: BrokerContext, operation: AclOperation, res: Any) -> None:
    """Topic configs need the operation on the topic, broker configs on the cluster."""
    if res.resource_type == RESOURCE_TOPIC:
        require_topic(ctx, operation, res.resource_name)
    elif res.resource_type == RESOURCE_BROKER:
        require_cluster(ctx, operation)


async def _alter(
    api_key: int,
    response_name: str,
    header: RequestHeader,
    request: Any,
    alter: Callable[[Any], Awaitable[None]],
) -> Any:
    """Both alter APIs: each resource on its own, its error in its own result."""
    v = header.api_version
    result_cls = response_class(api_key, v, "AlterConfigsResourceResponse")
    results = []
    for res in request.resources:
        error, message = ErrorCode.none, None
        try:
            if res.resource_type not in (RESOURCE_TOPIC, RESOURCE_BROKER):
                raise KafkaError(
                    f"resource type {res.resource_type} is not supported; "
                    "only topic and broker configs can be altered",
                    code=ErrorCode.invalid_request,
                )
            await alter(res)
        except KafkaError as e:
            error, message = e.code, str(e)
        results.append(
            build(
                result_cls,
                error_code=error,
                error_message=message,
                resource_type=res.resource_type,
                resource_name=res.resource_name,
            )
        )
    return build(
        response_class(api_key, v, response_name),
        throttle_time=NO_THROTTLE,
        responses=tuple(results),
    )
