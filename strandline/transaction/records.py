"""`__transaction_state` record keys and values, byte for byte as Kafka's TransactionLog
writes them (TransactionLogKey.json / TransactionLogValue.json), so Kafka's tools read a
Strandline log and the other way round.

Key   v0: int16 version | string transactional_id
Value v0: int16 version | int64 producer_id | int16 producer_epoch | int32 timeout_ms |
          int8 state | [topic string, [int32 partition]] partitions (null when Empty) |
          int64 last_update_timestamp_ms | int64 start_timestamp_ms
Value v1 is the same fields in the flexible encoding (compact strings and arrays, tagged
fields); Kafka 3.x still writes v0, and so do we, but both are read.
A null value is a tombstone: the transactional id expired.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from strandline.types import TopicPartition

KEY_VERSION = 0
VALUE_VERSION = 0


class TxnLogRecordError(ValueError):
    """A `__transaction_state` record this codec cannot read."""


@dataclass(frozen=True)
class TxnLogValue:
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state_id: int  # TxnState.id
    partitions: frozenset[TopicPartition]
    last_update_timestamp_ms: int
    start_timestamp_ms: int


# -- writing ------------------------------------------------------------------------------


def _string(text: str) -> bytes:
    raw = text.encode("utf-8")
    return struct.pack(">h", len(raw)) + raw


def encode_key(transactional_id: str) -> bytes:
    return struct.pack(">h", KEY_VERSION) + _string(transactional_id)


def encode_value(value: TxnLogValue, empty_state_id: int = 0) -> bytes:
    parts = [
        struct.pack(
            ">hqhib",
            VALUE_VERSION,
            value.producer_id,
            value.producer_epoch,
            value.timeout_ms,
            value.state_id,
        )
    ]
    if value.state_id == empty_state_id:
        # Kafka writes a null partition array for Empty (and refuses partitions there).
        if value.partitions:
            raise ValueError("an Empty transaction has no partitions")
        parts.append(struct.pack(">i", -1))
    else:
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(value.partitions):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        parts.append(struct.pack(">i", len(by_topic)))
        for topic, partitions in by_topic.items():
            parts.append(_string(topic))
            parts.append(struct.pack(f">i{len(partitions)}i", len(partitions), *partitions))
    parts.append(struct.pack(">qq", value.last_update_timestamp_ms, value.start_timestamp_ms))
    return b"".join(parts)


# -- reading ------------------------------------------------------------------------------


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise TxnLogRecordError("record truncated")
        chunk = bytes(self.data[self.pos : self.pos + n])
        self.pos += n
        return chunk

    def unpack(self, fmt: str) -> int:
        size = struct.calcsize(fmt)
        return int(struct.unpack(fmt, self.take(size))[0])

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            byte = self.take(1)[0]
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7
            if shift > 28:
                raise TxnLogRecordError("varint too long")

    def string(self, flexible: bool) -> str:
        n = self.uvarint() - 1 if flexible else self.unpack(">h")
        if n < 0:
            raise TxnLogRecordError("null where a string is required")
        return self.take(n).decode("utf-8")

    def array_len(self, flexible: bool) -> int:
        return self.uvarint() - 1 if flexible else self.unpack(">i")

    def skip_tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self.take(self.uvarint())


def decode_key(data: bytes) -> str:
    """The transactional id of a key; TxnLogRecordError for versions Kafka does not know."""
    r = _Reader(data)
    version = r.unpack(">h")
    if version != 0:
        raise TxnLogRecordError(f"unknown __transaction_state key version {version}")
    return r.string(flexible=False)


def decode_value(data: bytes) -> TxnLogValue:
    r = _Reader(data)
    version = r.unpack(">h")
    if version not in (0, 1):
        raise TxnLogRecordError(f"unknown __transaction_state value version {version}")
    flexible = version >= 1
    producer_id = r.unpack(">q")
    producer_epoch = r.unpack(">h")
    timeout_ms = r.unpack(">i")
    state_id = r.unpack(">b")
    partitions: set[TopicPartition] = set()
    count = r.array_len(flexible)
    for _ in range(max(count, 0)):
        topic = r.string(flexible)
        for _ in range(max(r.array_len(flexible), 0)):
            partitions.add(TopicPartition(topic, r.unpack(">i")))
        if flexible:
            r.skip_tagged_fields()
    last_update = r.unpack(">q")
    start = r.unpack(">q")
    if flexible:
        r.skip_tagged_fields()
    return TxnLogValue(
        producer_id, producer_epoch, timeout_ms, state_id, frozenset(partitions), last_update, start
    )
