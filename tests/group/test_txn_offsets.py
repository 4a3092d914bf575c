"""Transactional offset commits in the pure group coordinator (KIP-98, Kafka's
GroupMetadata.pendingTransactionalOffsetCommits and GroupMetadataManager's loading).

The driver keeps each `__consumer_offsets` partition's log as batches with real offsets
and writes markers into it, so every test can also check that a coordinator replaying
that log (failover) ends where the live one is.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode as E

from strandline.group.coordinator import GroupCoordinator
from strandline.group.model import (
    AppendToOffsetsTopic,
    DescribedGroup,
    FetchedOffset,
    GroupConfig,
    JoinGroupResponse,
    OffsetAndMetadata,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    OffsetFetchResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)
from strandline.group.records import (
    OffsetCommitValue,
    OffsetsBatch,
    build_batch,
    iter_batches,
    iter_records,
    offset_commit_record,
)
from strandline.protocol.control_batch import build_marker_batch
from strandline.types import TopicPartition
from tests.group.conftest import Harness, make_coordinator

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
PID_A, PID_B = 1000, 2000
PARTITIONS = 4


@dataclass
class TxnHarness(Harness):
    """The Harness, with each offsets partition's log kept as batches at real offsets."""

    batches: dict[int, list[OffsetsBatch]] = field(default_factory=dict)

    def next_offset(self, partition: int) -> int:
        log = self.batches.get(partition, [])
        if not log:
            return 0
        last = log[-1]
        return last.base_offset + max(len(last.records), 1)

    def complete(self, effect: AppendToOffsetsTopic, error: E) -> None:
        base = None
        if error == E.none:
            base = self.next_offset(effect.partition)
            self.batches.setdefault(effect.partition, []).append(
                OffsetsBatch(base, effect.records, effect.producer_id, effect.transactional)
            )
            self.log.extend((effect.partition, r) for r in effect.records)
        self.apply(self.coordinator.append_done(effect.append_id, error, self.now, base))

    def txn_commit(
        self,
        producer_id: int,
        offsets: dict[TopicPartition, int],
        *,
        group: str = "g",
        member_id: str = "",
        generation: int = -1,
        instance: str | None = None,
        metadata: str = "",
    ) -> object:
        token = next(self.tokens)
        request = TxnOffsetCommitRequest(
            token,
            group,
            producer_id,
            0,
            tuple((tp, OffsetAndMetadata(o, 3, metadata or f"m{o}")) for tp, o in offsets.items()),
            generation,
            member_id,
            instance,
        )
        self.last_token = token
        self.apply(self.coordinator.txn_offset_commit(request, self.now))
        return self.responses.get(token)

    def marker(self, producer_id: int, commit: bool, *, group: str = "g") -> None:
        """WriteTxnMarkers on the group's offsets partition: append, then report."""
        partition = self.coordinator.partition_for(group)
        at = self.next_offset(partition)
        self.batches.setdefault(partition, []).append(
            OffsetsBatch(at, (), producer_id, True, commit)
        )
        self.apply(self.coordinator.complete_txn_offsets(partition, producer_id, commit, self.now))

    def fetch(
        self,
        partitions: tuple[TopicPartition, ...] | None = (T0, T1),
        *,
        group: str = "g",
        stable: bool = False,
    ) -> OffsetFetchResponse:
        token = next(self.tokens)
        request = OffsetFetchRequest(token, group, partitions, stable)
        self.apply(self.coordinator.offset_fetch(request, self.now))
        response = self.responses[token]
        assert isinstance(response, OffsetFetchResponse)
        return response

    def offsets(self, *, group: str = "g", stable: bool = False) -> dict[TopicPartition, object]:
        """Partition -> committed offset (-1 none), or the error instead."""
        return {
            tp: (f.offset if f.error == E.none else f.error)
            for tp, f in self.fetch(group=group, stable=stable).offsets
        }

    def reloaded(self) -> GroupCoordinator:
        """A new coordinator that replays every partition's log, as after a failover."""
        new = make_coordinator(owned=False, partitions=PARTITIONS)
        for p in range(PARTITIONS):
            new.load(p, self.batches.get(p, []), self.now)
        return new


