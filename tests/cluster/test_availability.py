"""Acks and min.insync.replicas with brokers down; clean versus
unclean leader election."""

from __future__ import annotations

from strandline.types import TopicPartition
from tests.waiting import wait_until

from .support import (
    create_topic,
    delivery_recorder,
    partition_status,
    producer,
    state_change_events,
)


def _produce_one(cluster, acks: str, value: bytes) -> list[str]:
    acked: dict[tuple[int, int], bytes] = {}
    errors: list[str] = []
    p = producer(cluster, acks=acks, **{"message.timeout.ms": 3000, "retries": 0})
    p.produce("avail", value=value, on_delivery=delivery_recorder(acked, errors))
    p.flush(10)
    return errors if errors else ["ok"]


def test_acks_all_needs_min_isr_but_acks_1_does_not(cluster_factory) -> None:
    cluster = cluster_factory(brokers=3, min_insync_replicas=2, replica_lag_time_max_ms=1000)
    create_topic(cluster, "avail", 1, 3)
    tp = TopicPartition("avail", 0)
    leader = partition_status(cluster, tp).leader
    for b in (1, 2, 3):
        if b != leader:
            cluster.kill(b, "KILL")
    wait_until(
        "the ISR to shrink to the leader", lambda: partition_status(cluster, tp).isr == [leader]
    )
    errors = _produce_one(cluster, "all", b"needs-two")
    assert any("NOT_ENOUGH_REPLICAS" in e for e in errors), errors
    assert _produce_one(cluster, "1", b"one-is-enough") == ["ok"]


def test_partition_with_dead_isr_stays_offline_until_an_isr_member_returns(cluster_factory) -> None:
    cluster = cluster_factory(brokers=3, replica_lag_time_max_ms=1000)
    create_topic(cluster, "avail", 1, 3)
    tp = TopicPartition("avail", 0)
    status = partition_status(cluster, tp)
    leader = status.leader
    out_of_sync = next(b for b in status.replicas if b != leader)
    cluster.kill(out_of_sync, "KILL")
    wait_until("ISR shrink", lambda: out_of_sync not in partition_status(cluster, tp).isr)
    assert _produce_one(cluster, "all", b"committed-without-it") == ["ok"]
    others = [b for b in (1, 2, 3) if b not in (leader, out_of_sync)]
    for b in [*others, leader]:
        cluster.kill(b, "KILL")
    # Both sessions must be gone first: a controller that still saw one of them alive
    # would rightly elect it, drop the other from the ISR, and the test would then wait
    # for the wrong broker (seen on a loaded machine).
    wait_until(
        "the killed brokers' sessions to expire",
        lambda: not {leader, *others} & set(cluster.status().live_brokers),
    )
    cluster.start(out_of_sync)
    # Unclean election is off: the only live replica is not in the ISR, so no leader.
    wait_until("the partition to be offline", lambda: partition_status(cluster, tp).offline)
    assert partition_status(cluster, tp).leader in (None, -1)
    cluster.start(leader)
    wait_until(
        "the old ISR member to lead again", lambda: partition_status(cluster, tp).leader == leader
    )


def test_unclean_election_lets_a_live_out_of_sync_replica_lead_and_logs_it(cluster_factory) -> None:
    cluster = cluster_factory(
        brokers=3, replica_lag_time_max_ms=1000, unclean_leader_election_enable="true"
    )
    create_topic(cluster, "avail", 1, 3)
    tp = TopicPartition("avail", 0)
    status = partition_status(cluster, tp)
    leader = status.leader
    out_of_sync = next(b for b in status.replicas if b != leader)
    cluster.kill(out_of_sync, "KILL")
    wait_until("ISR shrink", lambda: out_of_sync not in partition_status(cluster, tp).isr)
    for b in (1, 2, 3):
        if b != out_of_sync:
            cluster.kill(b, "KILL")
    cluster.start(out_of_sync)
    wait_until(
        "the out-of-sync replica to lead",
        lambda: partition_status(cluster, tp).leader == out_of_sync,
    )
    assert _produce_one(cluster, "1", b"after-unclean") == ["ok"]
    controller = cluster.status().controller
    assert controller == out_of_sync
    events = state_change_events(cluster, controller)
    assert any(
        e["event"] == "unclean-leader-election" and e.get("leader") == out_of_sync for e in events
    ), "the state-change log does not record the unclean election"
