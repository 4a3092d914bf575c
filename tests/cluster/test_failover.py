"""Leader SIGKILLs under acks=all load lose nothing; a
stalled follower leaves the ISR and rejoins after it catches up."""

from __future__ import annotations

import threading
import time

from strandline.types import TopicPartition
from tests.waiting import wait_until

from .support import (
    consume_all,
    create_topic,
    delivery_recorder,
    kill_leaders_in_turn,
    partition_status,
    producer,
    replica_batches,
)

RECORDS = 50_000
PARTITIONS = 3


def test_leader_kills_under_acks_all_lose_no_acknowledged_record(cluster_factory) -> None:
    cluster = cluster_factory(brokers=3, min_insync_replicas=2, replica_lag_time_max_ms=2000)
    create_topic(cluster, "orders", PARTITIONS, 3)
    acked: dict[tuple[int, int], bytes] = {}
    errors: list[str] = []
    on_delivery = delivery_recorder(acked, errors)
    done = threading.Event()

    def produce() -> None:
        p = producer(cluster)
        for i in range(RECORDS):
            p.produce(
                "orders", key=str(i % 97).encode(), value=b"r%06d" % i, on_delivery=on_delivery
            )
            if i % 500 == 0:
                p.poll(0)
                time.sleep(0.1)  # spread the load over the kills below
        p.flush(60)
        done.set()

    thread = threading.Thread(target=produce)
    thread.start()
    kill_leaders_in_turn(cluster, "orders", PARTITIONS)
    thread.join(120)
    assert done.is_set(), "the producer did not finish"
    assert len(acked) >= RECORDS * 0.9, f"only {len(acked)} of {RECORDS} acknowledged: {errors[:3]}"

    consumed = consume_all(cluster, "orders", PARTITIONS)
    missing = {k: v for k, v in acked.items() if consumed.get(k) != v}
    assert not missing, (
        f"{len(missing)} acknowledged records lost or moved, e.g. {list(missing)[:5]}"
    )
    for partition in range(PARTITIONS):
        offsets = sorted(o for (p, o) in consumed if p == partition)
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets))), "offsets not dense"

    # Replica verification: every replica holds the same bytes below the high watermark.
    for partition in range(PARTITIONS):
        tp = TopicPartition("orders", partition)
        wait_until(f"{tp} fully in sync", lambda tp=tp: len(partition_status(cluster, tp).isr) == 3)
        committed = 1 + max(o for (p, o) in consumed if p == partition)
        copies = {b: replica_batches(cluster, b, tp, committed) for b in (1, 2, 3)}
        assert len(set(copies.values())) == 1, f"replicas of {tp} differ below the HW"
        assert copies[1], "no data"


def test_stalled_follower_leaves_isr_and_rejoins(cluster_factory) -> None:
    cluster = cluster_factory(brokers=3, min_insync_replicas=2, replica_lag_time_max_ms=1000)
    create_topic(cluster, "stall", 1, 3)
    tp = TopicPartition("stall", 0)
    status = partition_status(cluster, tp)
    follower = next(b for b in status.replicas if b != status.leader)
    # A stopped broker still accepts TCP connections and never answers: keep the
    # client's socket timeout short, and learn the metadata before the stop.
    p = producer(cluster, **{"message.timeout.ms": 10000, "socket.timeout.ms": 2000})
    acked: dict[tuple[int, int], bytes] = {}
    errors: list[str] = []
    on_delivery = delivery_recorder(acked, errors)
    p.produce("stall", value=b"warm-up", on_delivery=on_delivery)
    p.flush(10)
    assert len(acked) == 1
    acked.clear()

    cluster.kill(follower, "STOP")
    try:
        # The leader drops it from the ISR (written to the state znode)...
        wait_until(
            f"{follower} out of the ISR", lambda: follower not in partition_status(cluster, tp).isr
        )
        # ...and acks=all commits without it.
        for i in range(100):
            p.produce("stall", value=b"while-stopped-%d" % i, on_delivery=on_delivery)
        p.flush(10)
        assert len(acked) == 100 and not errors
    finally:
        cluster.kill(follower, "CONT")
    wait_until(f"{follower} back in the ISR", lambda: follower in partition_status(cluster, tp).isr)
    for i in range(100):
        p.produce("stall", value=b"after-%d" % i, on_delivery=on_delivery)
    p.flush(10)
    consumed = consume_all(cluster, "stall", 1)
    assert len(consumed) == 201
    wait_until("the ISR to be complete", lambda: len(partition_status(cluster, tp).isr) == 3)
    copies = {b: replica_batches(cluster, b, tp, 201) for b in (1, 2, 3)}
    assert len(set(copies.values())) == 1