def make(config: GroupConfig | None = None) -> TxnHarness:
    return TxnHarness(make_coordinator(config, partitions=PARTITIONS))


def ok(*tps: TopicPartition) -> TxnOffsetCommitResponse:
    return TxnOffsetCommitResponse(tuple((tp, E.none) for tp in tps))


def same_after_reload(h: TxnHarness, groups: tuple[str, ...] = ("g",)) -> None:
    """Failover keeps exactly what the live coordinator has: committed and pending."""
    new = h.reloaded()
    for group_id in groups:
        live, loaded = h.coordinator.group(group_id), new.group(group_id)
        if live is None:
            assert loaded is None or (not loaded.offsets and not loaded.pending_txn_offsets)
            continue
        assert loaded is not None
        assert loaded.offsets == live.offsets
        assert {
            pid: {tp: p.value for tp, p in offsets.items()}
            for pid, offsets in loaded.pending_txn_offsets.items()
        } == {
            pid: {tp: p.value for tp, p in offsets.items()}
            for pid, offsets in live.pending_txn_offsets.items()
        }


# == commit / abort ============================================================================


def test_txn_offsets_are_invisible_until_the_commit_marker() -> None:
    h = make()
    h.commit({T0: 5})
    assert h.txn_commit(PID_A, {T0: 10, T1: 20}) == ok(T0, T1)
    assert h.offsets() == {T0: 5, T1: -1}, "pending offsets are not committed offsets"
    (batch,) = [b for b in h.batches[h.coordinator.partition_for("g")] if b.transactional]
    assert batch.producer_id == PID_A and len(batch.records) == 2
    same_after_reload(h)
    h.marker(PID_A, commit=True)
    assert h.offsets() == {T0: 10, T1: 20}
    group = h.coordinator.group("g")
    assert group is not None and not group.pending_txn_offsets
    same_after_reload(h)


def test_abort_drops_the_txn_offsets() -> None:
    h = make()
    h.commit({T0: 5})
    h.txn_commit(PID_A, {T0: 10, T1: 20})
    h.marker(PID_A, commit=False)
    assert h.offsets() == {T0: 5, T1: -1}
    assert h.offsets(stable=True) == {T0: 5, T1: -1}
    same_after_reload(h)


def test_a_later_txn_commit_of_the_same_producer_replaces_the_pending_offset() -> None:
    h = make()
    h.txn_commit(PID_A, {T0: 10})
    h.txn_commit(PID_A, {T0: 11})
    h.marker(PID_A, commit=True)
    assert h.offsets() == {T0: 11, T1: -1}
    same_after_reload(h)


def test_a_plain_commit_written_after_the_txn_offset_wins_at_commit_time() -> None:
    """Order is the log's (Kafka's olderThan): the txn offset, written first, loses."""
    h = make()
    h.txn_commit(PID_A, {T0: 10, T1: 20})
    h.commit({T0: 7})
    assert h.offsets() == {T0: 7, T1: -1}
    h.marker(PID_A, commit=True)
    assert h.offsets() == {T0: 7, T1: 20}
    same_after_reload(h)


def test_two_producers_interleaved_complete_independently() -> None:
    h = make()
    h.txn_commit(PID_A, {T0: 10})
    h.txn_commit(PID_B, {T0: 30, T1: 31})
    h.txn_commit(PID_A, {T1: 11})
    same_after_reload(h)
    # B commits first: its offsets are newer than anything committed.
    h.marker(PID_B, commit=True)
    assert h.offsets() == {T0: 30, T1: 31}
    assert h.offsets(stable=True) == {T0: E.unstable_offset_commit, T1: E.unstable_offset_commit}
    h.marker(PID_A, commit=True)
    # A's T0 (written before B's) stays behind B's; A's T1 (written after) replaces it.
    assert h.offsets() == {T0: 30, T1: 11}
    assert h.offsets(stable=True) == {T0: 30, T1: 11}
    same_after_reload(h)


