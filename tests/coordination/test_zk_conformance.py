"""One behavioural suite for the ZooKeeperClient interface, run against both of its
implementations: `ZkClient` on the session's real ZooKeeper (a fresh chroot per test)
and `SimZkClient` on a fresh simulated ZooKeeper. Where they differ on purpose (when
watch callbacks run), the test says so."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, SessionExpiredError

from strandline.coordination import znodes
from strandline.coordination.errors import (
    BrokerIdInUseError,
    ControllerMovedError,
    TopicExistsError,
    ZkVersionConflictError,
)
from strandline.coordination.zk_client import ZkClient
from strandline.coordination.zk_ops import SetWrite
from strandline.coordination.znodes import LeaderAndIsr
from strandline.coordination.zookeeper_client import ZnodeStatView, ZooKeeperClient
from strandline.sim.zk_client import SimZkClient
from strandline.sim.zookeeper import SimZooKeeper
from strandline.types import TopicPartition

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


@dataclass
class Impl:
    """One implementation under test: a first session, a way to open more sessions on
    the same ZooKeeper, and a way to wait until watch callbacks have seen a change."""

    kind: str
    open_session: Callable[[], ZooKeeperClient]
    run_watches: Callable[[], None]
    sessions: list[ZooKeeperClient] = field(default_factory=list)

    def session(self) -> ZooKeeperClient:
        client = self.open_session()
        self.sessions.append(client)
        return client

    def settle(self, condition: Callable[[], bool], timeout: float = 5.0) -> None:
        """Wait until `condition` holds: the real client's callbacks arrive on kazoo's
        thread; the simulator's run when its notifications are run."""
        deadline = time.monotonic() + timeout
        while True:
            self.run_watches()
            if condition():
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.kind}: condition not met within {timeout} s")
            time.sleep(0.01)


# The real half runs on a ZooKeeper server, so it is in the cluster tier.
@pytest.fixture(params=[pytest.param("real", marks=pytest.mark.cluster), "sim"])
def impl(request: pytest.FixtureRequest) -> Iterator[Impl]:
    if request.param == "real":
        connect: str = request.getfixturevalue("zk_connect")
        impl = Impl(
            "real",
            lambda: ZkClient(connect, session_timeout_ms=4000).connect(),
            lambda: None,
        )
    else:
        sim = SimZooKeeper()
        impl = Impl("sim", lambda: SimZkClient(sim, sim.new_session()), sim.run_notifications)
    yield impl
    for client in impl.sessions:
        client.close()


@pytest.fixture
def zk(impl: Impl) -> ZooKeeperClient:
    return impl.session()


def state(leader: int, epoch: int, isr: tuple[int, ...] = (1, 2)) -> LeaderAndIsr:
    return LeaderAndIsr(leader=leader, leader_epoch=epoch, isr=isr, controller_epoch=1)


# --- topics ---------------------------------------------------------------------------


def test_topic_create_assignment_and_listing(zk: ZooKeeperClient) -> None:
    assert zk.get_all_topics() == []
    assert zk.get_topic_assignment("b") is None
    zk.create_topic("b", {0: [1, 2], 1: [2, 1]}, {"retention.ms": "1000"})
    zk.create_topic("a", {0: [3]})
    assert zk.get_all_topics() == ["a", "b"]
    assert zk.get_topic_assignment("b") == {0: [1, 2], 1: [2, 1]}
    assert zk.get_topic_config("b") == {"retention.ms": "1000"}
    assert zk.get_topic_config("a") == {}
    with pytest.raises(TopicExistsError):
        zk.create_topic("a", {0: [1]})
    assert zk.get_topic_assignment("a") == {0: [3]}  # the refused create changed nothing


def test_topic_assignment_write_is_conditional(zk: ZooKeeperClient) -> None:
    zk.create_topic("t", {0: [1]})
    assert zk.set_topic_assignment("t", {0: [1], 1: [2]}, expected_version=0) == 1
    with pytest.raises(ZkVersionConflictError) as lost:
        zk.set_topic_assignment("t", {0: [9]}, expected_version=0)
    assert isinstance(lost.value, BadVersionError)
    assert zk.get_topic_assignment("t") == {0: [1], 1: [2]}
    assert zk.set_topic_assignment("t", {0: [2]}) == 2  # -1: unconditional
    with pytest.raises(NoNodeError):
        zk.set_topic_assignment("missing", {0: [1]})


# --- partition state ------------------------------------------------------------------


