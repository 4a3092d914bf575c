"""Kafka wire primitives shared by the hand-written hot-path codecs.

`produce_codec` and `fetch_codec` inline the common case (a one-byte varint, an empty
tagged-field section) and call these only for the rare one; kio stays the codec of
every other API.
"""

from __future__ import annotations

import struct
from typing import NoReturn

from strandline.protocol.framing import ProtocolError

I8 = struct.Struct(">b")
I16 = struct.Struct(">h")
I32 = struct.Struct(">i")
I64 = struct.Struct(">q")

# Any of these from a decoder's body means the bytes ended early (a read past the end)
# or were not what the schema says: the decoders turn them into ProtocolError.
MALFORMED = (IndexError, struct.error, UnicodeDecodeError)

# One-byte unsigned varints, the size of every compact length below 127.
_SMALL_UVARINTS = tuple(bytes((i,)) for i in range(128))


def uvarint(value: int) -> bytes:
    """Kafka's unsigned varint (7 bits a byte, low first)."""
    if value < 128:
        return _SMALL_UVARINTS[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    """(value, position after it); at most 5 bytes, as Kafka's readUnsignedVarint."""
    value = 0
    shift = 0
    while True:
        b = buf[pos]  # IndexError when truncated: the caller reports it
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise ProtocolError("unsigned varint longer than 5 bytes")


def skip_tags(buf: bytes, pos: int) -> int:
    """Skip a tagged-field section (unknown tags are ignored, as Kafka does)."""
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
    if pos > len(buf):
        raise ProtocolError("tagged fields run past the end of the message")
    return pos


def negative_length(what: str, length: int) -> NoReturn:
    raise ProtocolError(f"{what} has negative length {length}")


def past_end(what: str, end: int, size: int) -> NoReturn:
    raise ProtocolError(f"{what} runs past the end of the message ({end} > {size} bytes)")


def null_where_required(what: str) -> NoReturn:
    # kio reads a null here as None (and the handler would then fail on it); Kafka
    # refuses the request ("non-nullable field ... was serialized as null").
    raise ProtocolError(f"{what} is null but the schema does not allow null")


def legacy_string(value: str) -> bytes:
    """int16 length + UTF-8 (a non-null STRING of a non-flexible version)."""
    data = value.encode()
    return I16.pack(len(data)) + data


def legacy_nullable_string(value: str | None) -> bytes:
    if value is None:
        return b"\xff\xff"
    return legacy_string(value)


def compact_string(value: str) -> bytes:
    """uvarint (length + 1) + UTF-8 (COMPACT_STRING of a flexible version)."""
    data = value.encode()
    return uvarint(len(data) + 1) + data


def compact_nullable_string(value: str | None) -> bytes:
    if value is None:
        return b"\x00"
    return compact_string(value)


__all__ = [
    "I8",
    "I16",
    "I32",
    "I64",
    "MALFORMED",
    "compact_nullable_string",
    "compact_string",
    "legacy_nullable_string",
    "legacy_string",
    "negative_length",
    "null_where_required",
    "past_end",
    "read_uvarint",
    "skip_tags",
    "uvarint",
]
