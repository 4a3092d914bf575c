"""The simulated ZooKeeper: tree semantics, sessions, multi-ops, watches, and SimZkClient's
agreement with ZkClient's contract (no real ZooKeeper involved)."""

from __future__ import annotations

from typing import Any

import pytest

from strandline.coordination import znodes
from strandline.coordination.errors import (
    BrokerIdInUseError,
    ControllerMovedError,
    TopicExistsError,
    ZkVersionConflictError,
)
from strandline.coordination.znodes import LeaderAndIsr
from strandline.sim.zk_client import SimZkClient
from strandline.sim.zookeeper import (
    BadVersion,
    CheckOp,
    CreateOp,
    DeleteOp,
    MultiFailed,
    NoChildrenForEphemerals,
    NodeExists,
    NoNode,
    NotEmpty,
    SessionExpired,
    SetOp,
    SimZooKeeper,
    ZnodeStat,
)
from strandline.types import TopicPartition

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


def client(zk: SimZooKeeper) -> SimZkClient:
    return SimZkClient(zk, zk.new_session())


def state(leader: int, epoch: int = 0, isr: tuple[int, ...] = (1, 2), ce: int = 1) -> LeaderAndIsr:
    return LeaderAndIsr(leader=leader, leader_epoch=epoch, isr=isr, controller_epoch=ce)


def view(found: tuple[LeaderAndIsr, int] | None) -> tuple[int, int, tuple[int, ...], int] | None:
    """(leader, leader epoch, ISR, zkVersion) of a read partition state."""
    if found is None:
        return None
    s, version = found
    return s.leader, s.leader_epoch, tuple(s.isr), version


# --- tree, versions, zxids ----------------------------------------------------------


def test_bootstrap_creates_the_persistent_paths() -> None:
    zk = SimZooKeeper()
    for path in znodes.PERSISTENT_PATHS:
        assert zk.exists(path) is not None, path
    bare = SimZooKeeper(bootstrap=False)
    assert bare.exists(znodes.BROKER_IDS_PATH) is None
    SimZkClient(bare, bare.new_session())  # connecting ensures them, as ZkClient.connect
    assert bare.exists(znodes.BROKER_IDS_PATH) is not None


def test_conditional_set_versions_and_zxids() -> None:
    zk = SimZooKeeper(bootstrap=False)
    zk.create("/a", b"0")
    _, created = zk.get("/a")
    assert (created.version, created.czxid, created.mzxid) == (0, zk.zxid, zk.zxid)
    stat = zk.set("/a", b"1", version=0)
    assert stat.version == 1
    assert stat.czxid == created.czxid and stat.mzxid == created.czxid + 1
    zxid = zk.zxid
    with pytest.raises(BadVersion):
        zk.set("/a", b"x", version=0)
    # A failed write changes nothing and uses no zxid.
    assert zk.get("/a")[0] == b"1" and zk.zxid == zxid
    assert zk.set("/a", b"2", version=-1).version == 2
    with pytest.raises(BadVersion):
        zk.delete("/a", version=1)
    zk.delete("/a", version=2)
    assert zk.exists("/a") is None
    with pytest.raises(NoNode):
        zk.set("/a", b"3")


def test_create_errors_makepath_and_recursive_delete() -> None:
    zk = SimZooKeeper(bootstrap=False)
    with pytest.raises(NoNode):
        zk.create("/x/y", b"")
    assert zk.create("/x/y/z", b"d", makepath=True) == "/x/y/z"
    assert zk.get_children("/x") == ["y"]
    with pytest.raises(NodeExists):
        zk.create("/x/y/z")
    with pytest.raises(NotEmpty):
        zk.delete("/x")
    s = zk.new_session()
    zk.create("/e", ephemeral=True, session_id=s)
    assert zk.exists("/e") is not None and zk.exists("/e").ephemeralOwner == s  # type: ignore[union-attr]
    with pytest.raises(NoChildrenForEphemerals):
        zk.create("/e/child")
    with pytest.raises(ValueError):
        zk.create("/no-owner", ephemeral=True)
    zk.delete("/x", recursive=True)
    assert zk.exists("/x") is None and zk.exists("/x/y/z") is None
    assert zk.get_children("/") == ["e"]


