"""__consumer_offsets codecs, partitioning and replay."""

from __future__ import annotations

import struct

from hypothesis import given
from hypothesis import strategies as st

from strandline.group.loading import load
from strandline.group.partitioning import java_string_hash, partition_for
from strandline.group.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    StoredMember,
    build_batch,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_value,
    encode_key,
    encode_offset_commit_value,
    group_metadata_record,
    iter_records,
    offset_commit_record,
)
from strandline.types import TopicPartition


def test_java_string_hash_matches_java() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    # Integer overflow wraps like Java's int arithmetic.
    assert java_string_hash("polygenelubricants") == -(2**31)
    # Outside the BMP Java hashes the two UTF-16 surrogates.
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00


def test_partition_for_uses_kafka_abs() -> None:
    # Utils.abs(Integer.MIN_VALUE) is 0, not MIN_VALUE: partition 0 for any count.
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 99162322 % 50
    negative = "console-consumer-1"
    assert java_string_hash(negative) != 0
    assert partition_for(negative, 50) == abs(java_string_hash(negative)) % 50


def test_offset_commit_key_bytes_exactly_as_kafka() -> None:
    key = encode_key(OffsetCommitKey("g", "t", 3))
    assert key == b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x03"
    assert decode_key(key) == OffsetCommitKey("g", "t", 3)
    # Version 0 keys (old brokers) read the same.
    assert decode_key(b"\x00\x00" + key[2:]) == OffsetCommitKey("g", "t", 3)
    assert encode_key(GroupMetadataKey("grp")) == b"\x00\x02\x00\x03grp"


def test_offset_commit_value_v3_and_v1_layouts() -> None:
    v3 = encode_offset_commit_value(OffsetCommitValue(42, "md", 1000, leader_epoch=7))
    assert v3 == struct.pack(">hqih2sq", 3, 42, 7, 2, b"md", 1000)
    v1 = encode_offset_commit_value(OffsetCommitValue(42, "", 1000, expire_timestamp=5000))
    assert v1 == struct.pack(">hqhqq", 1, 42, 0, 1000, 5000)
    assert decode_offset_commit_value(v1).expire_timestamp == 5000
    assert decode_offset_commit_value(v3) == OffsetCommitValue(42, "md", 1000, leader_epoch=7)
    v0 = struct.pack(">hqh1sq", 0, 9, 1, b"x", 77)
    assert decode_offset_commit_value(v0) == OffsetCommitValue(9, "x", 77)


def test_group_metadata_v0_members_read() -> None:
    v0 = (
        struct.pack(">h", 0)
        + b"\x00\x08consumer"
        + struct.pack(">i", 4)
        + b"\x00\x05range"
        + b"\x00\x02m1"
        + struct.pack(">i", 1)
        + b"\x00\x02m1"
        + b"\x00\x01c"
        + b"\x00\x01h"
        + struct.pack(">i", 6000)
        + struct.pack(">i", 2)
        + b"su"
        + struct.pack(">i", 1)
        + b"a"
    )
    value = decode_group_metadata_value(v0)
    assert value.generation == 4 and value.protocol == "range" and value.leader == "m1"
    member = value.members[0]
    assert (member.session_timeout_ms, member.rebalance_timeout_ms) == (6000, 6000)
    assert (member.subscription, member.assignment) == (b"su", b"a")


names = st.text(max_size=12)
members = st.builds(
    StoredMember,
    names,
    st.none() | names,
    names,
    names,
    st.integers(0, 2**31 - 1),
    st.integers(0, 2**31 - 1),
    st.binary(max_size=40),
    st.binary(max_size=40),
)


@given(
    st.builds(
        GroupMetadataValue,
        names,
        st.integers(-1, 2**31 - 1),
        st.none() | names,
        st.none() | names,
        st.integers(-1, 2**62),
        st.lists(members, max_size=4).map(tuple),
    )
)
def test_group_metadata_value_v3_round_trips(value: GroupMetadataValue) -> None:
    encoded = encode_group_metadata_value(value)
    assert encoded[:2] == b"\x00\x03"
    assert decode_group_metadata_value(encoded) == value


def test_load_replays_in_order_with_tombstones_through_real_batches() -> None:
    gm = GroupMetadataValue("consumer", 2, "range", "m", 10, ())
    records = [
        offset_commit_record("g", "t", 0, OffsetCommitValue(5, "", 1)),
        offset_commit_record("g", "t", 1, OffsetCommitValue(6, "", 1)),
        offset_commit_record("g", "t", 0, OffsetCommitValue(9, "", 2)),
        offset_commit_record("g", "t", 1, None),
        group_metadata_record("g", gm),
        group_metadata_record("gone", gm),
        group_metadata_record("gone", None),
        offset_commit_record("simple", "t", 0, OffsetCommitValue(1, "", 1)),
    ]
    log = build_batch(records[:3], 1) + build_batch(records[3:], 2)
    loaded = load(iter_records(log))
    assert loaded.offsets["g"] == {TopicPartition("t", 0): OffsetCommitValue(9, "", 2)}
    assert loaded.groups == {"g": gm}
    assert loaded.group_ids() == {"g", "simple"}


def test_load_skips_an_unreadable_record_and_keeps_going() -> None:
    """A record with key version 7 (a client's forgery) used to stop the load
    for good; it is skipped, noted with where it is, and every other record replays."""
    good_before = offset_commit_record("g", "t", 0, OffsetCommitValue(5, "", 0))
    forged = (struct.pack(">h", 7) + b"junk", b"whatever")
    truncated_value = (encode_key(OffsetCommitKey("g", "t", 1)), b"\x00")
    good_after = offset_commit_record("g", "t", 2, OffsetCommitValue(9, "", 0))
    loaded = load([good_before, forged, truncated_value, good_after])
    assert loaded.offsets["g"][TopicPartition("t", 0)].offset == 5
    assert loaded.offsets["g"][TopicPartition("t", 2)].offset == 9
    assert TopicPartition("t", 1) not in loaded.offsets["g"]
    assert [(at, i) for at, i, _ in loaded.skipped] == [(1, 0), (2, 0)]
    assert "key version 7" in loaded.skipped[0][2]
