"""Topic ids (KIP-516) in the ZooKeeper era, through real clients.

Every topic gets a random id at creation, kept in its znode and in each partition dir's
`partition.metadata`; Metadata answers it; it survives a controller failover and a
broker restart; a topic deleted and created again gets a new one, and a producer that
sees the new id drops the partitions the new topic does not have."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from confluent_kafka import KafkaError, Message, TopicCollection
from confluent_kafka.admin import AdminClient, NewPartitions
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

from strandline.coordination.zk_client import ZkClient
from strandline.launcher.local_cluster import LocalCluster
from strandline.storage.checkpoint import PARTITION_METADATA, parse_partition_metadata
from strandline.topic_ids import topic_id_from_str, topic_id_to_str
from tests.integration.wire import WireClient
from tests.waiting import wait_until

from .support import consume_all, create_topic, producer, state_change_events


def metadata_topic_id(cluster: LocalCluster, topic: str, bootstrap: str | None = None) -> str:
    """The topic id a broker's Metadata answer carries (librdkafka's describe_topics),
    as Kafka prints it (base64)."""
    admin = AdminClient({"bootstrap.servers": bootstrap or cluster.bootstrap})
    description = admin.describe_topics(TopicCollection([topic]))[topic].result(15)
    found = uuid.UUID(
        int=(description.topic_id.get_most_significant_bits() % (1 << 64)) << 64
        | (description.topic_id.get_least_significant_bits() % (1 << 64))
    )
    return topic_id_to_str(found)


def znode_topic_id(cluster: LocalCluster, topic: str) -> str | None:
    assert cluster.zk_connect is not None
    with ZkClient(cluster.zk_connect).connect() as zk:
        found = zk.get_topic_id(topic)
    return None if found is None else topic_id_to_str(found)


def deletion_done(cluster: LocalCluster, topic: str) -> bool:
    """Its znodes gone (DeleteTopics answers before, once the brokers forgot it)."""
    assert cluster.zk_connect is not None
    with ZkClient(cluster.zk_connect).connect() as zk:
        return (
            topic not in zk.get_topics_marked_for_deletion()
            and zk.get_topic_assignment(topic) is None
        )


def dir_topic_ids(cluster: LocalCluster, broker_id: int, topic: str) -> dict[str, str]:
    data = cluster.broker_dir(broker_id) / "data"
    return {
        d.name: topic_id_to_str(parse_partition_metadata((d / PARTITION_METADATA).read_text()))
        for d in sorted(data.iterdir())
        if d.is_dir() and d.name.startswith(f"{topic}-") and not d.name.endswith("-delete")
    }


def broker_bootstrap(cluster: LocalCluster, broker_id: int) -> str:
    return cluster.status().live_brokers[broker_id]


ZERO = topic_id_to_str(uuid.UUID(int=0))


def test_a_recreated_topic_with_fewer_partitions_is_noticed_by_the_producer(
    cluster_factory,
) -> None:
    """The issue's scenario: auto-create off, a 10-partition topic deleted and created
    again with 3. librdkafka accepts a smaller partition count only with a new topic
    id; without one its records for partitions 3-9 stayed queued until they expired."""
    cluster = cluster_factory(brokers=1, auto_create_topics_enable="false")
    topic = "shrunk"
    create_topic(cluster, topic, 10, 1)
    first_id = metadata_topic_id(cluster, topic)
    assert first_id != ZERO

    # No periodic refresh: the producer learns of the change only from its own
    # requests' errors, as a producer busy with a cached topic does.
    p = producer(cluster, **{"topic.metadata.refresh.interval.ms": 600000})
    for partition in range(10):
        p.produce(topic, value=b"old", partition=partition)
    assert p.flush(15) == 0

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.delete_topics([topic], operation_timeout=20)[topic].result(30)
    wait_until("the deletion to complete", lambda: deletion_done(cluster, topic))
    create_topic(cluster, topic, 3, 1)
    second_id = metadata_topic_id(cluster, topic)
    assert second_id not in (ZERO, first_id)

    outcomes: list[tuple[str, int | None, KafkaError | None]] = []

    def on_delivery(kind: str):  # type: ignore[no-untyped-def]
        def record(err: KafkaError | None, msg: Message) -> None:
            outcomes.append((kind, msg.partition(), err))

        return record

    # Keyed records spread over what the producer believes are 10 partitions; one is
    # sent to partition 7 by the application itself.
    for i in range(100):
        p.produce(topic, key=b"key-%d" % i, value=b"new-%d" % i, on_delivery=on_delivery("keyed"))
    p.produce(topic, value=b"explicit", partition=7, on_delivery=on_delivery("explicit"))
    started = time.monotonic()
    # message.timeout.ms is 30 s: a record stuck on a vanished partition is still
    # queued when this flush gives up.
    assert p.flush(15) == 0, f"{len(p)} records stuck after 15 s"
    assert time.monotonic() - started < 15
    assert len(outcomes) == 101

    delivered = [(k, part) for k, part, err in outcomes if err is None]
    failed = [(k, part, err) for k, part, err in outcomes if err is not None]
    assert all(part is not None and part < 3 for _, part in delivered), delivered
    # Only records for the partitions that went away fail, and at once: librdkafka says
    # unknown partition, or, for a record already queued to that partition's broker
    # thread when it dropped the partition, that the handle was destroyed (seen once).
    vanished = (KafkaError._UNKNOWN_PARTITION, KafkaError._DESTROY)
    for _, part, err in failed:
        assert part is not None and part >= 3 and err is not None, failed
        assert err.code() in vanished, failed
    assert ("explicit", 7) in [(k, part) for k, part, _ in failed]
    assert sum(1 for k, _ in delivered if k == "keyed") > 0

    # After it noticed, every keyed record lands on the 3 partitions.
    late: list[tuple[int | None, KafkaError | None]] = []
    for i in range(30):
        p.produce(
            topic,
            key=b"late-%d" % i,
            value=b"late",
            on_delivery=lambda err, msg: late.append((msg.partition(), err)),
        )
    assert p.flush(15) == 0
    assert len(late) == 30 and all(err is None and part < 3 for part, err in late), late
    records = consume_all(cluster, topic, 3)
    assert b"old" not in records.values()
    assert dir_topic_ids(cluster, 1, topic) == {f"{topic}-{i}": second_id for i in range(3)}


def test_the_id_is_stable_across_failover_and_restart_and_new_for_a_recreated_topic(
    cluster_factory,
) -> None:
    cluster = cluster_factory(brokers=2)
    topic = "ided"
    create_topic(cluster, topic, 2, 2)
    topic_id = metadata_topic_id(cluster, topic)
    assert topic_id != ZERO
    assert znode_topic_id(cluster, topic) == topic_id
    for broker_id in (1, 2):
        assert metadata_topic_id(cluster, topic, broker_bootstrap(cluster, broker_id)) == topic_id
        assert dir_topic_ids(cluster, broker_id, topic) == {
            f"{topic}-0": topic_id,
            f"{topic}-1": topic_id,
        }

    controller = cluster.status().controller
    assert controller is not None
    other = 2 if controller == 1 else 1
    cluster.kill(controller, "KILL")
    wait_until("a new controller", lambda: cluster.status().controller == other)
    assert metadata_topic_id(cluster, topic, broker_bootstrap(cluster, other)) == topic_id

    cluster.start(controller)
    wait_until("both brokers live", lambda: sorted(cluster.status().live_brokers) == [1, 2])
    assert metadata_topic_id(cluster, topic, broker_bootstrap(cluster, controller)) == topic_id
    assert znode_topic_id(cluster, topic) == topic_id
    assert dir_topic_ids(cluster, controller, topic)[f"{topic}-0"] == topic_id

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.delete_topics([topic], operation_timeout=20)[topic].result(30)
    wait_until("the deletion to complete", lambda: deletion_done(cluster, topic))
    create_topic(cluster, topic, 2, 2)
    new_id = metadata_topic_id(cluster, topic)
    assert new_id not in (ZERO, topic_id)
    assert znode_topic_id(cluster, topic) == new_id


def test_the_controller_gives_an_id_to_a_topic_written_without_one(cluster_factory) -> None:
    """A topic znode as Kafka before 2.8 (or an old tool) wrote it: version 1, no id.
    The controller assigns one when it loads the topic, as Kafka's does."""
    cluster = cluster_factory(brokers=1)
    assert cluster.zk_connect is not None
    with ZkClient(cluster.zk_connect).connect() as zk:
        zk.kazoo.create("/brokers/topics/legacy", b'{"version":1,"partitions":{"0":[1],"1":[1]}}')
    assigned = wait_until("an id in the znode", lambda: znode_topic_id(cluster, "legacy"))
    wait_until("the topic in Metadata", lambda: metadata_topic_id(cluster, "legacy") == assigned)
    assert dir_topic_ids(cluster, 1, "legacy") == {"legacy-0": assigned, "legacy-1": assigned}


