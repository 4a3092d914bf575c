"""The one seam through which the storage layer writes file bytes.

Every data and index write goes through a `Writer` (`os.pwrite` by default), so a
test, or a broker started with a fault-injection hook, can simulate a full disk or
an I/O error without filling a real file system.
"""

from __future__ import annotations

import errno
import os

from strandline.storage.index import Writer

DEFAULT_WRITER: Writer = os.pwrite


class FaultInjectingWriter:
    """`os.pwrite` that raises OSError(`errno`) while `failing` is set.

    `partial_bytes` makes a failing write first store that many bytes, like a disk
    that fills up in the middle of a batch.
    """

    def __init__(self) -> None:
        self.failing = False
        self.errno = errno.ENOSPC
        self.partial_bytes = 0
        self.failed_writes = 0

    def fail_with(self, error: int = errno.ENOSPC, partial_bytes: int = 0) -> None:
        self.failing, self.errno, self.partial_bytes = True, error, partial_bytes

    def recover(self) -> None:
        self.failing = False

    def __call__(self, fd: int, data: bytes | bytearray | memoryview, position: int) -> int:
        if not self.failing:
            return os.pwrite(fd, data, position)
        self.failed_writes += 1
        if self.partial_bytes and len(data) > self.partial_bytes:
            written = os.pwrite(fd, memoryview(data)[: self.partial_bytes], position)
            self.partial_bytes = 0
            return written
        raise OSError(self.errno, os.strerror(self.errno))