def test_sequential_names_grow_with_the_parents_cversion() -> None:
    zk = SimZooKeeper(bootstrap=False)
    zk.create("/q")
    first = zk.create("/q/n_", sequence=True)
    second = zk.create("/q/n_", sequence=True)
    assert (first, second) == ("/q/n_0000000000", "/q/n_0000000001")
    zk.delete(second)
    # Deletes bump the cversion too (ZooKeeper numbers from it): no number is reused.
    assert zk.create("/q/n_", sequence=True) == "/q/n_0000000003"


# --- sessions and brokers ----------------------------------------------------------


def test_expiry_deletes_ephemerals_and_re_registration_gets_a_new_epoch() -> None:
    zk = SimZooKeeper()
    first = client(zk)
    epoch = first.register_broker(1, "h1", 9092, rack="r1")
    assert epoch == zk.exists("/brokers/ids/1").czxid  # type: ignore[union-attr]
    # The same session registering again keeps its epoch.
    assert first.register_broker(1, "h1", 9092) == epoch
    reg = first.get_live_brokers()[1]
    assert (reg.host, reg.port, reg.rack, reg.epoch) == ("h1", 9092, "r1", epoch)

    zk.expire(first.session_id)
    assert not zk.is_alive(first.session_id)
    assert zk.exists("/brokers/ids/1") is None
    with pytest.raises(SessionExpired):
        first.get_live_brokers()
    with pytest.raises(SessionExpired):
        first.register_broker(1, "h1", 9092)

    second = client(zk)
    assert second.get_live_brokers() == {}
    new_epoch = second.register_broker(1, "h1", 9092)
    assert new_epoch > epoch
    assert second.get_broker(1).epoch == new_epoch  # type: ignore[union-attr]


def test_broker_id_held_by_another_live_session_is_refused_at_once() -> None:
    zk = SimZooKeeper()
    first, second = client(zk), client(zk)
    first.register_broker(1, "h1", 9092)
    with pytest.raises(BrokerIdInUseError, match="broker.id 1 is already registered"):
        second.register_broker(1, "h2", 9093, stale_wait_s=60.0)
    assert second.get_broker(1).host == "h1"  # type: ignore[union-attr]
    second.register_broker(2, "h2", 9093)
    assert list(second.get_live_brokers()) == [1, 2]
    first.close()
    assert list(second.get_live_brokers()) == [2]
    second.register_broker(1, "h2", 9093)
    assert second.get_broker(1).host == "h2"  # type: ignore[union-attr]


def test_expired_session_cannot_create_ephemerals_or_watch() -> None:
    zk = SimZooKeeper()
    s = zk.new_session()
    zk.expire(s)
    zk.expire(s)  # idempotent
    with pytest.raises(SessionExpired):
        zk.create("/e", ephemeral=True, session_id=s)
    with pytest.raises(SessionExpired):
        zk.watch_data(s, "/e", lambda d, st: None)
    assert zk.exists("/e") is None


def test_timestamps_come_only_from_the_given_clock() -> None:
    now = [1234]
    zk = SimZooKeeper(now_ms=lambda: now[0])
    c = client(zk)
    c.register_broker(1, "h", 1)
    assert c.get_broker(1).timestamp_ms == 1234  # type: ignore[union-attr]
    assert zk.exists("/brokers/ids/1").ctime == 1234  # type: ignore[union-attr]
    plain = SimZooKeeper()
    c2 = client(plain)
    c2.register_broker(1, "h", 1)
    assert c2.get_broker(1).timestamp_ms == 0  # type: ignore[union-attr]


# --- controller election and fencing -----------------------------------------------


def test_controller_election_one_winner_and_epoch_increments() -> None:
    zk = SimZooKeeper()
    a, b = client(zk), client(zk)
    assert a.get_controller() is None and a.get_controller_epoch() is None
    assert a.try_elect_controller(1) == 1
    assert b.try_elect_controller(2) is None
    assert b.get_controller() == 1
    epoch, version = b.get_controller_epoch()  # type: ignore[misc]
    assert epoch == 1 and a.controller_epoch_zk_version == version
    assert b.controller_epoch_zk_version is None
    # /controller and the epoch bump are one transaction.
    assert zk.exists("/controller").czxid == zk.exists("/controller_epoch").mzxid  # type: ignore[union-attr]

    zk.expire(a.session_id)  # the controller dies: its ephemeral /controller goes
    assert b.get_controller() is None
    assert b.try_elect_controller(2) == 2
    assert b.get_controller_epoch()[0] == 2  # type: ignore[index]


