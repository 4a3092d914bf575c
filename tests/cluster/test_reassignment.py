"""Partition reassignment under acks=all load, preferred replica
election (ElectLeaders and the admin znode), and auto leader rebalance."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from typer.testing import CliRunner

from strandline.cli.main import app
from strandline.coordination.zk_client import ZkClient
from strandline.launcher.local_cluster import LocalCluster
from strandline.types import TopicPartition
from tests.waiting import wait_until

from .support import (
    consume_all,
    delivery_recorder,
    partition_status,
    producer,
    replica_batches,
    state_change_events,
)

runner = CliRunner()


def create_with_assignment(cluster: LocalCluster, name: str, assignment: list[list[int]]) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=len(assignment), replica_assignment=assignment)],
        operation_timeout=20,
    )
    futures[name].result(30)
    wait_until(
        f"{name} online",
        lambda: all(not p.offline for p in cluster.status().partitions if p.tp.topic == name),
    )


def test_reassign_partition_while_producing_with_acks_all(cluster_factory, tmp_path: Path) -> None:
    cluster = cluster_factory(brokers=3, replica_lag_time_max_ms=2000)
    tp = TopicPartition("moving", 0)
    create_with_assignment(cluster, "moving", [[1, 2]])
    assert partition_status(cluster, tp).replicas == [1, 2]

    acked: dict[tuple[int, int], bytes] = {}
    errors: list[str] = []
    stop = threading.Event()

    def produce() -> None:
        p = producer(cluster, retries=1000)
        i = 0
        while not stop.is_set():
            p.produce("moving", value=b"r%06d" % i, on_delivery=delivery_recorder(acked, errors))
            p.poll(0)
            i += 1
            if i % 50 == 0:
                p.flush(0.05)
        p.flush(30)

    worker = threading.Thread(target=produce)
    worker.start()
    try:
        wait_until("records acknowledged before the move", lambda: len(acked) >= 300)
        plan = tmp_path / "plan.json"
        plan.write_text(
            json.dumps(
                {
                    "version": 1,
                    "partitions": [{"topic": "moving", "partition": 0, "replicas": [2, 3]}],
                }
            )
        )
        args = ["--bootstrap-server", cluster.bootstrap, "--reassignment-json-file", str(plan)]
        result = runner.invoke(app, ["reassign", *args, "--execute"])
        assert result.exit_code == 0, result.output
        assert "Successfully started" in result.output
        wait_until(
            "the assignment znode to become [2, 3]",
            lambda: (s := partition_status(cluster, tp)).replicas == [2, 3] and s,
            timeout_s=30,
        )
        done = runner.invoke(app, ["reassign", *args, "--verify"])
        assert done.exit_code == 0, done.output
        assert "is completed" in done.output
        produced_after = len(acked)
        wait_until(
            "records acknowledged after the move", lambda: len(acked) >= produced_after + 300
        )
    finally:
        stop.set()
        worker.join(60)

    final = partition_status(cluster, tp)
    assert final.leader in (2, 3)
    assert set(final.isr) <= {2, 3}
    # Replica 1 was stopped and its files deleted; the admin znode is gone.
    wait_until(
        "replica 1's directory deleted",
        lambda: not (cluster.broker_dir(1) / "data" / "moving-0").exists(),
    )
    assert cluster.zk_connect is not None
    with ZkClient(cluster.zk_connect).connect() as zk:
        assert zk.get_partition_reassignment() == {}
    events = state_change_events(cluster, 1)
    assert any(e["event"] == "stop-replica" and e.get("delete") for e in events)

    # No acknowledged record lost: each is consumed at the offset it was acknowledged at.
    consumed = consume_all(cluster, "moving", 1)
    missing = {k: v for k, v in acked.items() if consumed.get(k) != v}
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {list(missing)[:3]}"
    wait_until(
        "both new replicas in the ISR", lambda: set(partition_status(cluster, tp).isr) == {2, 3}
    )
    hw = max(offset for _p, offset in consumed) + 1
    wait_until(
        "replicas 2 and 3 identical below the HW",
        lambda: replica_batches(cluster, 2, tp, hw) == replica_batches(cluster, 3, tp, hw),
    )
    verify = runner.invoke(app, ["verify-replicas", "--data-dir", str(cluster.data_dir)])
    assert verify.exit_code == 0, verify.output
    assert "moving-0" in verify.output


def metadata_isr(cluster: LocalCluster, tp: TopicPartition) -> list[int]:
    """The ISR in the brokers' metadata: what the controller knows and propagated."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    topic = admin.list_topics(tp.topic, timeout=10).topics[tp.topic]
    return sorted(topic.partitions[tp.partition].isrs)


