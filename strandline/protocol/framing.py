"""Kafka's size-prefixed framing: a signed 32-bit length, then that many bytes."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable

_SIZE = struct.Struct(">i")


class ProtocolError(Exception):
    """The peer sent bytes that are not a well-formed Kafka request: close the connection."""


async def read_frame(
    reader: asyncio.StreamReader,
    max_size: int | Callable[[], tuple[int, str]],
) -> bytes | None:
    """Read one frame; None on a clean EOF between frames.

    A negative or oversized length (`socket.request.max.bytes`) or EOF inside a frame
    raises ProtocolError: Kafka closes such a connection rather than answering.
    `max_size` may be a function giving (the bound, the key that sets it) once the size
    prefix is in: a server's bound before authentication is smaller than after.
    """
    try:
        prefix = await reader.readexactly(4)
    except asyncio.IncompleteReadError as e:
        if not e.partial:
            return None
        raise ProtocolError("connection closed inside a frame's size prefix") from e
    (size,) = _SIZE.unpack(prefix)
    if size < 0:
        raise ProtocolError(f"negative frame size {size}")
    bound, key = max_size() if callable(max_size) else (max_size, "socket.request.max.bytes")
    if size > bound:
        raise ProtocolError(f"frame of {size} bytes exceeds {key}={bound}")
    try:
        return await reader.readexactly(size)
    except asyncio.IncompleteReadError as e:
        raise ProtocolError(
            f"connection closed after {len(e.partial)} of {size} frame bytes"
        ) from e
