"""Transactions in the producer state (strandline/storage/producer_state.py), pure:
open/close, the last stable offset, marker fencing, snapshots v1/v2, truncation."""

from __future__ import annotations

import struct

from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder
from kio.schema.errors import ErrorCode

from strandline.protocol.control_batch import EndTransactionMarker, build_marker_batch
from strandline.protocol.record_batch import assign_offsets, iter_batches
from strandline.storage.producer_state import (
    NO_OFFSET,
    SNAPSHOT_MAGIC,
    CompletedTxn,
    CoordinatorFenced,
    InvalidProducerEpoch,
    InvalidTxnState,
    ProducerStateManager,
    TxnRange,
)
from tests.storage.batches import build_batch

A, B, C = 1_000, 2_000, 3_000


def data(state: ProducerStateManager, pid: int, first: int, last: int, *, txn: bool = True) -> None:
    entry = state.producers.get(pid)
    seq = 0 if entry is None or not entry.batches else entry.last_seq + 1
    state.on_append(pid, 0, seq, seq + last - first, first, last, 10, is_transactional=txn)


def marker(
    state: ProducerStateManager, pid: int, offset: int, *, commit: bool, coordinator_epoch: int = 0
) -> CompletedTxn | None:
    return state.on_marker(pid, 0, offset, commit, coordinator_epoch, 10)


def test_a_transactional_batch_opens_a_transaction_and_its_marker_closes_it() -> None:
    state = ProducerStateManager()
    data(state, A, 0, 2)
    data(state, A, 3, 4)  # the same transaction: its first offset stays 0
    assert state.ongoing_txns == {A: 0}
    assert state.last_stable_offset(5) == 0

    done = marker(state, A, 5, commit=False)

    assert done == CompletedTxn(A, 0, 5, True, 6)
    assert state.ongoing_txns == {}
    assert state.producers[A].current_txn_first_offset == NO_OFFSET
    # Closed, but its marker is not below the HW yet: still unstable.
    assert state.last_stable_offset(5) == 0
    assert state.last_stable_offset(6) == 6
    assert state.unreplicated_txns == []
    assert not state.has_transactions


def test_the_lso_is_the_first_offset_of_the_oldest_unstable_transaction() -> None:
    state = ProducerStateManager()
    data(state, A, 0, 0)
    data(state, B, 1, 1)
    data(state, C, 2, 2, txn=False)  # idempotent only: no transaction
    assert state.last_stable_offset(3) == 0

    done = marker(state, A, 3, commit=True)
    assert done is not None and done.last_stable_offset == 1  # B's is still open
    assert state.last_stable_offset(4) == 1
    assert marker(state, B, 4, commit=False) == CompletedTxn(B, 1, 4, True, 5)
    assert state.last_stable_offset(4) == 1  # B's marker is not replicated
    assert state.last_stable_offset(5) == 5
    assert state.first_unstable_offset() is None


def test_a_marker_without_an_open_transaction_completes_nothing() -> None:
    state = ProducerStateManager()
    assert marker(state, A, 0, commit=True, coordinator_epoch=3) is None
    assert state.producers[A].coordinator_epoch == 3
    assert state.map_end_offset == 1
    assert state.last_stable_offset(1) == 1


def test_a_non_transactional_batch_is_refused_while_the_producer_has_a_transaction_open() -> None:
    state = ProducerStateManager()
    data(state, A, 0, 1)
    check = state.check_append(A, 0, 2, 2, is_transactional=False)
    assert isinstance(check, InvalidTxnState)
    assert check.error_code == ErrorCode.invalid_txn_state
    assert state.check_append(A, 0, 2, 2, is_transactional=True).error_code == ErrorCode.none
    marker(state, A, 2, commit=True)
    assert state.check_append(A, 0, 2, 2, is_transactional=False).error_code == ErrorCode.none


def test_markers_from_an_older_coordinator_or_producer_epoch_are_fenced() -> None:
    state = ProducerStateManager()
    state.on_append(A, 4, 0, 0, 0, 0, 10, is_transactional=True)
    state.on_marker(A, 4, 1, True, 7, 10)

    assert isinstance(state.check_marker(A, 4, 6), CoordinatorFenced)
    assert state.check_marker(A, 4, 6).error_code == ErrorCode.transaction_coordinator_fenced
    assert isinstance(state.check_marker(A, 3, 7), InvalidProducerEpoch)
    assert state.check_marker(A, 4, 7).error_code == ErrorCode.none
    assert state.check_marker(A, 5, 8).error_code == ErrorCode.none
    assert state.check_marker(B, 0, 0).error_code == ErrorCode.none  # unknown producer


def test_an_abort_with_a_bumped_epoch_restarts_the_producers_sequences() -> None:
    state = ProducerStateManager()
    state.on_append(A, 4, 0, 9, 0, 9, 10, is_transactional=True)
    state.on_marker(A, 5, 10, False, 1, 10)  # the coordinator aborted on timeout, epoch + 1
    assert isinstance(state.check_append(A, 4, 10, 10, True), InvalidProducerEpoch)
    assert state.check_append(A, 5, 0, 0, True).error_code == ErrorCode.none
    assert (
        state.check_append(A, 5, 10, 10, True).error_code == ErrorCode.out_of_order_sequence_number
    )


