"""ZkClient against the session's real ZooKeeper, each test in its own chroot."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest
from kazoo.exceptions import BadVersionError

from strandline.coordination import znodes
from strandline.coordination.errors import (
    BrokerIdInUseError,
    ControllerMovedError,
    TopicExistsError,
    ZkVersionConflictError,
)
from strandline.coordination.multi_read import multi_read_async
from strandline.coordination.zk_client import ZkClient, on_loop, split_connect_string
from strandline.coordination.znodes import LeaderAndIsr
from strandline.coordination.zookeeper_server import ZooKeeperServer
from strandline.topic_ids import topic_id_to_str
from strandline.types import TopicPartition
from tests.waiting import wait_until


@pytest.fixture
def zk(zk_connect: str) -> Iterator[ZkClient]:
    client = ZkClient(zk_connect, session_timeout_ms=4000).connect()
    yield client
    client.close()


def test_split_connect_string() -> None:
    assert split_connect_string("h:1,h:2/a/b") == ("h:1,h:2", "/a/b")
    assert split_connect_string("h:1") == ("h:1", "")
    assert split_connect_string("h:1/") == ("h:1", "")


def test_connect_creates_chroot_and_top_level_paths(
    zookeeper: ZooKeeperServer, zk: ZkClient
) -> None:
    with ZkClient(zookeeper.connect_string).connect() as root:
        assert root.kazoo.exists(zk.chroot)
        assert root.kazoo.exists(zk.chroot + "/brokers/ids")
        assert root.kazoo.exists(zk.chroot + "/admin/delete_topics")


def test_register_broker_returns_czxid_and_rejects_a_live_duplicate(zk_connect: str) -> None:
    with ZkClient(zk_connect, session_timeout_ms=400).connect() as first:
        epoch = first.register_broker(1, "127.0.0.1", 9092, rack="r1")
        _, stat = first.kazoo.get("/brokers/ids/1")
        assert epoch == stat.czxid > 0
        # Registering again on the same session keeps the epoch.
        assert first.register_broker(1, "127.0.0.1", 9092) == epoch
        live = first.get_live_brokers()
        assert list(live) == [1]
        assert (live[1].host, live[1].port, live[1].rack, live[1].epoch) == (
            "127.0.0.1",
            9092,
            "r1",
            epoch,
        )
        with ZkClient(zk_connect, session_timeout_ms=400).connect() as second:
            with pytest.raises(BrokerIdInUseError, match="broker.id 1 is already registered"):
                second.register_broker(1, "127.0.0.1", 9999, stale_wait_s=0.3)
            first.close()
            # The ephemeral node leaves with the session; a new incarnation gets a newer epoch.
            wait_until(
                "the old registration to expire", lambda: second.get_live_brokers() == {}, 5.0
            )
            assert second.register_broker(1, "127.0.0.1", 9999) > epoch


def test_restarted_broker_waits_out_its_crashed_predecessor(zk_connect: str) -> None:
    # A SIGKILLed broker leaves its ephemeral znode until its session expires.
    script = (
        "import sys, time\n"
        "from strandline.coordination.zk_client import ZkClient\n"
        # Long enough to outlive the next client's connect on a loaded machine.
        "zk = ZkClient(sys.argv[1], session_timeout_ms=2000).connect()\n"
        "zk.register_broker(3, '127.0.0.1', 1)\n"
        "print('registered', flush=True)\n"
        "time.sleep(60)\n"
    )
    crashed = subprocess.Popen(
        [sys.executable, "-c", script, zk_connect], stdout=subprocess.PIPE, text=True
    )
    try:
        assert crashed.stdout is not None and crashed.stdout.readline() == "registered\n"
    finally:
        crashed.kill()
        crashed.wait()
    # The same session timeout as its predecessor, as a restarted broker has: it waits
    # up to 1.5 x its own timeout + 1 s for the old registration to go.
    with ZkClient(zk_connect, session_timeout_ms=2000).connect() as restarted:
        old = restarted.get_broker(3)
        assert old is not None and old.port == 1
        started = time.monotonic()
        epoch = restarted.register_broker(3, "127.0.0.1", 2)
        assert time.monotonic() - started < 10
        new = restarted.get_broker(3)
        assert new is not None and new.port == 2 and epoch > old.epoch


def test_topic_create_read_config_and_exists(zk: ZkClient) -> None:
    topic_id = zk.create_topic("orders", {0: [1, 2], 1: [2, 1]}, {"retention.ms": "1000"})
    assert zk.get_all_topics() == ["orders"]
    assert zk.get_topic_assignment("orders") == {0: [1, 2], 1: [2, 1]}
    assert zk.get_topic_config("orders") == {"retention.ms": "1000"}
    raw, _ = zk.kazoo.get("/brokers/topics/orders")
    # Kafka 2.8+'s TopicZNode: version 3 with the new topic's id (KIP-516).
    assert json.loads(raw) == {
        "version": 3,
        "partitions": {"0": [1, 2], "1": [2, 1]},
        "adding_replicas": {},
        "removing_replicas": {},
        "topic_id": topic_id_to_str(topic_id),
    }
    assert zk.get_topic_id("orders") == topic_id
    with pytest.raises(TopicExistsError):
        zk.create_topic("orders", {0: [1]}, {})
    assert zk.get_topic_assignment("missing") is None
    assert zk.get_topic_config("missing") == {}

    version = zk.set_topic_assignment("orders", {0: [1, 2], 1: [2, 1], 2: [1, 2]})
    assert zk.get_topic_assignment("orders") == {0: [1, 2], 1: [2, 1], 2: [1, 2]}
    assert zk.get_topic_id("orders") == topic_id  # a rewrite keeps the id
    with pytest.raises(ZkVersionConflictError):
        zk.set_topic_assignment("orders", {0: [1]}, expected_version=version + 5)

    zk.set_topic_config("orders", {"retention.ms": "5"})
    assert zk.get_topic_config("orders") == {"retention.ms": "5"}
    assert list(zk.get_config_changes().values()) == ["topics/orders"]


def test_partition_state_conditional_writes(zk: ZkClient) -> None:
    tp = TopicPartition("t", 0)
    assert zk.get_partition_state(tp) is None
    state = LeaderAndIsr(leader=1, leader_epoch=0, isr=[1, 2], controller_epoch=1)
    assert zk.create_partition_state(tp, state) == 0
    with pytest.raises(ZkVersionConflictError):
        zk.create_partition_state(tp, state)
    assert zk.get_partition_state(tp) == (state, 0)

    shrunk = LeaderAndIsr(leader=1, leader_epoch=0, isr=[1], controller_epoch=1)
    assert zk.update_partition_state(tp, shrunk, expected_version=0) == 1
    with pytest.raises(BadVersionError):  # the error is BadVersion-derived
        zk.update_partition_state(tp, state, expected_version=0)
    assert zk.get_partition_state(tp) == (shrunk, 1)


def test_many_partition_states_pipelined(zk: ZkClient) -> None:
    tps = [TopicPartition("big", p) for p in range(200)]
    zk.create_partition_state(tps[5], LeaderAndIsr(1, 0, [1, 2], 1))
    created = zk.create_partition_states({tp: LeaderAndIsr(1, 0, [1, 2], 1) for tp in tps})
    assert isinstance(created[tps[5]], ZkVersionConflictError)  # it existed already
    assert all(created[tp] == 0 for tp in tps if tp != tps[5])
    states = zk.get_partition_states(tps + [TopicPartition("big", 999)])
    assert len(states) == 200
    updates = {tp: (LeaderAndIsr(2, 1, [2], 1), 0) for tp in tps}
    updates[tps[0]] = (LeaderAndIsr(2, 1, [2], 1), 7)  # stale version: only this one fails
    results = zk.update_partition_states(updates)
    assert isinstance(results[tps[0]], ZkVersionConflictError)
    assert all(results[tp] == 1 for tp in tps[1:])


def test_controller_election_increments_epoch_and_fences(zk_connect: str) -> None:
    with ZkClient(zk_connect, session_timeout_ms=400).connect() as a:
        with ZkClient(zk_connect, session_timeout_ms=400).connect() as b:
            assert a.get_controller() is None
            assert a.try_elect_controller(1) == 1
            assert b.try_elect_controller(2) is None  # /controller is taken
            assert b.get_controller() == 1
            assert b.get_controller_epoch() == (1, 1)
            raw, _ = b.kazoo.get("/controller_epoch")
            assert raw == b"1"

            tp = TopicPartition("t", 0)
            a.create_partition_state(tp, LeaderAndIsr(1, 0, [1], 1))
            assert a.update_partition_state(tp, LeaderAndIsr(1, 1, [1], 1), 0, True) == 1
            fenced_tp = TopicPartition("t", 1)
            assert a.create_partition_states({fenced_tp: LeaderAndIsr(1, 0, [1], 1)}, True) == {
                fenced_tp: 0
            }

            a.close()  # the controller's session ends: /controller disappears
            wait_until("/controller to be deleted", lambda: b.get_controller() is None, 5.0)
            assert b.try_elect_controller(2) == 2
            assert b.get_controller() == 2

            # The old controller's fencing version is stale now.
            stale = ZkClient(zk_connect).connect()
            stale.controller_epoch_zk_version = 1
            with pytest.raises(ControllerMovedError):
                stale.update_partition_state(tp, LeaderAndIsr(1, 2, [1], 1), 1, True)
            new_tp = TopicPartition("t", 2)
            fenced = stale.create_partition_states({new_tp: LeaderAndIsr(1, 0, [1], 1)}, True)
            assert isinstance(fenced[new_tp], ControllerMovedError)
            assert stale.get_partition_state(new_tp) is None
            stale.close()
            assert b.get_partition_state(tp) == (LeaderAndIsr(1, 1, [1], 1), 1)


def test_topic_deletion_znodes(zk: ZkClient) -> None:
    zk.create_topic("gone", {0: [1]}, {"retention.ms": "1"})
    zk.create_partition_state(TopicPartition("gone", 0), LeaderAndIsr(1, 0, [1], 1))
    zk.mark_topic_for_deletion("gone")
    zk.mark_topic_for_deletion("gone")  # idempotent
    assert zk.get_topics_marked_for_deletion() == ["gone"]
    zk.delete_topic_znodes("gone")
    assert zk.get_all_topics() == []
    assert zk.get_topics_marked_for_deletion() == []
    assert not zk.kazoo.exists("/config/topics/gone")


def test_isr_change_notifications_and_admin_znodes(zk: ZkClient) -> None:
    name = zk.create_isr_change_notification([TopicPartition("a", 1), TopicPartition("a", 0)])
    assert name.startswith("isr_change_")
    assert zk.get_isr_change_notifications() == {
        name: [TopicPartition("a", 0), TopicPartition("a", 1)]
    }
    zk.delete_isr_change_notifications([name])
    assert zk.get_isr_change_notifications() == {}

    reassignment = {TopicPartition("Foo", 1): [0, 1, 3]}
    zk.create_partition_reassignment(reassignment)
    assert zk.get_partition_reassignment() == reassignment
    zk.set_partition_reassignment({})
    assert zk.get_partition_reassignment() == {}

    zk.create_preferred_replica_election([TopicPartition("Bar", 0)])
    raw, _ = zk.kazoo.get(znodes.PREFERRED_REPLICA_ELECTION_PATH)
    assert json.loads(raw) == {"version": 1, "partitions": [{"topic": "Bar", "partition": 0}]}
    assert zk.get_preferred_replica_election() == [TopicPartition("Bar", 0)]
    zk.delete_preferred_replica_election()
    assert zk.get_preferred_replica_election() == []


def test_watches_marshalled_onto_the_event_loop(zk_connect: str) -> None:
    async def scenario() -> tuple[list[list[str]], list[int | None], set[int]]:
        loop = asyncio.get_running_loop()
        children_seen: list[list[str]] = []
        controller_seen: list[int | None] = []
        threads: set[int] = set()

        def on_children(children: list[str]) -> None:
            threads.add(threading.get_ident())
            children_seen.append(children)

        def on_controller(data: bytes | None, _stat: object) -> None:
            threads.add(threading.get_ident())
            controller_seen.append(znodes.decode_controller(data) if data else None)

        with ZkClient(zk_connect).connect() as watcher, ZkClient(zk_connect).connect() as actor:
            watcher.watch_children(znodes.BROKER_IDS_PATH, on_loop(loop, on_children))
            watcher.watch_data(znodes.CONTROLLER_PATH, on_loop(loop, on_controller))
            actor.register_broker(5, "127.0.0.1", 1)
            actor.try_elect_controller(5)
            for _ in range(250):
                if children_seen[-1:] == [["5"]] and controller_seen[-1:] == [5]:
                    break
                await asyncio.sleep(0.02)
            # Snapshot before closing: the actor's exit removes its ephemeral znode.
            snapshot = list(children_seen), list(controller_seen), set(threads)
        return snapshot

    children, controllers, threads = asyncio.run(scenario())
    assert children[0] == [] and children[-1] == ["5"]
    assert controllers[0] is None and controllers[-1] == 5
    assert threads == {threading.get_ident()}  # every callback ran on the loop's thread


def test_connect_to_missing_server_fails_and_leaves_no_threads() -> None:
    from strandline.coordination.zookeeper_server import free_port

    before = threading.active_count()
    client = ZkClient(f"127.0.0.1:{free_port()}/x", connect_timeout_s=0.5)
    with pytest.raises(Exception, match="(?i)time"):
        client.connect()
    wait_until("the client's threads to end", lambda: threading.active_count() <= before, 5.0)


def test_partition_states_of_a_missing_topic_fail_per_partition(zk: ZkClient) -> None:
    from kazoo.exceptions import NoNodeError

    results = zk.create_partition_states({TopicPartition("nope", 0): LeaderAndIsr(1, 0, [1], 1)})
    assert isinstance(results[TopicPartition("nope", 0)], NoNodeError)
    assert zk.get_all_topics() == []


def test_many_isr_change_notifications_and_brokers_read_pipelined(zk: ZkClient) -> None:
    """A broker back in thousands of ISRs leaves as many notifications; the controller
    reads them (and the live brokers) with pipelined reads, one round trip's latency."""
    names = [zk.create_isr_change_notification([TopicPartition("n", p)]) for p in range(50)]
    found = zk.get_isr_change_notifications()
    assert sorted(found) == sorted(names)
    assert {tp.partition for tps in found.values() for tp in tps} == set(range(50))
    for broker_id in (3, 1, 2):
        zk.register_broker(broker_id, "localhost", 9090 + broker_id)
    live = zk.get_live_brokers()
    assert list(live) == [1, 2, 3]
    assert [r.port for r in live.values()] == [9091, 9092, 9093]
    assert all(r.epoch > 0 for r in live.values())


