"""The znode JSON shapes match Kafka's ZooKeeper writers."""

from __future__ import annotations

import json
import uuid

import pytest

from strandline.coordination import znodes
from strandline.coordination.znodes import BrokerRegistration, LeaderAndIsr
from strandline.topic_ids import random_topic_id, topic_id_from_str, topic_id_to_str
from strandline.types import TopicPartition


def test_paths_follow_kafka_layout() -> None:
    tp = TopicPartition("topic2", 1)
    assert znodes.broker_path(3) == "/brokers/ids/3"
    assert znodes.topic_path("topic2") == "/brokers/topics/topic2"
    assert znodes.partition_state_path(tp) == "/brokers/topics/topic2/partitions/1/state"
    assert znodes.topic_config_path("topic2") == "/config/topics/topic2"
    assert znodes.delete_topic_path("topic2") == "/admin/delete_topics/topic2"


def test_topic_assignment_matches_seed_example() -> None:
    seed = b'{"version": 1, "partitions": {"2": [1, 2, 3], "1": [0, 1, 2], "0": [3, 0, 1]}}'
    assignment = znodes.decode_topic_assignment(seed)
    assert assignment == {0: [3, 0, 1], 1: [0, 1, 2], 2: [1, 2, 3]}
    assert znodes.decode_topic_id(seed) is None
    # Kafka 2.8+ writes version 3 even without an id (TopicZNode.encode).
    assert json.loads(znodes.encode_topic_assignment(assignment)) == {
        **json.loads(seed),
        "version": 3,
        "adding_replicas": {},
        "removing_replicas": {},
    }


def test_topic_znode_v3_carries_the_topic_id_as_kafka_writes_it() -> None:
    # As a Kafka 3.x broker wrote it (TopicZNode.encode, Uuid.toString).
    kafka = (
        b'{"partitions":{"0":[1,2,3]},"topic_id":"bNvAefkHRCO8WbhYMqbgqg",'
        b'"adding_replicas":{},"removing_replicas":{},"version":3}'
    )
    topic_id = znodes.decode_topic_id(kafka)
    assert topic_id is not None
    assert topic_id_to_str(topic_id) == "bNvAefkHRCO8WbhYMqbgqg"
    assert znodes.decode_topic_assignment(kafka) == {0: [1, 2, 3]}
    encoded = znodes.encode_topic_assignment({0: [1, 2, 3]}, topic_id)
    assert json.loads(encoded) == json.loads(kafka)


def test_topic_id_text_round_trips_and_rejects_garbage() -> None:
    topic_id = random_topic_id()
    text = topic_id_to_str(topic_id)
    assert len(text) == 22 and not text.startswith("-")
    assert topic_id_from_str(text) == topic_id
    assert topic_id not in (uuid.UUID(int=0), uuid.UUID(int=1))
    for bad in ("", "abc", "x" * 30, "!!!!!!!!!!!!!!!!!!!!!!"):
        with pytest.raises(ValueError, match="topic id"):
            topic_id_from_str(bad)


def test_partition_state_matches_seed_example() -> None:
    seed = (
        b'{"controller_epoch": 1, "leader": 3, "version": 1, "leader_epoch": 0, "isr": [3, 0, 1]}'
    )
    state = znodes.decode_leader_and_isr(seed)
    assert state == LeaderAndIsr(leader=3, leader_epoch=0, isr=[3, 0, 1], controller_epoch=1)
    assert json.loads(znodes.encode_leader_and_isr(state)) == json.loads(seed)


def test_broker_registration_reads_seed_v1_and_writes_endpoints() -> None:
    seed = (
        b'{"jmx_port": -1, "timestamp": "1525741823119", "version": 1,'
        b' "host": "hadoop1", "port": 9092}'
    )
    reg = znodes.decode_broker_registration(7, seed, epoch=42)
    assert reg == BrokerRegistration(7, "hadoop1", 9092, None, (), 1525741823119, -1, 42)
    written = json.loads(
        znodes.encode_broker_registration(
            BrokerRegistration(1, "127.0.0.1", 9093, rack="r1", timestamp_ms=5)
        )
    )
    assert written["host"] == "127.0.0.1" and written["port"] == 9093
    assert written["endpoints"] == ["PLAINTEXT://127.0.0.1:9093"]
    assert written["rack"] == "r1" and written["timestamp"] == "5" and written["jmx_port"] == -1
    assert written["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}
    back = znodes.decode_broker_registration(1, znodes.encode_broker_registration(reg))
    assert (back.host, back.port, back.timestamp_ms) == ("hadoop1", 9092, 1525741823119)


def test_broker_registration_without_host_uses_first_endpoint() -> None:
    data = b'{"version":4,"host":null,"port":-1,"endpoints":["SSL://10.0.0.1:9094"]}'
    reg = znodes.decode_broker_registration(1, data)
    assert (reg.host, reg.port) == ("10.0.0.1", 9094)


def test_controller_and_epoch() -> None:
    seed = b'{"version": 1, "brokerid": 0, "timestamp": "1525741822769"}'
    assert znodes.decode_controller(seed) == 0
    assert json.loads(znodes.encode_controller(2, 1525741822769)) == {
        "version": 1,
        "brokerid": 2,
        "timestamp": "1525741822769",
    }
    assert znodes.decode_controller(b"4") == 4  # Kafka 0.8's bare integer
    assert znodes.encode_controller_epoch(12) == b"12"  # plain integer, not JSON
    assert znodes.decode_controller_epoch(b"12") == 12


def test_reassignment_matches_seed_example() -> None:
    seed = (
        b'{"version": 1, "partitions": [{"topic": "Foo", "partition": 1, "replicas": [0, 1, 3]}]}'
    )
    decoded = znodes.decode_reassignment(seed)
    assert decoded == {TopicPartition("Foo", 1): [0, 1, 3]}
    assert json.loads(znodes.encode_reassignment(decoded)) == json.loads(seed)


def test_preferred_replica_election_matches_seed_example() -> None:
    seed = (
        b'{"version": 1, "partitions": [{"topic": "Bar", "partition": 0},'
        b' {"topic": "Foo", "partition": 1}]}'
    )
    decoded = znodes.decode_preferred_replica_election(seed)
    assert decoded == [TopicPartition("Bar", 0), TopicPartition("Foo", 1)]
    assert json.loads(znodes.encode_preferred_replica_election(decoded)) == json.loads(seed)


def test_delete_topics_and_config_and_isr_change() -> None:
    assert znodes.decode_delete_topics(b'{"version": 1, "topics": ["foo", "bar"]}') == [
        "foo",
        "bar",
    ]
    config = {"retention.ms": "1000", "cleanup.policy": "delete"}
    assert json.loads(znodes.encode_topic_config(config)) == {"version": 1, "config": config}
    assert znodes.decode_topic_config(znodes.encode_topic_config(config)) == config
    tps = [TopicPartition("a", 0), TopicPartition("b", 2)]
    data = znodes.encode_isr_change_notification(tps)
    assert json.loads(data) == {
        "version": 1,
        "partitions": [{"topic": "a", "partition": 0}, {"topic": "b", "partition": 2}],
    }
    assert znodes.decode_isr_change_notification(data) == tps
    assert znodes.decode_config_change(znodes.encode_config_change("topics/a")) == "topics/a"