def test_election_loses_when_the_epoch_moved_after_it_was_read() -> None:
    # The race ZkClient guards against: both read epoch 0; the slower one's conditional
    # bump must fail and must not leave a /controller behind.
    zk = SimZooKeeper()
    a, b = client(zk), client(zk)
    assert a.try_elect_controller(1) == 1
    a.resign_controller(1)
    assert a.controller_epoch_zk_version is None and zk.exists("/controller") is None
    stale_version = 0  # what b would have read before a's election
    with pytest.raises(MultiFailed) as failed:
        zk.multi(
            [
                CreateOp("/controller", znodes.encode_controller(2, 0), ephemeral=True),
                SetOp("/controller_epoch", znodes.encode_controller_epoch(1), stale_version),
            ],
            session_id=b.session_id,
        )
    assert failed.value.index == 1 and isinstance(failed.value.cause, BadVersion)
    assert zk.exists("/controller") is None
    assert b.try_elect_controller(2) == 2


def test_fenced_writes_of_a_deposed_controller_fail_per_partition() -> None:
    zk = SimZooKeeper()
    a, b = client(zk), client(zk)
    a.create_topic("t", {0: [1, 2], 1: [2, 1]})
    assert a.try_elect_controller(1) == 1
    created = a.create_partition_states({TP0: state(1), TP1: state(2)}, fence_controller_epoch=True)
    assert created == {TP0: 0, TP1: 0}
    assert a.update_partition_states({TP0: (state(1, 1), 0)}, True) == {TP0: 1}

    zk.delete("/controller")  # an operator forces a re-election; a's session lives on
    assert b.try_elect_controller(2) == 2

    fenced = a.update_partition_states({TP0: (state(1, 2), 1), TP1: (state(2, 1), 0)}, True)
    assert set(fenced) == {TP0, TP1}
    assert all(isinstance(r, ControllerMovedError) for r in fenced.values())
    with pytest.raises(ControllerMovedError):
        a.update_partition_state(TP0, state(1, 2), 1, fence_controller_epoch=True)
    recreate = a.create_partition_states({TopicPartition("t", 2): state(1)}, True)
    assert isinstance(recreate[TopicPartition("t", 2)], ControllerMovedError)
    assert zk.exists(znodes.partition_state_path(TopicPartition("t", 2))) is None
    # Nothing was written by the fenced calls.
    assert view(a.get_partition_state(TP0)) == (1, 1, (1, 2), 1)

    # The new controller's fenced writes go through, and unfenced writes still work.
    assert b.update_partition_states({TP1: (state(2, 1), 0)}, True) == {TP1: 1}
    assert a.update_partition_state(TP0, state(1, 5), 1) == 2
    assert view(a.get_partition_state(TP0)) == (1, 5, (1, 2), 2)


def test_fencing_without_an_election_and_version_conflicts() -> None:
    zk = SimZooKeeper()
    c = client(zk)
    c.create_topic("t", {0: [1], 1: [1]})
    with pytest.raises(ControllerMovedError, match="never won"):
        c.update_partition_states({TP0: (state(1), 0)}, True)
    assert c.create_partition_state(TP0, state(1)) == 0
    with pytest.raises(ZkVersionConflictError):
        c.create_partition_state(TP0, state(1))
    assert c.try_elect_controller(1) == 1
    results = c.update_partition_states({TP0: (state(1, 1), 7), TP1: (state(1, 1), 0)}, True)
    assert isinstance(results[TP0], ZkVersionConflictError)
    assert isinstance(results[TP1], NoNode)  # no state znode: not a version conflict
    unfenced = c.update_partition_states({TP0: (state(1, 1), 3)})
    assert isinstance(unfenced[TP0], ZkVersionConflictError)
    again = c.create_partition_states({TP0: state(2), TP1: state(1)}, True)
    assert isinstance(again[TP0], ZkVersionConflictError) and again[TP1] == 0
    gone = c.create_partition_states({TopicPartition("nosuch", 0): state(1)})
    assert isinstance(gone[TopicPartition("nosuch", 0)], NoNode)
    assert zk.exists("/brokers/topics/nosuch") is None  # not resurrected by the parents


