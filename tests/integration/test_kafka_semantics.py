"""Kafka semantics clients rely on, through real clients: record errors
(KIP-467), OffsetCommit for unknown partitions, ListOffsets MAX_TIMESTAMP (KIP-734),
authorized operations (KIP-430) and the standard configs."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.record.default_records import DefaultRecordBatchBuilder
from kio.schema.errors import ErrorCode

from . import wire
from .cluster_support import new_cluster, wait_until_serving
from .test_compaction import read_partition

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


# --- item 1: record errors (KIP-467) ---------------------------------------------------


def _deliver_all(producer: Producer, records: list[tuple[bytes | None, bytes, int | None]]) -> list:
    """Produce `records` (key, value, timestamp) in one batch; the delivery reports' errors
    in the order sent (None: delivered)."""
    reports: dict[int, Any] = {}
    for i, (key, value, ts) in enumerate(records):
        kwargs: dict[str, Any] = {"timestamp": ts} if ts is not None else {}
        producer.produce(
            producer_topic(producer),
            value,
            key=key,
            on_delivery=lambda err, _msg, i=i: reports.__setitem__(i, err),
            **kwargs,
        )
    assert producer.flush(15) == 0
    return [reports[i] for i in range(len(records))]


_TOPICS: dict[int, str] = {}


def producer_topic(producer: Producer) -> str:
    return _TOPICS[id(producer)]


def _producer(bootstrap: str, topic: str, linger_ms: int = 200) -> Producer:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": linger_ms, "retries": 0, "acks": "all"}
    )
    _TOPICS[id(producer)] = topic
    return producer


def _consume_values(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"read-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    values: list[bytes] = []
    deadline = time.monotonic() + 15
    try:
        while len(values) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
    finally:
        consumer.close()
    return values


@pytest.mark.parametrize("policy", ["compact", "delete,compact"])
def test_keyless_record_on_compacted_topic_is_invalid_record(
    cluster_factory: ClusterFactory, policy: str
) -> None:
    bootstrap = new_cluster(cluster_factory).bootstrap
    topic = _topic()
    _create(bootstrap, topic, config={"cleanup.policy": policy})
    # A linger no machine reaches: nothing leaves before _deliver_all's flush, which
    # sends the three as one batch (with 200 ms, a loaded machine once sent k1 alone).
    producer = _producer(bootstrap, topic, linger_ms=60_000)
    errors = _deliver_all(producer, [(b"k1", b"a", None), (None, b"b", None), (b"k3", b"c", None)])
    # The whole batch is refused (librdkafka fails all three with INVALID_RECORD);
    # test_record_errors_on_the_wire checks which records the answer names.
    assert all(e is not None and e.code() == KafkaError.INVALID_RECORD for e in errors), errors
    assert _deliver_all(producer, [(b"k4", b"d", None)]) == [None]
    assert _consume_values(bootstrap, topic, 1) == [b"d"]


def test_record_errors_on_the_wire(cluster_factory: ClusterFactory) -> None:
    """batch_index names exactly the bad records; the error_message says why."""
    bootstrap = new_cluster(cluster_factory).bootstrap
    topic = _topic()
    _create(bootstrap, topic, config={"cleanup.policy": "compact"})
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    now = int(time.time() * 1000)
    for i, key in enumerate([b"a", None, b"c", None]):
        builder.append(i, timestamp=now, key=key, value=b"v", headers=[])
    with wire.WireClient(bootstrap) as client:
        response = client.request(wire.produce(topic, 0, bytes(builder.build())))
    partition = response.responses[0].partition_responses[0]
    assert partition.error_code == ErrorCode.invalid_record
    assert [e.batch_index for e in partition.record_errors] == [1, 3]
    assert all(
        "without key" in (e.batch_index_error_message or "") for e in partition.record_errors
    )
    assert "2 record errors" in (partition.error_message or "")


def test_timestamp_out_of_range_is_invalid_timestamp(cluster_factory: ClusterFactory) -> None:
    bootstrap = new_cluster(cluster_factory).bootstrap
    topic = _topic()
    _create(bootstrap, topic, config={"message.timestamp.difference.max.ms": "60000"})
    producer = _producer(bootstrap, topic)
    hour_ago = int(time.time() * 1000) - 3_600_000
    errors = _deliver_all(producer, [(None, b"old", hour_ago)])
    assert errors[0] is not None and errors[0].code() == KafkaError.INVALID_TIMESTAMP, errors
    assert _deliver_all(producer, [(None, b"now", None)]) == [None]
    assert _consume_values(bootstrap, topic, 1) == [b"now"]


# --- item 4: ListOffsets MAX_TIMESTAMP (KIP-734) ---------------------------------------


def test_list_offsets_max_timestamp(cluster_factory: ClusterFactory) -> None:
    from confluent_kafka.admin import OffsetSpec

    bootstrap = new_cluster(cluster_factory).bootstrap
    topic = _topic()
    admin = _create(bootstrap, topic)
    producer = _producer(bootstrap, topic)
    t0 = int(time.time() * 1000) - 60_000
    # One batch whose largest timestamp is its second record, then a batch of older ones:
    # neither the last offset nor a batch's last record is the answer.
    stamps = [t0, t0 + 500, t0 + 100]
    assert _deliver_all(producer, [(None, b"x", ts) for ts in stamps]) == [None] * 3
    assert _deliver_all(producer, [(None, b"y", t0 + 10), (None, b"z", t0 + 20)]) == [None] * 2
    tp = TopicPartition(topic, 0)
    result = admin.list_offsets({tp: OffsetSpec.max_timestamp()})[tp].result(timeout=10)
    assert (result.offset, result.timestamp) == (1, t0 + 500)


# --- item 5: authorized operations (KIP-430) ------------------------------------------


def test_authorized_operations_without_an_authorizer(cluster_factory: ClusterFactory) -> None:
    """Without an authorizer the principal may do everything each resource supports."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AclOperation

    bootstrap = new_cluster(cluster_factory).bootstrap
    topic = _topic()
    admin = _create(bootstrap, topic)
    cluster = admin.describe_cluster(include_authorized_operations=True).result(timeout=10)
    assert set(cluster.authorized_operations or []) == {
        AclOperation.CREATE,
        AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
    }
    described = admin.describe_topics(TopicCollection([topic]), include_authorized_operations=True)[
        topic
    ].result(timeout=10)
    assert set(described.authorized_operations or []) == {
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.CREATE,
        AclOperation.DESCRIBE,
        AclOperation.DELETE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    }
    # Not asked for: omitted (librdkafka shows None).
    plain = admin.describe_cluster().result(timeout=10)
    assert not plain.authorized_operations
    # DescribeGroups v3+ as well, for a group that exists.
    group = f"g-{uuid.uuid4().hex[:6]}"
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
    finally:
        consumer.close()
    described_group = admin.describe_consumer_groups([group], include_authorized_operations=True)[
        group
    ].result(timeout=10)
    assert {AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE} <= set(
        described_group.authorized_operations or []
    ), described_group.authorized_operations


