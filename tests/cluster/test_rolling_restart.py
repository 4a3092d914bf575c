"""`strandline cluster rolling-restart`: the pure checks, then a real roll of a 3-broker
cluster under an acks=all producer and a consumer group."""

from __future__ import annotations

import threading
import time
from typing import Any

from confluent_kafka import Consumer

from strandline.cli.rolling_restart import (
    LocalRestarter,
    Roller,
    broker_order,
    not_in_isr,
    preferred_elsewhere,
    restart_blockers,
)
from strandline.launcher.local_cluster import LocalCluster
from strandline.types import PartitionInfo, TopicPartition
from tests.cli.support import tool
from tests.cluster.support import create_topic
from tests.conftest import ClusterFactory
from tests.faults.test_netns_cluster import PacedProducer, assert_nothing_acked_lost
from tests.waiting import wait_until

_run, ok, fails = tool("cluster", "rolling-restart")


def part(topic: str, replicas: list[int], isr: list[int], leader: int) -> PartitionInfo:
    return PartitionInfo.of(TopicPartition(topic, 0), leader, replicas, isr, live=replicas)


def test_a_broker_is_refused_when_a_partition_would_go_under_min_isr() -> None:
    min_isr = {"a": 2, "b": 1}.__getitem__
    healthy = [part("a", [1, 2, 3], [1, 2, 3], 1), part("b", [1, 2], [1, 2], 2)]
    assert restart_blockers(1, healthy, min_isr) == []
    shrunk = [part("a", [1, 2, 3], [1, 2], 1), part("b", [1], [1], 1)]
    assert restart_blockers(1, shrunk, min_isr) == [
        "a-0: ISR [1, 2] would shrink to [2], below min.insync.replicas=2",
        "b-0: ISR [1] would shrink to [], below min.insync.replicas=1",
    ]
    # Not in the ISR already: restarting it takes nothing away.
    assert restart_blockers(3, shrunk, min_isr) == []
    assert not_in_isr(3, shrunk) == [TopicPartition("a", 0)]
    assert preferred_elsewhere(1, [part("a", [1, 2, 3], [1, 2, 3], 2)]) == [TopicPartition("a", 0)]
    assert preferred_elsewhere(2, [part("a", [1, 2, 3], [1, 2, 3], 2)]) == []
    assert broker_order({3: "", 1: "", 2: ""}, controller=2) == [1, 3, 2]


def test_bad_invocations_get_one_clear_line(tmp_path: object) -> None:
    assert "give either --data-dir" in fails()
    assert "give either --data-dir" in fails("--data-dir", "x", "--zookeeper", "h:1")
    assert "--zookeeper needs --restart-command" in fails("--zookeeper", "127.0.0.1:1/x")
    assert "no cluster in" in fails("--data-dir", str(tmp_path))


class GroupReader:
    """A consumer-group member reading the topic in the background, as an application
    would during the roll."""

    def __init__(self, cluster: LocalCluster, topic: str) -> None:
        self.values: set[bytes] = set()
        self.consumer = Consumer(
            {
                "bootstrap.servers": cluster.bootstrap,
                "group.id": "roll-readers",
                "auto.offset.reset": "earliest",
                "topic.metadata.refresh.interval.ms": 500,
            }
        )
        self.consumer.subscribe([topic])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            message: Any = self.consumer.poll(0.2)
            if message is not None and message.error() is None:
                self.values.add(message.value())

    def __enter__(self) -> GroupReader:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.consumer.close()


def test_rolling_restart_under_load_loses_nothing(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(
        3,
        offsets_topic_replication_factor=3,
        replica_lag_time_max_ms=2000,
        min_insync_replicas=2,
    )
    cluster.wait_for_full_metadata()
    create_topic(cluster, "roll", 3, 3)
    assert cluster.zk_connect is not None
    marks: list[tuple[float, str]] = []
    roller = Roller(
        cluster.zk_connect,
        LocalRestarter(cluster),
        default_min_isr=2,
        timeout_s=180,  # a restart took 18 s at load average 30; room for worse
        say=lambda line: marks.append((time.monotonic(), line)),
    )
    state, _ = roller.status()
    order = broker_order(state.live_brokers, state.controller)
    with GroupReader(cluster, "roll") as reader:
        with PacedProducer(cluster, "roll") as writer:
            wait_until("the producer and the consumer running", lambda: len(reader.values) > 50)
            windows = []
            for broker_id in order:
                started = time.monotonic()
                roll = roller.roll_one(broker_id)
                windows.append((roll, started, time.monotonic()))
            wait_until("acks after the roll", lambda: writer.acks_since(windows[-1][2]) > 20)
        # The writer has stopped and flushed; the group member reads on until it has every
        # acknowledged record (the last ones were written just before the writer stopped).
        acked = set(writer.acked.values())
        wait_until(
            "the group reader to read every acknowledged record",
            lambda: acked <= reader.values,
            timeout_s=60,
        )
    assert not writer.errors, writer.errors[:5]
    assert_nothing_acked_lost(cluster, "roll", writer.acked)
    missing = set(writer.acked.values()) - reader.values
    print(f"\nrolling restart of brokers {order} (controller last) under ~100 acks=all writes/s:")
    for roll, start, end in windows:
        gap = writer.longest_gap(start, end)
        worst = max(writer.longest_gap(start, end, [p]) for p in range(3))
        print(
            f"  broker {roll.broker_id}: registered again after {roll.down_s:.1f}s, back in "
            f"every ISR and leading after {roll.back_s:.1f}s ({roll.elections} preferred "
            f"elections asked); produce unavailability: longest gap between acks "
            f"{gap:.2f}s overall, {worst:.2f}s on the worst partition"
        )
    print(
        f"  {len(writer.acked)} acked of {writer.sent} sent, 0 lost; the consumer group read "
        f"{len(writer.acked) - len(missing)} of them"
    )
    status = cluster.status()
    for p in status.partitions:
        assert p.isr and sorted(p.isr) == sorted(p.replicas), p
        assert p.leader == p.replicas[0], f"{p.tp} led by {p.leader}, preferred {p.replicas[0]}"
    # The group reader got every acknowledged record, across three coordinator moves.
    assert not missing, f"{len(missing)} acknowledged records never reached the consumer"

    # The command itself: a partition with rf=2 and min.insync.replicas=2 can lose no
    # replica, so each of its replicas is refused, with the reason.
    create_topic(cluster, "tight", 1, 2, min_insync_replicas="2")
    [tight] = [p for p in cluster.status().partitions if p.tp.topic == "tight"]
    d = str(cluster.data_dir)
    line = fails("--data-dir", d, "--brokers", str(tight.replicas[0]))
    assert f"not restarting broker {tight.replicas[0]}: 1 partition(s) would go under" in line
    assert "tight-0: ISR" in line and "below min.insync.replicas=2" in line
    spare = next(b for b in (1, 2, 3) if b not in tight.replicas)
    epoch = cluster.status().broker_epochs[spare]
    out = ok("--data-dir", d, "--brokers", str(spare))
    assert f"rolled 1 brokers ({spare}:" in out
    assert cluster.status().broker_epochs[spare] != epoch
    # The command started a new process: track that one, not the one it replaced.
    cluster.brokers[spare] = LocalCluster.load(cluster.data_dir).brokers[spare]
