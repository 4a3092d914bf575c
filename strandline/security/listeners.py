"""Kafka's listener configuration: which sockets the broker binds, how each is secured,
what it tells clients and other brokers to connect to, and which one brokers use.

Pure: nothing here binds, resolves or reads files. Keys and defaults are Kafka's:

- `listeners`: `NAME://host:port,...`. An empty host binds every interface (as do
  `0.0.0.0` and `[::]`); port 0 asks for an ephemeral port.
- `advertised.listeners`: what clients are told; defaults to `listeners`. It may not
  name a listener that `listeners` lacks, nor use the meta-address `0.0.0.0`.
- `listener.security.protocol.map`: `NAME:PROTOCOL,...`; by default each protocol is a
  listener name of its own (`PLAINTEXT:PLAINTEXT,SSL:SSL,...`).
- `inter.broker.listener.name` or `security.inter.broker.protocol` (not both): the
  listener other brokers connect to; default the listener named PLAINTEXT.
- `listener.name.<name in lower case>.<key>` overrides `<key>` for one listener.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from strandline.errors import ConfigError
from strandline.security.protocol import SecurityProtocol

DEFAULT_LISTENERS = "PLAINTEXT://127.0.0.1:9092"
DEFAULT_PROTOCOL_MAP: dict[str, SecurityProtocol] = {p.value: p for p in SecurityProtocol}

# Kafka's EndpointUtils pattern, so what Kafka accepts parses the same way here.
_ENDPOINT = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)$")
_WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::"})


@dataclass(frozen=True)
class Listener:
    """One endpoint. `host` is "" for "every interface" (also spelled 0.0.0.0 or [::],
    which are kept as written so the socket server binds what the operator asked)."""

    name: str
    security_protocol: SecurityProtocol
    host: str
    port: int

    @property
    def binds_all_interfaces(self) -> bool:
        return self.host in _WILDCARD_HOSTS

    @property
    def bind_host(self) -> str | None:
        """What `asyncio.start_server` takes: None (every interface) for an empty host."""
        return self.host or None

    @property
    def config_prefix(self) -> str:
        return listener_prefix(self.name)

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


@dataclass(frozen=True)
class ListenerConfig:
    listeners: tuple[Listener, ...]
    advertised: tuple[Listener, ...]
    inter_broker_listener: str
    protocol_map: Mapping[str, SecurityProtocol]

    def listener(self, name: str) -> Listener:
        return _by_name(self.listeners, name, "listeners")

    def advertised_listener(self, name: str) -> Listener:
        return _by_name(self.advertised, name, "advertised.listeners")

    @property
    def inter_broker(self) -> Listener:
        """The advertised endpoint other brokers connect to (and its protocol)."""
        return self.advertised_listener(self.inter_broker_listener)

    @property
    def inter_broker_protocol(self) -> SecurityProtocol:
        return self.inter_broker.security_protocol


def _by_name(listeners: Iterable[Listener], name: str, key: str) -> Listener:
    wanted = name.upper()
    for listener in listeners:
        if listener.name == wanted:
            return listener
    raise KeyError(f"no listener named {wanted} in {key}")


def listener_prefix(name: str) -> str:
    """Kafka's per-listener config prefix: `listener.name.<name in lower case>.`"""
    return f"listener.name.{name.lower()}."


def listener_prop(
    props: Mapping[str, str], listener: str, key: str, default: str | None = None
) -> str | None:
    """`listener.name.<listener>.<key>` if set, else `<key>`, else `default`."""
    prefixed = listener_prefix(listener) + key
    if prefixed in props:
        return props[prefixed]
    return props.get(key, default)


def listener_props(props: Mapping[str, str], listener: str) -> dict[str, str]:
    """Every key as `listener` sees it, as Kafka's `valuesWithPrefixOverride`: all
    keys, then the listener's prefixed keys with the prefix stripped, winning."""
    prefix = listener_prefix(listener)
    view = {k: v for k, v in props.items() if not k.startswith(prefix)}
    view.update({k[len(prefix) :]: v for k, v in props.items() if k.startswith(prefix)})
    return view


