"""Connection limits and idle/authentication expiry (strandline.server.connection_quotas)."""

from __future__ import annotations

import pytest

from strandline.server.config import ConfigError
from strandline.server.connection_quotas import (
    UNLIMITED,
    ConnectionLimits,
    ConnectionQuotas,
    IdleTracker,
    expiry_reason,
)


def test_defaults_are_kafkas() -> None:
    limits = ConnectionLimits.from_props({})
    assert limits.max_connections == UNLIMITED == 2**31 - 1
    assert limits.max_connections_per_ip == UNLIMITED
    assert limits.idle_ms == 600_000
    assert limits.authentication_ms == 30_000


def test_from_props() -> None:
    limits = ConnectionLimits.from_props(
        {
            "max.connections": "100",
            "max.connections.per.ip": "10",
            "max.connections.per.ip.overrides": "10.0.0.1:50, [::1]:3,fe80::1:0 , gw.example:7",
            "listener.name.external.max.connections": "40",
            "listener.name.external.max.connection.creation.rate": "5",
            "max.connection.creation.rate": "20",
            "connections.max.idle.ms": "1000",
            "strandline.connections.max.authentication.ms": "200",
        },
        listeners=["INTERNAL", "EXTERNAL"],
        resolve={"gw.example": "192.168.0.9"}.__getitem__,
    )
    assert limits.max_connections == 100
    assert dict(limits.per_ip_overrides) == {
        "10.0.0.1": 50,
        "::1": 3,
        "fe80::1": 0,
        "192.168.0.9": 7,
    }
    assert limits.max_for_ip("10.0.0.1") == 50
    assert limits.max_for_ip("::ffff:10.0.0.1") == 50  # an IPv4 peer on a dual-stack socket
    assert limits.max_for_ip("0:0::1") == 3
    assert limits.max_for_ip("10.9.9.9") == 10
    assert dict(limits.listener_max_connections) == {"EXTERNAL": 40}
    assert dict(limits.listener_creation_rate) == {"EXTERNAL": 5}
    assert limits.max_connection_creation_rate == 20
    assert (limits.idle_ms, limits.authentication_ms) == (1000, 200)


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"max.connections": "many"}, "max.connections='many' is not an integer"),
        ({"max.connections.per.ip": "-1"}, "must be at least 0"),
        ({"max.connections.per.ip": "0"}, "can be 0 only if max.connections.per.ip.overrides"),
        ({"max.connections.per.ip.overrides": "10.0.0.1"}, "expected host:count"),
        ({"max.connections.per.ip.overrides": "10.0.0.1:x"}, "expected host:count"),
        ({"max.connections.per.ip.overrides": ":4"}, "expected host:count"),
        ({"connections.max.idle.ms": "0"}, "must be at least 1"),
    ],
)
def test_bad_props(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        ConnectionLimits.from_props(props)
    assert message in str(err.value)


def test_per_ip_limit_and_release() -> None:
    quotas = ConnectionQuotas(ConnectionLimits(max_connections_per_ip=2))
    assert quotas.try_accept("10.0.0.1", 0.0) is None
    assert quotas.try_accept("10.0.0.1", 0.0) is None
    reason = quotas.try_accept("10.0.0.1", 0.0)
    assert reason == "too many connections from 10.0.0.1 (max.connections.per.ip: 2)"
    assert quotas.try_accept("10.0.0.2", 0.0) is None  # other addresses unaffected
    assert quotas.connections("10.0.0.1") == 2 and quotas.connections() == 3
    quotas.release("10.0.0.1")
    assert quotas.try_accept("10.0.0.1", 0.0) is None
    assert quotas.connections() == 3


def test_overrides_including_zero() -> None:
    limits = ConnectionLimits(
        max_connections_per_ip=0, per_ip_overrides={"127.0.0.1": 1, "10.0.0.5": 0}
    )
    quotas = ConnectionQuotas(limits)
    assert quotas.try_accept("10.0.0.7", 0.0) == (
        "too many connections from 10.0.0.7 (max.connections.per.ip: 0)"
    )
    assert "max.connections.per.ip.overrides: 0" in (quotas.try_accept("10.0.0.5", 0.0) or "")
    assert quotas.try_accept("127.0.0.1", 0.0) is None
    assert quotas.try_accept("::ffff:127.0.0.1", 0.0) is not None  # same address


def test_broker_wide_limit_spares_the_inter_broker_listener() -> None:
    quotas = ConnectionQuotas(
        ConnectionLimits(max_connections=2), inter_broker_listener="internal", listener_count=2
    )
    assert quotas.try_accept("10.0.0.1", 0.0, "EXTERNAL") is None
    assert quotas.try_accept("10.0.0.2", 0.0, "EXTERNAL") is None
    assert quotas.try_accept("10.0.0.3", 0.0, "EXTERNAL") == (
        "the broker has 2 connections (max.connections=2)"
    )
    assert quotas.try_accept("10.0.0.9", 0.0, "INTERNAL") is None
    assert quotas.connections(listener="internal") == 1
    assert quotas.connections() == 3


def test_the_only_listener_is_not_exempt_even_if_inter_broker() -> None:
    """Kafka exempts the inter-broker listener only when there are several; on
    a one-listener broker (`cluster up --security`) the limits used to never apply."""
    quotas = ConnectionQuotas(
        ConnectionLimits(max_connections=2, max_connection_creation_rate=10),
        inter_broker_listener="SASL_SSL",
        listener_count=1,
    )
    assert quotas.try_accept("10.0.0.1", 0.0, "SASL_SSL") is None
    assert quotas.try_accept("10.0.0.2", 0.0, "SASL_SSL") is None
    assert quotas.try_accept("10.0.0.3", 0.0, "SASL_SSL") == (
        "the broker has 2 connections (max.connections=2)"
    )


def test_listener_limit() -> None:
    quotas = ConnectionQuotas(
        ConnectionLimits(listener_max_connections={"EXTERNAL": 1}),
        inter_broker_listener="INTERNAL",
        listener_count=2,
    )
    assert quotas.try_accept("10.0.0.1", 0.0, "external") is None
    assert quotas.try_accept("10.0.0.2", 0.0, "external") == (
        "listener EXTERNAL has 1 connections (listener.name.external.max.connections=1)"
    )
    assert quotas.try_accept("10.0.0.2", 0.0, "INTERNAL") is None
    quotas.release("10.0.0.1", "EXTERNAL")
    assert quotas.try_accept("10.0.0.2", 0.0, "EXTERNAL") is None


def test_creation_rate() -> None:
    quotas = ConnectionQuotas(
        ConnectionLimits(max_connection_creation_rate=2, listener_creation_rate={"EXTERNAL": 10}),
        inter_broker_listener="INTERNAL",
        listener_count=2,
    )
    assert quotas.try_accept("10.0.0.1", 100.0, "EXTERNAL") is None
    assert quotas.try_accept("10.0.0.1", 100.0, "EXTERNAL") is None
    reason = quotas.try_accept("10.0.0.1", 100.1, "EXTERNAL")
    assert reason == "connections are being opened faster than max.connection.creation.rate=2/s"
    assert quotas.connections() == 2  # a refused connection is not counted
    # The inter-broker listener is not held back by the broker-wide rate.
    assert quotas.try_accept("10.0.0.2", 100.1, "INTERNAL") is None
    # Half a second later one more token has come back.
    assert quotas.try_accept("10.0.0.1", 100.6, "EXTERNAL") is None
    assert quotas.try_accept("10.0.0.1", 100.6, "EXTERNAL") is not None


def test_listener_creation_rate_applies_to_the_inter_broker_listener() -> None:
    quotas = ConnectionQuotas(
        ConnectionLimits(listener_creation_rate={"INTERNAL": 1}),
        inter_broker_listener="INTERNAL",
        listener_count=2,
    )
    assert quotas.try_accept("10.0.0.1", 0.0, "INTERNAL") is None
    assert "listener.name.internal.max.connection.creation.rate=1/s" in (
        quotas.try_accept("10.0.0.1", 0.5, "INTERNAL") or ""
    )
    assert quotas.try_accept("10.0.0.1", 1.0, "INTERNAL") is None


def test_release_without_accept_is_a_bug() -> None:
    quotas = ConnectionQuotas(ConnectionLimits())
    with pytest.raises(ValueError, match="without a matching accepted connection"):
        quotas.release("10.0.0.1")


def test_expiry_reason() -> None:
    limits = ConnectionLimits(idle_ms=10_000, authentication_ms=2_000)

    def reason(
        *,
        now: float = 1.0,
        accepted_at: float = 0.0,
        last_active: float = 0.0,
        authenticated: bool = True,
        in_flight: int = 0,
    ) -> str | None:
        return expiry_reason(
            accepted_at=accepted_at,
            last_active=last_active,
            authenticated=authenticated,
            in_flight=in_flight,
            now=now,
            limits=limits,
        )

    assert reason() is None
    assert reason(now=10.0) == "idle for 10000 ms (connections.max.idle.ms)"
    assert reason(now=10.0, last_active=5.0) is None
    assert reason(now=100.0, in_flight=1) is None  # a parked fetch is not idle
    assert reason(authenticated=False, now=2.0) == (
        "not authenticated 2000 ms after connecting (strandline.connections.max.authentication.ms)"
    )
    # Activity does not extend the time allowed to authenticate.
    assert reason(authenticated=False, now=2.0, last_active=1.9, in_flight=1) is not None


def test_half_sent_frames_cannot_hold_descriptors() -> None:
    """The fuzzing case: thousands of mutated frames, many stopping halfway. Each such
    connection holds one of its IP's slots, and only until the idle (or, unauthenticated,
    the authentication) bound: nothing it half-sends counts as activity."""
    limits = ConnectionLimits(max_connections_per_ip=50, idle_ms=5_000, authentication_ms=1_000)
    quotas = ConnectionQuotas(limits)
    tracker: IdleTracker[int] = IdleTracker(limits)
    open_conns: set[int] = set()
    refused = 0
    now = 0.0
    for conn in range(5332):
        now = conn * (60.0 / 5332)  # 5,332 connections in 60 s, one peer address
        for gone, _ in tracker.expired(now):
            tracker.closed(gone)
            quotas.release("10.0.0.66")
            open_conns.discard(gone)
        if quotas.try_accept("10.0.0.66", now) is not None:
            refused += 1
            continue
        tracker.opened(conn, now, authenticated=True)
        open_conns.add(conn)
        if conn % 3:
            # A complete request and its answer, then a half frame that never finishes.
            tracker.request_received(conn, now)
            tracker.response_sent(conn, now + 0.001)
        assert quotas.connections("10.0.0.66") <= 50
    assert refused > 0
    # Once the sender stops, every connection is gone within the idle bound.
    later = now + limits.idle_ms / 1000 + 0.01
    expired = tracker.expired(later)
    assert {c for c, _ in expired} == open_conns
    for conn, _ in expired:
        tracker.closed(conn)
        quotas.release("10.0.0.66")
    assert quotas.connections() == 0 and len(tracker) == 0


def test_idle_tracker() -> None:
    limits = ConnectionLimits(idle_ms=10_000, authentication_ms=3_000)
    tracker: IdleTracker[str] = IdleTracker(limits)
    tracker.opened("plain", 0.0, authenticated=True)
    tracker.opened("sasl", 0.0, authenticated=False)
    tracker.opened("slow-sasl", 0.0, authenticated=False)
    assert tracker.next_deadline() == 3.0
    tracker.authenticated("sasl", 1.0)
    assert tracker.expired(3.0) == [
        (
            "slow-sasl",
            "not authenticated 3000 ms after connecting "
            "(strandline.connections.max.authentication.ms)",
        )
    ]
    tracker.closed("slow-sasl")
    tracker.request_received("plain", 5.0)  # in flight: never idle
    assert tracker.next_deadline() == 11.0  # sasl: authenticated at 1.0
    assert [c for c, _ in tracker.expired(11.0)] == ["sasl"]
    tracker.closed("sasl")
    assert tracker.expired(1000.0) == []
    tracker.response_sent("plain", 1000.0)
    assert tracker.next_deadline() == 1010.0
    assert [c for c, _ in tracker.expired(1010.0)] == ["plain"]
    tracker.closed("plain")
    tracker.closed("plain")  # closing twice is harmless
    tracker.request_received("gone", 1.0)  # events for unknown connections are ignored
    assert len(tracker) == 0 and tracker.next_deadline() is None
