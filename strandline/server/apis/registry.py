"""The handler table: API key -> supported versions and the coroutine that answers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from strandline.protocol.codec import RequestHeader
from strandline.server.context import BrokerContext

Handler = Callable[[BrokerContext, RequestHeader, Any], Awaitable[Any | None]]


@dataclass(frozen=True)
class ApiSpec:
    api_key: int
    min_version: int
    max_version: int
    handler: Handler


REGISTRY: dict[int, ApiSpec] = {}


def api(api_key: int, min_version: int, max_version: int) -> Callable[[Handler], Handler]:
    """Register a handler; only registered APIs are advertised by ApiVersions."""

    def register(handler: Handler) -> Handler:
        REGISTRY[api_key] = ApiSpec(api_key, min_version, max_version, handler)
        return handler

    return register
