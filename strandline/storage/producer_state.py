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
- a non-transactional batch from a producer whose transaction on this partition is open
  -> INVALID_TXN_STATE (Kafka's "Expected transactional write").

Transactions (KIP-98, Kafka's ProducerStateManager): a transactional batch opens a
transaction for its producer on this partition (its first offset is remembered) unless one
is open already; a marker (control batch) closes it and yields a `CompletedTxn`. A closed
transaction stays *unreplicated* until the high watermark passes its marker, so that a
read_committed consumer never reads a transaction whose outcome a new leader might not
know. The first unstable offset is the lowest first offset of the open and unreplicated
transactions, and the last stable offset (LSO) is min(high watermark, first unstable
offset). Each producer also remembers the coordinator epoch of its last marker, to fence
markers from an older transaction coordinator.

Snapshot file (`<offset, 20 digits>.snapshot`, like Kafka's), all integers big-endian:
    magic "SLPS" | version int16 (=2) | crc32c uint32 of the rest | map_end_offset int64 |
    producer count int32 | per producer: producer_id int64, epoch int16,
    last_timestamp int64, coordinator_epoch int32, current_txn_first_offset int64 (-1: none),
    batch count int8, per batch: first_seq int32, last_seq int32, first_offset int64,
    last_offset int64, timestamp int64 |
    unreplicated txn count int32 | per txn: producer_id int64, first_offset int64,
    last_offset int64
Version 1 (no coordinator epoch, open or unreplicated transactions) is still read.
Unlike Kafka's (last batch only), the snapshot keeps all cached batches, so duplicates are
still recognised right after a restart.
"""

from __future__ import annotations

import json
import struct
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from crc32c import crc32c
from kio.schema.errors import ErrorCode

from strandline.errors import KafkaError
from strandline.protocol.control_batch import EndTransactionMarker

MAX_BATCHES_PER_PRODUCER = 5
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
INT32_MAX = 2**31 - 1
PRODUCER_ID_EXPIRATION_MS = 86_400_000  # producer.id.expiration.ms default

SNAPSHOT_MAGIC = b"SLPS"
NO_COORDINATOR_EPOCH = -1
NO_OFFSET = -1
SNAPSHOT_VERSION = 2
_PREFIX = struct.Struct(">4shI")
_BODY_HEAD = struct.Struct(">qi")
_PRODUCER_V1 = struct.Struct(">qhqb")
_PRODUCER = struct.Struct(">qhqiqb")
_BATCH = struct.Struct(">iiqqq")
_COUNT = struct.Struct(">i")
_TXN = struct.Struct(">qqq")


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


@dataclass(frozen=True)
class InvalidTxnState:
    """A non-transactional batch from a producer whose transaction here is still open."""

    producer_id: int
    txn_first_offset: int
    error_code: ErrorCode = ErrorCode.invalid_txn_state


@dataclass(frozen=True)
class CoordinatorFenced:
    """A marker from an older transaction coordinator than the last one seen here."""

    producer_id: int
    current_coordinator_epoch: int
    received_coordinator_epoch: int
    error_code: ErrorCode = ErrorCode.transaction_coordinator_fenced


OK = Ok()  # shared: the answer for nearly every batch

AppendCheck = (
    Ok
    | Duplicate
    | OutOfOrderSequence
    | InvalidProducerEpoch
    | UnknownProducerId
    | InvalidTxnState
    | CoordinatorFenced
)


# -- the same refusals as exceptions, for the produce path ------------------------------------


class OutOfOrderSequenceError(KafkaError):
    code = ErrorCode.out_of_order_sequence_number


class InvalidProducerEpochError(KafkaError):
    # Kafka >= 2.7 answers a produce from a fenced epoch with INVALID_PRODUCER_EPOCH, not
    # PRODUCER_FENCED: clients treat it as recoverable (epoch bump) instead of fatal.
    code = ErrorCode.invalid_producer_epoch


class UnknownProducerIdError(KafkaError):
    code = ErrorCode.unknown_producer_id


class InvalidTxnStateError(KafkaError):
    code = ErrorCode.invalid_txn_state


class TransactionCoordinatorFencedError(KafkaError):
    code = ErrorCode.transaction_coordinator_fenced


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
        case InvalidTxnState(pid, first_offset):
            raise InvalidTxnStateError(
                f"{where}: producer {pid} sent a non-transactional batch while its "
                f"transaction from offset {first_offset} is open"
            )
        case CoordinatorFenced(pid, current, received):
            raise TransactionCoordinatorFencedError(
                f"{where}: marker for producer {pid} from coordinator epoch {received}, "
                f"older than {current}"
            )


# -- state ------------------------------------------------------------------------------------


class BatchMetadata(NamedTuple):
    # A tuple, not a frozen dataclass: one is built per appended batch, on the hot path.
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp_ms: int


class CompletedTxn(NamedTuple):
    """A transaction a marker closed (Kafka's CompletedTxn, plus the LSO after it)."""

    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    is_aborted: bool
    # The LSO right after the marker, ignoring the HW: the next open transaction's first
    # offset, else the marker's offset + 1 (the txn index entry's lastStableOffset).
    last_stable_offset: int


class TxnRange(NamedTuple):
    """A closed transaction whose marker the high watermark has not passed yet."""

    producer_id: int
    first_offset: int
    last_offset: int


@dataclass
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=MAX_BATCHES_PER_PRODUCER)
    )
    last_timestamp_ms: int = -1
    coordinator_epoch: int = NO_COORDINATOR_EPOCH
    current_txn_first_offset: int = NO_OFFSET  # NO_OFFSET: no transaction open here

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
    @property
    def is_transactional(self) -> bool: ...


class SnapshotError(ValueError):
    """A producer-state snapshot that is torn, corrupt or of an unknown version."""


class ProducerStateManager:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerStateEntry] = {}
        # The next offset not yet reflected in this state (Kafka's mapEndOffset).
        self.map_end_offset = 0
        # producer id -> first offset of its open transaction. Transactions open in
        # offset order, so the dict's insertion order is first-offset order and its first
        # value is the lowest (Kafka keeps a TreeMap by first offset).
        self.ongoing_txns: dict[int, int] = {}
        # Closed transactions whose marker is not below the HW yet (Kafka's unreplicatedTxns).
        self.unreplicated_txns: list[TxnRange] = []

    # -- leader side -------------------------------------------------------------------------

    def check_append(
        self,
        producer_id: int,
        epoch: int,
        base_seq: int,
        last_seq: int,
        is_transactional: bool = False,
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
        elif entry.producer_epoch != NO_PRODUCER_EPOCH and not in_sequence(
            entry.last_seq, base_seq
        ):
            return OutOfOrderSequence(last_sequence(entry.last_seq, 1), base_seq)
        if not is_transactional and entry.current_txn_first_offset != NO_OFFSET:
            # Kafka's "Expected transactional write from producer": the open transaction
            # must be ended by its marker first.
            return InvalidTxnState(producer_id, entry.current_txn_first_offset)
        return OK

    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int) -> AppendCheck:
        """May the transaction coordinator append this producer's marker (Kafka's
        appendEndTxnMarker checks, coordinator origin)?"""
        entry = self.producers.get(producer_id)
        if entry is None:
            return OK
        if epoch < entry.producer_epoch:
            return InvalidProducerEpoch(entry.producer_epoch, epoch)
        if coordinator_epoch < entry.coordinator_epoch:
            return CoordinatorFenced(producer_id, entry.coordinator_epoch, coordinator_epoch)
        return OK

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
        is_transactional: bool = False,
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
        if is_transactional and entry.current_txn_first_offset == NO_OFFSET:
            entry.current_txn_first_offset = first_offset
            self.ongoing_txns[producer_id] = first_offset

    def on_marker(
        self,
        producer_id: int,
        epoch: int,
        offset: int,
        commit: bool,
        coordinator_epoch: int,
        timestamp_ms: int,
    ) -> CompletedTxn | None:
        """A marker at `offset` ends the producer's transaction; returns it, or None when
        none was open (an empty transaction, or a marker retried): such a marker changes
        neither the LSO nor the txn index, as in Kafka."""
        self.map_end_offset = max(self.map_end_offset, offset + 1)
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerStateEntry(producer_id)
        completed = None
        first = entry.current_txn_first_offset
        if first != NO_OFFSET:
            completed = CompletedTxn(
                producer_id, first, offset, not commit, self._stable_after(producer_id, offset)
            )
            entry.current_txn_first_offset = NO_OFFSET
            self.ongoing_txns.pop(producer_id, None)
            self.unreplicated_txns.append(TxnRange(producer_id, first, offset))
        if epoch != entry.producer_epoch:
            # The coordinator bumps the epoch when it aborts on timeout or fencing.
            entry.batches.clear()
            entry.producer_epoch = epoch
        entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp_ms = max(entry.last_timestamp_ms, timestamp_ms)
        return completed

    def _stable_after(self, producer_id: int, marker_offset: int) -> int:
        for pid, first in self.ongoing_txns.items():
            if pid != producer_id:
                return first
        return marker_offset + 1

    def on_batch(
        self, header: BatchHeaderLike, marker: EndTransactionMarker | None = None
    ) -> CompletedTxn | None:
        """Apply one appended/replicated batch by its header (and, for a control batch,
        its marker; None: a control record that is not a marker, which only moves the
        offset on)."""
        if header.is_control:
            if marker is None:
                self.map_end_offset = max(
                    self.map_end_offset, header.base_offset + header.last_offset_delta + 1
                )
                return None
            return self.on_marker(
                header.producer_id,
                header.producer_epoch,
                header.base_offset,
                marker.commit,
                marker.coordinator_epoch,
                header.max_timestamp,
            )
        self.on_append(
            producer_id=header.producer_id,
            epoch=header.producer_epoch,
            first_seq=header.base_sequence,
            last_seq=last_sequence(header.base_sequence, header.last_offset_delta),
            first_offset=header.base_offset,
            last_offset=header.base_offset + header.last_offset_delta,
            timestamp_ms=header.max_timestamp,
            is_transactional=header.is_transactional,
        )
        return None

    def replay(
        self,
        headers: Iterable[BatchHeaderLike],
        marker_of: Callable[[Any], EndTransactionMarker | None] | None = None,
    ) -> list[CompletedTxn]:
        """Rebuild from batch headers read from the log (from the snapshot offset onwards);
        `marker_of(header)` reads a control batch's marker. Returns the transactions the
        replayed markers closed."""
        completed = []
        for header in headers:
            if header.base_offset + header.last_offset_delta < self.map_end_offset:
                continue  # already covered by the snapshot this state was loaded from
            marker = marker_of(header) if header.is_control and marker_of is not None else None
            txn = self.on_batch(header, marker)
            if txn is not None:
                completed.append(txn)
        return completed

    # -- transactions ------------------------------------------------------------------------

    @property
    def has_transactions(self) -> bool:
        """Whether any transaction is open or not yet replicated (else the LSO is the HW)."""
        return bool(self.ongoing_txns or self.unreplicated_txns)

    def on_high_watermark(self, high_watermark: int) -> None:
        """Closed transactions whose marker is below the HW are stable now."""
        if self.unreplicated_txns:
            self.unreplicated_txns = [
                t for t in self.unreplicated_txns if t.last_offset >= high_watermark
            ]

    def first_unstable_offset(self) -> int | None:
        first = next(iter(self.ongoing_txns.values()), None)
        for txn in self.unreplicated_txns:
            if first is None or txn.first_offset < first:
                first = txn.first_offset
        return first

    def last_stable_offset(self, high_watermark: int) -> int:
        """min(high watermark, first unstable offset), Kafka's UnifiedLog.lastStableOffset."""
        if not self.ongoing_txns and not self.unreplicated_txns:
            return high_watermark
        self.on_high_watermark(high_watermark)
        first = self.first_unstable_offset()
        return high_watermark if first is None or first >= high_watermark else first

    # -- maintenance -------------------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Forget batches at or beyond `offset` (follower truncation, KIP-101/279).

        A producer whose cached batches all lie beyond `offset` is dropped: its next
        produce answers UNKNOWN_PRODUCER_ID unless it restarts at sequence 0. A
        transaction that began beyond `offset` is forgotten; one whose marker lies beyond
        it is open again. For an exact state, reload the newest snapshot at or below
        `offset` and `replay` the headers from there, as Kafka's truncateAndReload does
        (and as the Log does).
        """
        reopened = [t for t in self.unreplicated_txns if t.last_offset >= offset]
        self.unreplicated_txns = [t for t in self.unreplicated_txns if t.last_offset < offset]
        for txn in reopened:
            if txn.first_offset < offset and txn.producer_id in self.producers:
                self.producers[txn.producer_id].current_txn_first_offset = txn.first_offset
        for producer_id, entry in list(self.producers.items()):
            if entry.current_txn_first_offset >= offset:
                entry.current_txn_first_offset = NO_OFFSET
            kept = [b for b in entry.batches if b.last_offset < offset]
            if not kept and entry.current_txn_first_offset == NO_OFFSET:
                del self.producers[producer_id]
                continue
            entry.batches.clear()
            entry.batches.extend(kept)
        self._rebuild_ongoing()
        self.map_end_offset = min(self.map_end_offset, offset)

    def _rebuild_ongoing(self) -> None:
        self.ongoing_txns = dict(
            sorted(
                (
                    (pid, e.current_txn_first_offset)
                    for pid, e in self.producers.items()
                    if e.current_txn_first_offset != NO_OFFSET
                ),
                key=lambda item: item[1],
            )
        )

    def remove_expired_producers(
        self, now_ms: int, expiration_ms: int = PRODUCER_ID_EXPIRATION_MS
    ) -> list[int]:
        """Drop producers idle longer than `producer.id.expiration.ms`; returns their ids.
        A producer with an open transaction never expires (Kafka's isProducerExpired)."""
        expired = [
            pid
            for pid, entry in self.producers.items()
            if now_ms - entry.last_timestamp_ms >= expiration_ms
            and entry.current_txn_first_offset == NO_OFFSET
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
                    entry.coordinator_epoch,
                    entry.current_txn_first_offset,
                )
                if entry.current_txn_first_offset != NO_OFFSET:
                    scratch.ongoing_txns[pid] = entry.current_txn_first_offset
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
                    entry.coordinator_epoch,
                    entry.current_txn_first_offset,
                    len(entry.batches),
                )
            )
            parts.extend(
                _BATCH.pack(b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp_ms)
                for b in entry.batches
            )
        parts.append(_COUNT.pack(len(self.unreplicated_txns)))
        parts.extend(_TXN.pack(*t) for t in self.unreplicated_txns)
        body = b"".join(parts)
        return _PREFIX.pack(SNAPSHOT_MAGIC, SNAPSHOT_VERSION, crc32c(body)) + body

    @classmethod
    def from_snapshot(cls, data: bytes) -> ProducerStateManager:
        if len(data) < _PREFIX.size + _BODY_HEAD.size:
            raise SnapshotError("producer-state snapshot is truncated")
        magic, version, crc = _PREFIX.unpack_from(data, 0)
        if magic != SNAPSHOT_MAGIC:
            raise SnapshotError("not a producer-state snapshot")
        if version not in (1, SNAPSHOT_VERSION):
            raise SnapshotError(f"unknown producer-state snapshot version {version}")
        body = memoryview(data)[_PREFIX.size :]
        if crc32c(body) != crc:
            raise SnapshotError("producer-state snapshot CRC mismatch")
        state = cls()
        try:
            state.map_end_offset, count = _BODY_HEAD.unpack_from(body, 0)
            pos = _BODY_HEAD.size
            for _ in range(count):
                if version == 1:
                    pid, epoch, last_ts, n_batches = _PRODUCER_V1.unpack_from(body, pos)
                    pos += _PRODUCER_V1.size
                    entry = ProducerStateEntry(pid, epoch, last_timestamp_ms=last_ts)
                else:
                    pid, epoch, last_ts, coord_epoch, txn_first, n_batches = _PRODUCER.unpack_from(
                        body, pos
                    )
                    pos += _PRODUCER.size
                    entry = ProducerStateEntry(
                        pid,
                        epoch,
                        last_timestamp_ms=last_ts,
                        coordinator_epoch=coord_epoch,
                        current_txn_first_offset=txn_first,
                    )
                for _ in range(n_batches):
                    entry.batches.append(BatchMetadata(*_BATCH.unpack_from(body, pos)))
                    pos += _BATCH.size
                state.producers[pid] = entry
            if version >= 2:
                (n_txns,) = _COUNT.unpack_from(body, pos)
                pos += _COUNT.size
                for _ in range(n_txns):
                    state.unreplicated_txns.append(TxnRange(*_TXN.unpack_from(body, pos)))
                    pos += _TXN.size
        except struct.error as exc:
            raise SnapshotError(f"producer-state snapshot is truncated: {exc}") from exc
        if pos != len(body):
            raise SnapshotError("trailing bytes after producer-state snapshot")
        state._rebuild_ongoing()
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