def test_a_replica_of_an_older_topic_of_the_same_name_is_not_reused(cluster_factory) -> None:
    """The topic's znodes were replaced (deleted and created again without the
    controller, which would have waited for this broker) while the broker was down.
    The assignment still names the broker, so only the id tells the dir is stale: it is
    deleted before the broker registers and the new topic starts empty."""
    cluster = cluster_factory(brokers=1)
    create_topic(cluster, "reborn", 2, 1)
    p = producer(cluster)
    for i in range(10):
        p.produce("reborn", value=b"old-%d" % i, partition=i % 2)
    assert p.flush(15) == 0
    old_id = znode_topic_id(cluster, "reborn")
    cluster.kill(1, "KILL")
    assert cluster.zk_connect is not None
    with ZkClient(cluster.zk_connect).connect() as zk:
        zk.delete_topic_znodes("reborn")
        zk.create_topic("reborn", {0: [1], 1: [1]})
    new_id = znode_topic_id(cluster, "reborn")
    assert new_id not in (None, old_id)
    data: Path = cluster.broker_dir(1) / "data"
    assert dir_topic_ids(cluster, 1, "reborn") == {"reborn-0": old_id, "reborn-1": old_id}

    cluster.start(1)
    deleted = [
        (e["topic"], e["partition"])
        for e in state_change_events(cluster, 1)
        if e["event"] == "stray-replica-deleted"
    ]
    assert deleted == [("reborn", 0), ("reborn", 1)]
    wait_until("the new topic online", lambda: metadata_topic_id(cluster, "reborn") == new_id)
    assert dir_topic_ids(cluster, 1, "reborn") == {"reborn-0": new_id, "reborn-1": new_id}
    assert consume_all(cluster, "reborn", 2) == {}
    segments = b"".join(f.read_bytes() for f in data.glob("reborn-*/*.log"))
    assert b"old-" not in segments


