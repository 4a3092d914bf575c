"""The producer state of a log (idempotence and transactions, KIP-98), as Kafka's
UnifiedLog keeps it around its ProducerStateManager (`producer_state.py`, pure).

- Before a leader append, `check_producers` checks every idempotent or transactional
  batch and every transaction marker (Kafka's analyzeAndValidateProducerState).
- After an append, `record_producers` (leader) and `record_replicated_producers`
  (follower, no checks: the leader made them) update the state from the batch headers;
  markers go to the Log's `apply_marker`, which also indexes aborted transactions.
- `ProducerSnapshots` keeps the `<offset>.snapshot` files (offset = the log end offset
  a snapshot covers), taken on every roll and on close; `load_producer_state` rebuilds
  the state from the newest usable one plus the batch headers after it (on open and
  after truncation).
"""

from __future__ import annotations

import enum
import logging
import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path

from strandline.errors import InvalidRecordError
from strandline.protocol.control_batch import EndTransactionMarker, read_marker
from strandline.protocol.record_batch import CONTROL_MASK, TRANSACTIONAL_MASK, BatchHeader
from strandline.storage.atomic_file import write_bytes_atomically
from strandline.storage.producer_state import (
    NO_PRODUCER_ID,
    OK,
    AppendCheck,
    CompletedTxn,
    Duplicate,
    InvalidProducerEpoch,
    ProducerStateManager,
    SnapshotError,
    last_sequence,
    raise_for_refusal,
    snapshot_file_name,
)
from strandline.storage.segment import LogSegment
from strandline.storage.txn_index import AbortedTxn
from strandline.types import TopicPartition

# The Log's logger: these messages are about one partition's log, as before the split.
logger = logging.getLogger("strandline.storage.log")

SNAPSHOT_FILE = re.compile(r"^(\d{20})\.snapshot$")

Data = bytes | bytearray | memoryview
# (position in the payload, base offset, size, last offset, max timestamp) per batch.
PlannedBatch = tuple[int, int, int, int, int]
# The Log's: complete the transaction a marker just appended ends (header, its offset,
# the payload holding it, the append's first offset).
ApplyMarker = Callable[[BatchHeader, int, Data, int], None]


class AppendOrigin(enum.Enum):
    """Who asks for a leader append (Kafka's AppendOrigin): only the transaction
    coordinator may write control batches (transaction markers)."""

    CLIENT = "client"
    COORDINATOR = "coordinator"


def check_producers(
    state: ProducerStateManager,
    headers: list[BatchHeader],
    planned: list[PlannedBatch],
    records: Data,
    origin: AppendOrigin,
    tp: TopicPartition,
) -> Duplicate | None:
    """Check every idempotent batch before anything is written (Kafka's
    analyzeAndValidateProducerState); raise for a refused one. A payload holding a
    duplicate is answered as that duplicate, as Kafka does."""
    idempotent = [
        i
        for i, h in enumerate(headers)
        if h.producer_id != NO_PRODUCER_ID or h.attributes & CONTROL_MASK
    ]
    if not idempotent:
        return None
    # Later batches of one payload must see the earlier ones: check against a copy.
    live = state
    if len(idempotent) > 1:
        state = state.staged({headers[i].producer_id for i in idempotent})
    for i in idempotent:
        header = headers[i]
        attributes = header.attributes
        if attributes & CONTROL_MASK:
            check_marker(live, header, records, origin, tp)
            continue
        _, first_offset, _, last_offset, max_timestamp = planned[i]
        last_seq = last_sequence(header.base_sequence, header.last_offset_delta)
        transactional = attributes & TRANSACTIONAL_MASK != 0
        if origin is AppendOrigin.CLIENT:
            check: AppendCheck = state.check_append(
                header.producer_id,
                header.producer_epoch,
                header.base_sequence,
                last_seq,
                transactional,
            )
        else:
            # Kafka's maybeValidateDataBatch: a coordinator's batch (TxnOffsetCommit's)
            # has its epoch checked, never its sequences (each starts again at 0), and
            # is never taken for a duplicate.
            known = state.producers.get(header.producer_id)
            check = (
                InvalidProducerEpoch(known.producer_epoch, header.producer_epoch)
                if known is not None and header.producer_epoch < known.producer_epoch
                else OK
            )
        if check is not OK:  # the shared OK answers nearly every batch: no matching
            if isinstance(check, Duplicate):
                return check
            raise_for_refusal(check, header.producer_id, header.producer_epoch, str(tp))
        if state is not live:
            state.on_append(
                header.producer_id,
                header.producer_epoch,
                header.base_sequence,
                last_seq,
                first_offset,
                last_offset,
                max_timestamp,
                transactional,
            )
    return None


def check_marker(
    state: ProducerStateManager,
    header: BatchHeader,
    records: Data,
    origin: AppendOrigin,
    tp: TopicPartition,
) -> None:
    if origin is not AppendOrigin.COORDINATOR:
        raise InvalidRecordError(f"{tp}: clients may not write control batches")
    if header.producer_id == NO_PRODUCER_ID:
        raise InvalidRecordError(f"{tp}: a transaction marker needs a producer id")
    marker = read_marker(records, header)
    check = state.check_marker(header.producer_id, header.producer_epoch, marker.coordinator_epoch)
    raise_for_refusal(check, header.producer_id, header.producer_epoch, str(tp))


