"""Consumer-group APIs: FindCoordinator (10), OffsetCommit (8), OffsetFetch (9),
JoinGroup (11), Heartbeat (12), LeaveGroup (13), SyncGroup (14), DescribeGroups (15),
ListGroups (16), DeleteGroups (42), OffsetDelete (47).

Each handler maps the kio request onto the group core's plain request, lets the
GroupService run it (JoinGroup/SyncGroup answers may arrive much later), and maps the
core's answer back onto the kio response of the request's version.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode

from strandline.errors import KafkaError
from strandline.group import model
from strandline.group.coordinator import Effect
from strandline.group.model import Token
from strandline.group.partitioning import OFFSETS_TOPIC, partition_for
from strandline.protocol.codec import RequestHeader
from strandline.protocol.messages import build, response_class
from strandline.security.acl import AclOperation, ResourceType
from strandline.server.apis.api_versions import NO_THROTTLE
from strandline.server.apis.registry import api
from strandline.server.authz import (
    AUTHORIZED_OPERATIONS_OMITTED,
    authorized,
    authorized_names,
    authorized_operations,
    cluster_authorized,
)
from strandline.server.context import BrokerContext
from strandline.server.session import current_session
from strandline.transaction.partitioning import TRANSACTION_STATE_TOPIC
from strandline.types import TopicPartition

log = logging.getLogger(__name__)

OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 8, 9, 10
JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 11, 12, 13, 14
DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS = 15, 16, 42
OFFSET_DELETE = 47

GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE = 0, 1
# How long FindCoordinator waits for a just-created offsets topic before answering
# COORDINATOR_NOT_AVAILABLE (the client retries): short, so the request is not held.
OFFSETS_TOPIC_CREATE_WAIT_S = 2.0

R = TypeVar("R")
# The answers of a member's requests: each is built from its error code alone.
M = TypeVar(
    "M",
    model.JoinGroupResponse,
    model.SyncGroupResponse,
    model.HeartbeatResponse,
    model.LeaveGroupResponse,
)

# The client's IP address for the request being handled: for the socket server to set
# per connection (its request tasks inherit it). Empty until it does; DescribeGroups shows
# it as a member's host, as Kafka does.
CLIENT_ADDRESS: ContextVar[str] = ContextVar("client_address", default="")


def _client_host() -> str:
    # Kafka shows InetAddress.toString(): "/127.0.0.1".
    address = CLIENT_ADDRESS.get()
    return f"/{address}" if address else ""


def _group_allowed(ctx: BrokerContext, operation: AclOperation, group_id: str) -> bool:
    return authorized(ctx, operation, ResourceType.GROUP, group_id)


def _denied_description(g: model.DescribedGroup) -> model.DescribedGroup:
    """What DescribeGroups answers for a group the principal may not describe."""
    return model.DescribedGroup(ErrorCode.group_authorization_failed, g.group_id, "")


def _ms(value: datetime.timedelta) -> int:
    return int(value / datetime.timedelta(milliseconds=1))


async def _ask(
    ctx: BrokerContext, call: Callable[[Token, int], list[Effect]], expected: type[R]
) -> R | None:
    answer = await ctx.group_service.ask(call)
    return answer if isinstance(answer, expected) else None  # None: the broker is stopping


async def _ask_member(
    ctx: BrokerContext,
    group_id: str,
    call: Callable[[Token, int], list[Effect]],
    expected: type[M],
) -> M:
    """A group member's request (Join/Sync/Heartbeat/Leave): READ on the group needed,
    Kafka's GROUP_AUTHORIZATION_FAILED otherwise; COORDINATOR_NOT_AVAILABLE while the
    broker stops."""
    if not _group_allowed(ctx, AclOperation.READ, group_id):
        return expected(ErrorCode.group_authorization_failed)
    answer = await _ask(ctx, call, expected)
    return answer if answer is not None else expected(ErrorCode.coordinator_not_available)


# == FindCoordinator ===========================================================================


@api(FIND_COORDINATOR, 0, 4)
async def find_coordinator(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    v = header.api_version
    key_type = int(getattr(request, "key_type", GROUP_KEY_TYPE))
    keys: list[str] = list(request.coordinator_keys) if v >= 4 else [request.key]
    if key_type == GROUP_KEY_TYPE and not ctx.metadata_cache.has_topic(OFFSETS_TOPIC):
        await ensure_offsets_topic(ctx)
    found = [(key, *_coordinator_for(ctx, key_type, key)) for key in keys]
    if v >= 4:
        entry = response_class(FIND_COORDINATOR, v, "Coordinator")
        return build(
            response_class(FIND_COORDINATOR, v, "FindCoordinatorResponse"),
            throttle_time=NO_THROTTLE,
            coordinators=tuple(
                build(
                    entry,
                    key=key,
                    node_id=node,
                    host=host,
                    port=port,
                    error_code=error,
                    error_message=None if error is ErrorCode.none else error.name,
                )
                for key, error, node, host, port in found
            ),
        )
    _, error, node, host, port = found[0]
    return build(
        response_class(FIND_COORDINATOR, v, "FindCoordinatorResponse"),
        throttle_time=NO_THROTTLE,
        error_code=error,
        error_message=None if error is ErrorCode.none else error.name,
        node_id=node,
        host=host,
        port=port,
    )


def _coordinator_for(
    ctx: BrokerContext, key_type: int, key: str
) -> tuple[ErrorCode, int, str, int]:
    cache = ctx.metadata_cache
    unavailable = (ErrorCode.coordinator_not_available, -1, "", -1)
    if key_type == TRANSACTION_KEY_TYPE:
        # The leader of the id's __transaction_state partition, as Kafka; the topic is
        # created on first use and the client retries COORDINATOR_NOT_AVAILABLE meanwhile.
        if not authorized(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
            return ErrorCode.transactional_id_authorization_failed, -1, "", -1
        txn_service = ctx.txn_service
        if not cache.has_topic(TRANSACTION_STATE_TOPIC):
            txn_service.ensure_topic(ctx.topic_admin)
            return unavailable
        txn_tp = TopicPartition(TRANSACTION_STATE_TOPIC, txn_service.coordinator.partition_for(key))
        txn_state = cache.partition(txn_tp)
        if txn_state is None or txn_state.leader not in cache.brokers:
            return unavailable
        txn_address = cache.brokers[txn_state.leader].address_for(current_session().listener)
        if txn_address is None:
            return unavailable
        return ErrorCode.none, txn_state.leader, *txn_address
    if key_type != GROUP_KEY_TYPE:
        return ErrorCode.invalid_request, -1, "", -1
    if not key:
        return ErrorCode.invalid_group_id, -1, "", -1
    if not authorized(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, key):
        return ErrorCode.group_authorization_failed, -1, "", -1
    partitions = ctx.group_service.coordinator.num_partitions
    state = cache.partition(TopicPartition(OFFSETS_TOPIC, partition_for(key, partitions)))
    if state is None or state.leader not in cache.brokers:
        return unavailable
    leader = cache.brokers[state.leader]
    address = leader.address_for(current_session().listener)
    if address is None:
        return unavailable
    return ErrorCode.none, leader.broker_id, *address


async def ensure_offsets_topic(ctx: BrokerContext) -> None:
    """Create `__consumer_offsets` on first use, as Kafka does from FindCoordinator."""
    service = ctx.group_service
    task = service.offsets_topic_creation
    if task is None or task.done():
        task = asyncio.get_running_loop().create_task(_create_offsets_topic(ctx))
        service.offsets_topic_creation = task
    try:
        await asyncio.wait_for(asyncio.shield(task), OFFSETS_TOPIC_CREATE_WAIT_S)
    except TimeoutError:
        pass


async def _create_offsets_topic(ctx: BrokerContext) -> None:
    cfg = ctx.config
    live = len(ctx.metadata_cache.brokers)
    replication_factor = max(1, min(cfg.offsets_topic_replication_factor, live))
    try:
        await ctx.topic_admin.create_topic(
            OFFSETS_TOPIC,
            num_partitions=cfg.offsets_topic_num_partitions,
            replication_factor=replication_factor,
            configs={
                "cleanup.policy": "compact",
                "segment.bytes": str(cfg.offsets_topic_segment_bytes),
            },
        )
        log.info(
            "created %s with %d partitions, replication factor %d",
            OFFSETS_TOPIC,
            cfg.offsets_topic_num_partitions,
            replication_factor,
        )
    except KafkaError as e:
        if e.code is not ErrorCode.topic_already_exists:
            log.warning("cannot create %s: %s", OFFSETS_TOPIC, e)


# == JoinGroup / SyncGroup / Heartbeat / LeaveGroup ============================================


@api(JOIN_GROUP, 0, 9)
async def join_group(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    v = header.api_version
    session_ms = _ms(request.session_timeout)
    core_request = model.JoinGroupRequest(
        token=None,
        group_id=request.group_id,
        member_id=request.member_id,
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=_ms(request.rebalance_timeout) if v >= 1 else session_ms,
        protocol_type=request.protocol_type,
        protocols=tuple((p.name, bytes(p.metadata)) for p in request.protocols),
        group_instance_id=getattr(request, "group_instance_id", None),
        client_id=header.client_id or "",
        client_host=_client_host(),
        require_known_member_id=v >= 4,
    )
    coordinator = ctx.group_service.coordinator
    answer = await _ask_member(
        ctx,
        request.group_id,
        lambda token, now: coordinator.join_group(
            dataclasses.replace(core_request, token=token), now
        ),
        model.JoinGroupResponse,
    )
    if getattr(request, "reason", None):
        # v8+ (KIP-800): the client says why it (re)joins; Kafka only logs it.
        log.info(
            "member %s of group %s joins (client reason: %s)",
            answer.member_id,
            request.group_id,
            request.reason,
        )
    member_cls = response_class(JOIN_GROUP, v, "JoinGroupResponseMember")
    return build(
        response_class(JOIN_GROUP, v, "JoinGroupResponse"),
        throttle_time=NO_THROTTLE,
        error_code=answer.error,
        generation_id=answer.generation_id,
        protocol_type=answer.protocol_type,
        protocol_name=answer.protocol_name if v >= 7 else (answer.protocol_name or ""),
        leader=answer.leader,
        skip_assignment=answer.skip_assignment,
        member_id=answer.member_id,
        members=tuple(
            build(
                member_cls,
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                metadata=m.metadata,
            )
            for m in answer.members
        ),
    )


@api(SYNC_GROUP, 0, 5)
async def sync_group(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    v = header.api_version
    core_request = model.SyncGroupRequest(
        token=None,
        group_id=request.group_id,
        generation_id=request.generation_id,
        member_id=request.member_id,
        assignments=tuple((a.member_id, bytes(a.assignment)) for a in request.assignments),
        group_instance_id=getattr(request, "group_instance_id", None),
        protocol_type=getattr(request, "protocol_type", None),
        protocol_name=getattr(request, "protocol_name", None),
    )
    coordinator = ctx.group_service.coordinator
    answer = await _ask_member(
        ctx,
        request.group_id,
        lambda token, now: coordinator.sync_group(
            dataclasses.replace(core_request, token=token), now
        ),
        model.SyncGroupResponse,
    )
    return build(
        response_class(SYNC_GROUP, v, "SyncGroupResponse"),
        throttle_time=NO_THROTTLE,
        error_code=answer.error,
        protocol_type=answer.protocol_type,
        protocol_name=answer.protocol_name,
        assignment=answer.assignment,
    )


@api(HEARTBEAT, 0, 4)
async def heartbeat(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    core_request = model.HeartbeatRequest(
        token=None,
        group_id=request.group_id,
        generation_id=request.generation_id,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
    )
    coordinator = ctx.group_service.coordinator
    answer = await _ask_member(
        ctx,
        request.group_id,
        lambda token, now: coordinator.heartbeat(
            dataclasses.replace(core_request, token=token), now
        ),
        model.HeartbeatResponse,
    )
    return build(
        response_class(HEARTBEAT, header.api_version, "HeartbeatResponse"),
        throttle_time=NO_THROTTLE,
        error_code=answer.error,
    )


@api(LEAVE_GROUP, 0, 5)
async def leave_group(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    v = header.api_version
    if v >= 3:
        members = tuple(
            model.LeavingMember(m.member_id, m.group_instance_id) for m in request.members
        )
    else:
        members = (model.LeavingMember(request.member_id),)
    coordinator = ctx.group_service.coordinator
    answer = await _ask_member(
        ctx,
        request.group_id,
        lambda token, now: coordinator.leave_group(
            model.LeaveGroupRequest(token, request.group_id, members), now
        ),
        model.LeaveGroupResponse,
    )
    for m in request.members if v >= 5 else ():
        if m.reason:
            # KIP-800: why the member leaves; Kafka only logs it.
            log.info(
                "member %s left group %s through LeaveGroup (client reason: %s)",
                m.member_id,
                request.group_id,
                m.reason,
            )
    error = answer.error
    if v < 3 and error is ErrorCode.none and answer.members:
        # One member per request before v3: its own error is the answer.
        error = answer.members[0][1]
    member_cls = response_class(LEAVE_GROUP, v, "MemberResponse") if v >= 3 else None
    return build(
        response_class(LEAVE_GROUP, v, "LeaveGroupResponse"),
        throttle_time=NO_THROTTLE,
        error_code=error,
        members=tuple(
            build(
                member_cls,
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                error_code=e,
            )
            for m, e in answer.members
        )
        if member_cls is not None
        else (),
    )


# == OffsetCommit / OffsetFetch ================================================================


@api(OFFSET_COMMIT, 2, 8)
async def offset_commit(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    v = header.api_version
    offsets: list[tuple[TopicPartition, model.OffsetAndMetadata]] = []
    for topic in request.topics:
        for p in topic.partitions:
            offsets.append(
                (
                    TopicPartition(topic.name, p.partition_index),
                    model.OffsetAndMetadata(
                        offset=p.committed_offset,
                        leader_epoch=getattr(p, "committed_leader_epoch", -1),
                        metadata=p.committed_metadata or "",
                    ),
                )
            )
    retention = getattr(request, "retention_time", None)
    # Kafka: READ on the group for all, READ on each topic for its partitions.
    denied: dict[TopicPartition, ErrorCode] = {}
    if not _group_allowed(ctx, AclOperation.READ, request.group_id):
        denied = {tp: ErrorCode.group_authorization_failed for tp, _ in offsets}
    else:
        readable = authorized_names(
            ctx, AclOperation.READ, ResourceType.TOPIC, (tp.topic for tp, _ in offsets)
        )
        # As Kafka's handleOffsetCommitRequest: a partition the cluster does not have
        # is refused and not stored (a client would otherwise read back an offset for a
        # partition that never existed, or that a recreated topic no longer has).
        for tp, _ in offsets:
            if tp.topic not in readable:
                denied[tp] = ErrorCode.topic_authorization_failed
            elif ctx.metadata_cache.partition(tp) is None:
                denied[tp] = ErrorCode.unknown_topic_or_partition
    allowed_offsets = [(tp, o) for tp, o in offsets if tp not in denied]
    core_request = model.OffsetCommitRequest(
        token=None,
        group_id=request.group_id,
        offsets=tuple(allowed_offsets),
        generation_id=request.generation_id_or_member_epoch,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        retention_time_ms=_ms(retention) if retention is not None else -1,
    )
    coordinator = ctx.group_service.coordinator
    answer = None
    if allowed_offsets:
        answer = await _ask(
            ctx,
            lambda token, now: coordinator.offset_commit(
                dataclasses.replace(core_request, token=token), now
            ),
            model.OffsetCommitResponse,
        )
        if answer is None:
            answer = model.OffsetCommitResponse(
                tuple((tp, ErrorCode.coordinator_not_available) for tp, _ in allowed_offsets)
            )
    errors = [*(answer.errors if answer else ()), *denied.items()]
    return commit_response(OFFSET_COMMIT, v, "OffsetCommit", errors)


def commit_response(
    api_key: int, version: int, message: str, errors: Iterable[tuple[TopicPartition, ErrorCode]]
) -> Any:
    """OffsetCommit's or TxnOffsetCommit's answer (`message`): an error per partition."""
    by_topic: dict[str, list[tuple[int, ErrorCode]]] = {}
    for tp, error in errors:
        by_topic.setdefault(tp.topic, []).append((tp.partition, error))
    partition_cls = response_class(api_key, version, f"{message}ResponsePartition")
    topic_cls = response_class(api_key, version, f"{message}ResponseTopic")
    return build(
        response_class(api_key, version, f"{message}Response"),
        throttle_time=NO_THROTTLE,
        topics=tuple(
            build(
                topic_cls,
                name=name,
                partitions=tuple(
                    build(partition_cls, partition_index=index, error_code=error)
                    for index, error in partitions
                ),
            )
            for name, partitions in by_topic.items()
        ),
    )


@api(OFFSET_FETCH, 1, 8)
async def offset_fetch(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    v = header.api_version
    # v7+: a read_committed consumer asks not to be given an offset an open transaction
    # is about to change (UNSTABLE_OFFSET_COMMIT per partition; it retries).
    require_stable = bool(getattr(request, "require_stable", False))
    if v >= 8:
        group_cls = response_class(OFFSET_FETCH, v, "OffsetFetchResponseGroup")
        groups = []
        for group in request.groups:
            wanted = _wanted_partitions(group.topics)
            answer = await _fetch_offsets(ctx, group.group_id, wanted, require_stable)
            groups.append(
                build(
                    group_cls,
                    group_id=group.group_id,
                    error_code=answer.error,
                    topics=_fetched_topics(v, answer, "OffsetFetchResponseTopics"),
                )
            )
        return build(
            response_class(OFFSET_FETCH, v, "OffsetFetchResponse"),
            throttle_time=NO_THROTTLE,
            groups=tuple(groups),
        )
    wanted = _wanted_partitions(request.topics)
    answer = await _fetch_offsets(ctx, request.group_id, wanted, require_stable)
    if v < 2 and answer.error is not ErrorCode.none:
        # No top-level error field before v2: every asked partition carries it.
        error = answer.error
        answer = model.OffsetFetchResponse(
            ErrorCode.none,
            tuple((tp, model.FetchedOffset(-1, error=error)) for tp in wanted or ()),
        )
    return build(
        response_class(OFFSET_FETCH, v, "OffsetFetchResponse"),
        throttle_time=NO_THROTTLE,
        error_code=answer.error,
        topics=_fetched_topics(v, answer, "OffsetFetchResponseTopic"),
    )


def _wanted_partitions(topics: Any) -> tuple[TopicPartition, ...] | None:
    if topics is None:
        return None
    return tuple(TopicPartition(t.name, p) for t in topics for p in t.partition_indexes)


async def _fetch_offsets(
    ctx: BrokerContext,
    group_id: str,
    wanted: tuple[TopicPartition, ...] | None,
    require_stable: bool = False,
) -> model.OffsetFetchResponse:
    if not _group_allowed(ctx, AclOperation.DESCRIBE, group_id):
        return model.OffsetFetchResponse(ErrorCode.group_authorization_failed)
    coordinator = ctx.group_service.coordinator
    answer = await _ask(
        ctx,
        lambda token, now: coordinator.offset_fetch(
            model.OffsetFetchRequest(token, group_id, wanted, require_stable), now
        ),
        model.OffsetFetchResponse,
    )
    if answer is None:
        return model.OffsetFetchResponse(ErrorCode.coordinator_not_available)
    # Topics the principal may not describe: an error where asked, left out otherwise.
    visible = authorized_names(
        ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (tp.topic for tp, _ in answer.offsets)
    )
    offsets = tuple(
        (tp, fetched)
        if tp.topic in visible
        else (tp, model.FetchedOffset(-1, error=ErrorCode.topic_authorization_failed))
        for tp, fetched in answer.offsets
        if tp.topic in visible or wanted is not None
    )
    return dataclasses.replace(answer, offsets=offsets)


def _fetched_topics(v: int, answer: model.OffsetFetchResponse, topic_name: str) -> tuple[Any, ...]:
    partition_name = "OffsetFetchResponsePartitions" if v >= 8 else "OffsetFetchResponsePartition"
    partition_cls = response_class(OFFSET_FETCH, v, partition_name)
    topic_cls = response_class(OFFSET_FETCH, v, topic_name)
    by_topic: dict[str, list[Any]] = {}
    for tp, fetched in answer.offsets:
        by_topic.setdefault(tp.topic, []).append(
            build(
                partition_cls,
                partition_index=tp.partition,
                committed_offset=fetched.offset,
                committed_leader_epoch=fetched.leader_epoch,
                metadata=fetched.metadata,
                error_code=fetched.error,
            )
        )
    return tuple(
        build(topic_cls, name=name, partitions=tuple(parts)) for name, parts in by_topic.items()
    )


# == DescribeGroups / ListGroups / DeleteGroups ================================================


@api(DESCRIBE_GROUPS, 0, 5)
async def describe_groups(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    v = header.api_version
    allowed = authorized_names(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, request.groups)
    described = [
        g if g.group_id in allowed else _denied_description(g)
        for g in ctx.group_service.coordinator.describe_groups(list(request.groups))
    ]
    group_cls = response_class(DESCRIBE_GROUPS, v, "DescribedGroup")
    member_cls = response_class(DESCRIBE_GROUPS, v, "DescribedGroupMember")
    return build(
        response_class(DESCRIBE_GROUPS, v, "DescribeGroupsResponse"),
        throttle_time=NO_THROTTLE,
        groups=tuple(
            build(
                group_cls,
                error_code=g.error,
                group_id=g.group_id,
                group_state=g.state,
                protocol_type=g.protocol_type,
                protocol_data=g.protocol,
                authorized_operations=(
                    authorized_operations(ctx, ResourceType.GROUP, g.group_id)
                    if getattr(request, "include_authorized_operations", False)
                    and g.group_id in allowed
                    else AUTHORIZED_OPERATIONS_OMITTED
                ),
                members=tuple(
                    build(
                        member_cls,
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        member_metadata=m.metadata,
                        member_assignment=m.assignment,
                    )
                    for m in g.members
                ),
            )
            for g in described
        ),
    )


@api(LIST_GROUPS, 0, 4)
async def list_groups(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    v = header.api_version
    states = list(getattr(request, "states_filter", ()) or ()) or None
    error, listed = ctx.group_service.coordinator.list_groups(states)
    if not cluster_authorized(ctx, AclOperation.DESCRIBE):
        # Kafka: without DESCRIBE on the cluster, only the groups one may describe.
        visible = authorized_names(
            ctx, AclOperation.DESCRIBE, ResourceType.GROUP, (g.group_id for g in listed)
        )
        listed = [g for g in listed if g.group_id in visible]
    entry = response_class(LIST_GROUPS, v, "ListedGroup")
    return build(
        response_class(LIST_GROUPS, v, "ListGroupsResponse"),
        throttle_time=NO_THROTTLE,
        error_code=error,
        groups=tuple(
            build(entry, group_id=g.group_id, protocol_type=g.protocol_type, group_state=g.state)
            for g in listed
        ),
    )


@api(DELETE_GROUPS, 0, 2)
async def delete_groups(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    v = header.api_version
    service = ctx.group_service
    deletable = authorized_names(ctx, AclOperation.DELETE, ResourceType.GROUP, request.groups_names)
    results, effects = service.coordinator.delete_groups(
        [g for g in request.groups_names if g in deletable], ctx.now_ms()
    )
    service.execute(effects)
    results.update(
        {
            g: ErrorCode.group_authorization_failed
            for g in request.groups_names
            if g not in deletable
        }
    )
    entry = response_class(DELETE_GROUPS, v, "DeletableGroupResult")
    return build(
        response_class(DELETE_GROUPS, v, "DeleteGroupsResponse"),
        throttle_time=NO_THROTTLE,
        results=tuple(
            build(entry, group_id=group_id, error_code=error) for group_id, error in results.items()
        ),
    )


# == OffsetDelete ==============================================================================


@api(OFFSET_DELETE, 0, 0)
async def offset_delete(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    v = header.api_version
    # Kafka answers UNKNOWN_TOPIC_OR_PARTITION itself for partitions the cluster does not
    # have; only the others reach the coordinator.
    unknown: dict[TopicPartition, ErrorCode] = {}
    known: list[TopicPartition] = []
    if not _group_allowed(ctx, AclOperation.DELETE, request.group_id):
        return build(
            response_class(OFFSET_DELETE, v, "OffsetDeleteResponse"),
            error_code=ErrorCode.group_authorization_failed,
            throttle_time=NO_THROTTLE,
            topics=(),
        )
    readable = authorized_names(
        ctx, AclOperation.READ, ResourceType.TOPIC, (t.name for t in request.topics)
    )
    for topic in request.topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.name, int(p.partition_index))
            if topic.name not in readable:
                unknown[tp] = ErrorCode.topic_authorization_failed
            elif ctx.metadata_cache.partition(tp) is None:
                unknown[tp] = ErrorCode.unknown_topic_or_partition
            else:
                known.append(tp)
    coordinator = ctx.group_service.coordinator
    answer = await _ask(
        ctx,
        lambda token, now: coordinator.offset_delete(
            model.OffsetDeleteRequest(token, request.group_id, tuple(known)), now
        ),
        model.OffsetDeleteResponse,
    )
    if answer is None:
        answer = model.OffsetDeleteResponse(ErrorCode.coordinator_not_available)
    by_topic: dict[str, list[tuple[int, ErrorCode]]] = {}
    if answer.error is ErrorCode.none:
        for tp, error in [*answer.errors, *unknown.items()]:
            by_topic.setdefault(tp.topic, []).append((tp.partition, error))
    partition_cls = response_class(OFFSET_DELETE, v, "OffsetDeleteResponsePartition")
    topic_cls = response_class(OFFSET_DELETE, v, "OffsetDeleteResponseTopic")
    return build(
        response_class(OFFSET_DELETE, v, "OffsetDeleteResponse"),
        error_code=answer.error,
        throttle_time=NO_THROTTLE,
        topics=tuple(
            build(
                topic_cls,
                name=name,
                partitions=tuple(
                    build(partition_cls, partition_index=index, error_code=error)
                    for index, error in sorted(partitions, key=lambda pe: pe[0])
                ),
            )
            for name, partitions in by_topic.items()
        ),
    )
