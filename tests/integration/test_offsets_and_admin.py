"""ListOffsets by timestamp, DeleteRecords, DescribeConfigs with sources,
IncrementalAlterConfigs retention, CreatePartitions; also AlterConfigs and
DescribeCluster — driven by confluent-kafka's clients."""

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
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from kio.schema.errors import ErrorCode

from . import wire
from .cluster_support import new_cluster, segment_files, wait_until_serving
from .wire import WireClient

ClusterFactory = Callable[..., Any]


def _topic() -> str:
    return f"adm-{uuid.uuid4().hex[:8]}"


def _create(
    bootstrap: str, topic: str, partitions: int = 1, config: dict[str, str] | None = None
) -> AdminClient:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(topic, num_partitions=partitions, replication_factor=1, config=config or {})
    for future in admin.create_topics([new], operation_timeout=10).values():
        future.result(timeout=15)
    wait_until_serving(bootstrap, topic, partitions)
    return admin


def _consumer(bootstrap: str) -> Consumer:
    return Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "it-admin", "enable.auto.commit": False}
    )


def test_list_offsets_by_timestamp_inside_a_batch(cluster_factory: ClusterFactory) -> None:
    bootstrap = new_cluster(cluster_factory).bootstrap
    topic = _topic()
    _create(bootstrap, topic)
    t0 = int(time.time() * 1000) - 3_600_000
    with WireClient(bootstrap) as client:
        # Two single batches of ten records each, the second starting 100 ms after the first.
        for base in (t0, t0 + 100):
            values = [f"v{base}-{i}".encode() for i in range(10)]
            builder_batch = wire.batch(values, timestamp_ms=base)
            response = client.request(wire.produce(topic, 0, builder_batch))
            assert wire.produce_error(response) == ErrorCode.none
    consumer = _consumer(bootstrap)
    try:
        # wire.batch stamps record i with base + i: the answers fall inside the batches.
        cases = {
            t0 - 1: 0,
            t0: 0,
            t0 + 1: 1,
            t0 + 5: 5,
            t0 + 9: 9,
            t0 + 10: 10,
            t0 + 100: 10,
            t0 + 103: 13,
            t0 + 109: 19,
        }
        # One query per call: librdkafka merges repeated partitions within one request.
        found = {
            ts: consumer.offsets_for_times([TopicPartition(topic, 0, ts)], timeout=10)[0]
            for ts in cases
        }
        assert {ts: tp.offset for ts, tp in found.items()} == cases
        # Past the last timestamp there is no such record: Kafka answers offset -1.
        (after,) = consumer.offsets_for_times([TopicPartition(topic, 0, t0 + 1000)], timeout=10)
        assert after.offset == -1
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 20)
    finally:
        consumer.close()


def test_delete_records_advances_log_start(cluster_factory: ClusterFactory) -> None:
    bootstrap = new_cluster(cluster_factory).bootstrap
    topic = _topic()
    admin = _create(bootstrap, topic)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(10):
        producer.produce(topic, value=f"r{i}".encode(), partition=0)
    assert producer.flush(15) == 0

    futures = admin.delete_records([TopicPartition(topic, 0, 6)], request_timeout=10)
    (deleted,) = (f.result(timeout=15) for f in futures.values())
    assert deleted.low_watermark == 6

    consumer = _consumer(bootstrap)
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (6, 10)
    finally:
        consumer.close()
    with WireClient(bootstrap) as client:
        below = wire.fetch_partition(client.request(wire.fetch(topic, 0, 2)))
        assert below.error_code == ErrorCode.offset_out_of_range
        at_start = wire.fetch_partition(client.request(wire.fetch(topic, 0, 6)))
        assert at_start.error_code == ErrorCode.none
        assert at_start.log_start_offset == 6
        assert at_start.records


# Topic configs Kafka reports for every topic (a subset: the ones this issue implements).
CORE_TOPIC_CONFIGS = {
    "cleanup.policy",
    "retention.ms",
    "retention.bytes",
    "segment.bytes",
    "segment.ms",
    "max.message.bytes",
    "flush.messages",
    "flush.ms",
    "segment.index.bytes",
    "message.timestamp.type",
}


