"""The asyncio socket server: frames in, handler tasks, responses out in order.

Requests on one connection are handled concurrently (a parked fetch does not hold
up the next request), but responses are written in request order, as Kafka's
protocol requires. Malformed input closes only the offending connection.
"""

from __future__ import annotations

import asyncio
import logging
import time
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
from strandline.server.apis.groups import CLIENT_ADDRESS
from strandline.server.context import BrokerContext
from strandline.server.metrics import RequestTiming
from strandline.server.purgatory import REMOTE_WAITS

log = logging.getLogger(__name__)

Response = list[bytes] | None
Pending = tuple[Awaitable[Response], RequestTiming | None]
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
        # Handler tasks copy this context: JoinGroup records the member's host, as Kafka.
        CLIENT_ADDRESS.set(str(peer[0]) if peer else "")
        # Bounded, so a client that pipelines without reading is back-pressured (Kafka mutes it).
        pending: asyncio.Queue[Pending | None] = asyncio.Queue(maxsize=_MAX_IN_FLIGHT)
        writer_task = asyncio.create_task(self._write_responses(writer, pending, peer))
        try:
            while True:
                frame = await read_frame(reader, self.max_request_bytes)
                if frame is None:
                    break
                await pending.put(self._dispatch(frame, time.perf_counter()))
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

    def _dispatch(self, frame: bytes, received: float) -> Pending:
        """Parse the request and start its handler; a malformed request raises
        ProtocolError here so the read loop closes the connection."""
        header, pos = parse_header(frame)
        spec = REGISTRY.get(header.api_key)
        if spec is None:
            raise ProtocolError(f"unknown API key {header.api_key}")
        if not spec.min_version <= header.api_version <= spec.max_version:
            if header.api_key == API_VERSIONS:
                answer = encode_response(header.correlation_id, unsupported_version_response())
                return _done(answer), None
            raise ProtocolError(
                f"API key {header.api_key} version {header.api_version} is not supported "
                f"(supported: {spec.min_version}..{spec.max_version})"
            )
        request = decode_request(header, frame, pos)
        timing = RequestTiming(header.api_key, header.api_version, received)
        return asyncio.ensure_future(self._handle(spec.handler, header, request, timing)), timing

    async def _handle(
        self, handler: Any, header: RequestHeader, request: Any, timing: RequestTiming
    ) -> Response:
        timing.started = time.perf_counter()
        REMOTE_WAITS.set(timing.remote_wait)  # this task's own context
        response = await handler(self.ctx, header, request)
        encoded = None if response is None else encode_response(header.correlation_id, response)
        timing.handled = time.perf_counter()
        return encoded

    async def _write_responses(
        self,
        writer: asyncio.StreamWriter,
        pending: asyncio.Queue[Pending | None],
        peer: object,
    ) -> None:
        metrics = self.ctx.metrics
        while True:
            item = await pending.get()
            if item is None:
                return
            answer, timing = item
            try:
                chunks = await answer
            except Exception:
                log.exception("request from %s failed; closing the connection", peer)
                writer.transport.abort()
                return
            if timing is not None:
                timing.dequeued = time.perf_counter()
            if chunks is not None:
                writer.writelines(chunks)
                if writer.transport.get_write_buffer_size() > _HIGH_WATER:
                    await writer.drain()
            if timing is not None and metrics.enabled:
                metrics.request_done(timing, time.perf_counter())


def _done(value: Response) -> Awaitable[Response]:
    future: asyncio.Future[Response] = asyncio.get_event_loop().create_future()
    future.set_result(value)
    return future