def record_producers(
    state: ProducerStateManager,
    headers: list[BatchHeader],
    appended: list[PlannedBatch],
    buf: bytearray,
    log_end_offset: int,
    apply_marker: ApplyMarker,
) -> None:
    """Update the state from batches the leader just appended (`appended`: where each
    went), after `check_producers` accepted them."""
    for header, (_, first_offset, _, last_offset, max_timestamp) in zip(
        headers, appended, strict=True
    ):
        if header.producer_id != NO_PRODUCER_ID:
            attributes = header.attributes
            if attributes & CONTROL_MASK:
                apply_marker(header, first_offset, buf, appended[0][1])
                continue
            state.on_append(
                header.producer_id,
                header.producer_epoch,
                header.base_sequence,
                last_sequence(header.base_sequence, header.last_offset_delta),
                first_offset,
                last_offset,
                max_timestamp,
                attributes & TRANSACTIONAL_MASK != 0,
            )
    state.map_end_offset = log_end_offset


def record_replicated_producers(
    state: ProducerStateManager,
    headers: list[BatchHeader],
    records: Data,
    apply_marker: ApplyMarker,
) -> None:
    """Update the state from batches a follower just appended. Replication origin: the
    leader already checked the sequences."""
    for header in headers:
        attributes = header.attributes
        if attributes & CONTROL_MASK:
            # Complete the transaction (and index an abort) in offset order.
            apply_marker(header, header.base_offset, records, headers[0].base_offset)
        elif header.producer_id != NO_PRODUCER_ID:
            # ProducerStateManager.on_batch, inlined: this runs for every replicated batch.
            base_offset, delta, base_seq = (
                header.base_offset,
                header.last_offset_delta,
                header.base_sequence,
            )
            state.on_append(
                header.producer_id,
                header.producer_epoch,
                base_seq,
                last_sequence(base_seq, delta),
                base_offset,
                base_offset + delta,
                header.max_timestamp,
                attributes & TRANSACTIONAL_MASK != 0,
            )
    state.map_end_offset = max(state.map_end_offset, headers[-1].next_offset)


def aborted_txn(txn: CompletedTxn) -> AbortedTxn:
    """The txn index entry of an aborted transaction."""
    return AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, txn.last_stable_offset)


class ProducerSnapshots:
    """The `<offset>.snapshot` files of one log dir (Kafka's ProducerStateManager
    snapshot handling): written atomically, named by the log end offset they cover."""

    __slots__ = ("dir",)

    def __init__(self, directory: Path) -> None:
        self.dir = directory

    def offsets(self) -> list[int]:
        offsets = []
        for name in os.listdir(self.dir):
            match = SNAPSHOT_FILE.match(name)
            if match:
                offsets.append(int(match.group(1)))
        return sorted(offsets)

    def path(self, offset: int) -> Path:
        return self.dir / snapshot_file_name(offset)

    def take(self, state: ProducerStateManager, log_end_offset: int) -> None:
        """Write the state as `<log end offset>.snapshot` (atomically), Kafka's takeSnapshot."""
        state.map_end_offset = log_end_offset
        write_bytes_atomically(self.path(log_end_offset), state.to_snapshot())

    def delete_below(self, offset: int) -> None:
        """Drop snapshots of deleted segments, keeping the newest one below `offset` too:
        it still remembers producers whose batches retention removed."""
        below = [o for o in self.offsets() if o < offset]
        for old in below[:-1]:
            self.path(old).unlink(missing_ok=True)

    def delete_all(self) -> None:
        for old in self.offsets():
            self.path(old).unlink(missing_ok=True)

    def newest(self, log_end_offset: int, limit: int, tp: TopicPartition) -> ProducerStateManager:
        """The state of the newest readable snapshot at or below `limit` (empty if none).
        Snapshots beyond the log end describe data that is gone, and unreadable ones
        are of no use: both are deleted."""
        for offset in reversed(self.offsets()):
            path = self.path(offset)
            if offset > log_end_offset:
                path.unlink(missing_ok=True)
                continue
            if offset > limit:
                continue  # valid, but later than the replay must start
            try:
                return ProducerStateManager.from_snapshot(path.read_bytes())
            except (SnapshotError, OSError) as exc:
                logger.warning("ignoring producer-state snapshot %s of %s: %s", path, tp, exc)
                path.unlink(missing_ok=True)
        return ProducerStateManager()


def load_producer_state(
    snapshots: ProducerSnapshots,
    log_end_offset: int,
    headers_from: Callable[[int], Iterable[BatchHeader]],
    marker_of: Callable[[BatchHeader], EndTransactionMarker | None],
    segment_for: Callable[[int], LogSegment],
    tp: TopicPartition,
    rebuild_txn_index_from: int | None = None,
) -> ProducerStateManager:
    """Newest readable snapshot at or below the log end offset, then replay the batch
    headers after it (from the first segment when there is none), like Kafka's
    loadProducerState.

    With `rebuild_txn_index_from`, the replay starts at or below that offset and
    indexes every transaction aborted by a marker from there on (the caller emptied
    those segments' txn indexes)."""
    leo = log_end_offset
    limit = leo if rebuild_txn_index_from is None else min(leo, rebuild_txn_index_from)
    state = snapshots.newest(leo, limit, tp)
    completed = state.replay(headers_from(state.map_end_offset), marker_of)
    if rebuild_txn_index_from is not None:
        for txn in completed:
            if txn.is_aborted and txn.last_offset >= rebuild_txn_index_from:
                segment_for(txn.last_offset).txn_index.append(aborted_txn(txn))
    state.map_end_offset = leo
    return state
