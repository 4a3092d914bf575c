"""Idempotent-producer state of one partition (Kafka's ProducerStateManager), pure.

For every producer id the partition remembers the producer epoch and the metadata of
the last `MAX_BATCHES_PER_PRODUCER` batches appended (first/last sequence, first/last
offset, max timestamp). The leader asks `check_append` before appending a produce batch
and calls `on_append` after; a follower (or a restarting broker) calls `on_append` for
every batch header it replays, without checks, as Kafka's replication origin does.

Rules (Kafka's ProducerAppendInfo + UnifiedLog.analyzeAndValidateProducerState):
- epoch lower than the producer's current epoch -> INVALID_PRODUCER_EPOCH (fenced);
- same epoch, and (first seq, last seq) equal to one of the cached batches -> duplicate,
  answered with NONE and the original batch's offsets (Kafka never sends
  DUPLICATE_SEQUENCE_NUMBER to a client that retried within the window);
- higher epoch: the sequence must restart at 0;
- same epoch: first seq must be last seq + 1, with 0 following Int.MAX (wraparound);
- a producer id the partition has never seen must start at sequence 0, otherwise
  UNKNOWN_PRODUCER_ID (its state was lost, e.g. expired). This is Kafka's pre-2.5
  rule; Kafka >= 2.5 accepts any sequence there. We keep the strict rule because it
  never accepts a batch whose predecessors are missing, and librdkafka and the Java
  client recover from it (epoch bump / sequence reset) when nothing is in flight.
- idempotent producers without a transactional id need no transaction coordinator:
  InitProducerId hands them a fresh producer id (sequence 0 is accepted as above), and
  the Java client bumps the epoch locally (KIP-360), which the "higher epoch restarts
  at 0" rule accepts.

Snapshot file (`<offset, 20 digits>.snapshot`, like Kafka's), all integers big-endian:
    magic "SLPS" | version int16 (=1) | crc32c uint32 of the rest | map_end_offset int64 |
    producer count int32 | per producer: producer_id int64, epoch int16,
    last_timestamp int64, batch count int8, per batch: first_seq int32, last_seq int32,
    first_offset int64, last_offset int64, timestamp int64
Unlike Kafka's (last batch only), the snapshot keeps all cached batches, so duplicates are
still recognised right after a restart.
"""

from __future__ import annotations

import json
import struct
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from crc32c import crc32c
from kio.schema.errors import ErrorCode

from strandline.errors import KafkaError

MAX_BATCHES_PER_PRODUCER = 5
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
INT32_MAX = 2**31 - 1
PRODUCER_ID_EXPIRATION_MS = 86_400_000  # producer.id.expiration.ms default

SNAPSHOT_MAGIC = b"SLPS"
SNAPSHOT_VERSION = 1
_PREFIX = struct.Struct(">4shI")
_BODY_HEAD = struct.Struct(">qi")
_PRODUCER = struct.Struct(">qhqb")
_BATCH = struct.Struct(">iiqqq")


def last_sequence(base_sequence: int, last_offset_delta: int) -> int:
    """Sequence of a batch's last record; sequences wrap from Int.MAX to 0."""
    if base_sequence > INT32_MAX - last_offset_delta:
        return base_sequence - (INT32_MAX - last_offset_delta) - 1
    return base_sequence + last_offset_delta


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


def snapshot_file_name(offset: int) -> str:
    return f"{offset:020d}.snapshot"


# -- check results ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Ok:
    error_code: ErrorCode = ErrorCode.none


@dataclass(frozen=True)
class Duplicate:
    """A retry of a batch already in the log: answer NONE with these offsets, append nothing."""

    first_offset: int
    last_offset: int
    timestamp_ms: int
    error_code: ErrorCode = ErrorCode.none


@dataclass(frozen=True)
class OutOfOrderSequence:
    expected_sequence: int
    received_sequence: int
    error_code: ErrorCode = ErrorCode.out_of_order_sequence_number


@dataclass(frozen=True)
class InvalidProducerEpoch:
    current_epoch: int
    received_epoch: int
    error_code: ErrorCode = ErrorCode.invalid_producer_epoch


