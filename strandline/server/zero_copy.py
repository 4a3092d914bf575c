"""Writing a response whose records are FileRegions: sendfile where it can, a copy
where it cannot.

Kafka sends fetched records with `FileChannel.transferTo` (sendfile) on plaintext
connections; on TLS connections the bytes must go through the SSL engine, so they are
read into memory first. Here the same split is decided once per connection:

- plaintext, `strandline.zero.copy.enable` (default true): `SEND_REGIONS` is set for the
  connection's handlers, the Fetch handler reads records as FileRegions, and each region
  of at least SENDFILE_MIN_BYTES goes out with `loop.sendfile` (os.sendfile on the raw
  socket, after the bytes before it have been written, so the frame stays in order);
- TLS, or zero-copy disabled: `SEND_REGIONS` stays false and the handler reads bytes,
  exactly the path from before zero-copy;
- should a region still reach a connection that cannot sendfile (asyncio raises
  SendfileNotAvailableError before sending anything, e.g. on a platform without
  os.sendfile), it is read into bytes (`FileRegion.read`) and written as such, and the
  connection stops trying sendfile.

A read smaller than SENDFILE_MIN_BYTES is copied (`MIN_REGION_BYTES`: the segment
returns it as bytes, and a smaller region that reaches the writer is copied there).
"""

from __future__ import annotations

import asyncio
from contextvars import ContextVar
from typing import IO, cast

from strandline.protocol.fetch_response import Chunk, close_regions
from strandline.protocol.file_region import MIN_REGION_BYTES, FileRegion, TruncatedRegionError

# Set by the network layer, per connection: may handlers answer with FileRegions?
SEND_REGIONS: ContextVar[bool] = ContextVar("send_regions", default=False)

SENDFILE_MIN_BYTES = MIN_REGION_BYTES


def has_regions(chunks: list[Chunk]) -> bool:
    return any(isinstance(chunk, FileRegion) for chunk in chunks)


async def send_chunks(writer: asyncio.StreamWriter, chunks: list[Chunk], sendfile: bool) -> bool:
    """Write one response's chunks in order. Returns whether sendfile is still usable on
    this connection. Raises (TruncatedRegionError, OSError, RuntimeError) when the frame
    could not be written whole: the caller must then close the connection, since the
    peer has a size prefix for bytes that will never come."""
    loop = asyncio.get_running_loop()
    pending: list[bytes | bytearray] = []
    try:
        for chunk in chunks:
            if not isinstance(chunk, FileRegion):
                pending.append(chunk)
                continue
            if not sendfile or chunk.length < SENDFILE_MIN_BYTES:
                pending.append(chunk.read())
                chunk.close()
                continue
            if pending:
                writer.writelines(pending)
                pending = []
            try:
                # asyncio only asks the "file" for fileno() on the native path (fallback
                # is off: its own fallback would re-read the region through the file offset).
                sent = await loop.sendfile(
                    writer.transport,
                    cast(IO[bytes], chunk),
                    chunk.position,
                    chunk.length,
                    fallback=False,
                )
            except asyncio.SendfileNotAvailableError:
                # Raised before the first byte is sent: copy this region and the rest.
                sendfile = False
                pending.append(chunk.read())
            else:
                if sent != chunk.length:
                    # os.sendfile hit the end of the file: it was truncated under us.
                    raise TruncatedRegionError(
                        f"sent {sent} of {chunk.length} bytes of {chunk!r}: file truncated"
                    )
            chunk.close()
        if pending:
            writer.writelines(pending)
    finally:
        close_regions(chunks)
    return sendfile


__all__ = ["SENDFILE_MIN_BYTES", "SEND_REGIONS", "has_regions", "send_chunks"]