def test_partition_state_create_get_and_conditional_update(zk: ZooKeeperClient) -> None:
    zk.create_topic("t", {0: [1, 2], 1: [2, 1]})
    assert zk.get_partition_state(TP0) is None
    assert zk.create_partition_state(TP0, state(1, 0)) == 0
    with pytest.raises(ZkVersionConflictError):
        zk.create_partition_state(TP0, state(2, 0))
    assert zk.get_partition_state(TP0) == (state(1, 0), 0)

    assert zk.update_partition_state(TP0, state(1, 1, (1,)), expected_version=0) == 1
    # A stale zkVersion is refused the same way by both: ZkVersionConflictError, a
    # kazoo BadVersionError, and the znode keeps the winner's write.
    with pytest.raises(ZkVersionConflictError) as lost:
        zk.update_partition_state(TP0, state(2, 1), expected_version=0)
    assert isinstance(lost.value, BadVersionError)
    assert lost.value.expected_version == 0
    assert zk.get_partition_state(TP0) == (state(1, 1, (1,)), 1)


def test_batched_partition_states_fail_per_partition(zk: ZooKeeperClient) -> None:
    zk.create_topic("t", {0: [1, 2], 1: [2, 1]})
    created = zk.create_partition_states({TP0: state(1, 0), TP1: state(2, 0)})
    assert created == {TP0: 0, TP1: 0}
    again = zk.create_partition_states({TP0: state(1, 0)})
    assert isinstance(again[TP0], ZkVersionConflictError)
    # A topic whose znode is gone is not resurrected by a state create.
    orphan = TopicPartition("gone", 0)
    assert isinstance(zk.create_partition_states({orphan: state(1, 0)})[orphan], NoNodeError)
    assert zk.children_or_none(znodes.topic_path("gone")) is None

    missing = TopicPartition("t", 7)
    results = zk.update_partition_states(
        {TP0: (state(2, 1), 0), TP1: (state(1, 1), 5), missing: (state(1, 0), 0)}
    )
    assert results[TP0] == 1
    assert isinstance(results[TP1], ZkVersionConflictError)
    assert isinstance(results[missing], NoNodeError)
    assert zk.get_partition_states([TP0, TP1, missing]) == {
        TP0: (state(2, 1), 1),
        TP1: (state(2, 0), 0),
    }


def test_fenced_state_writes_need_the_current_controller_epoch(impl: Impl) -> None:
    old, new = impl.session(), impl.session()
    old.create_topic("t", {0: [1, 2]})
    old.create_partition_state(TP0, state(1, 0))
    with pytest.raises(ControllerMovedError):  # never elected: nothing to fence on
        old.update_partition_state(TP0, state(2, 1), 0, fence_controller_epoch=True)
    assert old.try_elect_controller(1) == 1
    assert old.update_partition_state(TP0, state(2, 1), 0, fence_controller_epoch=True) == 1
    # `old` loses the controllership without noticing (it keeps its fencing version).
    version = old.controller_epoch_zk_version
    old.resign_controller(1)
    assert new.try_elect_controller(2) == 2
    old.controller_epoch_zk_version = version
    result = old.update_partition_states({TP0: (state(1, 2), 1)}, fence_controller_epoch=True)
    assert isinstance(result[TP0], ControllerMovedError)
    with pytest.raises(ControllerMovedError):
        old.fenced_multi([_assignment_write("t", {0: [9]})])
    new.fenced_multi([_assignment_write("t", {0: [2, 1]})])
    assert new.get_topic_assignment("t") == {0: [2, 1]}
    assert new.get_partition_state(TP0) == (state(2, 1), 1)


def _assignment_write(topic: str, assignment: dict[int, list[int]]) -> SetWrite:
    return SetWrite(znodes.topic_path(topic), znodes.encode_topic_assignment(assignment))


# --- ISR change notifications ---------------------------------------------------------


def test_isr_change_notifications_create_get_delete(zk: ZooKeeperClient) -> None:
    assert zk.get_isr_change_notifications() == {}
    first = zk.create_isr_change_notification([TP1, TP0, TP1])
    second = zk.create_isr_change_notification([TopicPartition("u", 3)])
    assert first.startswith(znodes.ISR_CHANGE_PREFIX) and second > first
    assert zk.get_isr_change_notifications() == {
        first: [TP0, TP1],  # sorted, once each
        second: [TopicPartition("u", 3)],
    }
    zk.delete_isr_change_notifications([first, "isr_change_9999999999"])  # gone: skipped
    assert list(zk.get_isr_change_notifications()) == [second]


# --- controller -----------------------------------------------------------------------


def test_controller_election_epoch_and_resignation(impl: Impl) -> None:
    a, b = impl.session(), impl.session()
    assert a.get_controller() is None and a.get_controller_epoch() is None
    assert a.try_elect_controller(1) == 1
    assert b.get_controller() == 1
    assert b.get_controller_epoch() == (1, 1)
    assert a.controller_epoch_zk_version == 1
    assert b.try_elect_controller(2) is None  # /controller is held
    assert b.controller_epoch_zk_version is None
    b.resign_controller(2)  # not the holder: nothing happens
    assert a.get_controller() == 1

    a.resign_controller(1)
    assert a.get_controller() is None and a.controller_epoch_zk_version is None
    assert b.try_elect_controller(2) == 2
    assert a.get_controller_epoch() == (2, 2)
    b.close()  # /controller is ephemeral: it goes with the session
    assert a.get_controller() is None
    assert a.try_elect_controller(1) == 3