def test_an_aborted_producer_leaves_the_other_producers_txn_pending() -> None:
    h = make()
    h.txn_commit(PID_A, {T0: 10})
    h.txn_commit(PID_B, {T1: 21})
    h.marker(PID_A, commit=False)
    assert h.offsets(stable=True) == {T0: -1, T1: E.unstable_offset_commit}
    same_after_reload(h)
    h.marker(PID_B, commit=True)
    assert h.offsets(stable=True) == {T0: -1, T1: 21}
    same_after_reload(h)


def test_a_marker_only_completes_groups_of_its_partition_and_producer() -> None:
    h = make()
    other = next(
        g
        for g in (f"g{i}" for i in itertools.count())
        if h.coordinator.partition_for(g) != h.coordinator.partition_for("g")
    )
    h.txn_commit(PID_A, {T0: 10})
    h.txn_commit(PID_A, {T0: 40}, group=other)
    h.marker(PID_A, commit=True)  # on g's partition only
    assert h.offsets() == {T0: 10, T1: -1}
    assert h.offsets(group=other) == {T0: -1, T1: -1}
    assert h.offsets(group=other, stable=True)[T0] == E.unstable_offset_commit
    h.marker(PID_A, commit=False, group=other)
    assert h.offsets(group=other, stable=True) == {T0: -1, T1: -1}
    same_after_reload(h, ("g", other))


def test_a_failed_append_leaves_nothing_pending() -> None:
    h = make()
    h.append_error = E.not_leader_or_follower
    assert h.txn_commit(PID_A, {T0: 10}) == TxnOffsetCommitResponse(((T0, E.not_coordinator),))
    assert h.offsets(stable=True) == {T0: -1, T1: -1}
    assert h.coordinator.group("g") is None, "a group created for a failed commit is forgotten"


def test_a_fenced_producer_epoch_passes_through() -> None:
    h = make()
    h.append_error = E.invalid_producer_epoch
    assert h.txn_commit(PID_A, {T0: 10}) == TxnOffsetCommitResponse(
        ((T0, E.invalid_producer_epoch),)
    )


def test_pending_while_the_append_is_in_flight() -> None:
    h = make()
    h.hold_appends = True
    assert h.txn_commit(PID_A, {T0: 10}) is None
    assert h.offsets(stable=True)[T0] == E.unstable_offset_commit
    (held,) = h.held
    assert held.transactional and held.producer_id == PID_A and held.producer_epoch == 0
    h.complete(held, E.none)
    assert h.responses[h.last_token] == ok(T0)


def test_metadata_too_large_is_refused_per_partition() -> None:
    h = make(GroupConfig(group_initial_rebalance_delay_ms=0, offset_metadata_max_bytes=4))
    token_answer = h.txn_commit(PID_A, {T0: 1}, metadata="too long")
    assert token_answer == TxnOffsetCommitResponse(((T0, E.offset_metadata_too_large),))
    assert h.coordinator.group("g") is None


# == require_stable ============================================================================


def test_require_stable_only_affects_partitions_with_pending_offsets() -> None:
    h = make()
    h.commit({T0: 5, T1: 6})
    h.txn_commit(PID_A, {T1: 60})
    assert h.offsets() == {T0: 5, T1: 6}
    assert h.offsets(stable=True) == {T0: 5, T1: E.unstable_offset_commit}
    # All partitions (null topics): the committed ones, each checked.
    everything = h.fetch(None, stable=True)
    assert everything.offsets == (
        (T0, FetchedOffset(5, 3, "m5")),
        (T1, FetchedOffset(-1, error=E.unstable_offset_commit)),
    )
    h.marker(PID_A, commit=True)
    assert h.offsets(stable=True) == {T0: 5, T1: 60}


