"""The aborted-transaction index `.txnindex` (strandline/storage/txn_index.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from strandline.storage.txn_index import (
    ENTRY,
    ENTRY_SIZE,
    AbortedTxn,
    TransactionIndex,
    TxnIndexCorruptError,
    collect_aborted,
    decode_entries,
    encode_entries,
)

_txn = st.builds(
    AbortedTxn,
    st.integers(0, 2**63 - 1),
    st.integers(0, 2**62),
    st.integers(0, 2**62),
    st.integers(0, 2**62),
)


@given(st.lists(_txn, max_size=20))
def test_entries_round_trip_in_kafkas_34_byte_layout(txns: list[AbortedTxn]) -> None:
    data = encode_entries(txns)
    assert len(data) == 34 * len(txns)
    assert decode_entries(data) == txns
    if txns:  # version int16 0, then the four int64 fields, big-endian
        assert data[:ENTRY_SIZE] == ENTRY.pack(0, *txns[0])


def test_a_torn_last_entry_is_ignored_and_an_unknown_version_refused() -> None:
    data = encode_entries([AbortedTxn(1, 0, 5, 6), AbortedTxn(2, 3, 9, 10)])
    assert decode_entries(data[:-3]) == [AbortedTxn(1, 0, 5, 6)]
    with pytest.raises(TxnIndexCorruptError):
        decode_entries(b"\x00\x07" + data[2:])


def test_collect_returns_the_overlapping_transactions_and_stops_at_a_stable_point() -> None:
    entries = [
        AbortedTxn(1, 0, 10, 11),  # ends before the range
        AbortedTxn(2, 5, 20, 12),  # overlaps
        AbortedTxn(3, 12, 30, 40),  # overlaps; its LSO passes the range end: complete
        AbortedTxn(4, 14, 35, 36),  # never looked at
    ]
    found, complete = collect_aborted(entries, 11, 25)
    assert found == [AbortedTxn(2, 5, 20, 12), AbortedTxn(3, 12, 30, 40)]
    assert complete

    found, complete = collect_aborted(entries[:2], 11, 25)
    assert found == [AbortedTxn(2, 5, 20, 12)] and not complete
    # A transaction that begins at or after the end of the range is not returned.
    assert collect_aborted([AbortedTxn(5, 25, 26, 27)], 11, 25) == ([], True)


def test_the_file_is_created_with_its_first_entry_and_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.txnindex"
    index = TransactionIndex(path, os.pwrite)
    assert index.entries == [] and not path.exists()
    index.reset()
    assert not path.exists()  # nothing to empty: no file either

    index.append(AbortedTxn(1, 0, 4, 5))
    index.append(AbortedTxn(2, 2, 6, 7))
    index.flush()
    with pytest.raises(ValueError):
        index.append(AbortedTxn(3, 1, 6, 7))  # markers come in offset order
    index.close()
    assert path.stat().st_size == 2 * ENTRY_SIZE

    reopened = TransactionIndex(path, os.pwrite)
    assert reopened.entries == [AbortedTxn(1, 0, 4, 5), AbortedTxn(2, 2, 6, 7)]
    assert reopened.collect(5, 7) == ([AbortedTxn(2, 2, 6, 7)], True)


def test_truncation_drops_transactions_whose_marker_is_cut(tmp_path: Path) -> None:
    path = tmp_path / "x.txnindex"
    index = TransactionIndex(path, os.pwrite)
    for i in range(4):
        index.append(AbortedTxn(i, i * 10, i * 10 + 5, i * 10 + 6))
    index.truncate_to(25)  # the marker at 25 goes, the one at 15 stays
    assert [t.producer_id for t in index.entries] == [0, 1]
    assert path.stat().st_size == 2 * ENTRY_SIZE
    index.append(AbortedTxn(9, 21, 22, 23))  # appended right after the kept ones
    index.close()
    assert [t.producer_id for t in TransactionIndex(path, os.pwrite).entries] == [0, 1, 9]


def test_a_torn_tail_on_disk_is_cut_before_the_next_append(tmp_path: Path) -> None:
    path = tmp_path / "x.txnindex"
    path.write_bytes(encode_entries([AbortedTxn(1, 0, 4, 5)]) + b"\x00\x00\x01")
    index = TransactionIndex(path, os.pwrite)
    index.append(AbortedTxn(2, 5, 8, 9))
    index.close()
    assert TransactionIndex(path, os.pwrite).entries == [
        AbortedTxn(1, 0, 4, 5),
        AbortedTxn(2, 5, 8, 9),
    ]


def test_a_failed_append_leaves_the_index_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "x.txnindex"
    calls = []

    def half_then_full(fd: int, data: bytes | bytearray | memoryview, pos: int) -> int:
        calls.append(pos)
        if len(calls) == 1:
            return os.pwrite(fd, bytes(data)[:10], pos)
        raise OSError(28, "No space left on device")

    index = TransactionIndex(path, half_then_full)
    with pytest.raises(OSError):
        index.append(AbortedTxn(1, 0, 4, 5))
    assert index.entries == []
    assert path.stat().st_size == 0
