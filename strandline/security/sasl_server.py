"""The per-connection SASL authenticator (Kafka's SaslServerAuthenticator), pure.

One `SaslServer` lives in a connection's `Session.sasl` from its first SaslHandshake to
its close. It takes the mechanism from `handshake` and the tokens from `authenticate`
(SaslHandshake v1 + SaslAuthenticate, the framed flow every current client uses) and
says what to answer. States, as Kafka's:

    HANDSHAKE --handshake(enabled)--> AUTHENTICATE --tokens--> COMPLETE
        |                                   |                      |
        +-- anything else --> FAILED <------+-- bad token          |
                                                                   |
    COMPLETE --handshake (KIP-368 re-authentication)--> AUTHENTICATE (or FAILED)

FAILED is final: the socket server must close the connection once the failing
response is written (`failed`), as Kafka does. Re-authentication is accepted only when
`connections.max.reauth.ms` > 0 (the session then has an expiry), at most once a
second, with the same mechanism, and must end with the same principal.

Broker properties read by `SaslSettings.from_props` (each may also be given per
listener as `listener.name.<listener, lower case>.<key>`, as in Kafka):

- `sasl.enabled.mechanisms` (default `PLAIN,SCRAM-SHA-256,SCRAM-SHA-512`; Kafka's
  default GSSAPI is not supported, nor is OAUTHBEARER);
- `sasl.plain.users` (default empty): static SASL/PLAIN users, `alice:secret,bob:pw`;
- `connections.max.reauth.ms` (default 0: sessions never expire);
- `sasl.server.max.receive.size` (default 524288, Kafka's): the largest token taken.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from kio.schema.errors import ErrorCode

from strandline.security.plain import PLAIN, PlainServer, parse_plain_users
from strandline.security.principal import KafkaPrincipal, user
from strandline.security.scram import (
    SCRAM_MECHANISMS,
    SaslAuthenticationError,
    ScramCredential,
    ScramServer,
    invalid_credentials_message,
    server_nonce,
)

SUPPORTED_MECHANISMS = (PLAIN, *SCRAM_MECHANISMS)
DEFAULT_ENABLED_MECHANISMS = SUPPORTED_MECHANISMS
# Kafka's sasl.server.max.receive.size default.
DEFAULT_MAX_RECEIVE_SIZE = 524288
# KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS: re-authentication at most once a second.
MIN_REAUTH_INTERVAL_S = 1.0


class CredentialStore(Protocol):
    """Where SCRAM credentials come from (strandline.security.credentials.CredentialCache)."""

    def get(self, user: str, mechanism: str) -> ScramCredential | None: ...


class _Exchange(Protocol):
    username: str | None

    @property
    def complete(self) -> bool: ...

    def evaluate(self, token: bytes) -> bytes: ...


@dataclass(frozen=True)
class SaslSettings:
    enabled_mechanisms: tuple[str, ...] = DEFAULT_ENABLED_MECHANISMS
    plain_users: Mapping[str, str] = field(default_factory=dict, repr=False)
    reauth_ms: int = 0
    max_receive_size: int = DEFAULT_MAX_RECEIVE_SIZE

    @classmethod
    def from_props(cls, props: Mapping[str, str], listener: str | None = None) -> SaslSettings:
        """Raises ValueError naming the key; call it at start-up to refuse a bad config."""

        def get(key: str, default: str) -> str:
            if listener:
                scoped = f"listener.name.{listener.lower()}.{key}"
                if scoped in props:
                    return props[scoped]
            return props.get(key, default)

        def get_int(key: str, default: int) -> int:
            text = get(key, str(default))
            try:
                value = int(text)
            except ValueError:
                raise ValueError(f"{key}={text!r} is not an integer") from None
            if value < 0:
                raise ValueError(f"{key}={value} must not be negative")
            return value

        mechanisms = parse_mechanisms(
            get("sasl.enabled.mechanisms", ",".join(DEFAULT_ENABLED_MECHANISMS))
        )
        return cls(
            enabled_mechanisms=mechanisms,
            plain_users=parse_plain_users(get("sasl.plain.users", "")),
            reauth_ms=get_int("connections.max.reauth.ms", 0),
            max_receive_size=get_int("sasl.server.max.receive.size", DEFAULT_MAX_RECEIVE_SIZE),
        )


def parse_mechanisms(text: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    if not names:
        raise ValueError("sasl.enabled.mechanisms: No SASL mechanisms are enabled")
    unsupported = [n for n in names if n not in SUPPORTED_MECHANISMS]
    if unsupported:
        raise ValueError(
            f"sasl.enabled.mechanisms: {', '.join(unsupported)} not supported "
            f"(supported: {', '.join(SUPPORTED_MECHANISMS)})"
        )
    return names


@dataclass(frozen=True)
class AuthStep:
    """What to answer one SaslAuthenticate with."""

    error_code: ErrorCode
    error_message: str | None = None
    token_out: bytes = b""
    complete: bool = False
    principal: KafkaPrincipal | None = None
    session_lifetime_ms: int = 0


class _State(enum.Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    REAUTH_BAD_MECHANISM = "reauth-bad-mechanism"
    COMPLETE = "complete"
    FAILED = "failed"


class SaslServer:
    """`now_s` is a monotonic clock in seconds (the broker's `clock.monotonic_s`);
    `session_expires_at` is on that clock."""

    def __init__(
        self,
        enabled_mechanisms: Iterable[str],
        credentials: CredentialStore | None,
        plain_users: Mapping[str, str],
        now_s: Callable[[], float],
        reauth_ms: int = 0,
        *,
        max_receive_size: int = DEFAULT_MAX_RECEIVE_SIZE,
        nonce: Callable[[], str] = server_nonce,
    ) -> None:
        self.enabled_mechanisms = parse_mechanisms(",".join(enabled_mechanisms))
        self._credentials = credentials
        self._plain_users = dict(plain_users)
        self._now_s = now_s
        self.reauth_ms = reauth_ms
        self.max_receive_size = max_receive_size
        self._nonce = nonce
        self._state = _State.HANDSHAKE
        self._exchange: _Exchange | None = None
        self.mechanism: str | None = None
        self.principal: KafkaPrincipal | None = None
        self.session_expires_at: float | None = None
        # Set while a re-authentication is under way: what the session was before.
        self._previous: tuple[str, KafkaPrincipal] | None = None
        self._last_reauth_start: float | None = None
        self._bad_mechanism_message = ""
        # For the broker's log: why the last failure happened (never sent to a client).
        self.failure_detail: str | None = None

    @classmethod
    def from_settings(
        cls,
        settings: SaslSettings,
        credentials: CredentialStore | None,
        now_s: Callable[[], float],
    ) -> SaslServer:
        return cls(
            settings.enabled_mechanisms,
            credentials,
            settings.plain_users,
            now_s,
            settings.reauth_ms,
            max_receive_size=settings.max_receive_size,
        )

    @property
    def complete(self) -> bool:
        """Authenticated (and not re-authenticating)."""
        return self._state is _State.COMPLETE

    @property
    def failed(self) -> bool:
        """The connection must be closed after the current response."""
        return self._state is _State.FAILED

    @property
    def reauthenticating(self) -> bool:
        return self._previous is not None

    # --- SaslHandshake ---------------------------------------------------------------

    def handshake(self, mechanism: str) -> tuple[ErrorCode, list[str]]:
        enabled = list(self.enabled_mechanisms)
        if self._state is _State.HANDSHAKE:
            if mechanism not in self.enabled_mechanisms:
                return self._handshake_failed(f"Unsupported SASL mechanism {mechanism}"), enabled
            self._start(mechanism)
            return ErrorCode.none, enabled
        if self._state is _State.COMPLETE:
            error = self._begin_reauthentication(mechanism)
            return error, [] if error is ErrorCode.illegal_sasl_state else enabled
        # Mid-exchange, or after a failure: Kafka's IllegalSaslStateException.
        self.failure_detail = f"unexpected SaslHandshake in state {self._state.value}"
        self._state = _State.FAILED
        return ErrorCode.illegal_sasl_state, []

    def _begin_reauthentication(self, mechanism: str) -> ErrorCode:
        now = self._now_s()
        too_soon = (
            self._last_reauth_start is not None
            and now - self._last_reauth_start < MIN_REAUTH_INTERVAL_S
        )
        if self.session_expires_at is None or too_soon:
            # Kafka lets such a handshake through to KafkaApis, which answers
            # ILLEGAL_SASL_STATE and keeps the authenticated connection.
            return ErrorCode.illegal_sasl_state
        assert self.mechanism is not None and self.principal is not None
        self._last_reauth_start = now
        self._previous = (self.mechanism, self.principal)
        if mechanism not in self.enabled_mechanisms:
            return self._handshake_failed(f"Unsupported SASL mechanism {mechanism}")
        if mechanism != self.mechanism:
            # Accepted here, failed at the next SaslAuthenticate, as Kafka does (so that
            # it counts as a failed re-authentication).
            self._bad_mechanism_message = (
                f"SASL mechanism '{mechanism}' requested by client is not supported for "
                f"re-authentication of mechanism '{self.mechanism}'"
            )
            self._state = _State.REAUTH_BAD_MECHANISM
            return ErrorCode.none
        self._start(mechanism)
        return ErrorCode.none

    def _handshake_failed(self, detail: str) -> ErrorCode:
        self._state = _State.FAILED
        self.failure_detail = detail
        return ErrorCode.unsupported_sasl_mechanism

    def _start(self, mechanism: str) -> None:
        self.mechanism = mechanism
        self._state = _State.AUTHENTICATE
        credentials = self._credentials
        if mechanism == PLAIN:
            self._exchange = PlainServer(
                credentials.get if credentials is not None else None, self._plain_users
            )
        else:

            def lookup(name: str) -> ScramCredential | None:
                return credentials.get(name, mechanism) if credentials is not None else None

            self._exchange = ScramServer(mechanism, lookup, self._nonce)

    # --- SaslAuthenticate ------------------------------------------------------------

    def authenticate(self, token: bytes) -> AuthStep:
        if self._state is _State.COMPLETE:
            # KafkaApis' answer; the connection stays authenticated.
            return AuthStep(
                ErrorCode.illegal_sasl_state,
                "SaslAuthenticate request received after successful authentication",
            )
        if self._state in (_State.HANDSHAKE, _State.FAILED):
            self._state = _State.FAILED
            self.failure_detail = "SaslAuthenticate without a successful SaslHandshake"
            return AuthStep(
                ErrorCode.illegal_sasl_state,
                "Unexpected Kafka request of type SASL_AUTHENTICATE during SASL handshake.",
            )
        if len(token) > self.max_receive_size:
            return self._failed(
                "Failing SASL authentication due to invalid receive size",
                f"token of {len(token)} bytes > sasl.server.max.receive.size "
                f"{self.max_receive_size}",
            )
        if self._state is _State.REAUTH_BAD_MECHANISM:
            return self._failed(self._bad_mechanism_message, self._bad_mechanism_message)
        assert self._exchange is not None and self.mechanism is not None
        try:
            token_out = self._exchange.evaluate(token)
        except SaslAuthenticationError as e:
            message = (
                invalid_credentials_message(self.mechanism, self.reauthenticating)
                if e.generic
                else str(e)
            )
            return self._failed(message, e.detail)
        if not self._exchange.complete:
            return AuthStep(ErrorCode.none, None, token_out)
        assert self._exchange.username is not None
        principal = user(self._exchange.username)
        if self._previous is not None and principal != self._previous[1]:
            old = self._previous[1]
            message = (
                "Cannot change principals during re-authentication from "
                f"{old.principal_type}.{old.name}: {principal.principal_type}.{principal.name}"
            )
            return self._failed(message, message)
        lifetime_ms = self.reauth_ms if self.reauth_ms > 0 else 0
        self.session_expires_at = self._now_s() + lifetime_ms / 1000 if lifetime_ms else None
        self.principal = principal
        self._previous = None
        self._exchange = None
        self._state = _State.COMPLETE
        return AuthStep(ErrorCode.none, None, token_out, True, principal, lifetime_ms)

    def _failed(self, message: str, detail: str) -> AuthStep:
        self._state = _State.FAILED
        self._exchange = None
        self.failure_detail = detail
        return AuthStep(ErrorCode.sasl_authentication_failed, message)

    def session_expired(self, now_s: float | None = None) -> bool:
        """Whether the session's lifetime is over (the socket server then closes the
        connection on any request but a re-authenticating SaslHandshake)."""
        expires = self.session_expires_at
        now = self._now_s() if now_s is None else now_s
        return expires is not None and now >= expires