@dataclass(frozen=True)
class UnknownProducerId:
    producer_id: int
    error_code: ErrorCode = ErrorCode.unknown_producer_id


OK = Ok()  # shared: the answer for nearly every batch

AppendCheck = Ok | Duplicate | OutOfOrderSequence | InvalidProducerEpoch | UnknownProducerId


# -- the same refusals as exceptions, for the produce path ------------------------------------


class OutOfOrderSequenceError(KafkaError):
    code = ErrorCode.out_of_order_sequence_number


class InvalidProducerEpochError(KafkaError):
    # Kafka >= 2.7 answers a produce from a fenced epoch with INVALID_PRODUCER_EPOCH, not
    # PRODUCER_FENCED: clients treat it as recoverable (epoch bump) instead of fatal.
    code = ErrorCode.invalid_producer_epoch


class UnknownProducerIdError(KafkaError):
    code = ErrorCode.unknown_producer_id


def raise_for_refusal(
    check: AppendCheck, producer_id: int, producer_epoch: int, where: str
) -> None:
    """Raise the KafkaError for a refused batch; return for Ok and Duplicate."""
    match check:
        case OutOfOrderSequence(expected, received):
            raise OutOfOrderSequenceError(
                f"{where}: out of order sequence number for producer {producer_id} "
                f"epoch {producer_epoch}: expected {expected}, received {received}"
            )
        case InvalidProducerEpoch(current, received):
            raise InvalidProducerEpochError(
                f"{where}: producer {producer_id} epoch {received} is older than the "
                f"current epoch {current} (fenced)"
            )
        case UnknownProducerId(pid):
            raise UnknownProducerIdError(
                f"{where}: producer {pid} has no state here and its batch does not start "
                f"at sequence 0"
            )


# -- state ------------------------------------------------------------------------------------


class BatchMetadata(NamedTuple):
    # A tuple, not a frozen dataclass: one is built per appended batch, on the hot path.
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp_ms: int


@dataclass
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=MAX_BATCHES_PER_PRODUCER)
    )
    last_timestamp_ms: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.producer_epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None


class BatchHeaderLike(Protocol):
    """What replay needs from a v2 batch header (strandline.protocol.record_batch.BatchHeader)."""

    @property
    def base_offset(self) -> int: ...
    @property
    def last_offset_delta(self) -> int: ...
    @property
    def max_timestamp(self) -> int: ...
    @property
    def producer_id(self) -> int: ...
    @property
    def producer_epoch(self) -> int: ...
    @property
    def base_sequence(self) -> int: ...
    @property
    def is_control(self) -> bool: ...


class SnapshotError(ValueError):
    """A producer-state snapshot that is torn, corrupt or of an unknown version."""