# --- topics and admin znodes -------------------------------------------------------


def test_topic_lifecycle() -> None:
    zk = SimZooKeeper()
    c = client(zk)
    c.create_topic("t", {0: [1, 2]}, {"retention.ms": "1000"})
    with pytest.raises(TopicExistsError):
        c.create_topic("t", {0: [1]})
    assert c.get_all_topics() == ["t"]
    assert c.get_topic_config("t") == {"retention.ms": "1000"}
    assert c.set_topic_assignment("t", {0: [1, 2], 1: [2, 1]}, expected_version=0) == 1
    with pytest.raises(ZkVersionConflictError):
        c.set_topic_assignment("t", {0: [2]}, expected_version=0)
    assert c.get_topic_assignment("t") == {0: [1, 2], 1: [2, 1]}
    c.create_partition_states({TP0: state(1), TP1: state(2)})
    found = c.get_partition_states([TP0, TP1, TopicPartition("t", 9)])
    assert {tp: view(f) for tp, f in found.items()} == {
        TP0: (1, 0, (1, 2), 0),
        TP1: (2, 0, (1, 2), 0),
    }
    c.mark_topic_for_deletion("t")
    c.mark_topic_for_deletion("t")  # idempotent
    assert c.get_topics_marked_for_deletion() == ["t"]
    c.delete_topic_znodes("t")
    c.delete_topic_znodes("t")  # idempotent
    assert c.get_all_topics() == [] and c.get_topics_marked_for_deletion() == []
    assert c.get_topic_assignment("t") is None and c.get_partition_state(TP0) is None
    assert c.get_topic_config("t") == {}


def test_config_changes_are_announced_in_order() -> None:
    zk = SimZooKeeper()
    c = client(zk)
    c.set_topic_config("t", {"a": "1"})
    c.set_broker_config("1", {"b": "2"})
    assert c.get_topic_config("t") == {"a": "1"} and c.get_broker_config("1") == {"b": "2"}
    assert list(c.get_config_changes().values()) == ["topics/t", "brokers/1"]


def test_isr_change_notifications_are_sequential_and_ordered() -> None:
    zk = SimZooKeeper()
    c = client(zk)
    names = [
        c.create_isr_change_notification([TP1, TP0, TP0]),
        c.create_isr_change_notification([TopicPartition("u", 3)]),
        c.create_isr_change_notification([TP1]),
    ]
    assert all(n.startswith(znodes.ISR_CHANGE_PREFIX) for n in names)
    assert names == sorted(names) and len(set(names)) == 3
    found = c.get_isr_change_notifications()
    assert list(found) == names
    assert found[names[0]] == [TP0, TP1]  # deduplicated and sorted, as ZkClient writes
    c.delete_isr_change_notifications(names[:2] + ["isr_change_9999999999"])
    later = c.create_isr_change_notification([TP0])
    assert list(c.get_isr_change_notifications()) == [names[2], later]
    assert later > names[2]


def test_reassignment_and_preferred_election_znodes() -> None:
    zk = SimZooKeeper()
    c = client(zk)
    assert c.get_partition_reassignment() == {}
    c.create_partition_reassignment({TP0: [2, 3]})
    with pytest.raises(NodeExists):
        c.create_partition_reassignment({TP1: [1]})
    c.set_partition_reassignment({TP0: [2, 3], TP1: [3]})
    assert c.get_partition_reassignment() == {TP0: [2, 3], TP1: [3]}
    c.set_partition_reassignment({})
    assert zk.exists(znodes.REASSIGN_PARTITIONS_PATH) is None
    c.set_partition_reassignment({TP1: [1]})  # creates it again
    assert c.get_partition_reassignment() == {TP1: [1]}

    c.create_preferred_replica_election([TP1, TP0])
    assert c.get_preferred_replica_election() == [TP0, TP1]
    with pytest.raises(NodeExists):
        c.create_preferred_replica_election([TP0])
    c.delete_preferred_replica_election()
    c.delete_preferred_replica_election()
    assert c.get_preferred_replica_election() == []


# --- multi ----------------------------------------------------------------------------


