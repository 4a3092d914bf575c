"""Real network faults on real processes: every broker and ZooKeeper server in its own
network namespace, links cut with nftables, real clients in the root namespace.

These need root, `ip` and `nft`; without them they FAIL (never skip) with a hint.
Each test starts its own 3-broker cluster with a 3-server ZooKeeper ensemble (the
session ZooKeeper lives on 127.0.0.1, which no namespace can reach).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from kio.schema.errors import ErrorCode
from kio.schema.produce.v9 import request as produce_v9
from kio.schema.types import TopicName
from kio.static.primitive import Records, i16, i32, i32Timedelta

from strandline.launcher.local_cluster import LocalCluster, answers_metadata
from strandline.types import TopicPartition
from tests.cluster.support import (
    consume_all,
    create_topic,
    delivery_recorder,
    partition_status,
    producer,
    replica_batches,
)
from tests.integration.wire import WireClient, batch
from tests.waiting import wait_until

SESSION_MS = 2000
SETTINGS = {
    "zookeeper.session.timeout.ms": str(SESSION_MS),
    "replica.lag.time.max.ms": "1000",
    "offsets.topic.replication.factor": "3",
    "auto.leader.rebalance.enable": "false",
}
NOT_ACKNOWLEDGED = {
    ErrorCode.not_enough_replicas,
    ErrorCode.not_enough_replicas_after_append,
    ErrorCode.request_timed_out,
    ErrorCode.not_leader_or_follower,
}

ClusterMaker = Callable[..., LocalCluster]


@pytest.fixture
def netns_cluster(tmp_path: Path) -> Iterator[ClusterMaker]:
    missing = [tool for tool in ("ip", "nft") if shutil.which(tool) is None]
    if missing:
        pytest.fail(
            f"these tests need {' and '.join(missing)}: `make system-deps` installs iproute2 "
            "and nftables",
            pytrace=False,
        )
    if os.geteuid() != 0:
        pytest.fail("these tests create network namespaces: run them as root", pytrace=False)
    clusters: list[LocalCluster] = []

    def make(brokers: int = 3, zookeepers: int = 3, **overrides: str) -> LocalCluster:
        settings = dict(SETTINGS)
        settings.update({k.replace("_", "."): v for k, v in overrides.items()})
        cluster = LocalCluster(tmp_path / f"cluster-{len(clusters)}")
        clusters.append(cluster)
        cluster.up(brokers, settings, zookeeper_nodes=zookeepers, netns=True)
        cluster.wait_for_full_metadata()
        return cluster

    yield make

    for cluster in clusters:
        for broker_id, tail in cluster.unexpected_deaths().items():
            print(f"\n--- broker {broker_id} died unexpectedly; tail of broker.out ---\n{tail}")
        cluster.stop()
        assert cluster.network is None or not cluster.network.exists()


class PacedProducer:
    """A background acks=all producer writing numbered values at a steady pace and
    recording when each acknowledgement arrived."""

    def __init__(self, cluster: LocalCluster, topic: str, interval_s: float = 0.01) -> None:
        self.acked: dict[tuple[int, int], bytes] = {}
        self.errors: list[str] = []
        self.ack_times: list[tuple[float, int]] = []  # (when, partition)
        self._record = delivery_recorder(self.acked, self.errors)
        self.producer: Producer = producer(cluster, **{"message.timeout.ms": 60000})
        self.topic = topic
        self.interval_s = interval_s
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _on_delivery(self, err: Any, message: Any) -> None:
        self._record(err, message)
        if err is None:
            self.ack_times.append((time.monotonic(), message.partition()))

    def _run(self) -> None:
        while not self._stop.is_set():
            self.producer.produce(
                self.topic, f"v-{self.sent}".encode(), on_delivery=self._on_delivery
            )
            self.sent += 1
            self.producer.poll(0)
            time.sleep(self.interval_s)

    def __enter__(self) -> PacedProducer:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.producer.flush(60)

    def acks_since(self, t: float) -> int:
        return sum(1 for a, _ in list(self.ack_times) if a > t)

    def wait_flowing(self, partitions: int, since: float = 0.0, acks: int = 20) -> None:
        """Until each of `partitions` had `acks` acknowledgements after `since`."""

        def flowing() -> bool:
            got = Counter(p for a, p in list(self.ack_times) if a > since)
            return all(got[p] >= acks for p in range(partitions))

        wait_until(f"{acks} acknowledged writes on each partition", flowing, timeout_s=60)

    def longest_gap(self, start: float, end: float, partitions: list[int] | None = None) -> float:
        """Longest stretch without an acknowledgement within [start, end], counting only
        acknowledgements from `partitions` if given."""
        acks = [a for a, p in list(self.ack_times) if partitions is None or p in partitions]
        times = [start, *sorted(a for a in acks if start < a < end), end]
        return max(b - a for a, b in zip(times, times[1:], strict=False))


def assert_nothing_acked_lost(cluster: LocalCluster, topic: str, acked: dict[Any, bytes]) -> None:
    partitions = 1 + max(p for p, _ in acked)
    stored = consume_all(cluster, topic, partitions, timeout_s=60)
    lost = {k: v for k, v in acked.items() if stored.get(k) != v}
    assert not lost, f"{len(lost)} acknowledged records missing, e.g. {list(lost.items())[:5]}"


def can_connect_from(cluster: LocalCluster, node: str, host: str, port: int) -> bool:
    """Whether a TCP connection from inside `node`'s namespace reaches host:port."""
    assert cluster.network is not None
    probe = (
        "import socket,sys\n"
        f"try: socket.create_connection(({host!r}, {port}), timeout=1.5).close()\n"
        "except OSError: sys.exit(1)\n"
    )
    result = subprocess.run(
        [*cluster.network.exec_prefix(node), "python3", "-c", probe], check=False
    )
    return result.returncode == 0


