"""DeleteRecords (21): advance a partition's log start offset (its low watermark)."""

from __future__ import annotations

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
from strandline.types import TopicPartition

API_KEY = 21
HIGH_WATERMARK = -1  # "delete up to the high watermark"


@api(API_KEY, 0, 2)
async def handle(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    v = header.api_version
    partition_cls = response_class(API_KEY, v, "DeleteRecordsPartitionResult")
    topic_cls = response_class(API_KEY, v, "DeleteRecordsTopicResult")
    rm = ctx.replica_manager
    topics = []
    for t in request.topics:
        partitions = []
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
                low = rm.delete_records(tp, offset)
            except KafkaError as e:
                error = e.code
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
