"""Idempotent-producer state (strandline/storage/producer_state.py).

Lives under tests/group/ because that is the test directory this work owns; it tests
the storage module of the same issue.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record import MemoryRecordsBuilder
from kio.schema.errors import ErrorCode as E

from strandline.protocol.record_batch import iter_batches
from strandline.storage.producer_state import (
    INT32_MAX,
    Duplicate,
    InvalidProducerEpoch,
    Ok,
    OutOfOrderSequence,
    ProducerIdAllocator,
    ProducerIdBlock,
    ProducerStateManager,
    SnapshotError,
    UnknownProducerId,
    decode_producer_id_block,
    encode_producer_id_block,
    last_sequence,
    producer_id_block,
    snapshot_file_name,
)

PID = 1000


class Log:
    """A leader appending produce batches the way the broker will: check, then append."""

    def __init__(self) -> None:
        self.state = ProducerStateManager()
        self.next_offset = 0

    def produce(self, pid: int, epoch: int, base_seq: int, count: int, ts: int = 0) -> object:
        last_seq = last_sequence(base_seq, count - 1)
        result = self.state.check_append(pid, epoch, base_seq, last_seq)
        if isinstance(result, Ok):
            first = self.next_offset
            self.next_offset += count
            self.state.on_append(pid, epoch, base_seq, last_seq, first, first + count - 1, ts)
            return ("appended", first)
        return result


def test_sequences_duplicates_and_gaps() -> None:
    log = Log()
    assert log.produce(PID, 0, 0, 3) == ("appended", 0)
    assert log.produce(PID, 0, 3, 2) == ("appended", 3)
    assert log.produce(PID, 0, 0, 3) == Duplicate(0, 2, 0)
    assert log.produce(PID, 0, 3, 2) == Duplicate(3, 4, 0)
    gap = log.produce(PID, 0, 9, 1)
    assert gap == OutOfOrderSequence(5, 9)
    assert gap.error_code == E.out_of_order_sequence_number  # type: ignore[union-attr]
    # A retry that only overlaps a cached batch is not a duplicate.
    assert isinstance(log.produce(PID, 0, 1, 2), OutOfOrderSequence)
    assert Duplicate(0, 0, 0).error_code == E.none


def test_only_last_five_batches_are_remembered() -> None:
    log = Log()
    for i in range(6):
        log.produce(PID, 0, i, 1)
    assert isinstance(log.produce(PID, 0, 0, 1), OutOfOrderSequence)
    assert log.produce(PID, 0, 1, 1) == Duplicate(1, 1, 0)


def test_unknown_producer_must_start_at_zero() -> None:
    log = Log()
    assert log.produce(PID, 0, 5, 1) == UnknownProducerId(PID)
    assert UnknownProducerId(PID).error_code == E.unknown_producer_id
    # A fresh producer id from InitProducerId (no transaction coordinator) starts at 0.
    assert log.produce(PID + 1, 0, 0, 1) == ("appended", 0)
    # Non-idempotent producers are never checked.
    assert log.produce(-1, -1, -1, 1) == ("appended", 1)
    assert log.produce(-1, -1, -1, 1) == ("appended", 2)


def test_epoch_fencing_and_bump() -> None:
    log = Log()
    log.produce(PID, 5, 0, 2)
    fenced = log.produce(PID, 4, 2, 1)
    assert fenced == InvalidProducerEpoch(5, 4)
    assert fenced.error_code == E.invalid_producer_epoch  # type: ignore[union-attr]
    assert isinstance(log.produce(PID, 6, 2, 1), OutOfOrderSequence), "new epoch restarts at 0"
    assert log.produce(PID, 6, 0, 1) == ("appended", 2)
    # Old epoch's batches are forgotten; the old epoch is now fenced even for a duplicate.
    assert log.produce(PID, 5, 0, 2) == InvalidProducerEpoch(6, 5)
    assert log.state.producers[PID].producer_epoch == 6
    assert len(log.state.producers[PID].batches) == 1


def test_sequence_wraps_at_int_max() -> None:
    assert last_sequence(INT32_MAX - 1, 3) == 1
    assert last_sequence(INT32_MAX, 0) == INT32_MAX
    log = Log()
    log.state.on_append(PID, 0, INT32_MAX - 9, INT32_MAX, 0, 9, 0)
    log.next_offset = 10
    assert log.produce(PID, 0, 0, 5) == ("appended", 10)
    log.state.on_append(PID, 0, 100, INT32_MAX - 1, 15, 20, 0)
    state = ProducerStateManager()
    state.on_append(PID, 0, INT32_MAX - 4, 4, 0, 9, 0)  # a batch spanning the wrap
    assert state.check_append(PID, 0, 5, 5) == Ok()
    assert state.check_append(PID, 0, INT32_MAX - 4, 4) == Duplicate(0, 9, 0)


def test_snapshot_round_trip_and_corruption() -> None:
    log = Log()
    for i in range(7):
        log.produce(PID, 2, i * 2, 2, ts=100 + i)
    log.produce(PID + 1, 0, 0, 1, ts=5)
    data = log.state.to_snapshot()
    restored = ProducerStateManager.from_snapshot(data)
    assert restored.producers == log.state.producers
    assert restored.map_end_offset == log.next_offset == 15
    assert restored.check_append(PID, 2, 6, 7) == Duplicate(6, 7, 103)
    assert snapshot_file_name(15) == "00000000000000000015.snapshot"
    corrupt = bytearray(data)
    corrupt[-3] ^= 0xFF
    with pytest.raises(SnapshotError, match="CRC"):
        ProducerStateManager.from_snapshot(bytes(corrupt))
    with pytest.raises(SnapshotError):
        ProducerStateManager.from_snapshot(data[:-4])
    with pytest.raises(SnapshotError, match="version"):
        ProducerStateManager.from_snapshot(data[:4] + b"\x00\x09" + data[6:])


def _batch(base_offset: int, pid: int, epoch: int, base_seq: int, count: int) -> bytes:
    builder = MemoryRecordsBuilder(
        magic=2,
        compression_type=0,
        batch_size=1 << 20,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=base_seq,
    )
    for i in range(count):
        builder.append(timestamp=1_000 + i, key=None, value=b"v")
    builder.close()
    # The leader writes baseOffset in place (outside the CRC), as the broker does.
    return struct.pack(">q", base_offset) + bytes(builder.buffer())[8:]


def test_follower_rebuilds_from_batch_headers_and_snapshot() -> None:
    segment = (
        _batch(0, PID, 0, 0, 3)
        + _batch(3, PID + 1, 0, 0, 1)
        + _batch(4, PID, 0, 3, 2)
        + _batch(6, -1, -1, -1, 2)
        + _batch(8, PID, 0, 5, 1)
    )
    headers = list(iter_batches(segment))
    follower = ProducerStateManager()
    follower.replay(headers)
    assert follower.map_end_offset == 9
    assert follower.check_append(PID, 0, 3, 4) == Duplicate(4, 5, 1_001)
    assert follower.check_append(PID, 0, 6, 6) == Ok()
    # Restart: snapshot taken at offset 4, then replay of the whole segment skips what it has.
    partial = ProducerStateManager()
    partial.replay(headers[:2])
    resumed = ProducerStateManager.from_snapshot(partial.to_snapshot())
    resumed.replay(headers)
    assert resumed.producers == follower.producers


def test_truncate_to_forgets_batches_beyond_offset() -> None:
    log = Log()
    log.produce(PID, 0, 0, 2)  # offsets 0-1
    log.produce(PID + 1, 0, 0, 2)  # offsets 2-3
    log.produce(PID, 0, 2, 2)  # offsets 4-5
    log.state.truncate_to(2)
    assert log.state.map_end_offset == 2
    assert PID + 1 not in log.state.producers
    assert log.state.check_append(PID, 0, 2, 3) == Ok(), "the truncated batch may come again"
    assert log.state.check_append(PID + 1, 0, 0, 1) == Ok()


def test_producer_expiration() -> None:
    state = ProducerStateManager()
    state.on_append(PID, 0, 0, 0, 0, 0, 1_000)
    state.on_append(PID + 1, 0, 0, 0, 1, 1, 50_000)
    assert state.remove_expired_producers(now_ms=60_000, expiration_ms=20_000) == [PID]
    assert list(state.producers) == [PID + 1]


def test_producer_id_blocks() -> None:
    first = producer_id_block(None, broker_id=1)
    assert (first.first_id, first.last_id) == (0, 999)
    second = producer_id_block(first, broker_id=2)
    assert (second.broker_id, second.first_id, second.last_id) == (2, 1000, 1999)
    znode = encode_producer_id_block(second)
    assert b'"block_start": "1000"' in znode and b'"block_end": "1999"' in znode
    assert decode_producer_id_block(znode) == second
    allocator = ProducerIdAllocator(ProducerIdBlock(1, 10, size=2))
    assert [allocator.allocate(), allocator.allocate(), allocator.allocate()] == [10, 11, None]
    allocator.install(producer_id_block(ProducerIdBlock(1, 10, size=2), 1))
    assert allocator.allocate() == 12


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 2),  # producer
            st.booleans(),  # retry an earlier batch instead of sending a new one
            st.integers(0, 20),  # how far back the retry goes
            st.integers(1, 5),  # records in a new batch
        ),
        max_size=80,
    )
)
def test_retries_are_recognised_with_their_original_offsets(
    steps: list[tuple[int, bool, int, int]],
) -> None:
    log = Log()
    sent: dict[int, list[tuple[int, int, int, int]]] = {0: [], 1: [], 2: []}
    next_seq = {0: 0, 1: 0, 2: 0}
    for producer, retry, back, count in steps:
        pid = PID + producer
        history = sent[producer]
        if retry and history:
            index = max(len(history) - 1 - back, 0)
            base_seq, n, first, last = history[index]
            result = log.produce(pid, 0, base_seq, n)
            if len(history) - index <= 5:
                assert result == Duplicate(first, last, 0)
            else:
                assert isinstance(result, OutOfOrderSequence), "never appended twice"
            continue
        result = log.produce(pid, 0, next_seq[producer], count)
        assert isinstance(result, tuple)
        first = result[1]
        history.append((next_seq[producer], count, first, first + count - 1))
        next_seq[producer] += count
    snapshot = ProducerStateManager.from_snapshot(log.state.to_snapshot())
    assert snapshot.producers == log.state.producers
