"""Kafka's connection limits, pure: the socket server passes the time in and acts on
the answers (refuse a connection, close an expired one).

Keys (Kafka's, with Kafka's defaults, unless marked):

- `max.connections`: connections in the whole broker; the inter-broker listener is
  exempt, as in Kafka, so replication survives a client flood, but only when the broker
  has several listeners (Kafka's protectedListener): with one, exempting it would exempt
  every client.
- `listener.name.<listener>.max.connections`: connections on one listener.
- `max.connections.per.ip`, `max.connections.per.ip.overrides` (`host:count,...`;
  an IPv6 address may be written bare, the count follows its last colon; a count of
  0 refuses that host entirely).
- `max.connection.creation.rate` (and `listener.name.<listener>.max.connection.creation.rate`):
  new connections per second, broker-wide (inter-broker listener exempt) and per
  listener. Kafka delays accepting; here the connection is refused instead, since an
  asyncio server accepts on its own. Measured as a token bucket one second deep.
- `connections.max.idle.ms` (default 600000): a connection with no request in flight
  and no complete request or response for this long is closed.
- `strandline.connections.max.authentication.ms` (strandline's own, default 30000):
  a connection must finish its TLS handshake and SASL authentication within this long
  of being accepted. Kafka has no such key (it relies on the idle timeout, and
  `connections.max.reauth.ms` is KIP-368 re-authentication of sessions that already
  authenticated); a short bound here stops unauthenticated connections from holding
  descriptors for the full idle time.

A connection counts from accept to close, whatever it has sent, and only complete
frames count as activity: a peer that stops halfway through a frame holds one of its
IP's slots for at most the idle (or, before authenticating, the authentication) bound.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from strandline.errors import ConfigError

UNLIMITED = 2**31 - 1  # Kafka's Int.MaxValue default for every connection limit
DEFAULT_IDLE_MS = 600_000
DEFAULT_AUTHENTICATION_MS = 30_000
AUTHENTICATION_KEY = "strandline.connections.max.authentication.ms"


@dataclass(frozen=True)
class ConnectionLimits:
    max_connections: int = UNLIMITED
    max_connections_per_ip: int = UNLIMITED
    per_ip_overrides: Mapping[str, int] = field(default_factory=dict)
    # Upper-case listener name -> limit.
    listener_max_connections: Mapping[str, int] = field(default_factory=dict)
    max_connection_creation_rate: int = UNLIMITED
    listener_creation_rate: Mapping[str, int] = field(default_factory=dict)
    idle_ms: int = DEFAULT_IDLE_MS
    authentication_ms: int = DEFAULT_AUTHENTICATION_MS

    def max_for_ip(self, ip: str) -> int:
        return self.per_ip_overrides.get(_normalise_host(ip), self.max_connections_per_ip)

    @classmethod
    def from_props(
        cls,
        props: Mapping[str, str],
        listeners: Iterable[str] = (),
        *,
        resolve: Callable[[str], str] | None = None,
    ) -> ConnectionLimits:
        """`listeners`: the configured listener names, for their prefixed limits.
        `resolve`: turns a host name in the per-IP overrides into an address (Kafka
        resolves them; e.g. `socket.gethostbyname`); without it host names are kept
        and never match, since connections are counted by address."""

        def get_int(key: str, default: int, minimum: int = 0) -> int:
            text = props.get(key)
            if text is None:
                return default
            try:
                value = int(text.strip())
            except ValueError:
                raise ConfigError(f"{key}={text!r} is not an integer") from None
            if value < minimum:
                raise ConfigError(f"{key}={value} must be at least {minimum}")
            return value

        per_ip = get_int("max.connections.per.ip", UNLIMITED)
        overrides = _parse_overrides(props.get("max.connections.per.ip.overrides", ""), resolve)
        if per_ip == 0 and not overrides:
            raise ConfigError(
                "max.connections.per.ip can be 0 only if max.connections.per.ip.overrides "
                "names the hosts that may connect"
            )
        listener_max: dict[str, int] = {}
        listener_rate: dict[str, int] = {}
        for name in listeners:
            prefix = f"listener.name.{name.lower()}."
            if prefix + "max.connections" in props:
                listener_max[name.upper()] = get_int(prefix + "max.connections", UNLIMITED)
            if prefix + "max.connection.creation.rate" in props:
                listener_rate[name.upper()] = get_int(
                    prefix + "max.connection.creation.rate", UNLIMITED
                )
        return cls(
            max_connections=get_int("max.connections", UNLIMITED),
            max_connections_per_ip=per_ip,
            per_ip_overrides=overrides,
            listener_max_connections=listener_max,
            max_connection_creation_rate=get_int("max.connection.creation.rate", UNLIMITED),
            listener_creation_rate=listener_rate,
            idle_ms=get_int("connections.max.idle.ms", DEFAULT_IDLE_MS, minimum=1),
            authentication_ms=get_int(AUTHENTICATION_KEY, DEFAULT_AUTHENTICATION_MS, minimum=1),
        )


def _parse_overrides(text: str, resolve: Callable[[str], str] | None) -> dict[str, int]:
    overrides: dict[str, int] = {}
    for entry in (part.strip() for part in text.split(",")):
        if not entry:
            continue
        host, sep, count_text = entry.rpartition(":")
        host = host.strip().strip("[]")
        try:
            count = int(count_text)
        except ValueError:
            count = -1
        if not sep or not host or count < 0:
            raise ConfigError(
                f"max.connections.per.ip.overrides entry {entry!r}: expected host:count "
                f"with a count of 0 or more"
            )
        key = _normalise_host(host)
        if resolve is not None and not _is_ip(key):
            key = _normalise_host(resolve(host))
        overrides[key] = count
    return overrides


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _normalise_host(host: str) -> str:
    # One spelling per address, so "::1", "0:0::1" and an IPv4-mapped peer all match.
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host.lower()
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return str(address)


@dataclass
class _Bucket:
    """Connections per second: `rate` tokens a second, at most `rate` saved up."""

    rate: int
    tokens: float
    updated: float

    def refill(self, now: float) -> None:
        self.tokens = min(float(self.rate), self.tokens + (now - self.updated) * self.rate)
        self.updated = max(self.updated, now)


class ConnectionQuotas:
    """Counts open connections; `try_accept` before serving one, `release` when it
    closes (every accepted connection exactly once)."""

    def __init__(
        self,
        limits: ConnectionLimits,
        inter_broker_listener: str | None = None,
        listener_count: int = 1,
    ) -> None:
        self.limits = limits
        # Kafka's protectedListener: the inter-broker listener, if it is not the only one.
        self.inter_broker_listener = (
            inter_broker_listener.upper() if inter_broker_listener and listener_count > 1 else None
        )
        self.total = 0
        self._per_ip: dict[str, int] = {}
        self._per_listener: dict[str, int] = {}
        self._buckets: dict[str, _Bucket] = {}

    def connections(self, ip: str | None = None, listener: str | None = None) -> int:
        if ip is not None:
            return self._per_ip.get(_normalise_host(ip), 0)
        if listener is not None:
            return self._per_listener.get(listener.upper(), 0)
        return self.total

    def try_accept(self, ip: str, now: float, listener: str = "") -> str | None:
        """None and the connection is counted, or why it must be closed (for the log)
        and nothing is counted. `now`: monotonic seconds."""
        limits = self.limits
        name = listener.upper()
        protected = name != "" and name == self.inter_broker_listener
        address = _normalise_host(ip)

        listener_max = limits.listener_max_connections.get(name, UNLIMITED)
        if self._per_listener.get(name, 0) >= listener_max:
            return (
                f"listener {name} has {listener_max} connections "
                f"(listener.name.{name.lower()}.max.connections={listener_max})"
            )
        if not protected and self.total >= limits.max_connections:
            cap = limits.max_connections
            return f"the broker has {self.total} connections (max.connections={cap})"
        ip_max = limits.max_for_ip(address)
        if self._per_ip.get(address, 0) >= ip_max:
            key = (
                "max.connections.per.ip.overrides"
                if address in limits.per_ip_overrides
                else "max.connections.per.ip"
            )
            return f"too many connections from {address} ({key}: {ip_max})"

        wanted: list[tuple[str, str, int]] = []  # (bucket, config key, rate)
        if name in limits.listener_creation_rate:
            key = f"listener.name.{name.lower()}.max.connection.creation.rate"
            wanted.append((f"listener:{name}", key, limits.listener_creation_rate[name]))
        if not protected and limits.max_connection_creation_rate < UNLIMITED:
            rate = limits.max_connection_creation_rate
            wanted.append(("broker", "max.connection.creation.rate", rate))
        buckets = [self._bucket(bucket, rate, now) for bucket, _, rate in wanted]
        for bucket, (_, key, rate) in zip(buckets, wanted, strict=True):
            if bucket.tokens < 1:
                return f"connections are being opened faster than {key}={rate}/s"
        for bucket in buckets:
            bucket.tokens -= 1

        self.total += 1
        self._per_ip[address] = self._per_ip.get(address, 0) + 1
        self._per_listener[name] = self._per_listener.get(name, 0) + 1
        return None

    def release(self, ip: str, listener: str = "") -> None:
        address, name = _normalise_host(ip), listener.upper()
        count = self._per_ip.get(address, 0)
        if count <= 0:
            raise ValueError(f"release({ip!r}) without a matching accepted connection")
        if count == 1:
            del self._per_ip[address]
        else:
            self._per_ip[address] = count - 1
        self._per_listener[name] = self._per_listener.get(name, 1) - 1
        if self._per_listener[name] <= 0:
            del self._per_listener[name]
        self.total -= 1

    def _bucket(self, name: str, rate: int, now: float) -> _Bucket:
        bucket = self._buckets.get(name)
        if bucket is None or bucket.rate != rate:
            bucket = self._buckets[name] = _Bucket(rate, float(rate), now)
        bucket.refill(now)
        return bucket


def expiry_reason(
    *,
    accepted_at: float,
    last_active: float,
    authenticated: bool,
    in_flight: int,
    now: float,
    limits: ConnectionLimits,
) -> str | None:
    """Why a connection must be closed now, or None. Times in seconds; `last_active`
    is when the last complete request arrived or the last response was sent (never
    a partial frame's bytes: a peer that stops mid-frame must not look active)."""
    if not authenticated and now - accepted_at >= limits.authentication_ms / 1000:
        return (
            f"not authenticated {limits.authentication_ms} ms after connecting "
            f"({AUTHENTICATION_KEY})"
        )
    if in_flight == 0 and now - last_active >= limits.idle_ms / 1000:
        return f"idle for {limits.idle_ms} ms (connections.max.idle.ms)"
    return None


K = TypeVar("K", bound=Hashable)


@dataclass
class _Tracked:
    accepted_at: float
    last_active: float
    authenticated: bool
    in_flight: int = 0


class IdleTracker(Generic[K]):
    """The per-connection times `expiry_reason` needs, keyed by whatever identifies
    a connection to the socket server (its task, an id)."""

    def __init__(self, limits: ConnectionLimits) -> None:
        self.limits = limits
        self._conns: dict[K, _Tracked] = {}

    def __len__(self) -> int:
        return len(self._conns)

    def opened(self, conn: K, now: float, *, authenticated: bool) -> None:
        """At accept; `authenticated` False for TLS and SASL listeners until
        `authenticated` is called (after the handshake / SaslAuthenticate)."""
        self._conns[conn] = _Tracked(now, now, authenticated)

    def authenticated(self, conn: K, now: float) -> None:
        tracked = self._conns.get(conn)
        if tracked is not None:
            tracked.authenticated = True
            tracked.last_active = now

    def request_received(self, conn: K, now: float) -> None:
        """A complete request frame arrived."""
        tracked = self._conns.get(conn)
        if tracked is not None:
            tracked.in_flight += 1
            tracked.last_active = now

    def response_sent(self, conn: K, now: float) -> None:
        """A request finished (answered, or needing no answer as acks=0 produce)."""
        tracked = self._conns.get(conn)
        if tracked is not None:
            tracked.in_flight = max(0, tracked.in_flight - 1)
            tracked.last_active = now

    def closed(self, conn: K) -> None:
        self._conns.pop(conn, None)

    def expired(self, now: float) -> list[tuple[K, str]]:
        """The connections to close now, with why. They stay tracked until `closed`."""
        result = []
        for conn, t in self._conns.items():
            reason = expiry_reason(
                accepted_at=t.accepted_at,
                last_active=t.last_active,
                authenticated=t.authenticated,
                in_flight=t.in_flight,
                now=now,
                limits=self.limits,
            )
            if reason is not None:
                result.append((conn, reason))
        return result

    def next_deadline(self) -> float | None:
        """The earliest time (same clock as `now`) a tracked connection could expire:
        how long the socket server's reaper may sleep."""
        deadlines = []
        for t in self._conns.values():
            if not t.authenticated:
                deadlines.append(t.accepted_at + self.limits.authentication_ms / 1000)
            if t.in_flight == 0:
                deadlines.append(t.last_active + self.limits.idle_ms / 1000)
        return min(deadlines, default=None)
