"""Helpers for multi-broker tests: waiting on cluster state, reading replicas' bytes."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from strandline.launcher.local_cluster import ClusterStatus, LocalCluster
from strandline.storage import replica_verify
from strandline.types import PartitionInfo, TopicPartition
from tests.waiting import wait_until


def partition_status(cluster: LocalCluster, tp: TopicPartition) -> PartitionInfo:
    status: ClusterStatus = cluster.status()
    [found] = [p for p in status.partitions if p.tp == tp]
    return found


def create_topic(
    cluster: LocalCluster,
    name: str,
    partitions: int,
    rf: int,
    *,
    assignment: list[list[int]] | None = None,
    **config: str,
) -> None:
    """Create and wait for leaders; `assignment` (partition -> replicas, preferred leader
    first) places the replicas instead of the broker."""
    settings = {k.replace("_", "."): v for k, v in config.items()}
    if assignment is not None:
        assert len(assignment) == partitions and {len(r) for r in assignment} == {rf}
        topic = NewTopic(
            name, num_partitions=partitions, replica_assignment=assignment, config=settings
        )
    else:
        topic = NewTopic(name, partitions, rf, config=settings)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    futures = admin.create_topics([topic], operation_timeout=20)
    futures[name].result(30)
    wait_until(
        f"{name} to have leaders everywhere",
        lambda: all(not p.offline for p in cluster.status().partitions if p.tp.topic == name),
    )


def producer(cluster: LocalCluster, **extra: object) -> Producer:
    config: dict[str, object] = {
        "bootstrap.servers": cluster.bootstrap,
        "acks": "all",
        "linger.ms": 5,
        "message.timeout.ms": 30000,
        "retry.backoff.ms": 50,
        "topic.metadata.refresh.interval.ms": 500,
    }
    config.update(extra)
    return Producer(config)


def consume_all(
    cluster: LocalCluster, topic: str, partitions: int, timeout_s: float = 30.0
) -> dict[tuple[int, int], bytes]:
    """(partition, offset) -> value for every record below each partition's high
    watermark (reading to the end, not to a count: retries may have added duplicates)."""
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": f"verify-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 500,
        }
    )
    ends = {
        p: consumer.get_watermark_offsets(CkTopicPartition(topic, p), timeout=10)[1]
        for p in range(partitions)
    }
    consumer.assign([CkTopicPartition(topic, p, 0) for p in range(partitions)])
    records: dict[tuple[int, int], bytes] = {}
    next_offset = dict.fromkeys(ends, 0)
    deadline = time.monotonic() + timeout_s
    try:
        while any(next_offset[p] < ends[p] for p in ends) and time.monotonic() < deadline:
            for message in consumer.consume(1000, 0.5):
                if message.error():
                    continue
                records[(message.partition(), message.offset())] = message.value()
                next_offset[message.partition()] = message.offset() + 1
    finally:
        consumer.close()
    return records


def replica_batches(cluster: LocalCluster, broker_id: int, tp: TopicPartition, below: int) -> bytes:
    """The bytes of every batch below offset `below` in one replica's segment files (a
    replica verification in the spirit of Kafka's ReplicaVerificationTool)."""
    return replica_verify.replica_batches(
        replica_verify.partition_dir(cluster.broker_dir(broker_id) / "data", tp), below
    )


def state_change_events(cluster: LocalCluster, broker_id: int) -> list[dict[str, object]]:
    path: Path = cluster.broker_dir(broker_id) / "logs" / "state-change.log"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def delivery_recorder(
    acked: dict[tuple[int, int], bytes], errors: list[str]
) -> Callable[..., None]:
    def on_delivery(err: KafkaException | None, message: object) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            acked[(message.partition(), message.offset())] = message.value()  # type: ignore[attr-defined]

    return on_delivery


def kill_leaders_in_turn(cluster: LocalCluster, topic: str, partitions: int) -> list[int]:
    """SIGKILL the leader of each partition in turn; after each failover restart the
    broker and wait until it is back in every ISR. Returns the brokers killed."""
    killed = []
    for partition in range(partitions):
        tp = TopicPartition(topic, partition)
        leader = wait_until(
            f"a leader for {tp}", lambda tp=tp: partition_status(cluster, tp).leader
        )
        assert leader is not None and leader > 0
        cluster.kill(leader, "KILL")
        killed.append(leader)
        wait_until(
            f"{tp} to fail over from {leader}",
            lambda tp=tp, dead=leader: (
                (p := partition_status(cluster, tp)).leader not in (None, -1, dead) and p.leader
            ),
        )
        cluster.start(leader)
        wait_until(
            f"broker {leader} back in the ISR of every partition",
            lambda b=leader: all(b in p.isr for p in cluster.status().partitions),
            timeout_s=30,
        )
    return killed


def scrape(
    cluster: LocalCluster, broker_id: int
) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """A broker's Prometheus endpoint, parsed: (sample name, sorted labels) -> value."""
    url = cluster.brokers[broker_id].metrics_url
    assert url is not None, f"broker {broker_id} has no metrics_url"
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def metric(
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str
) -> float:
    """One sample's value (0 when absent: Prometheus omits counters never bumped)."""
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)