def test_multi_is_all_or_nothing() -> None:
    zk = SimZooKeeper(bootstrap=False)
    zk.create("/p")
    zk.create("/p/keep", b"k")
    zk.create("/q", b"v")
    seen: list[list[str]] = []
    s = zk.new_session()
    zk.watch_children(s, "/p", seen.append)
    zk.run_notifications()
    before_zxid, before_children = zk.zxid, zk.get_children("/p")
    before_q = zk.get("/q")
    with pytest.raises(MultiFailed) as failed:
        zk.multi(
            [
                CreateOp("/p/new", b"n"),
                DeleteOp("/p/keep"),
                SetOp("/q", b"changed"),
                CheckOp("/q", 5),  # fails: /q is at version 1 inside the transaction
            ]
        )
    assert failed.value.index == 3 and isinstance(failed.value.cause, BadVersion)
    assert zk.zxid == before_zxid
    assert zk.get_children("/p") == before_children == ["keep"]
    assert zk.get("/q") == before_q
    assert zk.exists("/p").cversion == 1  # type: ignore[union-attr]
    assert zk.pending_notifications == 0  # a failed multi fires no watch

    results = zk.multi([CreateOp("/p/new", b"n"), SetOp("/p/new", b"m", 0), DeleteOp("/p/keep")])
    assert results[0] == "/p/new" and results[2] is True
    assert isinstance(results[1], ZnodeStat) and results[1].version == 1
    assert zk.zxid == before_zxid + 1  # one transaction, one zxid
    assert zk.exists("/p/new").czxid == zk.exists("/p/new").mzxid == zk.zxid  # type: ignore[union-attr]
    zk.run_notifications()
    assert seen == [["keep"], ["new"]]


def test_multi_reports_which_op_failed() -> None:
    zk = SimZooKeeper()
    c = client(zk)
    assert c.try_elect_controller(1) == 1
    version = c.controller_epoch_zk_version
    assert version is not None
    c.create_partition_state(TP0, state(1))
    with pytest.raises(MultiFailed) as check_failed:
        zk.multi([CheckOp("/controller_epoch", version + 1), SetOp("/x", b"")])
    assert check_failed.value.index == 0
    with pytest.raises(MultiFailed) as set_failed:
        zk.multi(
            [CheckOp("/controller_epoch", version), SetOp(znodes.partition_state_path(TP0), b"", 4)]
        )
    assert set_failed.value.index == 1 and isinstance(set_failed.value.cause, BadVersion)


# --- watches ----------------------------------------------------------------------


def test_data_watch_fires_on_registration_and_changes_never_inside_the_write() -> None:
    zk = SimZooKeeper()
    c = client(zk)
    calls: list[tuple[bytes | None, int | None]] = []
    c.watch_data("/w", lambda data, stat: calls.append((data, stat and stat.version)))
    assert calls == []  # registration firing is queued too
    zk.run_notifications()
    assert calls == [(None, None)]
    zk.create("/w", b"a")
    assert calls == [(None, None)]  # nothing runs inside the write
    [note] = zk.take_notifications()
    assert (note.session_id, note.path, note.kind) == (c.session_id, "/w", "data")
    note.run()
    zk.set("/w", b"b")
    zk.delete("/w")
    zk.run_notifications()
    assert calls == [(None, None), (b"a", 0), (None, None)]


def test_notification_thunk_reads_state_when_it_runs() -> None:
    zk = SimZooKeeper()
    c = client(zk)
    data_calls: list[bytes | None] = []
    child_calls: list[list[str]] = []
    c.watch_data("/w", lambda data, _stat: data_calls.append(data))
    c.watch_children("/dir", child_calls.append)
    zk.create("/w", b"1")
    zk.set("/w", b"2")
    zk.create("/dir/b")
    zk.create("/dir/a")
    pending = zk.take_notifications()
    assert len(pending) == 6  # 2 registrations, 2 data changes, 2 child changes
    zk.set("/w", b"3")  # after the take, before the run
    for note in pending:
        note.run()
    # Changes made before a delivery coalesce into it (kazoo re-reads on each event).
    assert data_calls == [b"3"]
    assert child_calls == [["a", "b"]]
    zk.run_notifications()  # the queued firing of the last set sees nothing new
    assert data_calls == [b"3"]


