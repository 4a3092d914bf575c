"""WriteTxnMarkers (27): the transaction coordinator asks a partition leader to end a
transaction.

Each marker (producer id and epoch, COMMIT or ABORT, coordinator epoch) is appended to
every named partition as a control batch and waited for like an acks=all produce
(`ReplicaManager.write_txn_marker`); the answer carries one error code per partition.
Only brokers may send it: CLUSTER_ACTION on the cluster, as for the other inter-broker
APIs; without it every partition answers CLUSTER_AUTHORIZATION_FAILED (Kafka).

After a marker is in a `__consumer_offsets` partition, the group coordinator makes the
producer's transactional offset commits there visible (commit) or drops them (abort),
Kafka's onTransactionCompleted.

kio has no v0 of this API (v0 and v1 differ only in flexible encoding); v1 is what
Kafka 2.8+ brokers send, and our own coordinator sends it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kio.schema.errors import ErrorCode

from strandline.group.partitioning import OFFSETS_TOPIC
from strandline.protocol.codec import RequestHeader
from strandline.protocol.messages import build, response_class
from strandline.security.acl import AclOperation
from strandline.server.apis.registry import api
from strandline.server.authz import cluster_authorized
from strandline.server.context import BrokerContext
from strandline.types import TopicPartition

API_KEY = 27
log = logging.getLogger(__name__)


@api(API_KEY, 1, 1)
async def handle(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    v = header.api_version
    allowed = cluster_authorized(ctx, AclOperation.CLUSTER_ACTION)
    rm = ctx.replica_manager

    async def write(marker: Any, tp: TopicPartition) -> ErrorCode:
        if not allowed:
            return ErrorCode.cluster_authorization_failed
        error = await rm.write_txn_marker(
            tp,
            marker.producer_id,
            marker.producer_epoch,
            marker.coordinator_epoch,
            marker.transaction_result,
        )
        if error == ErrorCode.none and tp.topic == OFFSETS_TOPIC:
            try:
                ctx.group_service.complete_txn_offsets(
                    tp.partition, marker.producer_id, marker.transaction_result
                )
            except Exception:
                # The marker is written: the coordinator must not resend it. The group
                # state catches up when the partition is loaded again.
                log.exception("completing transactional offsets on %s failed", tp)
        return error

    # Every (marker, partition) at once: each waits for its own replication, and
    # writes to one partition still start in request order.
    jobs = [
        write(marker, TopicPartition(topic.name, index))
        for marker in request.markers
        for topic in marker.topics
        for index in topic.partition_indexes
    ]
    errors = iter(await asyncio.gather(*jobs))

    partition_cls = response_class(API_KEY, v, "WritableTxnMarkerPartitionResult")
    topic_cls = response_class(API_KEY, v, "WritableTxnMarkerTopicResult")
    marker_cls = response_class(API_KEY, v, "WritableTxnMarkerResult")
    markers = []
    for marker in request.markers:
        topics = []
        for topic in marker.topics:
            partitions = tuple(
                build(partition_cls, partition_index=index, error_code=next(errors))
                for index in topic.partition_indexes
            )
            topics.append(build(topic_cls, name=topic.name, partitions=partitions))
        markers.append(build(marker_cls, producer_id=marker.producer_id, topics=tuple(topics)))
    return build(response_class(API_KEY, v, "WriteTxnMarkersResponse"), markers=tuple(markers))
