"""AlterPartitionReassignments (45) and ListPartitionReassignments (46), KIP-455.

Like ElectLeaders these are answered by the controller (Kafka's ZooKeeper mode since
2.4); another broker answers NOT_CONTROLLER. The controller records API-started
reassignments in /admin/reassign_partitions as well, so a new controller resumes them.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode

from strandline.errors import KafkaError
from strandline.protocol.codec import RequestHeader
from strandline.protocol.messages import build, response_class
from strandline.security.acl import AclOperation
from strandline.server.apis.api_versions import NO_THROTTLE
from strandline.server.apis.registry import api
from strandline.server.authz import require_cluster
from strandline.server.context import BrokerContext
from strandline.types import TopicPartition

ALTER_PARTITION_REASSIGNMENTS = 45
LIST_PARTITION_REASSIGNMENTS = 46


@api(ALTER_PARTITION_REASSIGNMENTS, 0, 1)
async def alter_partition_reassignments(
    ctx: BrokerContext, header: RequestHeader, request: Any
) -> Any:
    v = header.api_version
    wanted: dict[TopicPartition, tuple[int, ...] | None] = {}
    results: dict[TopicPartition, tuple[ErrorCode, str | None]] = {}
    allow_rf_change = bool(getattr(request, "allow_replication_factor_change", True))
    for topic in request.topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.name, int(p.partition_index))
            target = None if p.replicas is None else tuple(int(r) for r in p.replicas)
            current = ctx.metadata_cache.topics.get(tp.topic, {}).get(tp.partition)
            if (
                not allow_rf_change
                and target is not None
                and current is not None
                and len(current.replicas) != len(target)
            ):
                results[tp] = (
                    ErrorCode.invalid_replication_factor,
                    f"{tp}: replication factor change not allowed",
                )
                continue
            wanted[tp] = target
    top_error, top_message = ErrorCode.none, None
    try:
        require_cluster(ctx, AclOperation.ALTER)
        results.update(
            await asyncio.wait_for(
                ctx.controller.alter_partition_reassignments(wanted),
                max(request.timeout.total_seconds(), 0.001),
            )
        )
    except KafkaError as e:
        top_error, top_message = e.code, str(e)
    except TimeoutError:
        top_error, top_message = ErrorCode.request_timed_out, "the controller did not answer"
    partition_cls = response_class(
        ALTER_PARTITION_REASSIGNMENTS, v, "ReassignablePartitionResponse"
    )
    topic_cls = response_class(ALTER_PARTITION_REASSIGNMENTS, v, "ReassignableTopicResponse")
    by_topic: dict[str, list[Any]] = {}
    for tp in [*wanted, *(tp for tp in results if tp not in wanted)]:
        code, message = results.get(tp, (top_error, top_message))
        by_topic.setdefault(tp.topic, []).append(
            build(
                partition_cls, partition_index=tp.partition, error_code=code, error_message=message
            )
        )
    return build(
        response_class(ALTER_PARTITION_REASSIGNMENTS, v, "AlterPartitionReassignmentsResponse"),
        throttle_time=NO_THROTTLE,
        allow_replication_factor_change=allow_rf_change,
        error_code=top_error,
        error_message=top_message,
        responses=tuple(
            build(topic_cls, name=name, partitions=tuple(parts)) for name, parts in by_topic.items()
        ),
    )


@api(LIST_PARTITION_REASSIGNMENTS, 0, 0)
async def list_partition_reassignments(
    ctx: BrokerContext, header: RequestHeader, request: Any
) -> Any:
    v = header.api_version
    tps = (
        None
        if request.topics is None
        else [TopicPartition(t.name, int(p)) for t in request.topics for p in t.partition_indexes]
    )
    response_cls = response_class(
        LIST_PARTITION_REASSIGNMENTS, v, "ListPartitionReassignmentsResponse"
    )
    try:
        require_cluster(ctx, AclOperation.DESCRIBE)
        ongoing = ctx.controller.list_partition_reassignments(tps)
    except KafkaError as e:
        return build(
            response_cls,
            throttle_time=NO_THROTTLE,
            error_code=e.code,
            error_message=str(e),
            topics=(),
        )
    partition_cls = response_class(LIST_PARTITION_REASSIGNMENTS, v, "OngoingPartitionReassignment")
    topic_cls = response_class(LIST_PARTITION_REASSIGNMENTS, v, "OngoingTopicReassignment")
    by_topic: dict[str, list[Any]] = {}
    for tp, r in sorted(ongoing.items()):
        by_topic.setdefault(tp.topic, []).append(
            build(
                partition_cls,
                partition_index=tp.partition,
                replicas=r.all_replicas,
                adding_replicas=r.adding,
                removing_replicas=r.removing,
            )
        )
    return build(
        response_cls,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        topics=tuple(build(topic_cls, name=n, partitions=tuple(ps)) for n, ps in by_topic.items()),
    )
