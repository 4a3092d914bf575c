"""The asyncio socket server: frames in, handler tasks, responses out in order.

Requests on one connection are handled concurrently (a parked fetch does not hold
up the next request), but responses are written in request order, as Kafka's
protocol requires. Malformed input closes only the offending connection.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Any

from strandline.protocol.codec import (
    RequestHeader,
    decode_request,
    encode_response,
    parse_header,
)
from strandline.protocol.framing import ProtocolError, read_frame
from strandline.server.apis import REGISTRY
from strandline.server.apis.api_versions import API_KEY as API_VERSIONS
from strandline.server.apis.api_versions import unsupported_version_response
from strandline.server.context import BrokerContext

log = logging.getLogger(__name__)

Response = list[bytes] | None
_HIGH_WATER = 1 << 20
_MAX_IN_FLIGHT = 256


class SocketServer:
    def __init__(self, ctx: BrokerContext, host: str, port: int, max_request_bytes: int) -> None:
        self.ctx = ctx
        self.host = host
        self.port = port
        self.max_request_bytes = max_request_bytes
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(
            self._on_connection, self.host, self.port, reuse_address=True, limit=1 << 20
        )

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)

    async def _on_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        peer = writer.get_extra_info("peername")
        # Bounded, so a client that pipelines without reading is back-pressured (Kafka mutes it).
        pending: asyncio.Queue[Awaitable[Response] | None] = asyncio.Queue(maxsize=_MAX_IN_FLIGHT)
        writer_task = asyncio.create_task(self._write_responses(writer, pending, peer))
        try:
            while True:
                frame = await read_frame(reader, self.max_request_bytes)
                if frame is None:
                    break
                await pending.put(self._dispatch(frame))
        except ProtocolError as e:
            log.warning("closing connection from %s: %s", peer, e)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            await pending.put(None)
            try:
                await writer_task
            except Exception:  # noqa: BLE001 - the connection is going away regardless
                pass
            writer.close()
            self._connections.discard(task)

    def _dispatch(self, frame: bytes) -> Awaitable[Response]:
        """Parse the request and start its handler; a malformed request raises
        ProtocolError here so the read loop closes the connection."""
        header, pos = parse_header(frame)
        spec = REGISTRY.get(header.api_key)
        if spec is None:
            raise ProtocolError(f"unknown API key {header.api_key}")
        if not spec.min_version <= header.api_version <= spec.max_version:
            if header.api_key == API_VERSIONS:
                return _done(encode_response(header.correlation_id, unsupported_version_response()))
            raise ProtocolError(
                f"API key {header.api_key} version {header.api_version} is not supported "
                f"(supported: {spec.min_version}..{spec.max_version})"
            )
        request = decode_request(header, frame, pos)
        return asyncio.ensure_future(self._handle(spec.handler, header, request))

    async def _handle(self, handler: Any, header: RequestHeader, request: Any) -> Response:
        response = await handler(self.ctx, header, request)
        if response is None:
            return None
        return encode_response(header.correlation_id, response)

    async def _write_responses(
        self,
        writer: asyncio.StreamWriter,
        pending: asyncio.Queue[Awaitable[Response] | None],
        peer: object,
    ) -> None:
        while True:
            item = await pending.get()
            if item is None:
                return
            try:
                chunks = await item
            except Exception:
                log.exception("request from %s failed; closing the connection", peer)
                writer.transport.abort()
                return
            if chunks is None:
                continue
            writer.writelines(chunks)
            if writer.transport.get_write_buffer_size() > _HIGH_WATER:
                await writer.drain()


def _done(value: Response) -> Awaitable[Response]:
    future: asyncio.Future[Response] = asyncio.get_event_loop().create_future()
    future.set_result(value)
    return future