class ProducerStateManager:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerStateEntry] = {}
        # The next offset not yet reflected in this state (Kafka's mapEndOffset).
        self.map_end_offset = 0

    # -- leader side -------------------------------------------------------------------------

    def check_append(
        self, producer_id: int, epoch: int, base_seq: int, last_seq: int
    ) -> AppendCheck:
        if producer_id == NO_PRODUCER_ID:
            return OK  # not an idempotent producer
        entry = self.producers.get(producer_id)
        if entry is None:
            if base_seq != 0:
                return UnknownProducerId(producer_id)
            return OK
        if epoch < entry.producer_epoch:
            return InvalidProducerEpoch(entry.producer_epoch, epoch)
        duplicate = entry.find_duplicate(epoch, base_seq, last_seq)
        if duplicate is not None:
            return Duplicate(duplicate.first_offset, duplicate.last_offset, duplicate.timestamp_ms)
        if epoch != entry.producer_epoch:
            if base_seq != 0 and entry.producer_epoch != NO_PRODUCER_EPOCH:
                return OutOfOrderSequence(0, base_seq)
            return OK
        if entry.producer_epoch == NO_PRODUCER_EPOCH or in_sequence(entry.last_seq, base_seq):
            return OK
        return OutOfOrderSequence(last_sequence(entry.last_seq, 1), base_seq)

    # -- both sides --------------------------------------------------------------------------

    def on_append(
        self,
        producer_id: int,
        epoch: int,
        first_seq: int,
        last_seq: int,
        first_offset: int,
        last_offset: int,
        timestamp_ms: int,
    ) -> None:
        self.map_end_offset = max(self.map_end_offset, last_offset + 1)
        if producer_id == NO_PRODUCER_ID:
            return
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerStateEntry(producer_id)
        if epoch != entry.producer_epoch:
            entry.batches.clear()  # a new epoch starts its sequences afresh
            entry.producer_epoch = epoch
        entry.batches.append(
            BatchMetadata(first_seq, last_seq, first_offset, last_offset, timestamp_ms)
        )
        entry.last_timestamp_ms = max(entry.last_timestamp_ms, timestamp_ms)

    def on_batch(self, header: BatchHeaderLike) -> None:
        """Apply one appended/replicated batch by its header alone."""
        if header.is_control:
            # Transaction markers carry no sequence; only the offset moves on.
            self.map_end_offset = max(
                self.map_end_offset, header.base_offset + header.last_offset_delta + 1
            )
            return
        self.on_append(
            producer_id=header.producer_id,
            epoch=header.producer_epoch,
            first_seq=header.base_sequence,
            last_seq=last_sequence(header.base_sequence, header.last_offset_delta),
            first_offset=header.base_offset,
            last_offset=header.base_offset + header.last_offset_delta,
            timestamp_ms=header.max_timestamp,
        )

    def replay(self, headers: Iterable[BatchHeaderLike]) -> None:
        """Rebuild from batch headers read from the log (from the snapshot offset onwards)."""
        for header in headers:
            if header.base_offset + header.last_offset_delta < self.map_end_offset:
                continue  # already covered by the snapshot this state was loaded from
            self.on_batch(header)

    def truncate_to(self, offset: int) -> None:
        """Forget batches at or beyond `offset` (follower truncation, KIP-101/279).

        A producer whose cached batches all lie beyond `offset` is dropped: its next
        produce answers UNKNOWN_PRODUCER_ID unless it restarts at sequence 0. For an
        exact state, reload the newest snapshot at or below `offset` and `replay` the
        headers from there, as Kafka's truncateAndReload does.
        """
        for producer_id, entry in list(self.producers.items()):
            kept = [b for b in entry.batches if b.last_offset < offset]
            if not kept:
                del self.producers[producer_id]
                continue
            entry.batches.clear()
            entry.batches.extend(kept)
        self.map_end_offset = min(self.map_end_offset, offset)

    def remove_expired_producers(
        self, now_ms: int, expiration_ms: int = PRODUCER_ID_EXPIRATION_MS
    ) -> list[int]:
        """Drop producers idle longer than `producer.id.expiration.ms`; returns their ids."""
        expired = [
            pid
            for pid, entry in self.producers.items()
            if now_ms - entry.last_timestamp_ms >= expiration_ms
        ]
        for pid in expired:
            del self.producers[pid]
        return expired

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def staged(self, producer_ids: Iterable[int]) -> ProducerStateManager:
        """A scratch copy of these producers' entries, to check a multi-batch append
        batch by batch without touching this state until the append succeeded."""
        scratch = ProducerStateManager()
        scratch.map_end_offset = self.map_end_offset
        for pid in producer_ids:
            entry = self.producers.get(pid)
            if entry is not None:
                scratch.producers[pid] = ProducerStateEntry(
                    pid,
                    entry.producer_epoch,
                    deque(entry.batches, maxlen=MAX_BATCHES_PER_PRODUCER),
                    entry.last_timestamp_ms,
                )
        return scratch

    # -- snapshot ----------------------------------------------------------------------------

    def to_snapshot(self) -> bytes:
        parts = [_BODY_HEAD.pack(self.map_end_offset, len(self.producers))]
        for entry in self.producers.values():
            parts.append(
                _PRODUCER.pack(
                    entry.producer_id,
                    entry.producer_epoch,
                    entry.last_timestamp_ms,
                    len(entry.batches),
                )
            )
            parts.extend(
                _BATCH.pack(b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp_ms)
                for b in entry.batches
            )
        body = b"".join(parts)
        return _PREFIX.pack(SNAPSHOT_MAGIC, SNAPSHOT_VERSION, crc32c(body)) + body

    @classmethod
    def from_snapshot(cls, data: bytes) -> ProducerStateManager:
        if len(data) < _PREFIX.size + _BODY_HEAD.size:
            raise SnapshotError("producer-state snapshot is truncated")
        magic, version, crc = _PREFIX.unpack_from(data, 0)
        if magic != SNAPSHOT_MAGIC:
            raise SnapshotError("not a producer-state snapshot")
        if version != SNAPSHOT_VERSION:
            raise SnapshotError(f"unknown producer-state snapshot version {version}")
        body = memoryview(data)[_PREFIX.size :]
        if crc32c(body) != crc:
            raise SnapshotError("producer-state snapshot CRC mismatch")
        state = cls()
        try:
            state.map_end_offset, count = _BODY_HEAD.unpack_from(body, 0)
            pos = _BODY_HEAD.size
            for _ in range(count):
                pid, epoch, last_ts, n_batches = _PRODUCER.unpack_from(body, pos)
                pos += _PRODUCER.size
                entry = ProducerStateEntry(pid, epoch, last_timestamp_ms=last_ts)
                for _ in range(n_batches):
                    entry.batches.append(BatchMetadata(*_BATCH.unpack_from(body, pos)))
                    pos += _BATCH.size
                state.producers[pid] = entry
        except struct.error as exc:
            raise SnapshotError(f"producer-state snapshot is truncated: {exc}") from exc
        if pos != len(body):
            raise SnapshotError("trailing bytes after producer-state snapshot")
        return state