# == group generation / member checks (v3+) ====================================================


def _stable_member(h: TxnHarness) -> tuple[str, int]:
    a = h.join_new()
    joined = h.answer(h.join(a))
    assert isinstance(joined, JoinGroupResponse) and joined.error == E.none
    h.sync(a, joined.generation_id, {a: b"A"})
    return a, joined.generation_id


def test_member_and_generation_are_checked_when_given() -> None:
    h = make()
    a, gen = _stable_member(h)
    assert h.txn_commit(PID_A, {T0: 1}, member_id=a, generation=gen) == ok(T0)
    assert h.txn_commit(PID_A, {T0: 2}, member_id=a, generation=gen + 1) == (
        TxnOffsetCommitResponse(((T0, E.illegal_generation),))
    )
    assert h.txn_commit(PID_A, {T0: 3}, member_id="zombie", generation=gen) == (
        TxnOffsetCommitResponse(((T0, E.unknown_member_id),))
    )
    assert h.txn_commit(PID_A, {T0: 4}, member_id=a, generation=gen, instance="i") == (
        TxnOffsetCommitResponse(((T0, E.unknown_member_id),))
    )
    # Before v3 (no member, generation -1) any group takes it, as in Kafka.
    assert h.txn_commit(PID_A, {T0: 5}) == ok(T0)
    h.marker(PID_A, commit=True)
    assert h.offsets()[T0] == 5


def test_a_new_group_refuses_a_generation() -> None:
    h = make()
    assert h.txn_commit(PID_A, {T0: 1}, member_id="m", generation=3) == (
        TxnOffsetCommitResponse(((T0, E.unknown_member_id),))
    )
    assert h.coordinator.group("g") is None


def test_static_member_fencing() -> None:
    h = make()
    joined = h.answer(h.join(instance="i"))
    assert isinstance(joined, JoinGroupResponse) and joined.error == E.none
    a = joined.member_id
    h.sync(a, joined.generation_id, {a: b"A"})
    gen = joined.generation_id
    assert h.txn_commit(PID_A, {T0: 1}, member_id=a, generation=gen, instance="i") == ok(T0)
    assert h.txn_commit(PID_A, {T0: 1}, member_id="old", generation=gen, instance="i") == (
        TxnOffsetCommitResponse(((T0, E.fenced_instance_id),))
    )


def test_not_coordinator_and_loading() -> None:
    coordinator = make_coordinator(owned=False, partitions=PARTITIONS)
    h = TxnHarness(coordinator)
    p = coordinator.partition_for("g")
    assert h.txn_commit(PID_A, {T0: 1}) == TxnOffsetCommitResponse(((T0, E.not_coordinator),))
    coordinator.begin_loading(p)
    assert h.txn_commit(PID_A, {T0: 1}) == TxnOffsetCommitResponse(
        ((T0, E.coordinator_load_in_progress),)
    )
    # A marker reported while loading is part of the log being replayed: nothing to do.
    assert coordinator.complete_txn_offsets(p, PID_A, True, 0) == []


# == deletion and expiry =======================================================================


def test_a_group_with_pending_txn_offsets_is_not_deleted_or_expired() -> None:
    config = GroupConfig(
        group_initial_rebalance_delay_ms=0,
        offsets_retention_minutes=1,
        offsets_retention_check_interval_ms=1_000,
    )
    h = make(config)
    h.txn_commit(PID_A, {T0: 10})
    results, effects = h.coordinator.delete_groups(["g"], h.now)
    assert results == {"g": E.non_empty_group} and effects == []
    h.advance(10 * 60_000)
    assert h.coordinator.group("g") is not None, "pending offsets keep the group alive"
    h.marker(PID_A, commit=True)
    assert h.offsets() == {T0: 10, T1: -1}
    # Once committed, the usual retention applies again (simple group: from the commit).
    h.advance(2 * 60_000)
    assert h.coordinator.group("g") is None
    same_after_reload(h)


