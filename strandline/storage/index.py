"""Sparse segment indexes in Kafka's file layout.

`.index`: entries of (relative offset u32, file position u32), one per
`index.interval.bytes` of log. `.timeindex`: entries of (timestamp i64, relative offset
u32), the largest timestamp seen so far and the offset where it was first reached.
Entries live in memory (arrays) and are appended to the file as they are made; the
file has exactly as many bytes as entries (Kafka's size after trimming).
"""

from __future__ import annotations

import bisect
import os
import struct
from array import array
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

Writer = Callable[[int, bytes | bytearray | memoryview, int], int]

_OFFSET_ENTRY = struct.Struct(">II")
_TIME_ENTRY = struct.Struct(">qI")


class IndexCorruptError(ValueError):
    pass


def write_fully(writer: Writer, fd: int, data: bytes | bytearray | memoryview, pos: int) -> None:
    view = memoryview(data)
    while view:
        written = writer(fd, view, pos)
        view = view[written:]
        pos += written


class _SparseIndex:
    """Two parallel arrays (key, value) backed by an append-only file of fixed entries."""

    ENTRY: struct.Struct
    KEY_TYPE: str
    VALUE_TYPE: str

    def __init__(self, path: Path, base_offset: int, max_entries: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_entries)
        self.keys: array[int] = array(self.KEY_TYPE)
        self.values: array[int] = array(self.VALUE_TYPE)
        # The file is created now but opened only when first written (Kafka's LazyIndex):
        # entries are read from memory, and 10,000 partitions holding two index files
        # open each would need 30,000 descriptors with their segments (docs/scaling.md).
        os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o644))
        self._fd = -1
        self._closed = False

    @property
    def fd(self) -> int:
        """The open file, opened on first use; -1 once closed (never reopened)."""
        if self._fd < 0 and not self._closed:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        return self._fd

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def is_full(self) -> bool:
        return len(self.keys) >= self.max_entries

    def load(self) -> None:
        """Read the file; raises IndexCorruptError when it cannot be trusted. Reading
        does not keep the file open (a broker loads every index at start-up)."""
        if self._fd >= 0 or self._closed:
            data = self._read_all(self.fd)
        else:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                data = self._read_all(fd)
            finally:
                os.close(fd)
        keys: array[int] = array(self.KEY_TYPE)
        values: array[int] = array(self.VALUE_TYPE)
        for key, value in self.ENTRY.iter_unpack(data):
            keys.append(key)
            values.append(value)
        self.keys, self.values = keys, values
        for i, problem in self.ordering_problems(keys, values):
            raise IndexCorruptError(f"{self.path} entry {i} {problem}")

    def _read_all(self, fd: int) -> bytes:
        size = os.fstat(fd).st_size
        if size % self.ENTRY.size:
            raise IndexCorruptError(f"{self.path} size {size} is not a multiple of an entry")
        return os.pread(fd, size, 0)

    @classmethod
    def decode(cls, data: bytes) -> list[tuple[int, int]]:
        """The whole (key, value) entries in an index file's bytes, for offline tools;
        a torn last entry is left out (its length shows as `len(data) % ENTRY.size`)."""
        whole = len(data) - len(data) % cls.ENTRY.size
        return list(cls.ENTRY.iter_unpack(data[:whole]))

    @classmethod
    def ordering_problems(
        cls, keys: Sequence[int], values: Sequence[int]
    ) -> Iterator[tuple[int, str]]:
        """(entry number, what is wrong) for every entry that breaks the index's order;
        lazy, so `load` stops at the first."""
        for i in range(1, len(keys)):
            if keys[i] <= keys[i - 1]:
                yield i, "is not increasing"

    def encode(self, entries: Sequence[tuple[int, int]]) -> bytes:
        pack = self.ENTRY.pack
        return b"".join(pack(key, value) for key, value in entries)

    def append_entries(self, writer: Writer, entries: Sequence[tuple[int, int]]) -> None:
        """Write entries (already relative) at the end; memory changes only on success."""
        if not entries:
            return
        write_fully(writer, self.fd, self.encode(entries), len(self.keys) * self.ENTRY.size)
        for key, value in entries:
            self.keys.append(key)
            self.values.append(value)

    def truncate_entries(self, count: int) -> None:
        del self.keys[count:]
        del self.values[count:]
        self._truncate(count * self.ENTRY.size)

    def _truncate(self, size: int) -> None:
        if self._fd < 0 and not self._closed:
            os.truncate(self.path, size)  # not open yet: no need to keep it open after
        else:
            os.ftruncate(self.fd, size)

    def reset(self, writer: Writer, entries: Sequence[tuple[int, int]]) -> None:
        # Recovery resets every index it checks: an empty one must not stay open.
        self._truncate(0)
        self.keys = array(self.KEY_TYPE)
        self.values = array(self.VALUE_TYPE)
        self.append_entries(writer, entries)

    def flush(self) -> None:
        if self._fd >= 0 or self._closed:  # never opened: nothing written to sync
            os.fsync(self.fd)

    def close(self) -> None:
        self._closed = True
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)


class OffsetIndex(_SparseIndex):
    ENTRY = _OFFSET_ENTRY
    KEY_TYPE = "L"
    VALUE_TYPE = "L"

    @classmethod
    def ordering_problems(
        cls, keys: Sequence[int], values: Sequence[int]
    ) -> Iterator[tuple[int, str]]:
        yield from super().ordering_problems(keys, values)
        # Every entry names a later batch of an append-only file, so a position that
        # does not grow cannot come from a healthy segment.
        for i in range(1, len(values)):
            if values[i] <= values[i - 1]:
                yield i, "position is not increasing"

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the last entry at or below `offset`; (base, 0) if none."""
        i = bisect.bisect_right(self.keys, offset - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self.keys[i], self.values[i]

    def entries_below(self, offset: int) -> int:
        return bisect.bisect_left(self.keys, offset - self.base_offset)

    @property
    def last_position(self) -> int:
        return self.values[-1] if self.values else 0

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.keys[-1] if self.keys else self.base_offset


class TimeIndex(_SparseIndex):
    ENTRY = _TIME_ENTRY
    KEY_TYPE = "q"
    VALUE_TYPE = "L"

    @classmethod
    def ordering_problems(
        cls, keys: Sequence[int], values: Sequence[int]
    ) -> Iterator[tuple[int, str]]:
        yield from super().ordering_problems(keys, values)
        for i in range(1, len(values)):
            if values[i] < values[i - 1]:
                yield i, "offset goes backwards"

    def lookup(self, timestamp: int) -> int:
        """Offset of the last entry with timestamp <= `timestamp`; the base if none."""
        i = bisect.bisect_right(self.keys, timestamp) - 1
        if i < 0:
            return self.base_offset
        return self.base_offset + self.values[i]

    def entries_below(self, offset: int) -> int:
        return bisect.bisect_left(self.values, offset - self.base_offset)

    @property
    def last_timestamp(self) -> int:
        return self.keys[-1] if self.keys else -1

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.values[-1] if self.values else self.base_offset
