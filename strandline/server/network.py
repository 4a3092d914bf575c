"""The asyncio socket server: frames in, handler tasks, responses out in order.

Requests on one connection are handled concurrently (a parked fetch does not hold
up the next request), but responses are written in request order, as Kafka's
protocol requires: one writer task per connection writes them whole, one after the
other, including the records a Fetch response sends from segment files with sendfile
(`zero_copy.py`). Malformed input closes only the offending connection.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import ssl
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, cast

from strandline.protocol.codec import (
    RequestHeader,
    decode_request,
    encode_response,
    parse_header,
)
from strandline.protocol.fetch_response import Chunk, encode_chunked_response
from strandline.protocol.framing import ProtocolError, read_frame
from strandline.security.listeners import Listener
from strandline.security.sasl_server import SaslSettings
from strandline.security.tls import (
    NoMatchingRule,
    SslPrincipalMapper,
    peer_principal,
    server_context,
    settings_for_listener,
)
from strandline.server import clock
from strandline.server.apis import REGISTRY
from strandline.server.apis.api_versions import API_KEY as API_VERSIONS
from strandline.server.apis.api_versions import unsupported_version_response
from strandline.server.apis.groups import CLIENT_ADDRESS
from strandline.server.apis.registry import FramedResponse
from strandline.server.config import BrokerConfig
from strandline.server.connection_quotas import ConnectionLimits, ConnectionQuotas, IdleTracker
from strandline.server.context import BrokerContext
from strandline.server.metrics import RequestTiming
from strandline.server.purgatory import REMOTE_WAITS
from strandline.server.session import CURRENT_SESSION, Session
from strandline.server.zero_copy import SEND_REGIONS, has_regions, send_chunks

log = logging.getLogger(__name__)

Response = list[Chunk] | None
Pending = tuple[Awaitable[Response], RequestTiming | None]
_HIGH_WATER = 1 << 20
REAP_INTERVAL_S = 1.0
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
_MAX_IN_FLIGHT = 256
FETCH = 1


@dataclass
class _Connection:
    """What the reaper needs to close a connection that outstayed its bound."""

    writer: asyncio.StreamWriter
    peer: str
    listener: str


class SocketServer:
    """One asyncio server per listener (`listeners`), TLS on SSL/SASL_SSL listeners,
    a Session per connection, SASL before anything else on SASL listeners, and
    Kafka's connection limits (`connection_quotas.py`)."""

    def __init__(self, ctx: BrokerContext, config: BrokerConfig) -> None:
        self.ctx = ctx
        self.config = config
        self.listeners = config.listeners
        self.max_request_bytes = config.socket_request_max_bytes
        props = config.props
        # Kafka's SaslServerAuthenticator reads at most sasl.server.max.receive.size per
        # receive until the connection has authenticated: an anonymous peer cannot make
        # the broker hold socket.request.max.bytes (100 MiB) per connection.
        self._pre_auth_max: dict[str, int] = {
            x.name: min(
                self.max_request_bytes,
                SaslSettings.from_props(props, x.name).max_receive_size,
            )
            for x in self.listeners.listeners
            if x.security_protocol.uses_sasl
        }
        # Fetched records from the page cache to plaintext sockets with sendfile (off:
        # read into memory, as on TLS listeners); a Strandline switch, Kafka has none.
        self.zero_copy = props.get("strandline.zero.copy.enable", "true").lower() != "false"
        self._tls: dict[str, tuple[ssl.SSLContext, SslPrincipalMapper]] = {}
        for listener in self.listeners.listeners:
            if listener.security_protocol.uses_tls:
                settings = settings_for_listener(props, listener.name, listener.security_protocol)
                self._tls[listener.name] = (
                    server_context(settings, listener=listener.name),
                    settings.principal_mapper(),
                )
        self.failed_authentication_delay_s = (
            int(props.get("connection.failed.authentication.delay.ms", "100")) / 1000
        )
        self.limits = ConnectionLimits.from_props(props, [x.name for x in self.listeners.listeners])
        self.quotas = ConnectionQuotas(
            self.limits,
            self.listeners.inter_broker_listener,
            listener_count=len(self.listeners.listeners),
        )
        self.tracker: IdleTracker[asyncio.Task[None]] = IdleTracker(self.limits)
        self._servers: list[asyncio.base_events.Server] = []
        self._connections: dict[asyncio.Task[None], _Connection] = {}
        self._reaper: asyncio.Task[None] | None = None

    async def start(self) -> None:
        for listener in self.listeners.listeners:
            self._servers.append(
                await asyncio.start_server(
                    functools.partial(self._on_connection, listener),
                    listener.bind_host,
                    listener.port,
                    reuse_address=True,
                    limit=1 << 20,
                )
            )
        self._reaper = asyncio.create_task(self._reap(), name="connection-reaper")

    async def stop(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
        for server in self._servers:
            server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)

    async def _reap(self) -> None:
        """Close connections idle (or unauthenticated) past their bound; abort, so a
        peer that never reads cannot hold the socket open."""
        while True:
            await asyncio.sleep(REAP_INTERVAL_S)
            for task, reason in self.tracker.expired(clock.monotonic_s()):
                conn = self._connections.get(task)
                if conn is not None:
                    log.info(
                        "closing connection from %s on %s: %s", conn.peer, conn.listener, reason
                    )
                    conn.writer.transport.abort()
                    task.cancel()

    async def _on_connection(
        self, listener: Listener, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        peer_address = writer.get_extra_info("peername")
        ip = str(peer_address[0]) if peer_address else ""
        peer = f"{ip}:{peer_address[1]}" if peer_address else "?"
        refused = self.quotas.try_accept(ip, clock.monotonic_s(), listener.name)
        if refused is not None:
            log.info("refusing connection from %s on %s: %s", peer, listener.name, refused)
            writer.transport.abort()
            return
        protocol = listener.security_protocol
        session = Session(
            listener.name,
            protocol,
            ip,
            authenticated=not protocol.uses_sasl,
            peer_port=int(peer_address[1]) if peer_address else 0,
        )
        self._connections[task] = _Connection(writer, peer, listener.name)
        self.tracker.opened(
            task, clock.monotonic_s(), authenticated=not (protocol.uses_tls or protocol.uses_sasl)
        )
        try:
            if protocol.uses_tls and not await self._start_tls(listener, writer, session, peer):
                return
            if protocol.uses_tls and not protocol.uses_sasl:
                self.tracker.authenticated(task, clock.monotonic_s())
            await self._serve(task, reader, writer, session, peer)
        finally:
            self.tracker.closed(task)
            self.quotas.release(ip, listener.name)
            self._connections.pop(task, None)
            writer.close()

    async def _start_tls(
        self, listener: Listener, writer: asyncio.StreamWriter, session: Session, peer: str
    ) -> bool:
        """The TLS handshake, first thing on the connection (an earlier read would eat
        the ClientHello); on an SSL listener the principal comes from the certificate."""
        context, mapper = self._tls[listener.name]
        try:
            await writer.start_tls(
                context, ssl_handshake_timeout=self.limits.authentication_ms / 1000
            )
        except (ssl.SSLError, ConnectionError, TimeoutError, OSError) as e:
            log.warning("TLS handshake with %s on %s failed: %s", peer, listener.name, e)
            return False
        if not session.security_protocol.uses_sasl:
            try:
                session.principal = peer_principal(writer.get_extra_info("ssl_object"), mapper)
            except NoMatchingRule as e:
                log.warning("no principal for %s on %s: %s", peer, listener.name, e)
                return False
        return True

    async def _serve(
        self,
        task: asyncio.Task[None],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        session: Session,
        peer: str,
    ) -> None:
        # Handler tasks copy these: JoinGroup records the member's host, as Kafka does,
        # and every handler finds the connection's principal.
        CLIENT_ADDRESS.set(session.peer_host)
        CURRENT_SESSION.set(session)
        # Only a plaintext socket can take sendfile: TLS must encrypt every byte in
        # user space (Kafka copies there too), so its Fetch handlers read bytes.
        sendfile = self.zero_copy and writer.get_extra_info("ssl_object") is None
        SEND_REGIONS.set(sendfile)
        # Bounded, so a client that pipelines without reading is back-pressured (Kafka mutes it).
        pending: asyncio.Queue[Pending | None] = asyncio.Queue(maxsize=_MAX_IN_FLIGHT)
        writer_task = asyncio.create_task(
            self._write_responses(writer, pending, peer, task, session, sendfile)
        )
        pre_auth_max = self._pre_auth_max.get(session.listener, self.max_request_bytes)

        def bound() -> tuple[int, str]:
            # Looked at once the size prefix is in: the login may have finished meanwhile.
            if session.authenticated:
                return self.max_request_bytes, "socket.request.max.bytes"
            return pre_auth_max, "sasl.server.max.receive.size (before authentication)"

        try:
            while True:
                frame = await read_frame(reader, bound)
                if frame is None:
                    break
                self.tracker.request_received(task, clock.monotonic_s())
                await pending.put(self._dispatch(frame, clock.perf_s(), session))
        except ProtocolError as e:
            log.warning("closing connection from %s on %s: %s", peer, session.listener, e)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            if writer.transport.is_closing():
                # Aborted (the reaper): nothing more can be delivered, and a sendfile
                # blocked on a full socket would never learn of the close (asyncio
                # leaves its write callback on the closed descriptor): stop the writer.
                writer_task.cancel()
            else:
                await pending.put(None)
            try:
                await writer_task
            except (Exception, asyncio.CancelledError):  # noqa: BLE001 - going away regardless
                pass

    def _dispatch(self, frame: bytes, received: float, session: Session) -> Pending:
        """Parse the request and start its handler; a malformed request raises
        ProtocolError here so the read loop closes the connection."""
        header, pos = parse_header(frame)
        spec = REGISTRY.get(header.api_key)
        if spec is None:
            raise ProtocolError(f"unknown API key {header.api_key}")
        _check_authentication(session, header.api_key)
        if not spec.min_version <= header.api_version <= spec.max_version:
            if header.api_key == API_VERSIONS:
                answer: list[Chunk] = list(
                    encode_response(header.correlation_id, unsupported_version_response())
                )
                return _done(answer), None
            raise ProtocolError(
                f"API key {header.api_key} version {header.api_version} is not supported "
                f"(supported: {spec.min_version}..{spec.max_version})"
            )
        if spec.decode is not None:
            request = spec.decode(header.api_version, frame, pos)
        else:
            request = decode_request(header, frame, pos)
        timing = RequestTiming(header.api_key, header.api_version, received)
        return asyncio.ensure_future(self._handle(spec.handler, header, request, timing)), timing

    async def _handle(
        self, handler: Any, header: RequestHeader, request: Any, timing: RequestTiming
    ) -> Response:
        timing.started = clock.perf_s()
        REMOTE_WAITS.set(timing.remote_wait)  # this task's own context
        response = await handler(self.ctx, header, request)
        encoded: Response
        if response is None:
            encoded = None
        elif isinstance(response, FramedResponse):
            encoded = response.chunks
        elif header.api_key == FETCH:
            # Its records may be FileRegions: framed as chunks, sent without a copy.
            encoded = encode_chunked_response(header.correlation_id, response)
        else:
            encoded = list(encode_response(header.correlation_id, response))
        timing.handled = clock.perf_s()
        return encoded

    async def _write_responses(
        self,
        writer: asyncio.StreamWriter,
        pending: asyncio.Queue[Pending | None],
        peer: object,
        task: asyncio.Task[None],
        session: Session,
        sendfile: bool,
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
                timing.dequeued = clock.perf_s()
            if chunks is not None:
                if has_regions(chunks):
                    try:
                        sendfile = await send_chunks(writer, chunks, sendfile)
                    except Exception as e:  # noqa: BLE001 - the frame is cut: close
                        log.warning("closing connection from %s: sending failed: %s", peer, e)
                        writer.transport.abort()
                        return
                else:
                    writer.writelines(cast(list[bytes], chunks))  # no region among them
                if writer.transport.get_write_buffer_size() > _HIGH_WATER:
                    await writer.drain()
            if timing is not None and metrics.enabled:
                metrics.request_done(timing, clock.perf_s())
            now = clock.monotonic_s()
            self.tracker.response_sent(task, now)
            if session.sasl is not None:
                if session.sasl.failed:
                    # Kafka closes after sending the failure, no second try on this
                    # socket, but only after connection.failed.authentication.delay.ms:
                    # a client that reads the answer and the close together (kafka-python)
                    # would otherwise see a dropped connection instead of the error.
                    await writer.drain()
                    await asyncio.sleep(self.failed_authentication_delay_s)
                    writer.transport.abort()
                    return
                if session.authenticated:
                    self.tracker.authenticated(task, now)


# Before SASL authentication only these are served (Kafka's SaslServerAuthenticator).
_BEFORE_AUTHENTICATION = frozenset({API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE})


def _check_authentication(session: Session, api_key: int) -> None:
    if not session.authenticated:
        if api_key not in _BEFORE_AUTHENTICATION:
            raise ProtocolError(
                f"API key {api_key} before SASL authentication on {session.listener}"
            )
        return
    expires = session.session_expires_at
    if (
        expires is not None
        and clock.monotonic_s() > expires
        and api_key
        not in (
            SASL_HANDSHAKE,
            SASL_AUTHENTICATE,
        )
    ):
        # KIP-368: past its session lifetime a connection must re-authenticate first.
        raise ProtocolError(f"SASL session expired on {session.listener}; re-authenticate")


def _done(value: Response) -> Awaitable[Response]:
    future: asyncio.Future[Response] = asyncio.get_event_loop().create_future()
    future.set_result(value)
    return future