def _restart_preferred_leader(
    cluster: LocalCluster, tp: TopicPartition, controller_knows: bool = True
) -> int:
    """Stop the partition's preferred leader (controlled shutdown moves leadership
    away), start it again and wait until it is back in the ISR as a follower: in the
    ISR the controller propagated, or (`controller_knows=False`) only in ZooKeeper's."""
    preferred = partition_status(cluster, tp).replicas[0]
    assert partition_status(cluster, tp).leader == preferred
    cluster.kill(preferred, "TERM")
    wait_until("leadership to move", lambda: partition_status(cluster, tp).leader != preferred)
    cluster.start(preferred)
    wait_until(
        "the preferred replica back in ZooKeeper's ISR",
        lambda: preferred in partition_status(cluster, tp).isr,
    )
    if controller_knows:
        wait_until(
            "the controller to know the preferred replica is back in the ISR",
            lambda: preferred in metadata_isr(cluster, tp),
        )
    return preferred


@pytest.mark.parametrize("notification_delay_ms", [0, 300])
def test_preferred_replica_election_moves_leadership_back(
    cluster_factory, notification_delay_ms: int
) -> None:
    """With the ISR change notification delayed, the election may come while the
    controller has not heard of the rejoined replica yet (docs/replication.md): it reads
    ZooKeeper's partition state, so the preferred replica is elected all the same."""
    cluster = cluster_factory(
        brokers=3,
        auto_leader_rebalance_enable="false",
        isr_change_notification_delay_ms=notification_delay_ms,
    )
    create_with_assignment(cluster, "pref", [[1, 2, 3], [2, 3, 1]])
    tp0, tp1 = TopicPartition("pref", 0), TopicPartition("pref", 1)
    delayed = notification_delay_ms > 0

    preferred = _restart_preferred_leader(cluster, tp0, controller_knows=not delayed)
    assert partition_status(cluster, tp0).leader != preferred  # nothing moves it back
    result = runner.invoke(
        app,
        [
            "elect",
            "--bootstrap-server",
            cluster.bootstrap,
            "--election-type",
            "preferred",
            "--all-topic-partitions",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "pref-0" in result.output
    assert partition_status(cluster, tp0).leader == preferred
    # Asked again, nothing needs to change.
    again = runner.invoke(
        app,
        [
            "elect",
            "--bootstrap-server",
            cluster.bootstrap,
            "--election-type",
            "preferred",
            "--topic",
            "pref",
            "--partition",
            "0",
        ],
    )
    assert again.exit_code == 0, again.output
    assert "already elected" in again.output

    # The older path: a tool writes /admin/preferred_replica_election.
    preferred1 = _restart_preferred_leader(cluster, tp1, controller_knows=not delayed)
    assert cluster.zk_connect is not None
    with ZkClient(cluster.zk_connect).connect() as zk:
        zk.create_preferred_replica_election([tp1])
        wait_until(
            "the leader back on the preferred replica",
            lambda: partition_status(cluster, tp1).leader == preferred1,
        )
        wait_until("the admin znode consumed", lambda: zk.get_preferred_replica_election() == [])


def test_auto_leader_rebalance_restores_preferred_leaders(cluster_factory) -> None:
    cluster = cluster_factory(
        brokers=3,
        auto_leader_rebalance_enable="true",
        leader_imbalance_check_interval_seconds=1,
    )
    create_with_assignment(cluster, "auto", [[1, 2, 3], [2, 3, 1], [3, 1, 2]])
    tp = TopicPartition("auto", 1)
    preferred = partition_status(cluster, tp).replicas[0]
    cluster.kill(preferred, "TERM")
    wait_until("leadership to move", lambda: partition_status(cluster, tp).leader != preferred)
    cluster.start(preferred)
    wait_until(
        "the controller to move leadership back by itself",
        lambda: partition_status(cluster, tp).leader == preferred,
        timeout_s=30,
    )
    controller = cluster.status().controller
    assert controller is not None
    assert any(
        e["event"] == "auto-leader-rebalance" for e in state_change_events(cluster, controller)
    )