def test_isolated_broker_leaves_zookeeper_and_isr_but_still_serves_clients(
    netns_cluster: ClusterMaker,
) -> None:
    cluster = netns_cluster()
    state = json.loads((cluster.data_dir / "cluster.json").read_text())
    assert state["netns"] is True
    for info in [*state["brokers"].values(), *state["zookeepers"].values()]:
        assert info["netns"] and info["ip"] and info["ip"].startswith("10.231.")
    assert state["bootstrap_servers"] == ",".join(
        f"{state['brokers'][b]['ip']}:9092" for b in ("1", "2", "3")
    )
    assert state["zookeeper_connect"] == ",".join(
        f"{state['zookeepers'][z]['ip']}:2181" for z in ("1", "2", "3")
    )
    assert len(cluster.zk_servers()) == 3 and cluster.zk_leader() in (1, 2, 3)

    create_topic(cluster, "iso", 3, 3, min_insync_replicas="2")
    acked: dict[tuple[int, int], bytes] = {}
    errors: list[str] = []
    p = producer(cluster)
    for i in range(1000):
        p.produce("iso", f"r-{i}".encode(), on_delivery=delivery_recorder(acked, errors))
        p.poll(0)
    assert p.flush(60) == 0 and not errors and len(acked) == 1000
    assert_nothing_acked_lost(cluster, "iso", acked)

    controller = cluster.status().controller
    victim = next(b for b in (3, 2, 1) if b != controller)
    other = next(b for b in (1, 2, 3) if b not in (victim, controller))
    cluster.isolate(str(victim))
    started = time.monotonic()
    # Broker-to-broker and broker-to-ZooKeeper links are really cut...
    assert not can_connect_from(cluster, str(victim), *cluster.broker_address(other))
    zk1 = cluster.zookeepers[1]
    assert not can_connect_from(cluster, str(victim), zk1.host, zk1.port)
    assert can_connect_from(cluster, str(other), *cluster.broker_address(controller or 1))
    # ...so its ZooKeeper session expires and it leaves /brokers/ids and every ISR,
    wait_until(
        f"broker {victim} to leave /brokers/ids",
        lambda: victim not in cluster.status().live_brokers,
        timeout_s=SESSION_MS / 1000 + 10,
    )
    gone = time.monotonic() - started
    wait_until(
        f"broker {victim} out of every ISR",
        lambda: all(victim not in p.isr for p in cluster.status().partitions),
    )
    print(f"\nisolated broker {victim} left ZooKeeper after {gone:.2f}s")
    # ...while a client in the root namespace still reaches it.
    response: Any = answers_metadata(*cluster.broker_address(victim))
    assert response.brokers, "the isolated broker answered Metadata with no brokers"

    cluster.heal()
    assert can_connect_from(cluster, str(victim), *cluster.broker_address(other))
    wait_until(
        f"broker {victim} back in every ISR",
        lambda: (
            victim in cluster.status().live_brokers
            and all(victim in p.isr for p in cluster.status().partitions)
        ),
        timeout_s=40,
    )
    p = producer(cluster)
    p.produce("iso", b"after-heal", on_delivery=delivery_recorder(acked, errors))
    assert p.flush(30) == 0 and not errors
    assert_nothing_acked_lost(cluster, "iso", acked)


