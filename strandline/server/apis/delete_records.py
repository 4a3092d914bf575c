"""DeleteRecords (21): advance a partition's log start offset (its low watermark).

As Kafka (DelayedDeleteRecords), the answer waits up to the request's timeout until the
partition's low watermark (the smallest log start offset of the leader and its live
followers, which move theirs on their next fetch and report it in the one after) reaches
the offset asked for; a partition not there by then answers REQUEST_TIMED_OUT with the
leader's own low watermark."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from kio.schema.errors import ErrorCode

from strandline.errors import InvalidTopicError, KafkaError, OffsetOutOfRangeError
from strandline.internal_topics import is_internal
from strandline.protocol.codec import RequestHeader
from strandline.protocol.messages import build, response_class
from strandline.security.acl import AclOperation
from strandline.server.apis.api_versions import NO_THROTTLE
from strandline.server.apis.registry import api
from strandline.server.authz import require_topic
from strandline.server.context import BrokerContext
from strandline.server.replica_manager import ReplicaManager
from strandline.types import TopicPartition

API_KEY = 21
HIGH_WATERMARK = -1  # "delete up to the high watermark"


@api(API_KEY, 0, 2)
async def handle(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    v = header.api_version
    partition_cls = response_class(API_KEY, v, "DeleteRecordsPartitionResult")
    topic_cls = response_class(API_KEY, v, "DeleteRecordsTopicResult")
    rm = ctx.replica_manager
    answers: dict[TopicPartition, tuple[ErrorCode, int]] = {}
    required: dict[TopicPartition, int] = {}  # deleted on the leader: the offset asked for
    for t in request.topics:
        for p in t.partitions:
            tp = TopicPartition(t.name, p.partition_index)
            error, low = ErrorCode.none, -1
            try:
                require_topic(ctx, AclOperation.DELETE, t.name)
                if is_internal(t.name):
                    raise InvalidTopicError(f"cannot delete records of internal topic {t.name}")
                hosted = rm.leader_partition(tp)
                offset = hosted.high_watermark if p.offset == HIGH_WATERMARK else p.offset
                if offset < 0 or offset > hosted.high_watermark:
                    raise OffsetOutOfRangeError(
                        f"{tp}: cannot delete records before {offset}; "
                        f"the high watermark is {hosted.high_watermark}"
                    )
                rm.delete_records(tp, offset)
                # As Kafka's deleteRecordsOnLeader: the partition's low watermark, the
                # answer too if the followers do not get there in time.
                low = rm.low_watermark(tp, ctx.metadata_cache.brokers)
                required[tp] = offset
            except KafkaError as e:
                error = e.code
            answers[tp] = (error, low)
    if required:
        await _await_replicas(ctx, rm, answers, required, request.timeout.total_seconds())
    topics = []
    for t in request.topics:
        partitions = []
        for p in t.partitions:
            error, low = answers[TopicPartition(t.name, p.partition_index)]
            partitions.append(
                build(
                    partition_cls,
                    partition_index=p.partition_index,
                    low_watermark=low,
                    error_code=error,
                )
            )
        topics.append(build(topic_cls, name=t.name, partitions=tuple(partitions)))
    return build(
        response_class(API_KEY, v, "DeleteRecordsResponse"),
        throttle_time=NO_THROTTLE,
        topics=tuple(topics),
    )


async def _await_replicas(
    ctx: BrokerContext,
    rm: ReplicaManager,
    answers: dict[TopicPartition, tuple[ErrorCode, int]],
    required: dict[TopicPartition, int],
    timeout_s: float,
) -> None:
    """Kafka's DelayedDeleteRecords: each partition deleted on the leader is answered
    once its low watermark reaches the offset (or leadership is lost), the others
    REQUEST_TIMED_OUT with the leader's low watermark when the timeout expires."""
    waiting = dict(required)

    def settle(tp: TopicPartition) -> None:
        try:
            low = rm.low_watermark(tp, ctx.metadata_cache.brokers)
        except KafkaError as e:  # no longer the leader, or no longer hosted
            answers[tp] = (e.code, -1)
            del waiting[tp]
            return
        if low >= waiting[tp]:
            answers[tp] = (ErrorCode.none, low)
            del waiting[tp]

    def all_settled(key: Hashable | None) -> bool:
        if key is None:
            for tp in list(waiting):
                settle(tp)
        elif isinstance(key, TopicPartition) and key in waiting:
            settle(key)
        return not waiting

    await rm.delete_records_purgatory.wait(list(required), all_settled, timeout_s)
    for tp in waiting:
        answers[tp] = (ErrorCode.request_timed_out, answers[tp][1])
