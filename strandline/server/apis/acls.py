"""DescribeAcls (29), CreateAcls (30) and DeleteAcls (31): the ACL admin APIs, as
Kafka's AclApis answers them.

Without an authorizer (`authorizer.class.name` empty) every result is SECURITY_DISABLED.
Versions 1-3 are served (the ones kio has; v1 added pattern types and is what
librdkafka and kafka-python send, Java clients use up to 3). Bindings are validated one
by one: a binding that cannot be stored (ANY/MATCH/UNKNOWN parts, an empty name, a
CLUSTER resource not named kafka-cluster, a '/' in the name, a malformed principal) is
INVALID_REQUEST on its own, and the others are still created. Describe reads this
broker's cache (Kafka's Authorizer.acls); create and delete write ZooKeeper and
announce the change to every broker.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from kio.schema.errors import ErrorCode

from strandline.protocol.codec import RequestHeader
from strandline.protocol.messages import build, response_class
from strandline.security.acl import (
    CLUSTER_NAME,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from strandline.security.acl_cache import AclCache, write_through
from strandline.security.principal import KafkaPrincipal
from strandline.server.apis.api_versions import NO_THROTTLE
from strandline.server.apis.registry import api
from strandline.server.authz import cluster_authorized
from strandline.server.context import BrokerContext

DESCRIBE_ACLS = 29
CREATE_ACLS = 30
DELETE_ACLS = 31

NO_AUTHORIZER = "No Authorizer is configured on the broker"


class InvalidAcl(ValueError):
    """A binding or filter the request may not contain; INVALID_REQUEST for it alone."""


def _store(ctx: BrokerContext) -> AclCache:
    # The broker's own cache when it has one (its lock orders local writes against
    # notification reloads); otherwise a write-through cache over the broker's ZooKeeper.
    cache = getattr(ctx, "acl_cache", None)
    if isinstance(cache, AclCache):
        return cache
    assert ctx.authorizer is not None
    return write_through(ctx.topic_admin.zk, ctx.authorizer)


def _error(e: Exception) -> tuple[ErrorCode, str]:
    if isinstance(e, InvalidAcl):
        return ErrorCode.invalid_request, str(e)
    code = getattr(e, "code", None)
    if isinstance(code, ErrorCode):
        return code, str(e)
    return ErrorCode.unknown_server_error, f"{type(e).__name__}: {e}"


# --- request -> model --------------------------------------------------------------


def binding_of(creation: Any) -> AclBinding:
    """A CreateAcls creation as a binding that can be stored, or InvalidAcl."""
    resource_type = ResourceType.from_code(creation.resource_type)
    pattern_type = PatternType.from_code(creation.resource_pattern_type)
    operation = AclOperation.from_code(creation.operation)
    permission = AclPermissionType.from_code(creation.permission_type)
    name, principal, host = creation.resource_name, creation.principal, creation.host
    if resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        raise InvalidAcl(f"Failed to create ACL: resource type {resource_type} is not specific")
    if not pattern_type.is_specific:
        raise InvalidAcl(f"Failed to create ACL: pattern type {pattern_type} is not specific")
    if operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        raise InvalidAcl(f"Failed to create ACL: operation {operation} is not specific")
    if permission in (AclPermissionType.UNKNOWN, AclPermissionType.ANY):
        raise InvalidAcl(f"Failed to create ACL: permission type {permission} is not specific")
    if resource_type == ResourceType.CLUSTER and name != CLUSTER_NAME:
        raise InvalidAcl(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if not name:
        raise InvalidAcl("Invalid empty resource name")
    if "/" in name:
        # It would become a ZooKeeper path separator.
        raise InvalidAcl(f"ACL binding contains invalid resource name: {name}")
    try:
        KafkaPrincipal.parse(principal)
    except ValueError as e:
        raise InvalidAcl(f"Failed to create ACL: {e}") from e
    if not host:
        raise InvalidAcl("Failed to create ACL: empty host")
    return AclBinding(
        ResourcePattern(resource_type, name, pattern_type),
        AccessControlEntry(principal, host, operation, permission),
    )


def filter_of(message: Any) -> AclBindingFilter:
    """A DescribeAcls request or DeleteAcls filter as a binding filter, or InvalidAcl
    when a part is UNKNOWN (Kafka refuses those requests)."""
    binding_filter = AclBindingFilter(
        ResourcePatternFilter(
            ResourceType.from_code(message.resource_type_filter),
            message.resource_name_filter,
            PatternType.from_code(message.pattern_type_filter),
        ),
        AccessControlEntryFilter(
            message.principal_filter,
            message.host_filter,
            AclOperation.from_code(message.operation),
            AclPermissionType.from_code(message.permission_type),
        ),
    )
    if binding_filter.is_unknown:
        raise InvalidAcl(f"filter contains UNKNOWN elements: {binding_filter}")
    return binding_filter


# --- handlers ----------------------------------------------------------------------


def _refusal(ctx: BrokerContext, operation: AclOperation) -> tuple[ErrorCode, str] | None:
    """Why the whole request is refused: no authorizer (Kafka's SECURITY_DISABLED), or
    the principal lacks `operation` on the cluster; None when it may go on."""
    if ctx.authorizer is None:
        return ErrorCode.security_disabled, NO_AUTHORIZER
    if not cluster_authorized(ctx, operation):
        return ErrorCode.cluster_authorization_failed, f"{operation.name} on the cluster needed"
    return None


@api(DESCRIBE_ACLS, 1, 3)
async def describe_acls(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    v = header.api_version
    error, message = ErrorCode.none, None
    resources: tuple[Any, ...] = ()
    refused = _refusal(ctx, AclOperation.DESCRIBE)
    if refused is not None:
        error, message = refused
    else:
        assert ctx.authorizer is not None
        try:
            bindings = ctx.authorizer.acls(filter_of(request))
        except InvalidAcl as e:
            error, message = ErrorCode.invalid_request, str(e)
        else:
            resources = _describe_resources(v, bindings)
    return build(
        response_class(DESCRIBE_ACLS, v, "DescribeAclsResponse"),
        throttle_time=NO_THROTTLE,
        error_code=error,
        error_message=message,
        resources=resources,
    )


def _describe_resources(v: int, bindings: Iterable[AclBinding]) -> tuple[Any, ...]:
    resource_cls = response_class(DESCRIBE_ACLS, v, "DescribeAclsResource")
    acl_cls = response_class(DESCRIBE_ACLS, v, "AclDescription")
    by_pattern: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for b in bindings:
        by_pattern.setdefault(b.pattern, []).append(b.entry)
    return tuple(
        build(
            resource_cls,
            resource_type=int(pattern.resource_type),
            resource_name=pattern.name,
            pattern_type=int(pattern.pattern_type),
            acls=tuple(
                build(
                    acl_cls,
                    principal=e.principal,
                    host=e.host,
                    operation=int(e.operation),
                    permission_type=int(e.permission_type),
                )
                for e in entries
            ),
        )
        for pattern, entries in by_pattern.items()
    )


@api(CREATE_ACLS, 1, 3)
async def create_acls(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    v = header.api_version
    result_cls = response_class(CREATE_ACLS, v, "AclCreationResult")
    outcomes: list[tuple[ErrorCode, str | None]] = []
    refused = _refusal(ctx, AclOperation.ALTER)
    if refused is not None:
        outcomes = [refused] * len(request.creations)
    else:
        valid: list[AclBinding] = []
        slots: list[int | Exception] = []
        for creation in request.creations:
            try:
                valid.append(binding_of(creation))
                slots.append(len(valid) - 1)
            except InvalidAcl as e:
                slots.append(e)
        written = await asyncio.to_thread(_store(ctx).create_acls, valid) if valid else []
        for slot in slots:
            failure = slot if isinstance(slot, Exception) else written[slot]
            outcomes.append((ErrorCode.none, None) if failure is None else _error(failure))
    return build(
        response_class(CREATE_ACLS, v, "CreateAclsResponse"),
        throttle_time=NO_THROTTLE,
        results=tuple(
            build(result_cls, error_code=code, error_message=message) for code, message in outcomes
        ),
    )


@api(DELETE_ACLS, 1, 3)
async def delete_acls(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    v = header.api_version
    filter_result_cls = response_class(DELETE_ACLS, v, "DeleteAclsFilterResult")
    matching_cls = response_class(DELETE_ACLS, v, "DeleteAclsMatchingAcl")
    results: list[Any] = []
    refused = _refusal(ctx, AclOperation.ALTER)
    if refused is not None:
        failed = build(
            filter_result_cls, error_code=refused[0], error_message=refused[1], matching_acls=()
        )
        results = [failed] * len(request.filters)
    else:
        valid: list[AclBindingFilter] = []
        slots: list[int | InvalidAcl] = []
        for message in request.filters:
            try:
                valid.append(filter_of(message))
                slots.append(len(valid) - 1)
            except InvalidAcl as e:
                slots.append(e)
        deleted = await asyncio.to_thread(_store(ctx).delete_acls, valid) if valid else []
        for slot in slots:
            if isinstance(slot, InvalidAcl):
                results.append(
                    build(
                        filter_result_cls,
                        error_code=ErrorCode.invalid_request,
                        error_message=str(slot),
                        matching_acls=(),
                    )
                )
                continue
            matching = []
            for binding, failure in deleted[slot]:
                code, text = (ErrorCode.none, None) if failure is None else _error(failure)
                matching.append(
                    build(
                        matching_cls,
                        error_code=code,
                        error_message=text,
                        resource_type=int(binding.pattern.resource_type),
                        resource_name=binding.pattern.name,
                        pattern_type=int(binding.pattern.pattern_type),
                        principal=binding.entry.principal,
                        host=binding.entry.host,
                        operation=int(binding.entry.operation),
                        permission_type=int(binding.entry.permission_type),
                    )
                )
            results.append(
                build(
                    filter_result_cls,
                    error_code=ErrorCode.none,
                    error_message=None,
                    matching_acls=tuple(matching),
                )
            )
    return build(
        response_class(DELETE_ACLS, v, "DeleteAclsResponse"),
        throttle_time=NO_THROTTLE,
        filter_results=tuple(results),
    )