def test_zookeeper_leader_loss_keeps_acks_all_writes_flowing(
    netns_cluster: ClusterMaker,
) -> None:
    cluster = netns_cluster()
    create_topic(cluster, "zkl", 3, 3, min_insync_replicas="2")
    with PacedProducer(cluster, "zkl") as writer:
        writer.wait_flowing(3)
        zk_leader = cluster.zk_leader()
        assert zk_leader is not None
        killed_at = time.monotonic()
        epochs = cluster.status().broker_epochs
        cluster.zk_kill(zk_leader)
        new_leader = wait_until(
            "a new ZooKeeper leader",
            lambda: (leader := cluster.zk_leader()) != zk_leader and leader,
            timeout_s=15,
        )
        elected = time.monotonic() - killed_at
        # The control plane works on the surviving quorum: a topic creation goes through
        # the controller's ZooKeeper writes.
        create_topic(cluster, "zkl-after", 1, 3)
        # Watched for longer than a session: a broker whose session the new quorum lost
        # would be seen re-registering, and its partitions' writes stalling, by then.
        writer.wait_flowing(3, since=killed_at + SESSION_MS / 1000 + 2)
        observed_until = time.monotonic()
        gap = writer.longest_gap(killed_at - 1, observed_until)
        worst = max(writer.longest_gap(killed_at - 1, observed_until, [p]) for p in range(3))
        after = writer.acks_since(killed_at + elected)
        status = cluster.status()
    print(
        f"\nZooKeeper leader {zk_leader} killed: server {new_leader} elected after "
        f"{elected:.2f}s; longest gap between acknowledged writes {gap:.2f}s overall, "
        f"{worst:.2f}s on one partition; {len(writer.acked)} acked of {writer.sent} sent; "
        f"broker sessions {'survived' if status.broker_epochs == epochs else 'were renewed'}"
    )
    assert sorted(status.live_brokers) == [1, 2, 3]
    assert after > 100, f"only {after} writes acknowledged after the election"
    assert gap < SESSION_MS / 1000 + 5, f"writes stalled for {gap:.2f}s"
    assert cluster.status().controller is not None
    cluster.zk_start(zk_leader)
    assert cluster.zk_mode(zk_leader) == "follower"
    assert_nothing_acked_lost(cluster, "zkl", writer.acked)


def test_broker_cut_from_zookeeper_loses_its_leaderships_and_writes_continue(
    netns_cluster: ClusterMaker,
) -> None:
    cluster = netns_cluster()
    create_topic(cluster, "cut", 3, 3, min_insync_replicas="2")
    status = cluster.status()
    leaders = {p.tp.partition: p.leader for p in status.partitions if p.tp.topic == "cut"}
    victim = next(b for b in leaders.values() if b != status.controller)
    assert victim is not None
    led = [p for p, b in leaders.items() if b == victim]
    with PacedProducer(cluster, "cut") as writer:
        writer.wait_flowing(3)
        cut_at = time.monotonic()
        cluster.from_zookeeper(victim)
        wait_until(
            f"partitions {led} to move off broker {victim}",
            lambda: all(
                partition_status(cluster, TopicPartition("cut", p)).leader not in (victim, -1, None)
                for p in led
            ),
            timeout_s=SESSION_MS / 1000 + 10,
        )
        moved = time.monotonic() - cut_at
        assert cluster.status().controller == status.controller
        writer.wait_flowing(3, since=time.monotonic())
        gap = writer.longest_gap(cut_at - 1, time.monotonic())
        gap_moved = writer.longest_gap(cut_at - 1, time.monotonic(), led)
        after = writer.acks_since(cut_at + moved)
        cluster.heal()
        wait_until(
            f"broker {victim} back in every ISR",
            lambda: (
                victim in cluster.status().live_brokers
                and all(victim in p.isr for p in cluster.status().partitions)
            ),
            timeout_s=40,
        )
    print(
        f"\nbroker {victim} cut from ZooKeeper: partitions {led} moved after {moved:.2f}s; "
        f"longest gap between acknowledged writes {gap:.2f}s overall, {gap_moved:.2f}s on "
        f"the moved partitions; {len(writer.acked)} acked of {writer.sent} sent"
    )
    assert moved < SESSION_MS / 1000 + 6
    assert gap_moved < SESSION_MS / 1000 + 8, f"moved partitions stalled for {gap_moved:.2f}s"
    assert after > 50, f"only {after} writes acknowledged after the failover"
    assert not writer.errors, writer.errors[:5]
    assert_nothing_acked_lost(cluster, "cut", writer.acked)


