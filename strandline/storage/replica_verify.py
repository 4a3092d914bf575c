"""Replica verification (Kafka's kafka-replica-verification.sh, offline form).

Every replica of a partition must hold the same bytes for every batch below the high
watermark: committed data is identical everywhere. This reads the segment files of
each replica directly (no broker involved) and compares those byte ranges.

Replicas of a compacted topic clean their logs independently (as in Kafka), so their
bytes may differ legitimately. When bytes differ, two replicas still agree if what
compaction allows to differ is all that does: records at offsets both hold are
identical, and both give every key the same latest record (tombstones aside).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from strandline.errors import KafkaError
from strandline.protocol.record_batch import iter_batches
from strandline.storage.checkpoint import REPLICATION_OFFSET_CHECKPOINT, read_offsets
from strandline.storage.cleaner import batch_records
from strandline.types import TopicPartition


def partition_dir(log_dir: Path, tp: TopicPartition) -> Path:
    return log_dir / f"{tp.topic}-{tp.partition}"


def replica_batches(directory: Path, below: int) -> bytes:
    """The bytes of every batch that ends below offset `below`, in offset order, from
    one replica's segment files. A torn batch at the end of a live segment ends it."""
    out = bytearray()
    for segment in sorted(directory.glob("*.log")):
        data = segment.read_bytes()
        try:
            for header in iter_batches(data):
                if header.next_offset <= below:
                    out += data[header.position : header.position + header.size]
        except KafkaError:
            pass  # a write in progress on a running broker; later bytes are not committed
    return bytes(out)


def producer_batches(directory: Path, below: int) -> list[tuple[int, int, int, int, int]]:
    """(first offset, last offset, producer id, producer epoch, base sequence) of every
    idempotent or transactional data batch that ends below offset `below`, in offset order,
    from one replica's segment files: who wrote which offsets, which a consumer cannot see."""
    out = []
    for segment in sorted(directory.glob("*.log")):
        data = segment.read_bytes()
        try:
            for h in iter_batches(data):
                if h.next_offset <= below and h.producer_id >= 0 and not h.is_control:
                    out.append(
                        (
                            h.base_offset,
                            h.last_offset,
                            h.producer_id,
                            h.producer_epoch,
                            h.base_sequence,
                        )
                    )
        except KafkaError:
            pass  # as replica_batches: a torn batch at the end of a live segment
    return out


def checkpointed_high_watermark(log_dir: Path, tp: TopicPartition) -> int | None:
    """The HW in `replication-offset-checkpoint` (written periodically and on shutdown)."""
    path = log_dir / REPLICATION_OFFSET_CHECKPOINT
    if not path.exists():
        return None
    return read_offsets(path).get(tp)


@dataclass(frozen=True)
class ReplicaComparison:
    tp: TopicPartition
    below: int
    sizes: dict[int, int]  # replica -> bytes compared
    mismatched: tuple[int, ...]  # replicas whose bytes differ from the reference

    @property
    def consistent(self) -> bool:
        return not self.mismatched


Record = tuple[Any, ...]  # key, value, headers, timestamp


def _records(data: bytes) -> dict[int, Record]:
    out: dict[int, Record] = {}
    for header in iter_batches(data, verify_crc=False):
        if header.is_control:
            continue
        for r in batch_records(data, header):
            out[r.offset] = (r.key, r.value, tuple(r.headers), r.timestamp)
    return out


def _compacted_view(records: dict[int, Record]) -> dict[Any, tuple[int, Record]]:
    """What compaction keeps for ever: each key's latest record unless it is a tombstone,
    and every record without a key."""
    latest: dict[Any, tuple[int, Record]] = {}
    for offset in sorted(records):
        record = records[offset]
        latest[record[0] if record[0] is not None else ("no key", offset)] = (offset, record)
    return {k: v for k, v in latest.items() if v[1][1] is not None}


def agree_after_compaction(a: bytes, b: bytes) -> bool:
    try:
        ra, rb = _records(a), _records(b)
    except (KafkaError, ValueError, AssertionError):
        return False
    common = ra.keys() & rb.keys()
    return all(ra[o] == rb[o] for o in common) and _compacted_view(ra) == _compacted_view(rb)


def compare_replicas(
    tp: TopicPartition, replica_dirs: dict[int, Path], below: int
) -> ReplicaComparison:
    """Compare every replica's committed bytes with the first replica's (by id)."""
    return compare_contents(
        tp, {r: replica_batches(d, below) for r, d in replica_dirs.items()}, below
    )


def compare_contents(
    tp: TopicPartition, replica_bytes: dict[int, bytes], below: int
) -> ReplicaComparison:
    """Compare replicas' batch bytes below `below` (read from files, or fetched over the
    network) with the first replica's (by id)."""
    contents = dict(sorted(replica_bytes.items()))
    sizes = {r: len(c) for r, c in contents.items()}
    if not contents:
        return ReplicaComparison(tp, below, sizes, ())
    reference = next(iter(contents.values()))
    mismatched = tuple(
        r
        for r, c in contents.items()
        if c != reference and not agree_after_compaction(reference, c)
    )
    return ReplicaComparison(tp, below, sizes, mismatched)


def partitions_in(log_dirs: list[Path]) -> set[TopicPartition]:
    """Every partition with a directory in any of the log dirs (deleted ones excluded)."""
    found = set()
    for log_dir in log_dirs:
        if not log_dir.is_dir():
            continue
        for child in log_dir.iterdir():
            topic, sep, partition = child.name.rpartition("-")
            if child.is_dir() and sep and partition.isdigit():
                found.add(TopicPartition(topic, int(partition)))
    return found
