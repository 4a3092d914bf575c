"""The transaction coordinator's state machine, driven without I/O."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from strandline.transaction.metadata import SHORT_MAX, TxnState
from strandline.transaction.model import SendMarkers, TxnConfig
from strandline.transaction.records import TxnLogValue, encode_key, encode_value
from strandline.types import TopicPartition
from tests.transaction.harness import COORDINATOR_EPOCH, Harness

E = ErrorCode
T0 = TopicPartition("orders", 0)
T1 = TopicPartition("orders", 1)


def started(h: Harness, txn_id: str = "tx") -> tuple[int, int]:
    answer = h.init(txn_id)
    assert answer.error is E.none
    return answer.producer_id, answer.producer_epoch


def owned() -> Harness:
    h = Harness()
    h.own()
    return h


# == InitProducerId ==========================================================================


def test_new_transactional_id_gets_producer_id_and_epoch_0() -> None:
    h = owned()
    answer = h.init("tx")
    assert (answer.error, answer.producer_epoch) == (E.none, 0)
    assert answer.producer_id >= 0
    assert h.logged_states("tx") == ["Empty"]
    assert h.describe("tx").state == "Empty"


def test_second_init_bumps_epoch_and_fences_the_first_producer() -> None:
    h = owned()
    pid, epoch = started(h)
    again = h.init("tx")
    assert (again.producer_id, again.producer_epoch) == (pid, epoch + 1)
    # The zombie with the old epoch can no longer start or end a transaction.
    assert h.add("tx", pid, epoch, T0) is E.producer_fenced
    assert h.end("tx", pid, epoch, True) is E.producer_fenced
    assert h.add("tx", pid, epoch + 1, T0) is E.none


def test_init_with_open_transaction_aborts_it_and_answers_concurrent_transactions() -> None:
    h = owned()
    pid, epoch = started(h)
    assert h.add("tx", pid, epoch, T0, T1) is E.none
    answer = h.init("tx")
    assert answer.error is E.concurrent_transactions
    # The abort markers carry the fencing epoch, so the old producer is fenced at the
    # partitions too.
    (markers,) = h.markers
    assert markers == SendMarkers(
        "tx", pid, epoch + 1, COORDINATOR_EPOCH, False, frozenset({T0, T1})
    )
    assert h.logged_states("tx")[-2:] == ["PrepareAbort", "CompleteAbort"]
    retry = h.init("tx")
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (E.none, pid, epoch + 2)
    assert h.end("tx", pid, epoch, False) is E.producer_fenced


def test_init_during_pending_markers_is_concurrent_transactions() -> None:
    h = owned()
    h.auto_markers = False
    pid, epoch = started(h)
    h.add("tx", pid, epoch, T0)
    assert h.end("tx", pid, epoch, True) is E.none
    assert h.describe("tx").state == "PrepareCommit"
    assert h.init("tx").error is E.concurrent_transactions
    assert h.end("tx", pid, epoch, True) is E.concurrent_transactions
    # While markers are out the completion is pending: everything waits, as in Kafka.
    assert h.end("tx", pid, epoch, False) is E.concurrent_transactions
    h.run(h.c.markers_written("tx", COORDINATOR_EPOCH, {T0: E.none}, h.now))
    assert h.describe("tx").state == "CompleteCommit"
    assert h.init("tx").producer_epoch == epoch + 1


def test_exhausted_epoch_rotates_to_a_new_producer_id() -> None:
    h = Harness()
    old = TxnLogValue(77, SHORT_MAX - 1, 60_000, TxnState.EMPTY.id, frozenset(), 1, -1)
    h.own(records=[(encode_key("tx"), encode_value(old))])
    answer = h.init("tx")
    assert answer.error is E.none
    assert answer.producer_id != 77 and answer.producer_epoch == 0


def test_kip360_epoch_bump_by_the_current_producer_and_its_retry() -> None:
    h = owned()
    pid, epoch = started(h)
    bumped = h.init("tx", expected=(pid, epoch))
    assert (bumped.producer_id, bumped.producer_epoch) == (pid, epoch + 1)
    # A retry whose answer was lost names the previous epoch: same answer, no new bump.
    retry = h.init("tx", expected=(pid, epoch))
    assert (retry.producer_id, retry.producer_epoch) == (pid, epoch + 1)
    assert h.init("tx", expected=(pid + 1, 0)).error is E.producer_fenced
    assert h.init("tx", expected=(pid, epoch + 7)).error is E.producer_fenced


def test_transaction_timeout_is_validated() -> None:
    h = Harness(TxnConfig(num_partitions=1, max_timeout_ms=10_000))
    h.own()
    assert h.init("tx", timeout_ms=10_001).error is E.invalid_transaction_timeout
    assert h.init("tx", timeout_ms=0).error is E.invalid_transaction_timeout
    assert h.init("tx", timeout_ms=10_000).error is E.none
    assert h.init("").error is E.invalid_request


def test_not_owned_or_loading_partition() -> None:
    h = Harness(TxnConfig(num_partitions=2))
    assert h.init("tx").error is E.not_coordinator
    partition = h.c.partition_for("tx")
    h.c.begin_loading(partition, 1)
    assert h.init("tx").error is E.coordinator_load_in_progress
    h.run(h.c.load(partition, 1, [], h.now))
    assert h.init("tx").error is E.none


# == AddPartitions / EndTxn ==================================================================


def test_commit_writes_prepare_markers_then_complete() -> None:
    h = owned()
    pid, epoch = started(h)
    assert h.add("tx", pid, epoch, T0) is E.none
    assert h.add("tx", pid, epoch, T1) is E.none
    assert h.add("tx", pid, epoch, T0) is E.none  # already in: nothing written
    described = h.describe("tx")
    assert (described.state, described.partitions) == ("Ongoing", (T0, T1))
    assert h.end("tx", pid, epoch, True) is E.none
    assert h.markers == [
        SendMarkers("tx", pid, epoch, COORDINATOR_EPOCH, True, frozenset({T0, T1}))
    ]
    assert h.logged_states("tx") == [
        "Empty",
        "Ongoing",
        "Ongoing",
        "PrepareCommit",
        "CompleteCommit",
    ]
    assert h.describe("tx").state == "CompleteCommit"
    assert h.describe("tx").partitions == ()
    # Repeating the commit is answered OK; an abort now is not.
    assert h.end("tx", pid, epoch, True) is E.none
    assert h.end("tx", pid, epoch, False) is E.invalid_txn_state
    # The next transaction starts from CompleteCommit.
    assert h.add("tx", pid, epoch, T1) is E.none
    assert h.end("tx", pid, epoch, False) is E.none
    assert h.markers[-1].commit is False
    assert h.describe("tx").state == "CompleteAbort"


def test_end_without_transaction_is_invalid_txn_state() -> None:
    h = owned()
    pid, epoch = started(h)
    assert h.end("tx", pid, epoch, True) is E.invalid_txn_state


def test_transaction_without_partitions_completes_without_markers() -> None:
    h = owned()
    pid, epoch = started(h)
    assert h.add("tx", pid, epoch) is E.none
    assert h.end("tx", pid, epoch, True) is E.none
    assert h.markers == []
    assert h.describe("tx").state == "CompleteCommit"


def test_bad_producer_id_or_epoch_leaves_every_transaction_alone() -> None:
    h = owned()
    a_pid, a_epoch = started(h, "a")
    b_pid, b_epoch = started(h, "b")
    assert h.add("a", a_pid, a_epoch, T0) is E.none
    before = h.describe("a")
    log_len = len(h.log)
    # Unknown transactional id, another producer's id, a wrong epoch.
    assert h.add("nobody", a_pid, a_epoch, T1) is E.invalid_producer_id_mapping
    assert h.end("nobody", a_pid, a_epoch, True) is E.invalid_producer_id_mapping
    assert h.add("a", b_pid, b_epoch, T1) is E.invalid_producer_id_mapping
    assert h.end("a", b_pid, b_epoch, False) is E.invalid_producer_id_mapping
    assert h.end("a", 999_999, 0, False) is E.invalid_producer_id_mapping
    assert h.add("a", a_pid, a_epoch + 1, T1) is E.producer_fenced
    assert h.end("a", a_pid, a_epoch - 1, True) is E.producer_fenced
    assert h.describe("a") == before
    assert len(h.log) == log_len and h.markers == []
    assert h.describe("b").state == "Empty"


def test_failed_append_changes_nothing_and_maps_the_error() -> None:
    h = owned()
    pid, epoch = started(h)
    h.append_error = E.not_enough_replicas
    assert h.add("tx", pid, epoch, T0) is E.coordinator_not_available
    assert h.describe("tx").state == "Empty"
    h.append_error = E.not_leader_or_follower
    assert h.add("tx", pid, epoch, T0) is E.not_coordinator
    h.append_error = E.none
    assert h.add("tx", pid, epoch, T0) is E.none  # no pending state was left behind


def test_append_completing_after_leadership_moved_is_not_coordinator() -> None:
    h = owned()
    pid, epoch = started(h)
    h.hold_appends = True
    token = 999
    h.run(h.c.add_partitions(token, "tx", pid, epoch, [T0], h.now))
    (held,) = h.held_appends
    h.c.unload(0)
    h.c.begin_loading(0, COORDINATOR_EPOCH + 1)
    h.run(h.c.load(0, COORDINATOR_EPOCH + 1, list(h.log), h.now))
    h.run(h.c.append_done(held.append_id, E.none, h.now))
    assert h.responses[token].error is E.not_coordinator  # type: ignore[attr-defined]
    assert h.describe("tx").state == "Empty"


# == markers ================================================================================


def test_marker_retries_and_fencing() -> None:
    h = owned()
    h.auto_markers = False
    pid, epoch = started(h)
    h.add("tx", pid, epoch, T0, T1)
    h.end("tx", pid, epoch, True)
    effects = h.c.markers_written(
        "tx", COORDINATOR_EPOCH, {T0: E.none, T1: E.not_leader_or_follower}, h.now
    )
    (retry,) = effects
    assert isinstance(retry, SendMarkers)
    assert retry.partitions == frozenset({T1}) and retry.delay_ms > 0
    assert h.describe("tx").partitions == (T1,)  # only the partition still waiting
    # A marker answer from an older coordinator epoch is ignored.
    assert h.c.markers_written("tx", COORDINATOR_EPOCH - 1, {T1: E.none}, h.now) == []
    h.run(h.c.markers_written("tx", COORDINATOR_EPOCH, {T1: E.none}, h.now))
    assert h.describe("tx").state == "CompleteCommit"


def test_deleted_topic_needs_no_marker() -> None:
    h = owned()
    h.auto_markers = False
    pid, epoch = started(h)
    h.add("tx", pid, epoch, T0)
    h.end("tx", pid, epoch, False)
    h.run(h.c.markers_written("tx", COORDINATOR_EPOCH, {}, h.now, deleted=[T0]))
    assert h.describe("tx").state == "CompleteAbort"


# == timeouts ================================================================================


def test_timed_out_transaction_is_aborted_and_its_producer_fenced() -> None:
    h = Harness(TxnConfig(num_partitions=1, abort_timed_out_interval_ms=100))
    h.own()
    pid, epoch = h.init("tx", timeout_ms=1_000).producer_id, 0
    h.add("tx", pid, epoch, T0)
    start = h.now
    h.now = start + 1_000  # exactly the timeout: not yet
    h.run(h.c.tick(h.now))
    assert h.describe("tx").state == "Ongoing"
    deadline = h.c.next_deadline_ms()
    assert deadline is not None and deadline <= h.now + 100
    h.now = start + 1_101
    h.run(h.c.tick(h.now))
    assert h.describe("tx").state == "CompleteAbort"
    assert h.markers[-1] == SendMarkers(
        "tx", pid, epoch + 1, COORDINATOR_EPOCH, False, frozenset({T0})
    )
    # The producer that let it time out is fenced: its commit is refused.
    assert h.end("tx", pid, epoch, True) is E.producer_fenced
    assert h.add("tx", pid, epoch, T0) is E.producer_fenced


def test_idle_transactional_id_expires_with_a_tombstone() -> None:
    h = Harness(
        TxnConfig(
            num_partitions=1, transactional_id_expiration_ms=5_000, remove_expired_interval_ms=10
        )
    )
    h.own()
    started(h)
    h.now += 5_001
    h.run(h.c.tick(h.now))
    assert h.describe("tx").error is E.transactional_id_not_found
    assert h.logged_states("tx") == ["Empty", "tombstone"]
    # A reload applies the tombstone too.
    h2 = Harness()
    h2.own(records=h.log)
    assert h2.describe("tx").error is E.transactional_id_not_found


# == failover ================================================================================


def test_new_coordinator_resumes_a_prepared_commit_from_the_log() -> None:
    old = owned()
    old.auto_markers = False
    pid, epoch = started(old)
    old.add("tx", pid, epoch, T0, T1)
    assert old.end("tx", pid, epoch, True) is E.none
    assert old.logged_states("tx")[-1] == "PrepareCommit"
    # The old coordinator dies before its markers land; the next leader loads the log.
    new = Harness()
    new.auto_markers = False
    new.own(epoch=COORDINATOR_EPOCH + 1, records=old.log)
    assert new.markers == [
        SendMarkers("tx", pid, epoch, COORDINATOR_EPOCH + 1, True, frozenset({T0, T1}))
    ]
    assert new.describe("tx").state == "PrepareCommit"
    assert new.init("tx").error is E.concurrent_transactions
    new.run(new.c.markers_written("tx", COORDINATOR_EPOCH + 1, {T0: E.none, T1: E.none}, new.now))
    assert new.describe("tx").state == "CompleteCommit"
    assert new.init("tx").producer_epoch == epoch + 1


def test_new_coordinator_resumes_a_prepared_abort_and_keeps_ongoing_as_is() -> None:
    old = owned()
    old.auto_markers = False
    a_pid, a_epoch = started(old, "a")
    b_pid, b_epoch = started(old, "b")
    old.add("a", a_pid, a_epoch, T0)
    old.end("a", a_pid, a_epoch, False)
    old.add("b", b_pid, b_epoch, T1)
    new = Harness()
    new.own(epoch=COORDINATOR_EPOCH + 1, records=old.log)
    assert [(m.transactional_id, m.commit) for m in new.markers] == [("a", False)]
    assert new.describe("a").state == "CompleteAbort"
    assert new.describe("b").state == "Ongoing"
    assert new.add("b", b_pid, b_epoch, T0) is E.none


def test_list_with_filters() -> None:
    h = owned()
    a_pid, _ = started(h, "a")
    b_pid, b_epoch = started(h, "b")
    h.add("b", b_pid, b_epoch, T0)
    listed = h.c.list_transactions([], [], -1, h.now)
    assert [(t.transactional_id, t.state) for t in listed.transactions] == [
        ("a", "Empty"),
        ("b", "Ongoing"),
    ]
    only = h.c.list_transactions(["Ongoing", "Bogus"], [], -1, h.now)
    assert [t.transactional_id for t in only.transactions] == ["b"]
    assert only.unknown_state_filters == ("Bogus",)
    assert [
        t.transactional_id for t in h.c.list_transactions([], [a_pid], -1, h.now).transactions
    ] == ["a"]