def test_producers_with_an_open_transaction_never_expire() -> None:
    state = ProducerStateManager()
    data(state, A, 0, 0)
    data(state, B, 1, 1, txn=False)
    assert state.remove_expired_producers(now_ms=10**12, expiration_ms=1) == [B]
    assert A in state.producers


def test_snapshot_v2_keeps_open_and_unreplicated_transactions() -> None:
    state = ProducerStateManager()
    data(state, A, 0, 1)
    data(state, B, 2, 2)
    data(state, C, 3, 3)
    marker(state, A, 4, commit=False, coordinator_epoch=9)

    restored = ProducerStateManager.from_snapshot(state.to_snapshot())

    assert restored.ongoing_txns == {B: 2, C: 3}
    assert list(restored.ongoing_txns) == [B, C]  # first-offset order
    assert restored.unreplicated_txns == [TxnRange(A, 0, 4)]
    assert restored.producers[A].coordinator_epoch == 9
    assert restored.last_stable_offset(4) == 0
    assert restored.last_stable_offset(5) == 2
    assert (
        restored.to_snapshot()
        == ProducerStateManager.from_snapshot(restored.to_snapshot()).to_snapshot()
    )


def test_a_version_1_snapshot_is_still_read() -> None:
    # v1 as written before transactions: producer_id, epoch, last_timestamp, batch count.
    body = struct.pack(">qi", 7, 1) + struct.pack(">qhqb", A, 2, 55, 1)
    body += struct.pack(">iiqqq", 0, 2, 4, 6, 55)
    data_v1 = struct.pack(">4shI", SNAPSHOT_MAGIC, 1, crc32c(body)) + body

    state = ProducerStateManager.from_snapshot(data_v1)

    entry = state.producers[A]
    assert (entry.producer_epoch, entry.last_seq, entry.last_timestamp_ms) == (2, 2, 55)
    assert entry.current_txn_first_offset == NO_OFFSET
    assert entry.coordinator_epoch == -1
    assert state.map_end_offset == 7 and not state.has_transactions


def test_truncation_forgets_transactions_begun_after_the_cut_and_reopens_cut_markers() -> None:
    state = ProducerStateManager()
    data(state, A, 0, 0)
    data(state, B, 1, 1)
    marker(state, A, 2, commit=True)
    data(state, C, 3, 3)

    state.truncate_to(2)  # the marker of A and all of C are gone

    assert state.ongoing_txns == {A: 0, B: 1}
    assert state.unreplicated_txns == []
    assert C not in state.producers
    assert state.last_stable_offset(2) == 0


def test_replay_of_real_batches_rebuilds_the_same_state() -> None:
    """What a follower (or a restart) sees: batch headers plus the markers' records."""

    def txn_batch(pid: int, seq: int) -> bytes:
        builder = DefaultRecordBatchBuilder(2, 0, True, pid, 0, seq, 1 << 20)
        builder.append(0, 10, b"k", b"v", [])
        return bytes(builder.build())

    payload = bytearray(
        txn_batch(A, 0)
        + build_batch([b"plain"])
        + txn_batch(B, 0)
        + build_marker_batch(A, 0, 1, False, 10)
        + txn_batch(B, 1)
    )
    assign_offsets(payload, 0, 0)
    headers = list(iter_batches(payload))
    markers = {h.base_offset: EndTransactionMarker(False, 1) for h in headers if h.is_control}

    state = ProducerStateManager()
    completed = state.replay(headers, lambda h: markers[h.base_offset])

    assert completed == [CompletedTxn(A, 0, 3, True, 2)]
    assert state.ongoing_txns == {B: 2}
    assert state.last_stable_offset(3) == 0  # A's marker (offset 3) is not below the HW
    assert state.last_stable_offset(4) == 2  # now it is; B's transaction is open
    assert state.unreplicated_txns == []


# -- model check ------------------------------------------------------------------------------

_PIDS = [A, B, C]
_events = st.lists(
    st.tuples(st.sampled_from(["data", "txn", "commit", "abort"]), st.sampled_from(_PIDS)),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(events=_events, hw_lag=st.integers(0, 5))
def test_the_lso_matches_a_simple_model(events: list[tuple[str, int]], hw_lag: int) -> None:
    """Kafka's rule, restated: a transaction is unstable from its first batch until the
    HW has passed its marker; the LSO is the lowest unstable first offset, capped by
    the HW. Snapshots in between change nothing."""
    state = ProducerStateManager()
    open_at: dict[int, int] = {}
    closed: list[tuple[int, int]] = []  # (first offset, marker offset)
    offset = 0
    for i, (kind, pid) in enumerate(events):
        if kind == "data" and pid in open_at:
            kind = "txn"  # a plain write would be refused
        if kind in ("data", "txn"):
            data(state, pid, offset, offset, txn=kind == "txn")
            if kind == "txn":
                open_at.setdefault(pid, offset)
        else:
            marker(state, pid, offset, commit=kind == "commit")
            if pid in open_at:
                closed.append((open_at.pop(pid), offset))
        offset += 1
        if i % 7 == 3:
            state = ProducerStateManager.from_snapshot(state.to_snapshot())
        hw = max(0, offset - hw_lag)
        unstable = [first for first in open_at.values()]
        unstable += [first for first, last in closed if last >= hw]
        expected = min([hw, *unstable])
        assert state.last_stable_offset(hw) == expected
        # The HW only grows: transactions it passed are stable for good.
        closed = [(first, last) for first, last in closed if last >= hw]
