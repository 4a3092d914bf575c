"""Listener configuration as Kafka validates it (strandline.security.listeners)."""

from __future__ import annotations

import pytest

from strandline.security.listeners import (
    Listener,
    listener_prop,
    listener_props,
    parse_listeners,
)
from strandline.server.config import ConfigError
from strandline.server.session import SecurityProtocol

PLAINTEXT = SecurityProtocol.PLAINTEXT
SSL = SecurityProtocol.SSL
SASL_SSL = SecurityProtocol.SASL_SSL


def test_default_is_one_plaintext_listener_on_9092() -> None:
    cfg = parse_listeners({})
    assert cfg.listeners == (Listener("PLAINTEXT", PLAINTEXT, "127.0.0.1", 9092),)
    assert cfg.advertised == cfg.listeners
    assert cfg.inter_broker_listener == "PLAINTEXT"
    assert cfg.inter_broker_protocol is PLAINTEXT


def test_several_listeners_with_the_default_protocol_map() -> None:
    cfg = parse_listeners(
        {
            "listeners": "PLAINTEXT://:9092, SSL://0.0.0.0:9093,sasl_ssl://[::]:9094",
            "advertised.listeners": "PLAINTEXT://b1:9092,SSL://b1:9093,SASL_SSL://b1:9094",
        }
    )
    assert cfg.listeners == (
        Listener("PLAINTEXT", PLAINTEXT, "", 9092),
        Listener("SSL", SSL, "0.0.0.0", 9093),
        Listener("SASL_SSL", SASL_SSL, "::", 9094),
    )
    assert all(ep.binds_all_interfaces for ep in cfg.listeners)
    assert cfg.listener("ssl").bind_host == "0.0.0.0"
    assert cfg.listener("plaintext").bind_host is None
    assert [ep.host for ep in cfg.advertised] == ["b1", "b1", "b1"]
    assert str(cfg.listeners[2]) == "SASL_SSL://[::]:9094"


def test_custom_names_through_the_protocol_map() -> None:
    cfg = parse_listeners(
        {
            "listeners": "INTERNAL://10.0.0.1:19092,EXTERNAL://10.0.0.1:9093",
            "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL",
            "inter.broker.listener.name": "internal",
        }
    )
    assert cfg.listener("EXTERNAL").security_protocol is SASL_SSL
    assert cfg.inter_broker == Listener("INTERNAL", PLAINTEXT, "10.0.0.1", 19092)


def test_security_inter_broker_protocol_names_the_listener() -> None:
    cfg = parse_listeners(
        {"listeners": "PLAINTEXT://:9092,SSL://:9093", "security.inter.broker.protocol": "SSL"}
    )
    assert cfg.inter_broker_listener == "SSL"
    assert cfg.inter_broker_protocol is SSL


def test_empty_advertised_host_gets_the_default_advertised_host() -> None:
    cfg = parse_listeners({"listeners": "PLAINTEXT://:9092"}, default_advertised_host="b7")
    assert cfg.listeners[0].host == ""
    assert cfg.advertised[0] == Listener("PLAINTEXT", PLAINTEXT, "b7", 9092)


def test_port_zero_may_repeat() -> None:
    cfg = parse_listeners(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        }
    )
    assert [ep.port for ep in cfg.listeners] == [0, 0]


def test_same_port_allowed_for_one_ipv4_and_one_ipv6_address() -> None:
    cfg = parse_listeners(
        {
            "listeners": "PLAINTEXT://127.0.0.1:9092,V6://[::1]:9092",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,V6:PLAINTEXT",
        }
    )
    assert cfg.listener("V6").host == "::1"


