"""The aborted-transaction index of a segment, `<base>.txnindex` (Kafka's TransactionIndex).

One entry per transaction aborted by a marker in the segment, appended when the marker
is (leader and follower alike), in marker order; 34 bytes, big-endian:

    version int16 (0) | producer id int64 | first offset int64 | last offset int64 |
    last stable offset int64

`last offset` is the marker's offset; `last stable offset` is the LSO right after the
marker (the first offset of the next still-open transaction of another producer, else
the marker's offset + 1). A read_committed fetch collects the entries overlapping the
range it returns (`collect_aborted`), walking segments from the one holding the fetch
offset until an entry's last stable offset reaches the end of the range: no transaction
that ends in a later segment can then have begun inside the range.

The file is created with its first entry (most segments never see an abort), read
lazily once and then kept in memory. Like the other indexes it is rebuilt when its
segment is recovered, cut on truncation and deleted with the segment.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from strandline.storage.index import Writer, write_fully

logger = logging.getLogger(__name__)

TXN_INDEX_SUFFIX = ".txnindex"
ENTRY_VERSION = 0
ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = ENTRY.size  # 34


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the abort marker's offset
    last_stable_offset: int


class TxnIndexCorruptError(ValueError):
    pass


def encode_entries(entries: Iterable[AbortedTxn]) -> bytes:
    return b"".join(
        ENTRY.pack(
            ENTRY_VERSION, t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset
        )
        for t in entries
    )


def decode_entries(data: bytes | bytearray | memoryview) -> list[AbortedTxn]:
    """Whole entries of `data`; a torn last entry (a crash mid-append) is ignored.

    Raises TxnIndexCorruptError for an unknown entry version."""
    out = []
    for pos in range(0, len(data) - len(data) % ENTRY_SIZE, ENTRY_SIZE):
        version, pid, first, last, lso = ENTRY.unpack_from(data, pos)
        if version != ENTRY_VERSION:
            raise TxnIndexCorruptError(f"unknown aborted-transaction entry version {version}")
        out.append(AbortedTxn(pid, first, last, lso))
    return out


def _valid_prefix(data: bytes) -> list[AbortedTxn]:
    out = []
    for pos in range(0, len(data) - len(data) % ENTRY_SIZE, ENTRY_SIZE):
        version, pid, first, last, lso = ENTRY.unpack_from(data, pos)
        if version != ENTRY_VERSION:
            break
        out.append(AbortedTxn(pid, first, last, lso))
    return out


def collect_aborted(
    entries: Iterable[AbortedTxn], fetch_offset: int, upper_bound_offset: int
) -> tuple[list[AbortedTxn], bool]:
    """Entries of transactions overlapping [fetch_offset, upper_bound_offset), and whether
    the search is complete (Kafka's TransactionIndex.collectAbortedTxns)."""
    found = []
    for txn in entries:
        if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
            found.append(txn)
        if txn.last_stable_offset >= upper_bound_offset:
            return found, True
    return found, False


class TransactionIndex:
    def __init__(self, path: Path, writer: Writer) -> None:
        self.path = path
        self.writer = writer
        self._entries: list[AbortedTxn] | None = None  # None: not read yet
        self._fd = -1
        self._dirty = False

    @property
    def entries(self) -> list[AbortedTxn]:
        if self._entries is None:
            try:
                data = self.path.read_bytes()
            except FileNotFoundError:
                data = b""
            try:
                entries = decode_entries(data)
            except TxnIndexCorruptError as exc:
                # Keep what precedes the bad entry; the segment's next recovery rebuilds it.
                entries = _valid_prefix(data)
                logger.warning("cutting %s after %d entries: %s", self.path, len(entries), exc)
            self._entries = entries
            if len(data) != len(entries) * ENTRY_SIZE:
                # A torn append: cut it, so the next entry lands on an entry boundary.
                self._rewrite(entries)
        return self._entries

    def _open(self) -> int:
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        return self._fd

    def append(self, txn: AbortedTxn) -> None:
        entries = self.entries
        if entries and txn.last_offset <= entries[-1].last_offset:
            raise ValueError(
                f"aborted transaction ending at {txn.last_offset} does not follow the last "
                f"one, ending at {entries[-1].last_offset}"
            )
        fd = self._open()
        size = len(entries) * ENTRY_SIZE
        try:
            write_fully(self.writer, fd, encode_entries([txn]), size)
        except OSError:
            try:
                os.ftruncate(fd, size)
            except OSError:
                pass  # a torn entry is dropped when the file is read again
            raise
        entries.append(txn)
        self._dirty = True

    def collect(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        return collect_aborted(self.entries, fetch_offset, upper_bound_offset)

    def truncate_to(self, offset: int) -> None:
        """Forget transactions whose marker is at or beyond `offset`."""
        entries = self.entries
        kept = [t for t in entries if t.last_offset < offset]
        if len(kept) != len(entries):
            self._rewrite(kept)

    def reset(self) -> None:
        """Empty the index (its segment is being recovered and the index rebuilt)."""
        if self._fd >= 0 or self.path.exists():
            self._rewrite([])
        else:
            self._entries = []

    def _rewrite(self, entries: list[AbortedTxn]) -> None:
        fd = self._open()
        os.ftruncate(fd, len(entries) * ENTRY_SIZE)
        self._entries = list(entries)
        self._dirty = True

    def flush(self) -> None:
        if self._dirty and self._fd >= 0:
            os.fsync(self._fd)
        self._dirty = False

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)
        self._entries = []