# -- producer id blocks (InitProducerId) ------------------------------------------------------

PRODUCER_ID_BLOCK_SIZE = 1000
LATEST_PRODUCER_ID_BLOCK_ZNODE = "/latest_producer_id_block"


@dataclass(frozen=True)
class ProducerIdBlock:
    broker_id: int
    first_id: int
    size: int = PRODUCER_ID_BLOCK_SIZE

    @property
    def last_id(self) -> int:
        return self.first_id + self.size - 1


def producer_id_block(latest: ProducerIdBlock | None, broker_id: int) -> ProducerIdBlock:
    """The block to claim after `latest` (None: the znode does not exist yet).

    The shell writes it to `/latest_producer_id_block` with a conditional (zkVersion)
    set, retrying with the new latest block if another broker won the race.
    """
    first = 0 if latest is None else latest.last_id + 1
    if first + PRODUCER_ID_BLOCK_SIZE - 1 > 2**63 - 1:
        raise OverflowError("producer ids exhausted")
    return ProducerIdBlock(broker_id, first)


def encode_producer_id_block(block: ProducerIdBlock) -> bytes:
    """The znode payload Kafka writes (ProducerIdBlockZNode): ids as decimal strings."""
    return json.dumps(
        {
            "version": 1,
            "broker": block.broker_id,
            "block_start": str(block.first_id),
            "block_end": str(block.last_id),
        }
    ).encode()


def decode_producer_id_block(data: bytes) -> ProducerIdBlock:
    doc = json.loads(data)
    first, last = int(doc["block_start"]), int(doc["block_end"])
    return ProducerIdBlock(int(doc["broker"]), first, last - first + 1)


class ProducerIdAllocator:
    """Hands out producer ids from the broker's current block."""

    def __init__(self, block: ProducerIdBlock | None = None) -> None:
        self.block = block
        self._next = block.first_id if block is not None else 0

    def install(self, block: ProducerIdBlock) -> None:
        self.block = block
        self._next = block.first_id

    def allocate(self) -> int | None:
        """The next id, or None when the shell must claim a new block first."""
        if self.block is None or self._next > self.block.last_id:
            return None
        pid = self._next
        self._next += 1
        return pid