def produce_acks_all(topic: str, partition: int, records: bytes, timeout_ms: int) -> Any:
    return produce_v9.ProduceRequest(
        transactional_id=None,
        acks=i16(-1),
        timeout=i32Timedelta.parse(timedelta(milliseconds=timeout_ms)),
        topic_data=(
            produce_v9.TopicProduceData(
                name=TopicName(topic),
                partition_data=(
                    produce_v9.PartitionProduceData(index=i32(partition), records=Records(records)),
                ),
            ),
        ),
    )


def test_zombie_leader_acknowledges_nothing_and_is_truncated(
    netns_cluster: ClusterMaker,
) -> None:
    cluster = netns_cluster()
    tp = TopicPartition("zombie", 0)
    create_topic(cluster, "zombie", 1, 3, min_insync_replicas="2")
    acked: dict[tuple[int, int], bytes] = {}
    errors: list[str] = []
    p = producer(cluster)
    for i in range(200):
        p.produce("zombie", f"before-{i}".encode(), on_delivery=delivery_recorder(acked, errors))
    assert p.flush(30) == 0 and not errors

    old = partition_status(cluster, tp).leader
    assert old is not None and old > 0
    cluster.from_zookeeper(old)
    cut_at = time.monotonic()
    new = wait_until(
        f"a new leader for {tp} instead of broker {old}",
        lambda: (leader := partition_status(cluster, tp).leader) not in (old, -1, None) and leader,
        timeout_s=SESSION_MS / 1000 + 10,
    )
    print(
        f"\nbroker {old} cut from ZooKeeper; broker {new} leads after "
        f"{time.monotonic() - cut_at:.2f}s"
    )

    # The zombie still believes it leads, and clients can still reach it. acks=all writes
    # sent straight to it must not be acknowledged: its followers now follow `new`.
    host, port = cluster.broker_address(old)
    outcomes: list[str] = []
    with WireClient(f"{host}:{port}", timeout_s=10) as client:
        for i in range(3):
            try:
                response = client.request(
                    produce_acks_all("zombie", 0, batch([f"zombie-{i}".encode()]), 2000)
                )
            except TimeoutError:
                outcomes.append("no answer")
                continue
            error = response.responses[0].partition_responses[0].error_code
            assert error in NOT_ACKNOWLEDGED, (
                f"the zombie leader {old} answered an acks=all write with {error!r}"
            )
            outcomes.append(error.name)
    print(f"acks=all writes sent to the zombie: {outcomes}")
    # It did append them (a leader appends before waiting for its followers): the
    # truncation checked below has something to remove.
    assert b"zombie-" in replica_batches(cluster, old, tp, 1 << 62)

    # Meanwhile the rest of the cluster acknowledges writes through the new leader. The
    # bootstrap leaves the zombie out: like a Kafka broker cut from ZooKeeper, it still
    # answers Metadata from its stale cache (itself as leader, old epoch), so a client
    # that happens to bootstrap from it keeps sending it writes that time out.
    survivors = ",".join(
        f"{h}:{p}" for h, p in (cluster.broker_address(b) for b in (1, 2, 3) if b != old)
    )
    p = producer(cluster, **{"bootstrap.servers": survivors})
    for i in range(100):
        p.produce("zombie", f"during-{i}".encode(), on_delivery=delivery_recorder(acked, errors))
    assert p.flush(40) == 0 and not errors, errors[:5]
    assert any(v.startswith(b"during-") for v in acked.values())

    cluster.heal()
    wait_until(
        f"broker {old} back in the ISR of {tp}",
        lambda: old in partition_status(cluster, tp).isr,
        timeout_s=40,
    )
    records = consume_all(cluster, "zombie", 1)
    hw = 1 + max(offset for _, offset in records)
    assert not [v for v in records.values() if v.startswith(b"zombie-")]
    assert all(records.get(k) == v for k, v in acked.items())

    def replicas_agree() -> bool:
        return replica_batches(cluster, old, tp, hw) == replica_batches(cluster, new, tp, hw)

    wait_until(f"broker {old}'s replica to match broker {new}'s below HW {hw}", replicas_agree)
    whole_log = replica_batches(cluster, old, tp, 1 << 62)
    assert b"zombie-" not in whole_log, "the zombie kept its uncommitted tail"
