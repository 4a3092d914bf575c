"""The handler table: API key -> supported versions and the coroutine that answers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from strandline.protocol.codec import RequestHeader
from strandline.protocol.fetch_response import Chunk
from strandline.server.context import BrokerContext

Handler = Callable[[BrokerContext, RequestHeader, Any], Awaitable[Any | None]]
# (version, frame, position after the header's client_id) -> the request body.
Decoder = Callable[[int, bytes, int], Any]


class FramedResponse(NamedTuple):
    """A response the handler framed itself (the hand-written Produce and Fetch
    encoders): sent as these chunks, not encoded again from kio objects."""

    chunks: list[Chunk]


@dataclass(frozen=True)
class ApiSpec:
    api_key: int
    min_version: int
    max_version: int
    handler: Handler
    # A hand-written body decoder for the hot path (Produce, Fetch); kio's otherwise.
    decode: Decoder | None = None


REGISTRY: dict[int, ApiSpec] = {}


def api(
    api_key: int, min_version: int, max_version: int, decode: Decoder | None = None
) -> Callable[[Handler], Handler]:
    """Register a handler; only registered APIs are advertised by ApiVersions."""

    def register(handler: Handler) -> Handler:
        REGISTRY[api_key] = ApiSpec(api_key, min_version, max_version, handler, decode)
        return handler

    return register
