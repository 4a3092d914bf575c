"""OffsetForLeaderEpoch (23): the end offset of a leader epoch (KIP-101/KIP-279).

A follower asks it before fetching to find where its log diverges from the leader's.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from strandline.errors import ClusterAuthorizationFailedError, KafkaError
from strandline.protocol.codec import RequestHeader
from strandline.protocol.messages import build, response_class
from strandline.security.acl import AclOperation
from strandline.server.apis.api_versions import NO_THROTTLE
from strandline.server.apis.registry import api
from strandline.server.authz import cluster_authorized, require_topic
from strandline.server.context import BrokerContext
from strandline.types import TopicPartition

API_KEY = 23


@api(API_KEY, 2, 4)
async def handle(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    v = header.api_version
    partition_cls = response_class(API_KEY, v, "EpochEndOffset")
    topic_cls = response_class(API_KEY, v, "OffsetForLeaderTopicResult")
    rm = ctx.replica_manager
    # Followers (replica_id >= 0, v3+) need CLUSTER_ACTION; clients DESCRIBE per topic.
    follower = getattr(request, "replica_id", -1) >= 0
    follower_allowed = follower and cluster_authorized(ctx, AclOperation.CLUSTER_ACTION)
    topics = []
    for t in request.topics:
        partitions = []
        for p in t.partitions:
            tp = TopicPartition(t.topic, p.partition)
            error, epoch, end = ErrorCode.none, -1, -1
            try:
                if follower and not follower_allowed:
                    raise ClusterAuthorizationFailedError(
                        "CLUSTER_ACTION needed to fetch as a replica"
                    )
                if not follower:
                    require_topic(ctx, AclOperation.DESCRIBE, t.topic)
                hosted = rm.leader_partition(tp, p.current_leader_epoch)
                epoch, end = hosted.log.leader_epoch_cache.end_offset_for(
                    p.leader_epoch, hosted.log.log_end_offset
                )
            except KafkaError as e:
                error = e.code
            partitions.append(
                build(
                    partition_cls,
                    error_code=error,
                    partition=p.partition,
                    leader_epoch=epoch,
                    end_offset=end,
                )
            )
        topics.append(build(topic_cls, topic=t.topic, partitions=tuple(partitions)))
    return build(
        response_class(API_KEY, v, "OffsetForLeaderEpochResponse"),
        throttle_time=NO_THROTTLE,
        topics=tuple(topics),
    )