@pytest.mark.parametrize(
    ("props", "message"),
    [
        (
            {"listeners": "FOO://:9092"},
            "listener FOO has no entry in listener.security.protocol.map",
        ),
        (
            {
                "listeners": "PLAINTEXT://:9092,EXTERNAL://:9093",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT",
            },
            "listener EXTERNAL has no entry in listener.security.protocol.map",
        ),
        ({"listeners": "PLAINTEXT://:9092,PLAINTEXT://:9093"}, "different name"),
        ({"listeners": "PLAINTEXT://a:9092,SSL://b:9092"}, "different port"),
        ({"listeners": "PLAINTEXT://127.0.0.1:9092,SSL://10.0.0.1:9092"}, "different port"),
        ({"listeners": "localhost:9092"}, "expected NAME://host:port"),
        ({"listeners": "PLAINTEXT://:99999"}, "outside 0..65535"),
        ({"listeners": ""}, "listeners is empty"),
        (
            {"listener.security.protocol.map": "PLAINTEXT:KERBEROS"},
            "'KERBEROS' (for listener PLAINTEXT) is not a security protocol",
        ),
        ({"listener.security.protocol.map": "PLAINTEXT"}, "expected NAME:PROTOCOL"),
        ({"listeners": "PLAINTEXT://0.0.0.0:9092"}, "non-routable meta-address 0.0.0.0"),
        (
            {"listeners": "PLAINTEXT://:9092", "advertised.listeners": "PLAINTEXT://0.0.0.0:9092"},
            "advertised.listeners (PLAINTEXT://0.0.0.0:9092) cannot advertise",
        ),
        (
            {"listeners": "PLAINTEXT://:9092", "advertised.listeners": "SSL://b1:9093"},
            "advertised.listeners names SSL, which is not in listeners",
        ),
        (
            {"listeners": "SSL://:9093"},
            "inter-broker listener PLAINTEXT (from the default security.inter.broker.protocol",
        ),
        (
            {"listeners": "PLAINTEXT://:9092", "inter.broker.listener.name": "SSL"},
            "inter-broker listener SSL (from inter.broker.listener.name) must be",
        ),
        (
            {"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "SSL"},
            "only one of inter.broker.listener.name and security.inter.broker.protocol",
        ),
        (
            {"inter.broker.listener.name": "INTERNAL"},
            "listener INTERNAL has no entry in listener.security.protocol.map",
        ),
        ({"security.inter.broker.protocol": "TLS"}, "'TLS' is not a security protocol"),
    ],
)
def test_invalid_configs_are_config_errors(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_listeners(props)
    assert message in str(err.value)


def test_advertised_listeners_may_share_a_port() -> None:
    cfg = parse_listeners(
        {
            "listeners": "HOST://localhost:9091,LB://localhost:9092",
            "advertised.listeners": "HOST://localhost:9091,LB://localhost:9091",
            "listener.security.protocol.map": "HOST:SASL_SSL,LB:SASL_SSL",
            "inter.broker.listener.name": "HOST",
        }
    )
    assert [ep.port for ep in cfg.advertised] == [9091, 9091]


def test_a_protocol_the_broker_cannot_serve() -> None:
    with pytest.raises(ConfigError, match="SASL_SSL, which this broker cannot serve"):
        parse_listeners(
            {"listeners": "PLAINTEXT://:9092,SASL_SSL://:9094"},
            supported=(PLAINTEXT, SSL),
        )


def test_per_listener_overrides_use_the_lower_case_prefix() -> None:
    props = {
        "ssl.keystore.location": "/etc/broker.pem",
        "listener.name.external.ssl.keystore.location": "/etc/external.pem",
        "listener.name.external.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "sasl.enabled.mechanisms": "PLAIN",
    }
    assert listener_prop(props, "EXTERNAL", "ssl.keystore.location") == "/etc/external.pem"
    assert listener_prop(props, "INTERNAL", "ssl.keystore.location") == "/etc/broker.pem"
    assert listener_prop(props, "INTERNAL", "ssl.client.auth") is None
    assert listener_prop(props, "INTERNAL", "ssl.client.auth", "none") == "none"
    view = listener_props(props, "External")
    assert view["ssl.keystore.location"] == "/etc/external.pem"
    assert view["sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert not any(k.startswith("listener.name.external.") for k in view)
    assert listener_props(props, "INTERNAL")["sasl.enabled.mechanisms"] == "PLAIN"
