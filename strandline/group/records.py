"""`__consumer_offsets` record keys and values, byte-for-byte as Kafka writes them.

Every key and value starts with an int16 schema version. Strings are int16-length
UTF-8 (-1 = null for nullable strings), bytes are int32-length.

Keys:
  v0/v1  OffsetCommitKey    group, topic, partition(int32)   (Kafka writes v1)
  v2     GroupMetadataKey   group
Values:
  OffsetCommitValue v0: offset, metadata, commit_timestamp
                    v1: offset, metadata, commit_timestamp, expire_timestamp
                    v2: offset, metadata, commit_timestamp
                    v3: offset, leader_epoch(int32), metadata, commit_timestamp
  Kafka writes v1 when the commit carried an explicit retention time, else v3.
  GroupMetadataValue v0..v3: protocol_type, generation, protocol?, leader?,
                    [v2+ current_state_timestamp(int64)], members[...]
  member v0: member_id, client_id, client_host, session_timeout, subscription, assignment
  member v1/v2: + rebalance_timeout (before session_timeout)
  member v3: + group_instance_id? (after member_id)
A null value is a tombstone: the offset (or the whole group) is deleted, and
compaction eventually drops the key.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from kafka.record import MemoryRecords, MemoryRecordsBuilder

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
GROUP_METADATA_VALUE_VERSION = 3


@dataclass(frozen=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupMetadataKey:
    group: str


OffsetsKey = OffsetCommitKey | GroupMetadataKey


@dataclass(frozen=True)
class OffsetCommitValue:
    offset: int
    metadata: str
    commit_timestamp: int
    leader_epoch: int = -1
    # Set only by OffsetCommit v2-v4 requests carrying retention_time_ms (value v1).
    expire_timestamp: int | None = None


@dataclass(frozen=True)
class StoredMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: tuple[StoredMember, ...] = field(default_factory=tuple)


class OffsetsRecordError(ValueError):
    """A `__consumer_offsets` record this codec cannot read."""


# -- primitive writer/reader ---------------------------------------------------------------


class _Writer:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def int16(self, v: int) -> None:
        self.parts.append(struct.pack(">h", v))

    def int32(self, v: int) -> None:
        self.parts.append(struct.pack(">i", v))

    def int64(self, v: int) -> None:
        self.parts.append(struct.pack(">q", v))

    def string(self, v: str | None) -> None:
        if v is None:
            self.int16(-1)
            return
        raw = v.encode("utf-8")
        self.int16(len(raw))
        self.parts.append(raw)

    def bytes_(self, v: bytes) -> None:
        self.int32(len(v))
        self.parts.append(bytes(v))

    def done(self) -> bytes:
        return b"".join(self.parts)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def _take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise OffsetsRecordError("record truncated")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def int16(self) -> int:
        return int(struct.unpack(">h", self._take(2))[0])

    def int32(self) -> int:
        return int(struct.unpack(">i", self._take(4))[0])

    def int64(self) -> int:
        return int(struct.unpack(">q", self._take(8))[0])

    def nullable_string(self) -> str | None:
        n = self.int16()
        if n < 0:
            return None
        return bytes(self._take(n)).decode("utf-8")

    def string(self) -> str:
        v = self.nullable_string()
        if v is None:
            raise OffsetsRecordError("null where a string is required")
        return v

    def bytes_(self) -> bytes:
        n = self.int32()
        return b"" if n < 0 else bytes(self._take(n))


# -- keys -------------------------------------------------------------------------------------


def encode_key(key: OffsetsKey) -> bytes:
    w = _Writer()
    if isinstance(key, OffsetCommitKey):
        w.int16(OFFSET_COMMIT_KEY_VERSION)
        w.string(key.group)
        w.string(key.topic)
        w.int32(key.partition)
    else:
        w.int16(GROUP_METADATA_KEY_VERSION)
        w.string(key.group)
    return w.done()


def decode_key(data: bytes) -> OffsetsKey:
    r = _Reader(data)
    version = r.int16()
    if version in (0, 1):
        return OffsetCommitKey(r.string(), r.string(), r.int32())
    if version == 2:
        return GroupMetadataKey(r.string())
    raise OffsetsRecordError(f"unknown __consumer_offsets key version {version}")


# -- offset commit values ---------------------------------------------------------------------


def encode_offset_commit_value(value: OffsetCommitValue) -> bytes:
    w = _Writer()
    if value.expire_timestamp is not None:
        w.int16(1)
        w.int64(value.offset)
        w.string(value.metadata)
        w.int64(value.commit_timestamp)
        w.int64(value.expire_timestamp)
    else:
        w.int16(3)
        w.int64(value.offset)
        w.int32(value.leader_epoch)
        w.string(value.metadata)
        w.int64(value.commit_timestamp)
    return w.done()


def decode_offset_commit_value(data: bytes) -> OffsetCommitValue:
    r = _Reader(data)
    version = r.int16()
    if version in (0, 2):
        return OffsetCommitValue(r.int64(), r.string(), r.int64())
    if version == 1:
        offset, metadata, committed = r.int64(), r.string(), r.int64()
        return OffsetCommitValue(offset, metadata, committed, expire_timestamp=r.int64())
    if version == 3:
        offset, epoch = r.int64(), r.int32()
        return OffsetCommitValue(offset, r.string(), r.int64(), leader_epoch=epoch)
    raise OffsetsRecordError(f"unsupported OffsetCommitValue version {version}")


# -- group metadata values --------------------------------------------------------------------


def encode_group_metadata_value(value: GroupMetadataValue) -> bytes:
    w = _Writer()
    w.int16(GROUP_METADATA_VALUE_VERSION)
    w.string(value.protocol_type)
    w.int32(value.generation)
    w.string(value.protocol)
    w.string(value.leader)
    w.int64(value.current_state_timestamp)
    w.int32(len(value.members))
    for m in value.members:
        w.string(m.member_id)
        w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        w.int32(m.rebalance_timeout_ms)
        w.int32(m.session_timeout_ms)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
    return w.done()


def decode_group_metadata_value(data: bytes) -> GroupMetadataValue:
    r = _Reader(data)
    version = r.int16()
    if not 0 <= version <= 3:
        raise OffsetsRecordError(f"unsupported GroupMetadataValue version {version}")
    protocol_type = r.string()
    generation = r.int32()
    protocol = r.nullable_string()
    leader = r.nullable_string()
    state_ts = r.int64() if version >= 2 else -1
    members = []
    for _ in range(r.int32()):
        member_id = r.string()
        instance_id = r.nullable_string() if version >= 3 else None
        client_id = r.string()
        client_host = r.string()
        session_timeout = r.int32() if version == 0 else -1
        rebalance_timeout = r.int32() if version >= 1 else session_timeout
        if version >= 1:
            session_timeout = r.int32()
        members.append(
            StoredMember(
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                r.bytes_(),
                r.bytes_(),
            )
        )
    return GroupMetadataValue(protocol_type, generation, protocol, leader, state_ts, tuple(members))


# -- consumer protocol ------------------------------------------------------------------------


def subscribed_topics(subscription: bytes) -> list[str] | None:
    """Topics of a "consumer" protocol subscription (ConsumerProtocolSubscription v0-v3).

    Every version starts with int16 version and the topics array; None if unreadable,
    in which case Kafka does not expire offsets by subscription either.
    """
    try:
        r = _Reader(subscription)
        r.int16()
        count = r.int32()
        if count < 0:
            return None
        return [r.string() for _ in range(count)]
    except (OffsetsRecordError, UnicodeDecodeError):
        return None


# -- records ----------------------------------------------------------------------------------

RawRecord = tuple[bytes, bytes | None]
"""(key, value) as stored in `__consumer_offsets`; value None is a tombstone."""


def offset_commit_record(
    group: str, topic: str, partition: int, value: OffsetCommitValue | None
) -> RawRecord:
    key = encode_key(OffsetCommitKey(group, topic, partition))
    return key, None if value is None else encode_offset_commit_value(value)


def group_metadata_record(group: str, value: GroupMetadataValue | None) -> RawRecord:
    key = encode_key(GroupMetadataKey(group))
    return key, None if value is None else encode_group_metadata_value(value)


DecodedRecord = tuple[OffsetsKey, OffsetCommitValue | GroupMetadataValue | None]


def decode_record(key: bytes, value: bytes | None) -> DecodedRecord:
    k = decode_key(key)
    if value is None:
        return k, None
    if isinstance(k, OffsetCommitKey):
        return k, decode_offset_commit_value(value)
    return k, decode_group_metadata_value(value)


# Control record key (Kafka's ControlRecordType): int16 version, int16 type.
_CONTROL_KEY = struct.Struct(">hh")
CONTROL_ABORT, CONTROL_COMMIT = 0, 1
NO_PRODUCER_ID = -1


@dataclass(frozen=True)
class OffsetsBatch:
    """One batch of `__consumer_offsets` as the loader needs it.

    `base_offset` orders commits (Kafka's appendedBatchOffset). A transactional batch
    holds a TxnOffsetCommit of `producer_id`, pending until a control batch of the same
    producer says `commit` (True) or abort (False); `marker` is None for data batches.
    """

    base_offset: int
    records: tuple[RawRecord, ...] = ()
    producer_id: int = NO_PRODUCER_ID
    transactional: bool = False
    marker: bool | None = None


def build_batch(
    records: Iterable[RawRecord],
    timestamp_ms: int,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
) -> bytes:
    """A v2 record batch (base offset 0) ready for the leader to append.

    With a producer id it is a transactional batch of that producer, as Kafka's
    storeOffsets writes a TxnOffsetCommit (base sequence 0: the leader appends it with
    the coordinator's origin, which checks the epoch but not sequences).
    """
    transactional = producer_id != NO_PRODUCER_ID
    builder = MemoryRecordsBuilder(
        magic=2,
        compression_type=0,
        batch_size=1 << 30,
        transactional=transactional,
        producer_id=producer_id,
        producer_epoch=producer_epoch if transactional else -1,
        base_sequence=0 if transactional else -1,
    )
    for key, value in records:
        builder.append(timestamp=timestamp_ms, key=key, value=value, headers=[])
    builder.close()
    return bytes(builder.buffer())


def control_marker(key: bytes | None) -> bool | None:
    """The control record key's marker: True = commit, False = abort, None = another
    control type (Kafka ignores those while loading)."""
    if key is None or len(key) < _CONTROL_KEY.size:
        return None
    _, kind = _CONTROL_KEY.unpack_from(key)
    if kind == CONTROL_COMMIT:
        return True
    if kind == CONTROL_ABORT:
        return False
    return None


def iter_batches(log_bytes: bytes) -> Iterator[OffsetsBatch]:
    """Every batch in a run of v2 batches, e.g. a partition read while loading."""
    batches = MemoryRecords(log_bytes)
    while batches.has_next():
        batch = batches.next_batch()
        if batch is None:
            break
        producer_id = int(batch.producer_id)
        transactional = bool(batch.is_transactional)
        if batch.is_control_batch:
            first = next(iter(batch), None)
            marker = control_marker(None if first is None else bytes(first.key))
            if marker is not None:
                yield OffsetsBatch(int(batch.base_offset), (), producer_id, transactional, marker)
            continue
        records = tuple(
            (bytes(r.key), None if r.value is None else bytes(r.value))
            for r in batch
            if r.key is not None
        )
        yield OffsetsBatch(int(batch.base_offset), records, producer_id, transactional)


def iter_records(log_bytes: bytes) -> Iterator[RawRecord]:
    """Every (key, value) of the data batches, ignoring transactions (tools, tests)."""
    for batch in iter_batches(log_bytes):
        yield from batch.records
