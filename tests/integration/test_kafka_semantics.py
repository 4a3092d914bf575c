"""Issue 27: Kafka semantics clients rely on, through real clients: record errors
(KIP-467), OffsetCommit for unknown partitions, ListOffsets MAX_TIMESTAMP (KIP-734),
authorized operations (KIP-430) and the standard configs."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .cluster_support import new_cluster, wait_until_serving

ClusterFactory = Callable[..., Any]


def _topic(prefix: str = "k27") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _create(
    bootstrap: str, topic: str, partitions: int = 1, config: dict[str, str] | None = None
) -> AdminClient:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(topic, num_partitions=partitions, replication_factor=1, config=config or {})
    for future in admin.create_topics([new], operation_timeout=10).values():
        future.result(timeout=15)
    wait_until_serving(bootstrap, topic, partitions)
    return admin


# --- item 2: OffsetCommit for partitions that do not exist ---------------------------


def test_offset_commit_for_unknown_partitions_is_refused(cluster_factory: ClusterFactory) -> None:
    bootstrap = new_cluster(cluster_factory, auto_create_topics_enable="false").bootstrap
    topic = _topic()
    admin = _create(bootstrap, topic)
    group = f"g-{uuid.uuid4().hex[:6]}"
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    try:
        missing_topic = TopicPartition(_topic("absent"), 0, 5)
        missing_partition = TopicPartition(topic, 7, 5)
        present = TopicPartition(topic, 0, 3)
        for tp in (missing_topic, missing_partition):
            with pytest.raises(KafkaException) as info:
                consumer.commit(offsets=[tp], asynchronous=False)
            assert info.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART, info.value
        answered = consumer.commit(offsets=[present], asynchronous=False)
        assert answered is not None and answered[0].error is None
        committed = consumer.committed([missing_topic, missing_partition, present], timeout=10)
        got = {(tp.topic, tp.partition): tp.offset for tp in committed}
        assert got[(topic, 0)] == 3
        assert got[(missing_topic.topic, 0)] < 0 and got[(topic, 7)] < 0, got
    finally:
        consumer.close()

    # The admin API's AlterConsumerGroupOffsets is OffsetCommit too.
    from confluent_kafka import ConsumerGroupTopicPartitions

    futures = admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 9, 1)])]
    )
    for future in futures.values():
        result = future.result(timeout=10)
        errors = [tp.error for tp in result.topic_partitions]
        assert len(errors) == 1 and errors[0] is not None, result.topic_partitions
        assert errors[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART, errors
    listed = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 9)])]
    )
    for future in listed.values():
        result = future.result(timeout=10)
        assert all(tp.offset < 0 for tp in result.topic_partitions), result.topic_partitions
