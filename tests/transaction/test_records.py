"""`__transaction_state` records are byte-compatible with Kafka's TransactionLog."""

from __future__ import annotations

import struct

import pytest

from strandline.transaction.partitioning import partition_for
from strandline.transaction.records import (
    TxnLogRecordError,
    TxnLogValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from strandline.types import TopicPartition


def test_key_is_version_0_and_a_short_string() -> None:
    assert encode_key("txn-a") == b"\x00\x00\x00\x05txn-a"
    assert decode_key(encode_key("tx-é")) == "tx-é"
    with pytest.raises(TxnLogRecordError):
        decode_key(b"\x00\x01\x00\x01a")


def test_value_v0_layout_matches_kafka() -> None:
    value = TxnLogValue(
        producer_id=7,
        producer_epoch=3,
        timeout_ms=60_000,
        state_id=1,  # Ongoing
        partitions=frozenset({TopicPartition("t", 1), TopicPartition("t", 0)}),
        last_update_timestamp_ms=1_700,
        start_timestamp_ms=1_600,
    )
    expected = (
        struct.pack(">hqhib", 0, 7, 3, 60_000, 1)
        + struct.pack(">i", 1)  # one topic
        + b"\x00\x01t"
        + struct.pack(">iii", 2, 0, 1)
        + struct.pack(">qq", 1_700, 1_600)
    )
    assert encode_value(value) == expected
    assert decode_value(expected) == value


def test_empty_state_writes_null_partitions() -> None:
    value = TxnLogValue(9, 0, 1000, 0, frozenset(), 5, -1)
    raw = encode_value(value)
    assert raw[2 + 8 + 2 + 4 + 1 : 2 + 8 + 2 + 4 + 1 + 4] == b"\xff\xff\xff\xff"
    assert decode_value(raw) == value


def test_flexible_value_v1_is_read() -> None:
    # compact string/arrays are length+1 varints; each struct ends with tagged fields.
    raw = (
        struct.pack(">hqhib", 1, 42, 2, 30_000, 2)
        + bytes([2])  # one topic
        + bytes([4])
        + b"abc"
        + bytes([2])  # one partition
        + struct.pack(">i", 5)
        + bytes([0])  # topic's tagged fields
        + struct.pack(">qq", 11, 10)
        + bytes([0])
    )
    value = decode_value(raw)
    assert value.producer_id == 42 and value.state_id == 2
    assert value.partitions == frozenset({TopicPartition("abc", 5)})
    assert (value.last_update_timestamp_ms, value.start_timestamp_ms) == (11, 10)


def test_truncated_value_is_an_error() -> None:
    with pytest.raises(TxnLogRecordError):
        decode_value(struct.pack(">hq", 0, 1))


def test_partition_for_is_kafkas_abs_hashcode_mod() -> None:
    # "hello".hashCode() == 99162322 in Java.
    assert partition_for("hello", 50) == 99162322 % 50
    # A negative hashCode: "polygenelubricants".hashCode() == Integer.MIN_VALUE -> 0.
    assert partition_for("polygenelubricants", 50) == 0
    with pytest.raises(ValueError):
        partition_for("x", 0)