def test_notifications_of_an_expired_session_are_dropped_and_its_watches_die() -> None:
    zk = SimZooKeeper()
    watcher, other = client(zk), client(zk)
    calls: list[list[str]] = []
    other_calls: list[list[str]] = []
    watcher.watch_children(znodes.BROKER_IDS_PATH, calls.append)
    other.watch_children(znodes.BROKER_IDS_PATH, other_calls.append)
    taken = zk.take_notifications(watcher.session_id)
    assert [n.session_id for n in taken] == [watcher.session_id]
    assert zk.pending_notifications == 1  # the other session's stays queued
    other.register_broker(7, "h", 1)
    zk.expire(watcher.session_id)
    for note in taken:
        note.run()  # taken before the expiry, run after it: not delivered
    assert zk.take_notifications(watcher.session_id) == []
    zk.run_notifications()
    assert calls == []
    assert other_calls == [["7"]]
    other.register_broker(8, "h", 2)
    zk.run_notifications()
    assert calls == [] and other_calls == [["7"], ["7", "8"]]


def test_expiry_fires_other_sessions_watches() -> None:
    zk = SimZooKeeper()
    controller, broker = client(zk), client(zk)
    broker.register_broker(1, "h", 1)
    changes: list[bytes | None] = []
    ids: list[list[str]] = []
    controller.watch_data("/controller", lambda data, _s: changes.append(data))
    controller.watch_children(znodes.BROKER_IDS_PATH, ids.append)
    assert broker.try_elect_controller(1) == 1
    zk.run_notifications()
    assert ids == [["1"]] and changes[-1] is not None
    zk.expire(broker.session_id)
    assert changes[-1] is not None  # not delivered until run
    zk.run_notifications()
    assert changes[-1] is None and ids == [["1"], []]


def test_children_watch_ends_when_its_znode_is_deleted() -> None:
    zk = SimZooKeeper(bootstrap=False)
    s = zk.new_session()
    zk.create("/d")
    calls: list[list[str]] = []
    watch = zk.watch_children(s, "/d", calls.append)
    zk.run_notifications()
    zk.delete("/d")
    zk.run_notifications()
    assert calls == [[]] and not watch.active
    zk.create("/d")
    zk.create("/d/x")
    assert zk.pending_notifications == 0


def test_callbacks_may_write_and_run_notifications_drains_the_cascade() -> None:
    zk = SimZooKeeper(bootstrap=False)
    s = zk.new_session()
    zk.create("/a", b"0")
    zk.create("/b", b"0")

    def copy_to_b(data: bytes | None, _stat: Any) -> None:
        if data is not None:
            zk.set("/b", data)

    seen_b: list[bytes | None] = []
    zk.watch_data(s, "/a", copy_to_b)
    zk.watch_data(s, "/b", lambda data, _s: seen_b.append(data))
    zk.run_notifications()
    zk.set("/a", b"7")
    zk.run_notifications()
    assert zk.get("/b")[0] == b"7" and seen_b[-1] == b"7"


def test_same_calls_give_the_same_history() -> None:
    def run() -> list[tuple[int, str, str]]:
        zk = SimZooKeeper()
        a, b = client(zk), client(zk)
        log: list[tuple[int, str, str]] = []
        for c in (a, b):
            c.watch_children(
                znodes.BROKER_IDS_PATH, lambda ch: log.append((zk.zxid, "ids", ",".join(ch)))
            )
        for broker_id, c in ((3, a), (1, b)):
            c.register_broker(broker_id, "h", broker_id)
        a.try_elect_controller(3)
        log.append((zk.zxid, "isr", a.create_isr_change_notification([TP0])))
        zk.expire(a.session_id)
        for note in zk.take_notifications():
            log.append((zk.zxid, "note", f"{note.session_id}{note.kind}{note.path}"))
            note.run()
        return log

    assert run() == run()


def test_producer_id_blocks_never_overlap() -> None:
    zk = SimZooKeeper()
    a, b = client(zk), client(zk)
    first = a.allocate_producer_id_block(1)
    second = b.allocate_producer_id_block(2)
    third = a.allocate_producer_id_block(1)
    assert first.first_id == 0 and first.broker_id == 1
    assert second.first_id == first.last_id + 1 and second.broker_id == 2
    assert third.first_id == second.last_id + 1
    assert zk.exists("/latest_producer_id_block").version == 2  # type: ignore[union-attr]
