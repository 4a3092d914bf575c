"""A byte range of a segment's `.log` file, to be sent without passing through Python.

Kafka's consume path hands the socket a `FileRecords` slice (`FileChannel.transferTo`,
i.e. sendfile) instead of copying the records into the response. A FileRegion is that
slice here: its own file descriptor (a `dup` of the segment's), a position and a length.

Why its own descriptor: the response may wait behind earlier ones on the connection
while retention deletes the segment, or a compaction swap replaces it, closing the
segment's descriptor. A dup'ed descriptor keeps the inode readable after an unlink or
that close (and no reuse of the fd number can make us send another file's bytes).
What it cannot survive is a truncation of the same file (a follower truncating its
active segment): the region then runs past the end of the file and a send comes up
short. Kafka fails such a write too ("Size of FileRecords ... has been truncated
during write"); here `read` raises TruncatedRegionError, a short sendfile is reported
the same way, and the network layer closes the connection rather than send a frame
shorter than its size prefix.

The descriptor is closed by `close()` once sent, or when the region is garbage
collected (a fetch whose result is dropped, e.g. re-read after waiting in purgatory).
"""

from __future__ import annotations

import os
from collections.abc import Callable

# Below this a read is copied rather than sent with sendfile: a sendfile through asyncio
# waits for the transport's buffer to empty and pauses reading around the call, which
# for a few KiB costs more than the copy it saves (Kafka has no such floor).
MIN_REGION_BYTES = 64 * 1024


class TruncatedRegionError(OSError):
    """The file ends before the region does: it was truncated after the region was taken."""


class FileRegion:
    """`length` bytes of an open file from `position`; `len()` is the byte count, so code
    that only measures records (budgets, quotas, metrics) treats it as it treats bytes."""

    __slots__ = ("_fd", "position", "length")

    def __init__(self, fd: int, position: int, length: int) -> None:
        self._fd = fd  # owned: closed by close() / on collection
        self.position = position
        self.length = length

    @classmethod
    def of(cls, fd: int, position: int, length: int) -> FileRegion:
        """A region of the file open as `fd`, holding its own duplicate of it."""
        return cls(os.dup(fd), position, length)

    def fileno(self) -> int:
        """The region's descriptor (what `loop.sendfile` sends from). asyncio moves its
        file offset after a send; no one reads the file through that offset (the
        segment reads and writes with pread/pwrite), so sharing it with a dup is safe."""
        if self._fd < 0:
            raise ValueError("region is closed")
        return self._fd

    def __len__(self) -> int:
        return self.length

    def read(self) -> bytes:
        """The region's bytes (the copy zero-copy avoids: the fallback for TLS, tests)."""
        data = os.pread(self.fileno(), self.length, self.position)
        while len(data) < self.length:
            more = os.pread(self._fd, self.length - len(data), self.position + len(data))
            if not more:
                raise TruncatedRegionError(
                    f"file ends {self.length - len(data)} bytes before the region "
                    f"[{self.position}, {self.position + self.length})"
                )
            data += more
        return data

    def close(self, _close: Callable[[int], None] = os.close) -> None:
        # os.close bound early: __del__ may run at interpreter exit, after `os` is gone.
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            _close(fd)

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def __del__(self) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"FileRegion(fd={self._fd}, position={self.position}, length={self.length})"


Records = bytes | FileRegion
"""What a fetch returns for a partition: bytes, or a region of a segment file."""


def materialize(records: Records) -> bytes:
    """`records` as bytes (reads and closes a region)."""
    if isinstance(records, FileRegion):
        try:
            return records.read()
        finally:
            records.close()
    return records


__all__ = ["MIN_REGION_BYTES", "FileRegion", "Records", "TruncatedRegionError", "materialize"]
