"""Transaction markers (strandline/protocol/control_batch.py): what we build is what Kafka
clients read as a control batch, and what we read back is what was built."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch

from strandline.errors import InvalidRecordError
from strandline.protocol.control_batch import (
    MARKER_ABORT,
    MARKER_COMMIT,
    EndTransactionMarker,
    NotAMarkerError,
    build_marker_batch,
    read_marker,
)
from strandline.protocol.record_batch import assign_offsets, read_header
from tests.storage.batches import build_batch


@given(
    producer_id=st.integers(0, 2**63 - 1),
    producer_epoch=st.integers(0, 2**15 - 1),
    coordinator_epoch=st.integers(-(2**31), 2**31 - 1),
    commit=st.booleans(),
    timestamp=st.integers(0, 2**62),
)
def test_a_marker_reads_back_as_built(
    producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool, timestamp: int
) -> None:
    batch = build_marker_batch(producer_id, producer_epoch, coordinator_epoch, commit, timestamp)
    header = read_header(batch, 0, verify_crc=True)

    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch) == (producer_id, producer_epoch)
    assert header.base_sequence == -1
    assert header.record_count == 1 and header.last_offset_delta == 0
    assert header.max_timestamp == timestamp
    assert read_marker(batch, header) == EndTransactionMarker(commit, coordinator_epoch)


@pytest.mark.parametrize("commit", [True, False])
def test_kafka_python_reads_it_as_kafkas_control_record(commit: bool) -> None:
    batch = bytearray(build_marker_batch(42, 3, 7, commit, 1_000))
    assign_offsets(batch, 100, 5)  # as the leader appends it: CRC still valid

    decoded = DefaultRecordBatch(bytes(batch))
    assert decoded.validate_crc()
    assert decoded.is_control_batch and decoded.is_transactional
    (record,) = list(decoded)
    assert record.offset == 100
    assert struct.unpack(">hh", record.key) == (0, MARKER_COMMIT if commit else MARKER_ABORT)
    assert struct.unpack(">hi", record.value) == (0, 7)
    # ... and the offsets assigned in place keep it readable.
    header = read_header(batch, 0, verify_crc=True)
    assert header.base_offset == 100
    assert read_marker(batch, header) == EndTransactionMarker(commit, 7)


def test_a_marker_is_read_at_its_position_in_a_larger_buffer() -> None:
    first = build_batch([b"a", b"b"])
    marker = build_marker_batch(9, 1, 2, False, 5)
    buf = first + marker
    header = read_header(buf, len(first), verify_crc=True)
    assert read_marker(buf, header) == EndTransactionMarker(False, 2)


def test_data_batches_and_other_control_types_are_not_markers() -> None:
    data = build_batch([b"x"])
    with pytest.raises(InvalidRecordError):
        read_marker(data, read_header(data, 0, verify_crc=True))

    marker = bytearray(build_marker_batch(9, 1, 2, True, 5))
    key_at = marker.rindex(struct.pack(">hh", 0, MARKER_COMMIT))
    struct.pack_into(">hh", marker, key_at, 0, 2)  # LEADER_CHANGE (KRaft), not a marker
    with pytest.raises(NotAMarkerError):
        read_marker(marker, read_header(marker, 0, verify_crc=False))


def test_a_truncated_marker_record_is_refused() -> None:
    marker = build_marker_batch(9, 1, 2, True, 5)
    header = read_header(marker, 0, verify_crc=True)
    # The header says the batch is whole, the buffer holds less of the record.
    short = header._replace(batch_length=header.batch_length - 4)
    with pytest.raises(InvalidRecordError):
        read_marker(marker, short)
