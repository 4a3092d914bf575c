"""Disk full (docs/faults.md): one broker's log directory fills up (a real tmpfs, real ENOSPC).

Chosen behaviour. Kafka marks a failed log dir offline, the controller moves its
leaders away, and the replicas stay offline until the broker restarts. Strandline
keeps the replicas and recovers without a restart instead:

* the full broker answers Produce for the partitions it leads with KAFKA_STORAGE_ERROR
  (56; librdkafka retries it), writes `log-dir-full` to state-change.log once per
  partition and role (not per request), and nothing of the refused batches stays;
* as a follower it backs off and refetches, so the leaders drop it from their ISR by
  the ordinary replica.lag.time.max.ms rule and, with min.insync.replicas=2, keep
  acknowledging acks=all writes with the other two replicas;
* once space returns the same process writes again (`log-dir-recovered`), its
  producers' retried batches are acknowledged, and it rejoins every ISR.

Every acknowledged record must be readable at its acknowledged offset afterwards.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError

from strandline.faults import disk
from strandline.launcher.local_cluster import LocalCluster
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

TOPIC = "fills"
PARTITIONS = 3
FULL = 2  # the broker whose disk fills up
SIZE_MB = 64
PAGE = 4096


@pytest.fixture
def limited_dirs() -> Iterator[list[Path]]:
    """Directories put on a tmpfs by the test; always unmounted (lazily) afterwards."""
    if os.geteuid() != 0:
        pytest.fail("this test mounts a tmpfs and must run as root", pytrace=False)
    mounted: list[Path] = []
    yield mounted
    for directory in mounted:
        disk.free(directory)
        disk.unmount(directory)


def _events(cluster: LocalCluster, broker: int, name: str) -> list[dict[str, object]]:
    return [
        e
        for e in state_change_events(cluster, broker)
        if e["event"] == name and e.get("topic") == TOPIC
    ]


def _acked_on(acked: dict[tuple[int, int], bytes], partition: int) -> int:
    return sum(1 for p, _ in list(acked) if p == partition)


def _wait_stalled(data: Path, acked: dict[tuple[int, int], bytes], partition: int) -> int:
    """Top the filler up until writes to `partition` stop being acknowledged for 2 s.

    A disk at its limit is not full for good at once: a failed write that is cut back
    frees the pages it had taken, and the last partly written page of every file takes
    small writes. Each such success is real (the bytes are on the file system).
    """
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        disk.fill(data)
        count = _acked_on(acked, partition)
        time.sleep(2)
        if _acked_on(acked, partition) == count:
            return count
    raise AssertionError(f"writes to partition {partition} never stalled on the full disk")


def _alternate(events: list[dict[str, object]]) -> bool:
    """Per partition and role: full, recovered, full, ... never one state twice in a row."""
    last: dict[tuple[object, object], object] = {}
    for e in events:
        key = (e["partition"], e["role"])
        if last.get(key) == e["event"]:
            return False
        last[key] = e["event"]
    return True


def test_full_log_dir_refuses_writes_then_recovers_without_restart(
    limited_dirs: list[Path], cluster_factory
) -> None:
    started = time.monotonic()
    cluster = cluster_factory(brokers=3, min_insync_replicas=2, replica_lag_time_max_ms=2000)
    data = cluster.broker_dir(FULL) / "data"
    cluster.kill(FULL, "TERM")
    try:
        disk.mount_limited(data, SIZE_MB)
    except disk.DiskFaultError as exc:
        pytest.fail(f"cannot put broker {FULL}'s log dir on a tmpfs: {exc}", pytrace=False)
    limited_dirs.append(data)
    cluster.start(FULL)
    assert disk.is_limited(data)
    pid = cluster.brokers[FULL].pid

    # Small segments: rolls (and their producer-state snapshots) meet ENOSPC too.
    create_topic(cluster, TOPIC, PARTITIONS, 3, segment_bytes="65536")
    leaders = {p: partition_status(cluster, TopicPartition(TOPIC, p)).leader for p in range(3)}
    [own] = [p for p, b in leaders.items() if b == FULL]
    others = [p for p in range(PARTITIONS) if p != own]

    acked: dict[tuple[int, int], bytes] = {}
    errors: list[str] = []
    on_delivery = delivery_recorder(acked, errors)
    stop = threading.Event()

    def produce() -> None:
        # A long message timeout: batches refused by the full broker are retried until
        # space returns, and must then be acknowledged, not dropped.
        p = producer(cluster, **{"message.timeout.ms": 90000})
        i = 0
        while not stop.is_set():
            p.produce(TOPIC, value=b"v%07d" % i, partition=i % PARTITIONS, on_delivery=on_delivery)
            i += 1
            if i % 30 == 0:
                p.poll(0)
                time.sleep(0.02)
        assert p.flush(90) == 0

    thread = threading.Thread(target=produce)
    thread.start()
    try:
        wait_until(
            "writes to every partition", lambda: min(_acked_on(acked, p) for p in range(3)) > 100
        )

        filled = disk.fill(data)
        assert filled > 0
        wait_until(
            f"broker {FULL} to report its full disk as leader and as follower",
            lambda: (
                {e["role"] for e in _events(cluster, FULL, "log-dir-full")}
                == {"leader", "follower"}
            ),
        )

        stuck_own = _wait_stalled(data, acked, own)

        # A produce without retries sees the error itself. Larger than a page: the last
        # partly written page of a segment could still take a tiny record.
        probe_acked: dict[tuple[int, int], bytes] = {}
        probe_errors: list[KafkaError] = []
        probe = producer(cluster, retries=0, **{"message.timeout.ms": 10000})
        probe.produce(
            TOPIC,
            value=b"probe-" + b"p" * 3 * PAGE,
            partition=own,
            on_delivery=lambda err, msg: (
                probe_errors.append(err)
                if err
                else probe_acked.__setitem__((msg.partition(), msg.offset()), msg.value())
            ),
        )
        probe.flush(15)
        assert not probe_acked, "a full disk acknowledged a write"
        assert [e.code() for e in probe_errors] == [KafkaError.KAFKA_STORAGE_ERROR], probe_errors

        # The other leaders drop the stuck follower and go on committing with two.
        for p in others:
            wait_until(
                f"{FULL} out of the ISR of partition {p}",
                lambda p=p: FULL not in partition_status(cluster, TopicPartition(TOPIC, p)).isr,
            )
        before = {p: _acked_on(acked, p) for p in others}
        wait_until(
            "acks=all writes to the other partitions",
            lambda: all(_acked_on(acked, p) >= before[p] + 100 for p in others),
        )
        assert _acked_on(acked, own) == stuck_own, "the full broker acknowledged writes"

        disk.free(data)
        wait_until(
            f"broker {FULL} to report recovery as leader and as follower",
            lambda: (
                {e["role"] for e in _events(cluster, FULL, "log-dir-recovered")}
                == {"leader", "follower"}
            ),
        )
        wait_until(
            f"writes to partition {own} acknowledged again",
            lambda: _acked_on(acked, own) >= stuck_own + 100,
            timeout_s=30,
        )
        wait_until(
            f"broker {FULL} back in every ISR",
            lambda: all(FULL in p.isr for p in cluster.status().partitions if p.tp.topic == TOPIC),
            timeout_s=30,
        )
    finally:
        disk.free(data)  # a failed assertion must not leave the producer retrying
        stop.set()
        thread.join(120)
    assert not thread.is_alive(), "the producer did not finish"
    assert not errors, f"{len(errors)} deliveries failed, e.g. {errors[:3]}"
    assert cluster.brokers[FULL].pid == pid and cluster.is_running(FULL), "the broker restarted"

    # One line per transition, per partition and role, however many requests failed.
    transitions = [
        e
        for e in state_change_events(cluster, FULL)
        if e["event"] in ("log-dir-full", "log-dir-recovered", "append-failed")
    ]
    full = [e for e in transitions if e["event"] != "log-dir-recovered"]
    recovered = [e for e in transitions if e["event"] == "log-dir-recovered"]
    assert _alternate(transitions), transitions
    assert {e["partition"] for e in full} == set(range(PARTITIONS)), full
    assert all(e["errno"] == "ENOSPC" and e["log_dir"] == str(data) for e in full), full
    assert transitions[-1]["event"] == "log-dir-recovered"
    # The long outage of the partition it leads: many refused produces, one line each way.
    assert max(e["failed_writes"] for e in recovered if e["partition"] == own) >= 3, recovered
    assert len(transitions) < 20, transitions

    consumed = consume_all(cluster, TOPIC, PARTITIONS)
    missing = {k: v for k, v in acked.items() if consumed.get(k) != v}
    assert not missing, f"{len(missing)} acknowledged records lost or moved: {list(missing)[:5]}"
    for p in range(PARTITIONS):
        tp = TopicPartition(TOPIC, p)
        committed = 1 + max(o for (q, o) in consumed if q == p)
        wait_until(
            f"{tp} identical on every replica",
            lambda tp=tp, committed=committed: (
                len({replica_batches(cluster, b, tp, committed) for b in (1, 2, 3)}) == 1
            ),
        )
    assert time.monotonic() - started < 90


def test_a_topic_created_while_the_controllers_disk_is_full(
    tmp_path: Path, zk_connect: str
) -> None:
    """Found by `strandline chaos explore` (seed 1126, a disk-full on the controller while
    the admin thread created a topic). Creating the new partitions' logs failed with
    ENOSPC inside the controller's own LeaderAndIsr, the exception aborted the
    controller's event half-way, and the other brokers never heard of the topic
    (no LeaderAndIsr, no UpdateMetadata). Now the full broker answers KAFKA_STORAGE_ERROR
    for those partitions, writes `log-create-failed`, the controller carries on, and the
    broker creates the logs by itself once space returns."""
    if os.geteuid() != 0:
        pytest.fail("this test mounts a tmpfs and must run as root", pytrace=False)
    cluster = LocalCluster(tmp_path / "cluster")
    try:
        cluster.up(
            3,
            {"zookeeper.session.timeout.ms": "2000", "replica.lag.time.max.ms": "2000"},
            zk_connect=zk_connect,
            disk_limit_mb=16,
        )
        _create_while_full(cluster)
    finally:
        cluster.stop()


def _create_while_full(cluster: LocalCluster) -> None:
    controller = wait_until("a controller", lambda: cluster.status().controller)
    data = cluster.log_dir(controller)
    disk.fill(data)

    create_topic(cluster, "made-while-full", 3, 3)
    wait_until(
        "log-create-failed on the full controller",
        lambda: any(
            e["event"] == "log-create-failed" and e.get("topic") == "made-while-full"
            for e in state_change_events(cluster, controller)
        ),
    )
    # Every broker, the full one included, serves metadata naming a leader everywhere.
    for broker in cluster.brokers:
        host, port = cluster.broker_address(broker)
        wait_until(
            f"broker {broker}'s metadata to list the new topic with leaders",
            lambda host=host, port=port: _topic_led(host, port, "made-while-full", 3),
        )

    disk.free(data)
    wait_until(
        "the full broker to create its three logs once space returned",
        lambda: (
            sum(
                e["event"] == "log-created-after-failure" and e.get("topic") == "made-while-full"
                for e in state_change_events(cluster, controller)
            )
            == 3
        ),
        timeout_s=30,
    )
    wait_until(
        f"broker {controller} in every ISR of the new topic",
        lambda: all(
            controller in p.isr
            for p in cluster.status().partitions
            if p.tp.topic == "made-while-full"
        ),
        timeout_s=30,
    )
    acked: dict[tuple[int, int], bytes] = {}
    errors: list[str] = []
    p = producer(cluster, on_delivery=delivery_recorder(acked, errors))
    for i in range(30):
        p.produce("made-while-full", value=f"after-{i}".encode(), partition=i % 3)
    assert p.flush(30) == 0 and not errors, errors
    assert consume_all(cluster, "made-while-full", 3) == acked


def _topic_led(host: str, port: int, topic: str, partitions: int) -> bool:
    from strandline.launcher.local_cluster import answers_metadata

    response = answers_metadata(host, port)
    for t in response.topics:  # type: ignore[attr-defined]
        if t.name == topic:
            return len(t.partitions) == partitions and all(p.leader_id >= 0 for p in t.partitions)
    return False