def test_describe_configs_every_effective_config_with_source(
    cluster_factory: ClusterFactory,
) -> None:
    bootstrap = new_cluster(cluster_factory, config={"log.segment.bytes": "2097152"}).bootstrap
    topic = _topic()
    admin = _create(bootstrap, topic, config={"retention.ms": "123456789"})
    (future,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
    entries: dict[str, ConfigEntry] = future.result(timeout=15)
    missing = CORE_TOPIC_CONFIGS - set(entries)
    assert not missing, f"DescribeConfigs lacks {sorted(missing)}"

    assert entries["retention.ms"].value == "123456789"
    assert entries["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    # A broker-level log.segment.bytes is the topic's segment.bytes, from the static config.
    assert entries["segment.bytes"].value == "2097152"
    assert entries["segment.bytes"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert entries["cleanup.policy"].value == "delete"
    assert entries["cleanup.policy"].source == ConfigSource.DEFAULT_CONFIG.value
    assert entries["max.message.bytes"].value == "1048588"  # Kafka's message.max.bytes default
    for name, entry in entries.items():
        assert entry.source != ConfigSource.UNKNOWN_CONFIG.value, f"{name} has no source"


def test_incremental_alter_configs_retention_takes_effect(
    cluster_factory: ClusterFactory,
) -> None:
    cluster = new_cluster(cluster_factory, config={"log.retention.check.interval.ms": "200"})
    bootstrap = cluster.bootstrap
    topic = _topic()
    admin = _create(bootstrap, topic, config={"segment.bytes": "4096"})
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    for i in range(60):
        producer.produce(topic, value=f"{i:04d}".encode() * 100, partition=0)
        producer.flush(10)  # one batch per record: many small segments
    before = segment_files(cluster, topic, 0)
    assert len(before) > 3, "segment.bytes=4096 must roll segments"

    resource = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=15)
    (described,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
    entry = described.result(timeout=15)["retention.ms"]
    assert (entry.value, entry.source) == ("1", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)

    consumer = _consumer(bootstrap)
    try:
        deadline = time.monotonic() + 15
        low = 0
        while time.monotonic() < deadline:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)
            if low > 0 and len(segment_files(cluster, topic, 0)) < len(before):
                break
            time.sleep(0.2)
        assert low > 0, "retention must advance the log start offset"
        assert high == 60
        after = segment_files(cluster, topic, 0)
        assert len(after) < len(before), "whole segments are deleted"
        # The active segment is never deleted; what is left starts at the log start offset.
        assert int(after[0].stem) == low
    finally:
        consumer.close()


# AlterConfigs (API 33) is what is under test; confluent-kafka deprecates its wrapper.
@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")
def test_alter_configs_replaces_every_override(cluster_factory: ClusterFactory) -> None:
    """AlterConfigs (API 33, confluent-kafka's `alter_configs`): the configs sent replace
    the topic's overrides; one left out returns to its default."""
    bootstrap = new_cluster(cluster_factory).bootstrap
    topic = _topic()
    admin = _create(bootstrap, topic, config={"retention.ms": "123456789"})

    def described() -> dict[str, ConfigEntry]:
        (future,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
        return future.result(timeout=15)

    resource = ConfigResource(ResourceType.TOPIC, topic, set_config={"segment.bytes": "65536"})
    for future in admin.alter_configs([resource]).values():
        future.result(timeout=15)
    entries = described()
    assert (entries["segment.bytes"].value, entries["segment.bytes"].source) == (
        "65536",
        ConfigSource.DYNAMIC_TOPIC_CONFIG.value,
    )
    assert entries["retention.ms"].value == "604800000"  # back to log.retention.hours=168
    assert entries["retention.ms"].source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value

    unknown = ConfigResource(ResourceType.TOPIC, topic, set_config={"no.such.config": "1"})
    (failed,) = admin.alter_configs([unknown]).values()
    with pytest.raises(KafkaException) as raised:
        failed.result(timeout=15)
    assert raised.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert described()["segment.bytes"].value == "65536", "a refused change alters nothing"


def test_describe_cluster_names_the_cluster_controller_and_brokers(
    cluster_factory: ClusterFactory,
) -> None:
    cluster = new_cluster(cluster_factory)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    (metadata_cluster_id, metadata_controller) = _metadata_view(admin)

    description = admin.describe_cluster(request_timeout=15).result(timeout=20)

    assert description.cluster_id == metadata_cluster_id
    assert description.controller is not None
    assert description.controller.id == metadata_controller
    host, port = cluster.bootstrap.split(",")[0].rsplit(":", 1)
    assert [(n.id, n.host, n.port) for n in description.nodes] == [
        (metadata_controller, host, int(port))
    ]

    # kafka-python asks DescribeCluster too once ApiVersions lists it (else Metadata).
    from kafka import KafkaAdminClient

    other = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=10_000)
    try:
        assert other.api_versions().get(60) is not None, "DescribeCluster is advertised"
        described = other.describe_cluster()
    finally:
        other.close()
    assert described["cluster_id"] == metadata_cluster_id
    assert described["controller_id"] == metadata_controller
    assert [(b["broker_id"], b["host"], b["port"]) for b in described["brokers"]] == [
        (metadata_controller, host, int(port))
    ]


def _metadata_view(admin: AdminClient) -> tuple[str, int]:
    md = admin.list_topics(timeout=15)
    return md.cluster_id, md.controller_id


def test_create_partitions_then_clients_use_them(cluster_factory: ClusterFactory) -> None:
    bootstrap = new_cluster(cluster_factory).bootstrap
    topic = _topic()
    admin = _create(bootstrap, topic, partitions=2)
    for future in admin.create_partitions([NewPartitions(topic, 5)], operation_timeout=10).values():
        future.result(timeout=15)
    wait_until_serving(bootstrap, topic, 5)

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for partition in range(5):
        for i in range(20):
            producer.produce(topic, value=f"p{partition}-{i}".encode(), partition=partition)
    assert producer.flush(15) == 0

    consumer = _consumer(bootstrap)
    got: dict[int, list[bytes]] = {p: [] for p in range(5)}
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(5)])
        deadline = time.monotonic() + 20
        while sum(map(len, got.values())) < 100 and time.monotonic() < deadline:
            for msg in consumer.consume(500, 0.5):
                assert msg.error() is None, msg.error()
                got[msg.partition() or 0].append(msg.value() or b"")
    finally:
        consumer.close()
    assert got == {p: [f"p{p}-{i}".encode() for i in range(20)] for p in range(5)}
