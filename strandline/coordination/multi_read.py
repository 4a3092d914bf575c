"""ZooKeeper's multiRead (opcode 22, ZooKeeper 3.6+): many getData in one request.

kazoo (2.x) has no multiRead; this is the request for its connection, framed like its
own `Transaction` (a multi-op): a MultiHeader and a GetDataRequest per path, answered
with a MultiHeader and either (data, stat) or an error code per path. Unlike a write
multi it is not atomic: a missing znode fails only its own entry.

Why: a new controller reads every partition's state znode. kazoo handles one request
per turn of its connection loop, so 10,000 pipelined getData took the controller
~2 s on a loaded machine (docs/scaling.md); the same reads in ten multiReads take a few
hundred milliseconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import EXCEPTIONS
from kazoo.protocol.paths import _prefix_root
from kazoo.protocol.serialization import (
    GetData,
    MultiHeader,
    int_struct,
    multiheader_struct,
    read_buffer,
    stat_struct,
    write_string,
)
from kazoo.protocol.states import ZnodeStat

MULTI_READ_OPCODE = 22
# Paths per request: a state znode answers ~200 bytes, so 1,000 stay far below the
# 1 MB jute.maxbuffer either way, and several requests are in flight at once.
PATHS_PER_MULTI_READ = 1000

Result = tuple[bytes, ZnodeStat] | Exception


class MultiRead:
    """The request as kazoo's connection sends it (`type`, `serialize`, `deserialize`)."""

    type = MULTI_READ_OPCODE

    def __init__(self, paths: tuple[str, ...]) -> None:
        self.paths = paths  # chrooted already

    def __repr__(self) -> str:
        return f"MultiRead({len(self.paths)} paths)"

    def serialize(self) -> bytearray:
        b = bytearray()
        for path in self.paths:
            b.extend(multiheader_struct.pack(GetData.type, False, -1))
            b.extend(write_string(path))
            b.append(0)  # no watch
        b.extend(multiheader_struct.pack(-1, True, -1))
        return b

    @classmethod
    def deserialize(cls, data: bytes, offset: int) -> list[Result]:
        results: list[Result] = []
        header, offset = MultiHeader.deserialize(data, offset)
        while not header.done:
            if header.type == GetData.type:
                value, offset = read_buffer(data, offset)
                stat = ZnodeStat._make(stat_struct.unpack_from(data, offset))
                offset += stat_struct.size
                results.append((value or b"", stat))
            else:  # -1: this path's error code
                code = int_struct.unpack_from(data, offset)[0]
                offset += int_struct.size
                results.append(EXCEPTIONS[code]())
            header, offset = MultiHeader.deserialize(data, offset)
        return results


def multi_read_async(kazoo: KazooClient, paths: Sequence[str]) -> list[tuple[list[str], Any]]:
    """Send the reads of `paths` (relative to the client's chroot) as pipelined
    multiReads; returns (paths, async result of [data, stat or exception per path])."""
    pending = []
    for start in range(0, len(paths), PATHS_PER_MULTI_READ):
        chunk = list(paths[start : start + PATHS_PER_MULTI_READ])
        request = MultiRead(tuple(_prefix_root(kazoo.chroot, p) for p in chunk))
        async_result = kazoo.handler.async_result()
        kazoo._call(request, async_result)
        pending.append((chunk, async_result))
    return pending
