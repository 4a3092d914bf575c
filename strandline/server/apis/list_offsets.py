"""ListOffsets (2): earliest (-2), latest (-1, the HW for consumers; the last stable
offset for read_committed ones, isolation_level=1), the record with the largest
timestamp (-3, KIP-734), or the first record whose timestamp is >= T below that bound,
found at record granularity inside its batch."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from strandline.errors import KafkaError
from strandline.protocol.codec import RequestHeader
from strandline.protocol.messages import build, response_class
from strandline.security.acl import AclOperation
from strandline.server.apis.api_versions import NO_THROTTLE
from strandline.server.apis.registry import api
from strandline.server.authz import cluster_authorized, require_topic
from strandline.server.context import BrokerContext
from strandline.server.replica_manager import READ_COMMITTED
from strandline.types import (
    CONSUMER_REPLICA_ID,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    TopicPartition,
)

API_KEY = 2


@api(API_KEY, 1, 7)
async def handle(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    v = header.api_version
    partition_cls = response_class(API_KEY, v, "ListOffsetsPartitionResponse")
    topic_cls = response_class(API_KEY, v, "ListOffsetsTopicResponse")
    # Kafka checks DESCRIBE on each topic whoever asks: a replica id is only a claim.
    # Beyond that, only a principal with CLUSTER_ACTION (a broker) is answered as the
    # replica it claims to be (the log end offset rather than the high watermark).
    replica_id = request.replica_id
    if replica_id >= 0 and not cluster_authorized(ctx, AclOperation.CLUSTER_ACTION):
        replica_id = CONSUMER_REPLICA_ID
    topics = []
    for t in request.topics:
        partitions = []
        for p in t.partitions:
            tp = TopicPartition(t.name, p.partition_index)
            try:
                require_topic(ctx, AclOperation.DESCRIBE, t.name)
                offset, timestamp, epoch = _lookup(
                    ctx,
                    tp,
                    p.timestamp,
                    replica_id,
                    getattr(p, "current_leader_epoch", -1),
                    getattr(request, "isolation_level", 0),
                )
                error = ErrorCode.none
            except KafkaError as e:
                offset, timestamp, epoch, error = -1, -1, -1, e.code
            partitions.append(
                build(
                    partition_cls,
                    partition_index=p.partition_index,
                    error_code=error,
                    timestamp=timestamp,
                    offset=offset,
                    old_style_offsets=(offset,),
                    leader_epoch=epoch,
                )
            )
        topics.append(build(topic_cls, name=t.name, partitions=tuple(partitions)))
    return build(
        response_class(API_KEY, v, "ListOffsetsResponse"),
        throttle_time=NO_THROTTLE,
        topics=tuple(topics),
    )


def _lookup(
    ctx: BrokerContext,
    tp: TopicPartition,
    timestamp: int,
    replica_id: int,
    leader_epoch: int,
    isolation_level: int = 0,
) -> tuple[int, int, int]:
    hosted = ctx.replica_manager.leader_partition(tp, leader_epoch)
    plog = hosted.log
    # Kafka's lastFetchableOffset: what a consumer of this isolation level may read.
    fetchable = (
        hosted.last_stable_offset if isolation_level == READ_COMMITTED else hosted.high_watermark
    )
    if timestamp == EARLIEST_TIMESTAMP:
        offset = plog.log_start_offset
    elif timestamp == LATEST_TIMESTAMP:
        offset = fetchable if replica_id == CONSUMER_REPLICA_ID else plog.log_end_offset
    else:
        # MAX_TIMESTAMP is answered at every version, as Kafka's fetchOffsetByTimestamp
        # does; clients send it only from v7 on.
        if timestamp == MAX_TIMESTAMP:
            found = plog.offset_of_max_timestamp()
        else:
            found = plog.offset_for_timestamp(timestamp)
        if found is None or found[0] >= fetchable:
            return -1, -1, -1
        offset, ts = found
        return offset, ts, _epoch_at(hosted, offset)
    return offset, -1, _epoch_at(hosted, offset)


def _epoch_at(hosted: Any, offset: int) -> int:
    epoch = -1
    for entry in hosted.log.leader_epoch_cache.entries:
        if entry.start_offset <= offset:
            epoch = entry.epoch
    return epoch
