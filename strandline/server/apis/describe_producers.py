"""DescribeProducers (61): the producers with state in a partition's log here — id,
epoch, last sequence and timestamp, coordinator epoch and the first offset of an open
transaction. Any replica answers (Kafka reads the local log), which is what
`kafka-transactions.sh find-hanging --broker-id` asks each broker for."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from strandline.errors import KafkaError
from strandline.protocol.codec import RequestHeader
from strandline.protocol.messages import build, response_class
from strandline.security.acl import AclOperation
from strandline.server.apis.api_versions import NO_THROTTLE
from strandline.server.apis.registry import api
from strandline.server.authz import require_topic
from strandline.server.context import BrokerContext
from strandline.types import TopicPartition

API_KEY = 61


@api(API_KEY, 0, 0)
async def handle(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    v = header.api_version
    producer_cls = response_class(API_KEY, v, "ProducerState")
    partition_cls = response_class(API_KEY, v, "PartitionResponse")
    topic_cls = response_class(API_KEY, v, "TopicResponse")
    topics = []
    for t in request.topics:
        partitions = []
        for index in t.partition_indexes:
            producers: list[Any] = []
            try:
                require_topic(ctx, AclOperation.READ, t.name)
                hosted = ctx.replica_manager.get_partition(TopicPartition(t.name, index))
                state = hosted.log.producer_state
                producers = [
                    build(
                        producer_cls,
                        producer_id=entry.producer_id,
                        producer_epoch=entry.producer_epoch,
                        last_sequence=entry.last_seq,
                        last_timestamp=entry.last_timestamp_ms,
                        coordinator_epoch=entry.coordinator_epoch,
                        current_txn_start_offset=entry.current_txn_first_offset,
                    )
                    for entry in state.producers.values()
                ]
                error, message = ErrorCode.none, None
            except KafkaError as e:
                error, message = e.code, str(e)
            partitions.append(
                build(
                    partition_cls,
                    partition_index=index,
                    error_code=error,
                    error_message=message,
                    active_producers=tuple(producers),
                )
            )
        topics.append(build(topic_cls, name=t.name, partitions=tuple(partitions)))
    return build(
        response_class(API_KEY, v, "DescribeProducersResponse"),
        throttle_time=NO_THROTTLE,
        topics=tuple(topics),
    )