def test_metadata_v12_finds_a_topic_by_id_and_create_partitions_keeps_it(
    cluster_factory,
) -> None:
    cluster = cluster_factory(brokers=1)
    create_topic(cluster, "byid", 1, 1)
    topic_id = topic_id_from_str(metadata_topic_id(cluster, "byid"))
    unknown = uuid.uuid4()
    with WireClient(cluster.bootstrap) as client:
        response = client.request(
            MetadataRequest(
                topics=(
                    MetadataRequestTopic(topic_id=topic_id, name=None),
                    MetadataRequestTopic(topic_id=unknown, name=None),
                ),
                allow_auto_topic_creation=True,
                include_topic_authorized_operations=False,
            )
        )
    found = {t.topic_id: t for t in response.topics}
    assert found[topic_id].name == "byid" and found[topic_id].error_code == ErrorCode.none
    assert len(found[topic_id].partitions) == 1
    assert found[unknown].error_code == ErrorCode.unknown_topic_id
    assert found[unknown].name is None

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_partitions([NewPartitions("byid", 3)])["byid"].result(30)
    wait_until(
        "3 partitions with leaders",
        lambda: len([p for p in cluster.status().partitions if p.tp.topic == "byid"]) == 3,
    )
    text = topic_id_to_str(topic_id)
    assert znode_topic_id(cluster, "byid") == text
    wait_until(
        "partition.metadata in every dir",
        lambda: dir_topic_ids(cluster, 1, "byid") == {f"byid-{i}": text for i in range(3)},
    )
