"""One client connection's security state (Kafka's RequestContext principal and
listener), visible to request handlers through `CURRENT_SESSION`."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from strandline.security.principal import ANONYMOUS, KafkaPrincipal
from strandline.security.protocol import SecurityProtocol

__all__ = ["CURRENT_SESSION", "SecurityProtocol", "Session", "current_session"]


@dataclass
class Session:
    """Created when a connection is accepted. On a SASL listener the principal is
    ANONYMOUS and `authenticated` False until SaslAuthenticate succeeds; until then
    only ApiVersions, SaslHandshake and SaslAuthenticate are served."""

    listener: str
    security_protocol: SecurityProtocol
    peer_host: str
    principal: KafkaPrincipal = ANONYMOUS
    authenticated: bool = True
    peer_port: int = 0
    # The SASL exchange in progress (a `strandline.security.sasl_server.SaslServer`).
    sasl: Any = field(default=None, repr=False)
    # KIP-368: when the SASL session ends (monotonic seconds); None = never.
    session_expires_at: float | None = None


# Set by the socket server for each connection; handler tasks copy it.
CURRENT_SESSION: ContextVar[Session | None] = ContextVar("current_session", default=None)


def current_session() -> Session:
    """The session of the request being handled; a handler called outside any
    connection (in-process) is an anonymous PLAINTEXT client."""
    session = CURRENT_SESSION.get()
    if session is None:
        return Session("PLAINTEXT", SecurityProtocol.PLAINTEXT, "")
    return session