# --- item 6: the standard configs ----------------------------------------------------


def _stored_codecs(bootstrap: str, topic: str) -> list[int]:
    """The compression codec of every batch the broker holds for partition 0."""
    from strandline.protocol.record_batch import iter_batches

    with wire.WireClient(bootstrap) as client:
        partition = wire.fetch_partition(client.request(wire.fetch(topic, 0, 0)))
    return [h.compression_codec for h in iter_batches(bytes(partition.records or b""))]


@pytest.mark.parametrize(
    ("topic_codec", "producer_codec", "stored"),
    [
        ("gzip", "none", 1),
        ("uncompressed", "lz4", 0),
        ("zstd", "snappy", 4),
        ("producer", "lz4", 3),
    ],
)
def test_topic_compression_type_recompresses(
    cluster_factory: ClusterFactory, topic_codec: str, producer_codec: str, stored: int
) -> None:
    bootstrap = new_cluster(cluster_factory).bootstrap
    topic = _topic()
    _create(bootstrap, topic, config={"compression.type": topic_codec})
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 100,
            "compression.type": producer_codec,
            "enable.idempotence": True,
        }
    )
    _TOPICS[id(producer)] = topic
    sent = [(f"k{i}".encode(), f"value-{i}".encode() * 20, None) for i in range(30)]
    assert _deliver_all(producer, sent) == [None] * 30
    codecs = _stored_codecs(bootstrap, topic)
    assert codecs and set(codecs) == {stored}, codecs
    assert _consume_values(bootstrap, topic, 30) == [v for _k, v, _t in sent]


