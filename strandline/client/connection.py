"""A minimal Kafka request/response connection built on kio's codecs.

Frames are `int32 size | header | body`. The request header is v2 for flexible
request versions and v1 otherwise; the response header is v1 for flexible responses
and v0 otherwise, except ApiVersions, whose response header is always v0 (kio's
schemas carry the right header class in `__header_schema__`, so we follow it).
"""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Callable
from functools import partial
from typing import Any

from kio.serial import entity_reader

from strandline.client.security import ClientSecurity, SaslLoginError, sasl_login
from strandline.protocol.codec import encode_request, response_type

_SIZE = struct.Struct(">i")
_CORRELATION_ID = struct.Struct(">i")
PRODUCE_API_KEY = 0


class KafkaConnectionError(ConnectionError):
    """The connection failed or closed before a response arrived."""


class SaslError(KafkaConnectionError, SaslLoginError):
    """The broker refused our SASL login (wrong password, unknown mechanism)."""


def response_type_for(request: Any) -> type[Any]:
    """The response class matching a request (same API key and version), kio's or, for
    the controller APIs kio lacks, ours."""
    return response_type(request.__api_key__, request.__version__)


def expects_response(request: Any) -> bool:
    # An acks=0 produce is the one Kafka request the broker never answers.
    return not (request.__api_key__ == PRODUCE_API_KEY and getattr(request, "acks", 1) == 0)


def peek_correlation_id(payload: bytes) -> int:
    """Every response header version starts with the correlation id."""
    correlation_id: int = _CORRELATION_ID.unpack_from(payload, 0)[0]
    return correlation_id


def decode_response(
    payload: bytes | bytearray | memoryview, response_type: type[Any]
) -> tuple[int, Any]:
    """(correlation id, response) from a frame's payload (size prefix stripped)."""
    data = bytes(payload)  # kio's readers reject bytearray
    header, offset = entity_reader(response_type.__header_schema__)(data, 0)
    response, _ = entity_reader(response_type)(data, offset)
    return int(header.correlation_id), response


def _decode_body(response_type: type[Any], payload: bytes) -> Any:
    return decode_response(payload, response_type)[1]