# --- brokers --------------------------------------------------------------------------


def test_broker_registration_and_live_brokers(impl: Impl) -> None:
    one, two = impl.session(), impl.session()
    epoch = one.register_broker(
        1,
        "127.0.0.1",
        9092,
        rack="r1",
        endpoints=["PLAINTEXT://127.0.0.1:9092", "SSL://127.0.0.1:9093"],
        security_protocols={"PLAINTEXT": "PLAINTEXT", "SSL": "SSL"},
    )
    assert one.register_broker(1, "127.0.0.1", 9092) == epoch  # own node: same epoch
    two.register_broker(2, "127.0.0.1", 9094)
    live = two.get_live_brokers()
    assert list(live) == [1, 2]
    reg = live[1]
    assert (reg.host, reg.port, reg.rack, reg.epoch) == ("127.0.0.1", 9092, "r1", epoch)
    assert reg.endpoints == ("PLAINTEXT://127.0.0.1:9092", "SSL://127.0.0.1:9093")
    assert dict(reg.security_protocols) == {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL"}
    assert two.get_broker(1) == reg
    with pytest.raises(BrokerIdInUseError):
        two.register_broker(1, "127.0.0.1", 9999, stale_wait_s=0.0)

    one.close()  # ephemeral: the broker is gone with its session
    assert list(two.get_live_brokers()) == [2]
    assert two.get_broker(1) is None
    three = impl.session()
    assert three.register_broker(1, "127.0.0.1", 9092) > epoch  # a new incarnation


# --- topic deletion -------------------------------------------------------------------


def test_topic_deletion_markers_and_znode_removal(zk: ZooKeeperClient) -> None:
    zk.create_topic("t", {0: [1], 1: [1]}, {"cleanup.policy": "compact"})
    zk.create_topic("keep", {0: [1]})
    zk.create_partition_states({TP0: state(1, 0), TP1: state(1, 0)})
    zk.mark_topic_for_deletion("t")
    zk.mark_topic_for_deletion("t")  # twice: not an error
    assert zk.get_topics_marked_for_deletion() == ["t"]

    zk.delete_topic_znodes("t")
    assert zk.get_all_topics() == ["keep"]
    assert zk.get_topic_assignment("t") is None
    assert zk.get_partition_states([TP0, TP1]) == {}
    assert zk.get_topic_config("t") == {}
    assert zk.get_topics_marked_for_deletion() == []
    zk.delete_topic_znodes("t")  # already gone: not an error
    assert zk.get_topic_assignment("keep") == {0: [1]}


# --- configs --------------------------------------------------------------------------


def test_topic_and_broker_configs_announce_changes(zk: ZooKeeperClient) -> None:
    zk.create_topic("t", {0: [1]}, {"retention.ms": "1"})
    assert zk.get_config_changes() == {}  # creating a topic announces nothing
    zk.set_topic_config("t", {"retention.ms": "2", "segment.bytes": "1024"})
    zk.set_broker_config("1", {"log.cleaner.threads": "2"})
    zk.set_broker_config(znodes.BROKER_CONFIG_DEFAULT, {"min.insync.replicas": "2"})
    zk.set_topic_config("t", {})  # replaces: the overrides go
    assert zk.get_topic_config("t") == {}
    assert zk.get_broker_config("1") == {"log.cleaner.threads": "2"}
    assert zk.get_broker_config(znodes.BROKER_CONFIG_DEFAULT) == {"min.insync.replicas": "2"}
    assert zk.get_broker_config("2") == {}
    changes = zk.get_config_changes()
    assert list(changes) == sorted(changes)
    assert all(name.startswith(znodes.CONFIG_CHANGE_PREFIX) for name in changes)
    assert list(changes.values()) == ["topics/t", "brokers/1", "brokers/<default>", "topics/t"]


# --- admin znodes ---------------------------------------------------------------------


def test_partition_reassignment_znode(zk: ZooKeeperClient) -> None:
    assert zk.get_partition_reassignment() == {}
    zk.create_partition_reassignment({TP0: [2, 3], TP1: [3, 1]})
    assert zk.get_partition_reassignment() == {TP0: [2, 3], TP1: [3, 1]}
    with pytest.raises(NodeExistsError):  # one reassignment at a time
        zk.create_partition_reassignment({TP0: [1]})
    zk.set_partition_reassignment({TP1: [3, 1]})  # TP0 done
    assert zk.get_partition_reassignment() == {TP1: [3, 1]}
    zk.set_partition_reassignment({})  # all done: the znode goes
    assert zk.children_or_none(znodes.REASSIGN_PARTITIONS_PATH) is None
    zk.create_partition_reassignment({TP0: [1]})
    assert zk.get_partition_reassignment() == {TP0: [1]}


def test_preferred_replica_election_znode(zk: ZooKeeperClient) -> None:
    assert zk.get_preferred_replica_election() == []
    zk.create_preferred_replica_election([TP1, TP0, TP1])
    assert zk.get_preferred_replica_election() == [TP0, TP1]
    with pytest.raises(NodeExistsError):
        zk.create_preferred_replica_election([TP0])
    zk.delete_preferred_replica_election()
    assert zk.get_preferred_replica_election() == []
    zk.delete_preferred_replica_election()  # nothing pending: not an error


# --- watches --------------------------------------------------------------------------


def test_watch_children_sees_every_change(impl: Impl) -> None:
    watcher, writer = impl.session(), impl.session()
    seen: list[list[str]] = []
    watcher.watch_children(znodes.BROKER_TOPICS_PATH, seen.append)
    impl.settle(lambda: seen == [[]])
    writer.create_topic("b", {0: [1]})
    writer.create_topic("a", {0: [1]})
    impl.settle(lambda: bool(seen) and seen[-1] == ["a", "b"])
    writer.delete_topic_znodes("b")
    impl.settle(lambda: seen[-1] == ["a"])
    # A path that does not exist yet is created so the watch can be set.
    fresh: list[list[str]] = []
    watcher.watch_children("/conformance/fresh", fresh.append)
    assert watcher.children_or_none("/conformance/fresh") == []
    impl.settle(lambda: fresh == [[]])


def test_watch_data_sees_create_change_and_delete(impl: Impl) -> None:
    watcher, controller = impl.session(), impl.session()
    seen: list[tuple[int | None, int | None]] = []

    def on_controller(data: bytes | None, stat: ZnodeStatView | None) -> None:
        holder = None if data is None else znodes.decode_controller(data)
        seen.append((holder, None if stat is None else stat.ephemeralOwner))

    watcher.watch_data(znodes.CONTROLLER_PATH, on_controller)
    impl.settle(lambda: seen == [(None, None)])
    assert controller.try_elect_controller(7) == 1
    impl.settle(lambda: seen[-1] == (7, controller.session_id))
    controller.resign_controller(7)
    impl.settle(lambda: seen[-1] == (None, None))
    assert len(seen) == 3


def test_where_watch_callbacks_run_differs_on_purpose(impl: Impl) -> None:
    """The one intended difference: the real client calls back on kazoo's thread, at
    once; the simulator never calls back inside a write, only when its notifications
    are run (on the thread that runs them), so a schedule decides when brokers see it."""
    watcher, writer = impl.session(), impl.session()
    threads: list[threading.Thread] = []
    watcher.watch_children(
        znodes.BROKER_IDS_PATH, lambda _c: threads.append(threading.current_thread())
    )
    impl.settle(lambda: len(threads) == 1)
    writer.register_broker(1, "127.0.0.1", 9092)
    if impl.kind == "real":
        impl.settle(lambda: len(threads) == 2)
        assert threads[-1] is not threading.current_thread()
    else:
        assert len(threads) == 1  # queued, not yet delivered
        impl.settle(lambda: len(threads) == 2)
        assert threads[-1] is threading.current_thread()


# --- producer ids ---------------------------------------------------------------------


def test_producer_id_blocks_are_unique_across_sessions(impl: Impl) -> None:
    a, b = impl.session(), impl.session()
    first = a.allocate_producer_id_block(1)
    second = b.allocate_producer_id_block(2)
    third = a.allocate_producer_id_block(1)
    assert (first.broker_id, first.first_id) == (1, 0)
    assert (second.broker_id, second.first_id) == (2, first.last_id + 1)
    assert third.first_id == second.last_id + 1


# --- sessions -------------------------------------------------------------------------


def test_a_closed_session_refuses_every_call(impl: Impl) -> None:
    """Both refuse; the error differs on purpose. The simulator's closed session is an
    expired one (SessionExpiredError, as the broker's code sees after a real expiry);
    a closed ZkClient has no kazoo client left at all (RuntimeError: a programming
    error, since a real expiry does not close it: kazoo opens a new session by itself)."""
    zk = impl.session()
    zk.register_broker(1, "127.0.0.1", 9092)
    zk.close()
    expected = RuntimeError if impl.kind == "real" else SessionExpiredError
    with pytest.raises(expected):
        zk.get_all_topics()
    with pytest.raises(expected):
        zk.register_broker(1, "127.0.0.1", 9092)
    assert impl.session().get_live_brokers() == {}