def test_max_compaction_lag_compacts_a_topic_below_its_dirty_ratio(
    cluster_factory: ClusterFactory,
) -> None:
    """min.cleanable.dirty.ratio 0.99 alone would never clean this log: the active
    segment rolls at max.compaction.lag.ms and the cleaner compacts the overdue one."""
    bootstrap = new_cluster(cluster_factory, config={"log.cleaner.backoff.ms": "200"}).bootstrap
    topic = _topic()
    _create(
        bootstrap,
        topic,
        config={
            "cleanup.policy": "compact",
            "min.cleanable.dirty.ratio": "0.99",
            "max.compaction.lag.ms": "1500",
        },
    )
    producer = _producer(bootstrap, topic)
    sent = [(b"k%d" % (i % 5), b"v%d" % i, None) for i in range(50)]
    assert _deliver_all(producer, sent) == [None] * 50
    deadline = time.monotonic() + 20
    values = [m.value() for m in read_partition(bootstrap, topic, 0)]
    while len(values) > 5 and time.monotonic() < deadline:
        time.sleep(0.3)
        values = [m.value() for m in read_partition(bootstrap, topic, 0)]
    assert sorted(values) == sorted(b"v%d" % i for i in range(45, 50)), values


def test_standard_configs_of_missing_features_are_accepted_and_say_so(
    cluster_factory: ClusterFactory,
) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    bootstrap = new_cluster(cluster_factory).bootstrap
    topic = _topic()
    admin = _create(bootstrap, topic, config={"preallocate": "true", "compression.zstd.level": "5"})
    # A bad value of such a config is still refused, as Kafka refuses it.
    bad = NewTopic(_topic(), 1, 1, config={"compression.zstd.level": "99"})
    with pytest.raises(KafkaException) as info:
        admin.create_topics([bad])[bad.topic].result(timeout=10)
    assert info.value.args[0].code() == KafkaError.INVALID_CONFIG
    broker = ConfigResource(ResourceType.BROKER, "1")
    change = ConfigEntry(
        "sasl.kerberos.min.time.before.relogin",
        "120000",
        incremental_operation=AlterConfigOpType.SET,
    )
    broker.add_incremental_config(change)
    for future in admin.incremental_alter_configs([broker]).values():
        future.result(timeout=10)
    described = admin.describe_configs([ConfigResource(ResourceType.BROKER, "1")])
    entries = next(iter(described.values())).result(timeout=10)
    assert entries["sasl.kerberos.min.time.before.relogin"].value == "120000"
    described = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)])
    entries = next(iter(described.values())).result(timeout=10)
    assert entries["preallocate"].value == "true"
    assert entries["compression.type"].value == "producer"
    # DescribeConfigs' documentation (librdkafka does not show it): Kafka's, after why
    # the config does nothing here.
    docs = {
        **_documentation(bootstrap, 4, "1"),
        **_documentation(bootstrap, 2, topic),
    }
    assert docs["sasl.kerberos.min.time.before.relogin"].startswith(
        "No effect in Strandline: Kerberos"
    ), docs["sasl.kerberos.min.time.before.relogin"]
    assert docs["preallocate"].startswith("No effect in Strandline"), docs["preallocate"]
    assert docs["compression.type"].startswith("Specify the final compression type")
    assert docs["max.compaction.lag.ms"].startswith("The maximum time a message will remain")


def _documentation(bootstrap: str, resource_type: int, name: str) -> dict[str, str]:
    from kio.schema.describe_configs import v4
    from kio.static.primitive import i8

    request = v4.request.DescribeConfigsRequest(
        resources=(
            v4.request.DescribeConfigsResource(
                resource_type=i8(resource_type), resource_name=name, configuration_keys=None
            ),
        ),
        include_synonyms=False,
        include_documentation=True,
    )
    with wire.WireClient(bootstrap) as client:
        response = client.request(request)
    (result,) = response.results
    assert result.error_code == ErrorCode.none, result.error_message
    return {c.name: c.documentation or "" for c in result.configs}
