"""ApiVersions (18): what this broker speaks. Only implemented APIs are listed."""

from __future__ import annotations

import datetime
import re
from typing import Any

from kio.schema.errors import ErrorCode

from strandline.protocol.codec import RequestHeader
from strandline.protocol.messages import build, response_class
from strandline.server.apis.registry import REGISTRY, api
from strandline.server.context import BrokerContext

API_KEY = 18
MAX_VERSION = 3
NO_THROTTLE = datetime.timedelta(0)
NO_THROTTLE_MS = 0  # the same, for the hand-written encoders
# Kafka's ApiVersionsRequest.SOFTWARE_NAME_VERSION_PATTERN (KIP-511).
SOFTWARE_NAME_VERSION = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def api_versions_response(
    version: int, error: ErrorCode = ErrorCode.none, with_keys: bool = True
) -> Any:
    entry = response_class(API_KEY, version, "ApiVersion")
    keys = tuple(
        entry(api_key=s.api_key, min_version=s.min_version, max_version=s.max_version)
        for s in sorted(REGISTRY.values(), key=lambda s: s.api_key)
        if with_keys
    )
    return build(
        response_class(API_KEY, version, "ApiVersionsResponse"),
        error_code=error,
        api_keys=keys,
        throttle_time=NO_THROTTLE,
    )


def unsupported_version_response() -> Any:
    """KIP-511: an ApiVersions request of a version we do not know is answered at v0
    with UNSUPPORTED_VERSION and our ranges, so the client can retry lower."""
    return api_versions_response(0, ErrorCode.unsupported_version)


@api(API_KEY, 0, MAX_VERSION)
async def handle(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    if header.api_version >= 3 and not all(
        SOFTWARE_NAME_VERSION.fullmatch(str(v))
        for v in (request.client_software_name, request.client_software_version)
    ):
        # As Kafka's KafkaApis: a malformed client name or version is INVALID_REQUEST,
        # with no version ranges.
        return api_versions_response(header.api_version, ErrorCode.invalid_request, False)
    return api_versions_response(header.api_version)
