"""DescribeLogDirs (35): every log dir of this broker with the replicas it holds.

Per replica: its size on disk (all segments), its offset lag and isFuture. The lag is
Kafka's (ReplicaManager.getLogEndOffsetLag): max(high watermark - log end offset, 0),
so 0 on a leader and, on a follower, how far it trails what the leader has told it is
committed; -1 for a log on disk whose partition this broker does not serve right now.
isFuture is always false: AlterReplicaLogDirs (moving a replica between dirs) is not
implemented, so there are no future logs.

kio has versions 1-5; v1 is the oldest any client sends (kafka-python 3, librdkafka),
v4 adds each dir's total/usable bytes, v5 the cordoned flag (always false here).
"""

from __future__ import annotations

import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from strandline.protocol.codec import RequestHeader
from strandline.protocol.messages import build, response_class
from strandline.security.acl import AclOperation
from strandline.server.apis.api_versions import NO_THROTTLE
from strandline.server.apis.registry import api
from strandline.server.authz import cluster_authorized
from strandline.server.context import BrokerContext
from strandline.storage.log import Log
from strandline.types import TopicPartition

API_KEY = 35
# Kafka's DescribeLogDirsResponse.INVALID_OFFSET_LAG.
INVALID_OFFSET_LAG = -1


def _wanted(request: Any) -> set[TopicPartition] | None:
    """None: every partition (a null topic list)."""
    if request.topics is None:
        return None
    return {TopicPartition(t.topic, int(p)) for t in request.topics for p in t.partitions}


def _offset_lag(ctx: BrokerContext, tp: TopicPartition, log: Log) -> int:
    hosted = ctx.replica_manager.partitions.get(tp)
    if hosted is None or hosted.log is not log:
        return INVALID_OFFSET_LAG
    return max(hosted.high_watermark - log.log_end_offset, 0)


@api(API_KEY, 1, 5)
async def handle(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    v = header.api_version
    result_cls = response_class(API_KEY, v, "DescribeLogDirsResult")
    topic_cls = response_class(API_KEY, v, "DescribeLogDirsTopic")
    partition_cls = response_class(API_KEY, v, "DescribeLogDirsPartition")
    if not cluster_authorized(ctx, AclOperation.DESCRIBE):
        return build(
            response_class(API_KEY, v, "DescribeLogDirsResponse"),
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.cluster_authorization_failed,
            results=(),
        )
    wanted = _wanted(request)
    by_dir: dict[Path, dict[str, list[tuple[TopicPartition, Log]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for tp, log in sorted(ctx.replica_manager.log_manager.all_logs().items()):
        if wanted is None or tp in wanted:
            by_dir[log.dir.parent.resolve()][tp.topic].append((tp, log))
    results = []
    for log_dir in ctx.config.log_dirs:
        path = log_dir.resolve()
        error, total, usable = ErrorCode.none, -1, -1
        try:
            usage = shutil.disk_usage(path)
            total, usable = usage.total, usage.free
        except OSError:
            # Kafka's answer for a log dir it cannot use.
            error = ErrorCode.kafka_storage_error
        topics: tuple[Any, ...] = ()
        if error == ErrorCode.none:
            topics = tuple(
                build(
                    topic_cls,
                    name=topic,
                    partitions=tuple(
                        build(
                            partition_cls,
                            partition_index=tp.partition,
                            partition_size=log.size_in_bytes,
                            offset_lag=_offset_lag(ctx, tp, log),
                            is_future_key=False,
                        )
                        for tp, log in replicas
                    ),
                )
                for topic, replicas in sorted(by_dir.get(path, {}).items())
            )
        results.append(
            build(
                result_cls,
                error_code=error,
                log_dir=str(path),
                topics=topics,
                total_bytes=total,
                usable_bytes=usable,
                is_cordoned=False,
            )
        )
    return build(
        response_class(API_KEY, v, "DescribeLogDirsResponse"),
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        results=tuple(results),
    )