def test_partition_states_are_written_in_few_multi_ops(zk_connect: str) -> None:
    """A 600-partition topic's states go in a few fenced multi-ops, not 600 requests
    (docs/scaling.md): a multi is one ZooKeeper transaction, so its znodes share one zxid. A
    multi that meets an existing znode is redone per partition: only that one fails."""
    with ZkClient(zk_connect, session_timeout_ms=4000).connect() as zk:
        assert zk.try_elect_controller(1) == 1
        tps = [TopicPartition("wide", p) for p in range(600)]
        zk.create_partition_state(tps[400], LeaderAndIsr(1, 0, (1, 2), 1))
        created = zk.create_partition_states(
            {tp: LeaderAndIsr(1, 0, (1, 2), 1) for tp in tps}, fence_controller_epoch=True
        )
        assert isinstance(created[tps[400]], ZkVersionConflictError)
        assert all(created[tp] == 0 for tp in tps if tp != tps[400])
        zxids = {zk.kazoo.exists(znodes.partition_state_path(tp)).czxid for tp in tps[:250]}
        assert len(zxids) == 1  # the first 250 in one transaction

        updates = {tp: (LeaderAndIsr(2, 1, (2, 1), 1), 0) for tp in tps}
        updates[tps[300]] = (LeaderAndIsr(2, 1, (2, 1), 1), 5)  # stale: only it fails
        written = zk.update_partition_states(updates, fence_controller_epoch=True)
        assert isinstance(written[tps[300]], ZkVersionConflictError)
        assert all(written[tp] == 1 for tp in tps if tp != tps[300])
        zxids = {zk.kazoo.exists(znodes.partition_state_path(tp)).mzxid for tp in tps[:250]}
        assert len(zxids) == 1
        assert zk.get_partition_state(tps[599]) == (LeaderAndIsr(2, 1, (2, 1), 1), 1)

        zk.controller_epoch_zk_version = 99  # as a controller that lost its election
        fenced = zk.update_partition_states(
            {tp: (LeaderAndIsr(3, 2, (3,), 1), 1) for tp in tps[:300]}, True
        )
        assert all(isinstance(r, ControllerMovedError) for r in fenced.values())
        assert zk.get_partition_state(tps[0]) == (LeaderAndIsr(2, 1, (2, 1), 1), 1)


def test_partition_states_read_with_multi_read(zk: ZkClient) -> None:
    """A failover reads every state znode with multiRead (ZooKeeper 3.6+), a thousand
    per request: missing znodes are left out, the others come back with their
    zkVersion, through the client's chroot (docs/scaling.md)."""
    tps = [TopicPartition("mr", p) for p in range(1500)]
    zk.create_topic("mr", {tp.partition: [1, 2] for tp in tps})
    zk.create_partition_states({tp: LeaderAndIsr(1, 0, (1, 2), 1) for tp in tps[:1200]})
    zk.update_partition_state(tps[7], LeaderAndIsr(2, 1, (2,), 1), 0)
    answers = multi_read_async(zk.kazoo, [znodes.partition_state_path(tp) for tp in tps[:3]])
    assert [len(chunk) for chunk, _result in answers] == [3]
    states = zk.get_partition_states(tps)
    assert zk._multi_read  # the server answered multiRead: no fallback happened
    assert sorted(states) == tps[:1200]
    assert states[tps[7]] == (LeaderAndIsr(2, 1, (2,), 1), 1)
    assert states[tps[1199]] == (LeaderAndIsr(1, 0, (1, 2), 1), 0)
