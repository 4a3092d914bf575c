"""A Fetch response framed as chunks: bytes, and FileRegions for the records.

kio's encoder writes a `records` field as its length followed by one `buffer.write` of
the value. Handing it a buffer whose `write` takes a FileRegion as a chunk of its own
(and the region in the records field, which kio only measures with `len`) gives
exactly kio's bytes with the records left in the file: the frame is kio's encoding by
construction, not a second hand-written encoder of the Fetch schema that could drift
from it. `tests/protocol/test_fetch_response.py` checks that against kio's own output.
"""

from __future__ import annotations

import struct
from typing import IO, Any, cast

from kio.serial import entity_writer

from strandline.protocol.file_region import FileRegion

Chunk = bytes | bytearray | FileRegion

_I32 = struct.Struct(">i")


class ChunkWriter:
    """A write-only buffer (what kio's writers call) that keeps FileRegions apart."""

    __slots__ = ("chunks", "_buf", "size")

    def __init__(self) -> None:
        self.chunks: list[Chunk] = []
        self._buf = bytearray()
        self.size = 0  # bytes written so far, regions included

    def write(self, data: bytes | bytearray | memoryview | FileRegion) -> int:
        if isinstance(data, FileRegion):
            if data.length:
                if self._buf:
                    self.chunks.append(self._buf)
                    self._buf = bytearray()
                self.chunks.append(data)
            else:
                data.close()  # nothing to send from it
            self.size += data.length
            return data.length
        self._buf += data
        self.size += len(data)
        return len(data)

    def finish(self) -> list[Chunk]:
        if self._buf:
            self.chunks.append(self._buf)
            self._buf = bytearray()
        return self.chunks


def encode_chunked_response(correlation_id: int, response: Any) -> list[Chunk]:
    """Frame a response whose records may be FileRegions: the size prefix, the header
    (v0 or v1 per the schema), the body, as kio's `entity_writer` writes them."""
    out = ChunkWriter()
    out.write(b"\0\0\0\0")  # size, patched below
    out.write(_I32.pack(correlation_id))
    if response.__header_schema__.__flexible__:
        out.write(b"\0")  # no tagged fields in the response header
    # kio only calls write() on its buffer: this one also takes FileRegions.
    entity_writer(type(response))(cast(IO[bytes], out), response)
    chunks = out.finish()
    first = chunks[0]
    # The prefix and header bytes open the first chunk, a bytearray the writer made.
    assert isinstance(first, bytearray)
    _I32.pack_into(first, 0, out.size - 4)
    return chunks


def close_regions(chunks: list[Chunk]) -> None:
    """Release the descriptors of a response that will not be sent (or is sent)."""
    for chunk in chunks:
        if isinstance(chunk, FileRegion):
            chunk.close()


__all__ = ["Chunk", "ChunkWriter", "close_regions", "encode_chunked_response"]
