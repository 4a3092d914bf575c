"""A real leader-epoch truncation on real brokers.

A leader takes acks=1 writes while both followers are frozen (SIGSTOP), then freezes
itself: those records were acknowledged but never replicated, a divergent tail. The
followers elect a new leader that writes different records at the same offsets. When
the old leader comes back, OffsetForLeaderEpoch (KIP-101/KIP-279) must cut its tail at
the first divergent offset, and `state-change.log` must say so with `epoch-truncation`.

The same STOP/CONT failover without a divergent tail is the control experiment: it may
only write `epoch-check`, so the `epoch-truncation` assertion can fail.
"""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import Producer

from strandline.launcher.local_cluster import LocalCluster
from strandline.storage import replica_verify
from strandline.types import TopicPartition
from tests.waiting import wait_until

from .support import (
    consume_all,
    create_topic,
    delivery_recorder,
    partition_status,
    producer,
    replica_batches,
    state_change_events,
)

TOPIC = "diverge"
TP = TopicPartition(TOPIC, 0)
ZOMBIES = 20


def _events(cluster: LocalCluster, broker: int, name: str) -> list[dict[str, object]]:
    return [
        e
        for e in state_change_events(cluster, broker)
        if e["event"] == name and e.get("topic") == TOPIC
    ]


def _produce(p: Producer, values: list[bytes]) -> dict[tuple[int, int], bytes]:
    acked: dict[tuple[int, int], bytes] = {}
    errors: list[str] = []
    for value in values:
        p.produce(TOPIC, value=value, on_delivery=delivery_recorder(acked, errors))
    p.flush(15)
    assert len(acked) == len(values), f"only {len(acked)} of {len(values)} acked: {errors[:3]}"
    return acked


def _fail_over(cluster: LocalCluster, old: int) -> int:
    """Wait until `old` (frozen) has lost leadership through its ZooKeeper session."""
    return wait_until(
        f"a leader other than {old}",
        lambda: (leader := partition_status(cluster, TP).leader) not in (None, -1, old) and leader,
    )


def _segment_bytes(cluster: LocalCluster, broker: int) -> bytes:
    directory = replica_verify.partition_dir(cluster.broker_dir(broker) / "data", TP)
    return b"".join(path.read_bytes() for path in sorted(Path(directory).glob("*.log")))


def test_divergent_tail_is_cut_by_leader_epoch(cluster_factory) -> None:
    started = time.monotonic()
    # A large lag time keeps the frozen followers in the ISR (the failover stays
    # clean); a 4 s session keeps their ~1.5 s freeze from expiring their sessions.
    cluster = cluster_factory(
        brokers=3,
        replica_lag_time_max_ms=60000,
        min_insync_replicas=1,
        zookeeper_session_timeout_ms=4000,
    )
    create_topic(cluster, TOPIC, 1, 3)
    committed = producer(cluster, **{"socket.timeout.ms": 2000})
    acked = _produce(committed, [b"base-%d" % i for i in range(10)])

    # -- control: an ordinary failover with nothing to cut --------------------------
    first = partition_status(cluster, TP).leader
    assert first is not None and first > 0
    cluster.kill(first, "STOP")
    try:
        _fail_over(cluster, first)
    finally:
        cluster.kill(first, "CONT")
    # No write until it follows again: until its LeaderAndIsr arrives the woken broker
    # still believes it leads, and a record it took then would be a divergent tail.
    wait_until(
        f"{first} to settle its log end as a follower",
        lambda: [e for e in _events(cluster, first, "epoch-check") if e["leader"] != first],
    )
    wait_until(f"{first} back in the ISR", lambda: first in partition_status(cluster, TP).isr)
    acked |= _produce(committed, [b"after-control-%d" % i for i in range(10)])
    for broker in (1, 2, 3):
        assert not _events(cluster, broker, "epoch-truncation"), (
            f"broker {broker} reports a truncation where nothing diverged"
        )

    # -- a divergent tail ----------------------------------------------------------
    leader = partition_status(cluster, TP).leader
    assert leader is not None and leader > 0
    followers = [b for b in (1, 2, 3) if b != leader]
    zombie_producer = producer(cluster, acks=1, **{"socket.timeout.ms": 2000})
    _produce(zombie_producer, [b"warm-up"])  # learns the metadata while all are up
    # acks=all after the warm-up: both followers hold everything up to here.
    acked |= _produce(committed, [b"before-tail"])

    for f in followers:
        cluster.kill(f, "STOP")
    try:
        # A fetch long-poll (500 ms) sent before the freeze must be answered, empty,
        # before the tail exists, or a follower would wake up holding it.
        time.sleep(0.8)
        zombies = _produce(zombie_producer, [b"zombie-%d" % i for i in range(ZOMBIES)])
        cluster.kill(leader, "STOP")
    finally:
        for f in followers:
            cluster.kill(f, "CONT")
    old_leader = leader
    try:
        divergence = min(offset for _, offset in zombies)
        old_end = max(offset for _, offset in zombies) + 1
        new_leader = _fail_over(cluster, old_leader)
        # Different records over the same offsets, committed by the new ISR. A new
        # producer that knows only the new leader: one with the old metadata would
        # first send them to the frozen broker, whose socket buffer keeps the request
        # until SIGCONT, when it appends them as a zombie leader (never acknowledged,
        # but then its tail is longer than the one measured here).
        host, port = cluster.broker_address(new_leader)
        fresh_producer = producer(cluster, **{"bootstrap.servers": f"{host}:{port}"})
        fresh = _produce(fresh_producer, [b"fresh-%d" % i for i in range(ZOMBIES + 5)])
        acked |= fresh
        assert min(offset for _, offset in fresh) == divergence, "offsets do not overlap"
        before = replica_batches(cluster, old_leader, TP, old_end)
        prefix = replica_batches(cluster, old_leader, TP, divergence)
        tail = before[len(prefix) :]
        assert tail and b"zombie-0" in tail, "the old leader holds no divergent tail"
    finally:
        cluster.kill(old_leader, "CONT")

    wait_until(
        f"{old_leader} back in the ISR",
        lambda: old_leader in partition_status(cluster, TP).isr,
        timeout_s=30,
    )
    [cut] = _events(cluster, old_leader, "epoch-truncation")
    assert cut["truncate_to"] == divergence, cut
    assert cut["log_end_offset"] == old_end, cut
    assert cut["removed_offsets"] == old_end - divergence, cut
    assert cut["removed_bytes"] == len(tail), cut
    assert cut["leader"] == new_leader, cut
    # Only the rejoining replica had anything to cut.
    for broker in followers:
        assert not _events(cluster, broker, "epoch-truncation")

    consumed = consume_all(cluster, TOPIC, 1)
    high_watermark = max(offset for _, offset in consumed) + 1
    assert {k: consumed.get(k) for k in acked} == acked, "an acknowledged record moved"
    assert not [v for v in consumed.values() if v.startswith(b"zombie-")], "a zombie is readable"
    # The old leader's bytes below the HW are the new leader's, and the tail is gone.
    wait_until(
        f"{old_leader} to hold everything below the HW",
        lambda: (
            replica_batches(cluster, old_leader, TP, high_watermark)
            == replica_batches(cluster, new_leader, TP, high_watermark)
        ),
    )
    copies = {b: replica_batches(cluster, b, TP, high_watermark) for b in (1, 2, 3)}
    assert len(set(copies.values())) == 1, "replicas differ below the HW"
    assert tail not in _segment_bytes(cluster, old_leader)
    assert b"zombie-" not in _segment_bytes(cluster, old_leader)
    assert time.monotonic() - started < 60