def parse_protocol_map(value: str | None) -> dict[str, SecurityProtocol]:
    if value is None:
        return dict(DEFAULT_PROTOCOL_MAP)
    result: dict[str, SecurityProtocol] = {}
    for entry in _csv(value):
        name, sep, proto = entry.partition(":")
        name, proto = name.strip().upper(), proto.strip().upper()
        if not sep or not name or not proto:
            raise ConfigError(
                f"listener.security.protocol.map entry {entry!r}: expected NAME:PROTOCOL"
            )
        try:
            protocol = SecurityProtocol(proto)
        except ValueError:
            raise ConfigError(
                f"listener.security.protocol.map: {proto!r} (for listener {name}) is not a "
                f"security protocol; known: {_names(SecurityProtocol)}"
            ) from None
        if name in result:
            raise ConfigError(f"listener.security.protocol.map names listener {name} twice")
        result[name] = protocol
    return result


def parse_endpoints(
    value: str,
    key: str,
    protocol_map: Mapping[str, SecurityProtocol],
    *,
    require_distinct_ports: bool,
) -> tuple[Listener, ...]:
    endpoints = tuple(_endpoint(entry, key, protocol_map) for entry in _csv(value))
    if not endpoints:
        raise ConfigError(f"{key} is empty: expected NAME://host:port[,...]")
    seen: set[str] = set()
    for ep in endpoints:
        if ep.name in seen:
            raise ConfigError(f"each listener must have a different name; {key}={value!r}")
        seen.add(ep.name)
    if require_distinct_ports:
        _check_ports(endpoints, key, value)
    return endpoints


def _endpoint(text: str, key: str, protocol_map: Mapping[str, SecurityProtocol]) -> Listener:
    match = _ENDPOINT.match(text)
    if match is None:
        raise ConfigError(f"{key}: cannot parse {text!r}; expected NAME://host:port")
    name, host, port_text = match.group(1).upper(), match.group(2), match.group(3)
    if not name:
        raise ConfigError(f"{key}: {text!r} has no listener name before ://")
    port = int(port_text)
    if not 0 <= port <= 65535:
        raise ConfigError(f"{key}: {text!r}: port {port} is outside 0..65535")
    protocol = protocol_map.get(name)
    if protocol is None:
        raise ConfigError(
            f"listener {name} has no entry in listener.security.protocol.map "
            f"(map: {_map_text(protocol_map)}); add {name}:<protocol> to it, or use one of "
            f"{', '.join(sorted(protocol_map))} as the listener name"
        )
    return Listener(name, protocol, host, port)


def _check_ports(endpoints: tuple[Listener, ...], key: str, value: str) -> None:
    # Kafka lets two listeners share a port only when one binds an IPv4 address and the
    # other an IPv6 address; port 0 (ephemeral) never clashes.
    by_port: dict[int, list[Listener]] = {}
    for ep in endpoints:
        if ep.port != 0:
            by_port.setdefault(ep.port, []).append(ep)
    for port, group in by_port.items():
        if len(group) < 2:
            continue
        versions = sorted(_ip_version(ep.host) for ep in group)
        if versions != [4, 6]:
            raise ConfigError(
                f"each listener must have a different port unless exactly one binds an IPv4 "
                f"address and the other an IPv6 address; {key}={value!r} uses port {port} "
                f"for {', '.join(ep.name for ep in group)}"
            )


def _ip_version(host: str) -> int:
    try:
        return ipaddress.ip_address(host).version
    except ValueError:
        return 0


