"""SaslHandshake (17) and SaslAuthenticate (36): SASL/PLAIN and SCRAM on SASL listeners.

The connection's `Session.sasl` holds its `SaslServer` (made at the first of these
requests, from the broker's properties: see `strandline.security.sasl_server`); these
handlers feed it and copy the outcome into the session: the principal,
`authenticated`, and (KIP-368) `session_expires_at`. After a failure the session is
left unauthenticated and `session.sasl.failed` is set: the socket server closes the
connection once the response is written, as Kafka does.

On a listener without SASL both requests are answered ILLEGAL_SASL_STATE (KafkaApis'
answer there). SaslHandshake v0 (the old flow whose tokens follow unframed) is answered
like v1, but only framed SaslAuthenticate tokens are read afterwards.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from typing import Any

from kio.schema.errors import ErrorCode

from strandline.protocol.codec import RequestHeader
from strandline.protocol.messages import build, response_class
from strandline.security.credentials import CredentialCache
from strandline.security.principal import ANONYMOUS
from strandline.security.sasl_server import SaslServer, SaslSettings
from strandline.server import clock
from strandline.server.apis.registry import api
from strandline.server.context import BrokerContext
from strandline.server.session import Session, current_session

log = logging.getLogger(__name__)

SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36


def broker_credentials(ctx: BrokerContext) -> CredentialCache | None:
    """The broker's CredentialCache (`ctx.credentials`); without one only the static
    PLAIN users can log in."""
    credentials = getattr(ctx, "credentials", None)
    return credentials if isinstance(credentials, CredentialCache) else None


def _sasl_server(ctx: BrokerContext, session: Session) -> SaslServer:
    if not isinstance(session.sasl, SaslServer):
        settings = SaslSettings.from_props(ctx.config.props, session.listener)
        session.sasl = SaslServer.from_settings(
            settings, broker_credentials(ctx), clock.monotonic_s
        )
    return session.sasl


def _fail_session(session: Session, sasl: SaslServer) -> None:
    log.info(
        "SASL authentication of %s:%d on listener %s failed: %s",
        session.peer_host,
        session.peer_port,
        session.listener,
        sasl.failure_detail,
    )
    session.authenticated = False
    session.principal = ANONYMOUS
    session.session_expires_at = None


@api(SASL_HANDSHAKE, 0, 1)
async def sasl_handshake(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    session = current_session()
    if session.security_protocol.uses_sasl:
        sasl = _sasl_server(ctx, session)
        error, mechanisms = sasl.handshake(request.mechanism)
        if sasl.failed:
            _fail_session(session, sasl)
    else:
        error, mechanisms = ErrorCode.illegal_sasl_state, []
    return build(
        response_class(SASL_HANDSHAKE, header.api_version, "SaslHandshakeResponse"),
        error_code=error,
        mechanisms=tuple(mechanisms),
    )


@api(SASL_AUTHENTICATE, 0, 2)
async def sasl_authenticate(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    response_cls = response_class(SASL_AUTHENTICATE, header.api_version, "SaslAuthenticateResponse")
    session = current_session()
    if not session.security_protocol.uses_sasl:
        return build(
            response_cls,
            error_code=ErrorCode.illegal_sasl_state,
            error_message="SaslAuthenticate request received after successful authentication",
            auth_bytes=b"",
            session_lifetime=datetime.timedelta(0),
        )
    sasl = _sasl_server(ctx, session)
    # PLAIN against a SCRAM credential salts the password (thousands of HMACs): not on
    # the event loop. Clients send one SASL token at a time, so no two run at once.
    step = await asyncio.to_thread(sasl.authenticate, bytes(request.auth_bytes))
    if step.complete:
        assert step.principal is not None
        session.principal = step.principal
        session.authenticated = True
        session.session_expires_at = sasl.session_expires_at
    elif sasl.failed:
        _fail_session(session, sasl)
    return build(
        response_cls,
        error_code=step.error_code,
        error_message=step.error_message,
        auth_bytes=step.token_out,
        session_lifetime=datetime.timedelta(milliseconds=step.session_lifetime_ms),
    )
