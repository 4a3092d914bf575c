"""Request/response codec over kio's schemas.

The request header is parsed by hand (it is tiny and on every request); bodies are
parsed and written by kio. A response is returned as a list of byte chunks so that a
large payload (fetched segment bytes) need not be copied into one buffer.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.index import api_key_map
from kio.serial import entity_reader, entity_writer

from strandline.protocol import controller_schema
from strandline.protocol.framing import ProtocolError
from strandline.protocol.length_check import check_lengths
from strandline.protocol.primitives import skip_tags

_HEADER_FIXED = struct.Struct(">hhih")


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


# The controller APIs kio lacks (4-7), named as Kafka names them.
_CONTROLLER_API_NAMES = {
    4: "LeaderAndIsr",
    5: "StopReplica",
    6: "UpdateMetadata",
    7: "ControlledShutdown",
}


@cache
def api_name(api_key: int) -> str:
    """Kafka's name of an API ("Produce", "OffsetCommit"), as its request metrics use."""
    if api_key in _CONTROLLER_API_NAMES:
        return _CONTROLLER_API_NAMES[api_key]
    snake = api_key_map.get(api_key)
    if snake is None:
        return f"Unknown{api_key}"
    return "".join(part.capitalize() for part in snake.split("_"))


@cache
def request_type(api_key: int, version: int) -> type[Any]:
    """The request class for (api_key, version): kio's, or ours for the controller APIs
    kio lacks (4-7). Raises LookupError when neither has it."""
    try:
        return load_request_schema(api_key, version)
    except Exception:  # kio raises its own index errors and ImportError
        return controller_schema.request_type(api_key, version)


@cache
def response_type(api_key: int, version: int) -> type[Any]:
    try:
        return load_response_schema(api_key, version)
    except Exception:
        return controller_schema.response_type(api_key, version)


def parse_header(frame: bytes) -> tuple[RequestHeader, int]:
    """Parse the fixed part of a request header (v1 layout, shared by v2).

    Returns the header and the offset just after client_id. Tagged fields of a v2
    header (flexible versions) are skipped by `skip_header_tags`, because whether a
    request is flexible depends on a schema lookup the caller may refuse first.
    """
    if len(frame) < _HEADER_FIXED.size:
        raise ProtocolError(f"request of {len(frame)} bytes is shorter than a request header")
    api_key, api_version, correlation_id, client_len = _HEADER_FIXED.unpack_from(frame, 0)
    pos = _HEADER_FIXED.size
    client_id: str | None = None
    if client_len >= 0:
        end = pos + client_len
        if end > len(frame):
            raise ProtocolError("client_id runs past the end of the request")
        client_id = frame[pos:end].decode("utf-8", errors="replace")
        pos = end
    return RequestHeader(api_key, api_version, correlation_id, client_id), pos


def skip_header_tags(frame: bytes, pos: int) -> int:
    try:
        return skip_tags(frame, pos)
    except IndexError as e:
        raise ProtocolError("header tagged fields run past the end of the request") from e


def decode_request(header: RequestHeader, frame: bytes, pos: int) -> Any:
    """Parse the body of a request whose (api_key, version) has a schema."""
    cls = request_type(header.api_key, header.api_version)
    if cls.__flexible__:
        pos = skip_header_tags(frame, pos)
    check_lengths(cls, frame, pos)
    try:
        body, _size = entity_reader(cls)(frame, pos)
    except Exception as e:  # kio raises ValueError/KeyError/IndexError on bad input
        raise ProtocolError(
            f"cannot parse {cls.__name__} v{header.api_version}: {type(e).__name__}: {e}"
        ) from e
    return body


def encode_response(correlation_id: int, response: Any) -> list[bytes]:
    """Frame a response: size prefix, header (v0 or v1 per the schema), body."""
    out = io.BytesIO()
    out.write(b"\0\0\0\0")
    out.write(struct.pack(">i", correlation_id))
    if response.__header_schema__.__flexible__:
        out.write(b"\0")  # no tagged fields in the response header
    entity_writer(type(response))(out, response)
    data = out.getbuffer()
    struct.pack_into(">i", data, 0, len(data) - 4)
    return [bytes(data)]


def encode_request(correlation_id: int, client_id: str | None, request: Any) -> bytes:
    """Frame a request (used by our own client and tools)."""
    out = io.BytesIO()
    cid = (client_id or "").encode()
    out.write(b"\0\0\0\0")
    out.write(
        _HEADER_FIXED.pack(request.__api_key__, request.__version__, correlation_id, len(cid))
    )
    out.write(cid)
    if request.__flexible__:
        out.write(b"\0")
    entity_writer(type(request))(out, request)
    data = out.getbuffer()
    struct.pack_into(">i", data, 0, len(data) - 4)
    return bytes(data)