class KafkaConnection:
    """One asyncio connection; concurrent `send` calls are pipelined and matched to
    their responses by correlation id."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        client_id: str | None = "strandline",
    ) -> None:
        self._reader = reader
        self._writer = writer
        self.client_id = client_id
        self._next_correlation_id = 0
        # correlation id -> (how to decode its response's payload, who waits for it)
        self._pending: dict[int, tuple[Callable[[bytes], Any], asyncio.Future[Any]]] = {}
        self._closed_error: BaseException | None = None
        self._read_task = asyncio.get_running_loop().create_task(self._read_loop())

    @classmethod
    async def open(
        cls,
        host: str,
        port: int,
        client_id: str | None = "strandline",
        timeout: float = 10.0,
        security: ClientSecurity | None = None,
    ) -> KafkaConnection:
        """Connect; with `security`, over TLS and/or logged in with SASL first."""
        context = None if security is None else security.ssl_context
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(
                host,
                port,
                ssl=context,
                server_hostname=host
                if context is not None and security and security.check_hostname
                else None,
            ),
            timeout,
        )
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = cls(reader, writer, client_id)
        if security is not None and security.sasl_mechanism is not None:
            try:
                await asyncio.wait_for(conn._authenticate(security), timeout)
            except BaseException:
                await conn.close()
                raise
        return conn

    async def _authenticate(self, security: ClientSecurity) -> None:
        """Drive the shared SASL exchange (`security.sasl_login`) over this connection."""
        login = sasl_login(security)
        request = next(login)
        while True:
            response = await self.send(request)
            try:
                request = login.send(response)
            except StopIteration:
                return
            except SaslLoginError as exc:
                raise SaslError(str(exc)) from exc

    @property
    def closed(self) -> bool:
        return self._closed_error is not None

    async def send(
        self,
        request: Any,
        response_type: type[Any] | None = None,
        timeout: float | None = None,
    ) -> Any:
        """Send a kio request and await its response (None for an acks=0 produce).

        `response_type` is needed only for messages kio does not index (the
        inter-broker APIs defined in strandline.protocol).
        """
        if self._closed_error is not None:
            raise KafkaConnectionError(f"connection closed: {self._closed_error}")
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) & 0x7FFFFFFF
        frame = encode_request(correlation_id, self.client_id, request)
        if not expects_response(request):
            self._writer.write(frame)
            await self._writer.drain()
            return None
        return await self._exchange(
            correlation_id,
            frame,
            partial(_decode_body, response_type or response_type_for(request)),
            timeout,
        )

    async def send_framed(
        self,
        encode: Callable[[int], bytes],
        decode: Callable[[bytes], Any],
        timeout: float | None = None,
    ) -> Any:
        """Send a request framed by a hand-written encoder (`encode(correlation_id)`)
        and return `decode(payload)` of its response: the replica fetcher's Fetch."""
        if self._closed_error is not None:
            raise KafkaConnectionError(f"connection closed: {self._closed_error}")
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) & 0x7FFFFFFF
        return await self._exchange(correlation_id, encode(correlation_id), decode, timeout)

    async def _exchange(
        self,
        correlation_id: int,
        frame: bytes,
        decode: Callable[[bytes], Any],
        timeout: float | None,
    ) -> Any:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[correlation_id] = (decode, future)
        # Registered and written with no await in between: pipelining keeps order.
        self._writer.write(frame)
        try:
            await self._writer.drain()
            return await asyncio.wait_for(asyncio.shield(future), timeout)
        finally:
            self._pending.pop(correlation_id, None)

    async def _read_loop(self) -> None:
        error: BaseException
        try:
            while True:
                size_bytes = await self._reader.readexactly(4)
                (size,) = _SIZE.unpack(size_bytes)
                if size < 4:
                    raise KafkaConnectionError(f"invalid response frame size {size}")
                payload = await self._reader.readexactly(size)
                correlation_id = peek_correlation_id(payload)
                entry = self._pending.get(correlation_id)
                if entry is None:
                    continue  # its sender timed out and left
                decode, future = entry
                if future.done():
                    continue
                try:
                    future.set_result(decode(payload))
                except Exception as exc:  # noqa: BLE001 - a bad response fails its sender
                    future.set_exception(exc)
        except asyncio.IncompleteReadError:
            error = KafkaConnectionError("connection closed by the broker")
        except asyncio.CancelledError:
            error = KafkaConnectionError("connection closed")
        except Exception as exc:  # noqa: BLE001 - reported to every waiting sender
            error = exc
        self._fail_pending(error)

    def _fail_pending(self, error: BaseException) -> None:
        self._closed_error = error
        for _, future in self._pending.values():
            if not future.done():
                future.set_exception(
                    error
                    if isinstance(error, KafkaConnectionError)
                    else KafkaConnectionError(str(error))
                )
        self._pending.clear()

    async def close(self) -> None:
        self._read_task.cancel()
        try:
            await self._read_task
        except asyncio.CancelledError:
            # The read task's own cancellation is expected; ours (the caller being
            # cancelled, e.g. a fetcher at shutdown) must go on, or the caller hangs.
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise
        if self._closed_error is None:
            self._fail_pending(KafkaConnectionError("connection closed"))
        self._writer.close()
        try:
            await self._writer.wait_closed()
        except (ConnectionError, OSError):
            pass

    async def __aenter__(self) -> KafkaConnection:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def send_request(
    host: str,
    port: int,
    request: Any,
    timeout: float = 10.0,
    response_type: type[Any] | None = None,
    client_id: str | None = "strandline-tool",
) -> Any:
    """Blocking one-shot request for tools and readiness probes."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(encode_request(0, client_id, request))
        if not expects_response(request):
            return None
        (size,) = _SIZE.unpack(_recv_exactly(sock, 4))
        payload = _recv_exactly(sock, size)
    _, response = decode_response(payload, response_type or response_type_for(request))
    return response


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    chunks: list[bytes] = []
    remaining = n
    while remaining:
        chunk = sock.recv(min(remaining, 1 << 20))
        if not chunk:
            raise KafkaConnectionError("connection closed by the broker")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)