def parse_listeners(
    props: Mapping[str, str],
    *,
    supported: Collection[SecurityProtocol] = tuple(SecurityProtocol),
    default_advertised_host: str = "127.0.0.1",
) -> ListenerConfig:
    """Validate the listener keys of `props` as a Kafka broker does.

    `supported`: the protocols this broker can serve; a listener mapped to another is
    a ConfigError. `default_advertised_host`: what an empty host in an advertised
    listener becomes (Kafka uses the machine's canonical host name; pass
    `socket.getfqdn()` for that — the default keeps this module free of lookups).
    """
    protocol_map = parse_protocol_map(props.get("listener.security.protocol.map"))
    listeners_text = props.get("listeners", DEFAULT_LISTENERS)
    listeners = parse_endpoints(
        listeners_text, "listeners", protocol_map, require_distinct_ports=True
    )
    for listener in listeners:
        if listener.security_protocol not in supported:
            raise ConfigError(
                f"listener {listener.name} uses {listener.security_protocol.value}, which this "
                f"broker cannot serve (supported: {_names(supported)})"
            )

    advertised_text = props.get("advertised.listeners")
    if advertised_text is None:
        advertised_key, advertised_text = "listeners", listeners_text
    else:
        advertised_key = "advertised.listeners"
    advertised = parse_endpoints(
        advertised_text, advertised_key, protocol_map, require_distinct_ports=False
    )
    names = [ep.name for ep in listeners]
    for ep in advertised:
        if ep.name not in names:
            raise ConfigError(
                f"advertised.listeners names {ep.name}, which is not in listeners "
                f"({', '.join(names)}): advertised listener names must be a subset"
            )
        if ep.host in ("0.0.0.0", "::"):
            hint = (
                "set advertised.listeners to a routable address"
                if advertised_key == "listeners"
                else "use a routable address"
            )
            raise ConfigError(
                f"{advertised_key} ({ep}) cannot advertise the non-routable meta-address "
                f"{ep.host}: {hint}"
            )
    advertised = tuple(
        ep if ep.host else Listener(ep.name, ep.security_protocol, default_advertised_host, ep.port)
        for ep in advertised
    )

    inter_broker = _inter_broker_listener(props, protocol_map)
    advertised_names = [ep.name for ep in advertised]
    if inter_broker not in advertised_names:
        raise ConfigError(
            f"inter-broker listener {inter_broker} (from {_inter_broker_source(props)}) must be "
            f"a listener name defined in advertised.listeners; configured: "
            f"{', '.join(advertised_names)}"
        )
    return ListenerConfig(listeners, advertised, inter_broker, protocol_map)


def _inter_broker_listener(
    props: Mapping[str, str], protocol_map: Mapping[str, SecurityProtocol]
) -> str:
    name = props.get("inter.broker.listener.name")
    protocol = props.get("security.inter.broker.protocol")
    if name is not None and protocol is not None:
        raise ConfigError(
            "only one of inter.broker.listener.name and security.inter.broker.protocol may be set"
        )
    if name is not None:
        name = name.strip().upper()
        if name not in protocol_map:
            raise ConfigError(
                f"inter.broker.listener.name={name}: listener {name} has no entry in "
                f"listener.security.protocol.map"
            )
        return name
    text = (protocol or SecurityProtocol.PLAINTEXT.value).strip().upper()
    try:
        return SecurityProtocol(text).value
    except ValueError:
        raise ConfigError(
            f"security.inter.broker.protocol={protocol!r} is not a security protocol; "
            f"known: {_names(SecurityProtocol)}"
        ) from None


def _inter_broker_source(props: Mapping[str, str]) -> str:
    for key in ("inter.broker.listener.name", "security.inter.broker.protocol"):
        if key in props:
            return key
    return "the default security.inter.broker.protocol=PLAINTEXT"


def _csv(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def _names(protocols: Iterable[SecurityProtocol]) -> str:
    return ", ".join(p.value for p in protocols)


def _map_text(protocol_map: Mapping[str, SecurityProtocol]) -> str:
    return ",".join(f"{name}:{p.value}" for name, p in protocol_map.items())