def test_committed_offsets_expire_while_pending_ones_stay() -> None:
    config = GroupConfig(
        group_initial_rebalance_delay_ms=0,
        offsets_retention_minutes=1,
        offsets_retention_check_interval_ms=1_000,
    )
    h = make(config)
    h.commit({T0: 5})
    h.advance(30_000)
    h.txn_commit(PID_A, {T1: 60})
    h.advance(45_000)  # T0 expires; T1 is pending
    assert h.offsets(stable=True) == {T0: -1, T1: E.unstable_offset_commit}
    same_after_reload(h)
    h.marker(PID_A, commit=True)
    assert h.offsets() == {T0: -1, T1: 60}
    same_after_reload(h)


def test_offset_delete_keeps_the_pending_txn_offset_like_a_reload_would() -> None:
    h = make()
    h.commit({T0: 5})
    h.txn_commit(PID_A, {T0: 10})
    token = next(h.tokens)
    h.apply(h.coordinator.offset_delete(OffsetDeleteRequest(token, "g", (T0,)), h.now))
    assert h.offsets(stable=True)[T0] == E.unstable_offset_commit
    assert h.offsets()[T0] == -1
    h.marker(PID_A, commit=True)
    assert h.offsets()[T0] == 10
    same_after_reload(h)


def test_an_aborted_transaction_leaves_no_group_behind() -> None:
    h = make()
    h.txn_commit(PID_A, {T0: 10})
    h.marker(PID_A, commit=False)
    assert h.coordinator.group("g") is None
    described: DescribedGroup = h.coordinator.describe_groups(["g"])[0]
    assert described.state == "Dead"


# == loading (failover) ========================================================================


def test_loading_keeps_open_transactions_pending_until_their_marker() -> None:
    h = make()
    h.commit({T0: 5})
    h.txn_commit(PID_A, {T0: 10})
    h.txn_commit(PID_B, {T1: 20})
    h.marker(PID_B, commit=True)
    new = h.reloaded()
    h2 = TxnHarness(new, now=h.now, batches=h.batches)
    assert h2.offsets() == {T0: 5, T1: 20}
    assert h2.offsets(stable=True) == {T0: E.unstable_offset_commit, T1: 20}
    # The new coordinator completes the transaction that was open at the failover.
    h2.marker(PID_A, commit=True)
    assert h2.offsets(stable=True) == {T0: 10, T1: 20}


def test_loading_real_batches_with_markers() -> None:
    """Bytes as the log holds them: a transactional batch, a plain one, Kafka markers."""
    g = "g"
    log = b"".join(
        [
            build_batch([offset_commit_record(g, "t", 0, OffsetCommitValue(1, "", 1))], 1),
            build_batch(
                [
                    offset_commit_record(g, "t", 0, OffsetCommitValue(10, "a", 2)),
                    offset_commit_record(g, "t", 1, OffsetCommitValue(11, "a", 2)),
                ],
                2,
                producer_id=PID_A,
                producer_epoch=3,
            ),
            build_batch(
                [offset_commit_record(g, "t", 1, OffsetCommitValue(21, "b", 3))],
                3,
                producer_id=PID_B,
                producer_epoch=0,
            ),
            build_marker_batch(PID_A, 3, 7, commit=True, timestamp_ms=4),
            build_marker_batch(PID_B, 0, 7, commit=False, timestamp_ms=5),
            build_batch(
                [offset_commit_record(g, "t", 0, OffsetCommitValue(30, "c", 6))],
                6,
                producer_id=PID_B,
                producer_epoch=1,
            ),
        ]
    )
    # Offsets as the leader would assign them: base offsets 0, 1, 3, 4, 5, 6.
    batches = _with_offsets(log)
    assert [(b.base_offset, b.producer_id, b.marker) for b in batches] == [
        (0, -1, None),
        (1, PID_A, None),
        (3, PID_B, None),
        (4, PID_A, True),
        (5, PID_B, False),
        (6, PID_B, None),
    ]
    assert all(b.transactional for b in batches[1:])
    # Tools that ignore transactions still see every data record.
    assert len(list(iter_records(log))) == 5
    coordinator = make_coordinator(owned=False, partitions=PARTITIONS)
    coordinator.load(coordinator.partition_for(g), batches, 0)
    group = coordinator.group(g)
    assert group is not None
    assert group.offsets == {T0: OffsetCommitValue(10, "a", 2), T1: OffsetCommitValue(11, "a", 2)}
    assert {pid: set(p) for pid, p in group.pending_txn_offsets.items()} == {PID_B: {T0}}


def _with_offsets(log: bytes) -> list[OffsetsBatch]:
    """The batches of `log` at consecutive offsets, as appended by a leader."""
    placed = []
    next_offset = 0
    for batch in iter_batches(log):
        size = max(len(batch.records), 1)
        placed.append(
            OffsetsBatch(
                next_offset, batch.records, batch.producer_id, batch.transactional, batch.marker
            )
        )
        next_offset += size
    return placed


def test_plain_commits_still_replace_each_other_in_log_order() -> None:
    h = make()
    assert h.commit({T0: 5}) == OffsetCommitResponse(((T0, E.none),))
    h.commit({T0: 4})
    assert h.offsets() == {T0: 4, T1: -1}
    same_after_reload(h)


# == random interleavings: the live state is what a reload of the log gives ====================

_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("txn"), st.sampled_from([PID_A, PID_B]), st.sampled_from([T0, T1])),
        st.tuples(st.just("plain"), st.just(0), st.sampled_from([T0, T1])),
        st.tuples(st.just("commit"), st.sampled_from([PID_A, PID_B]), st.just(T0)),
        st.tuples(st.just("abort"), st.sampled_from([PID_A, PID_B]), st.just(T0)),
        st.tuples(st.just("reload"), st.just(0), st.just(T0)),
    ),
    max_size=25,
)


@settings(max_examples=150, deadline=None)
@given(_OPS)
def test_live_state_matches_replay_and_a_simple_model(
    ops: list[tuple[str, int, TopicPartition]],
) -> None:
    h = make()
    # Model: committed (offset, log position); pending per producer tp -> (offset, position).
    committed: dict[TopicPartition, tuple[int, int]] = {}
    pending: dict[int, dict[TopicPartition, tuple[int, int]]] = {}
    for n, (op, pid, tp) in enumerate(ops):
        p = h.coordinator.partition_for("g")
        at = h.next_offset(p)
        if op == "txn":
            assert h.txn_commit(pid, {tp: n}) == ok(tp)
            pending.setdefault(pid, {})[tp] = (n, at)
        elif op == "plain":
            h.commit({tp: n})
            committed[tp] = (n, at)
        elif op in ("commit", "abort"):
            h.marker(pid, commit=op == "commit")
            for ptp, (offset, pos) in pending.pop(pid, {}).items():
                if op == "commit" and (ptp not in committed or committed[ptp][1] < pos):
                    committed[ptp] = (offset, pos)
        else:
            h = TxnHarness(h.reloaded(), now=h.now, batches=h.batches, tokens=h.tokens)
        same_after_reload(h)
        expected = {t: committed[t][0] if t in committed else -1 for t in (T0, T1)}
        assert h.offsets() == expected
        unstable = {t for offsets in pending.values() for t in offsets}
        assert h.offsets(stable=True) == {
            t: E.unstable_offset_commit if t in unstable else expected[t] for t in (T0, T1)
        }
