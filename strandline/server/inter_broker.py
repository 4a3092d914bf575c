"""How this broker connects to the other brokers' inter-broker listener."""

from __future__ import annotations

from collections.abc import Mapping

from strandline.client.security import ClientSecurity
from strandline.security.listeners import listener_props
from strandline.security.protocol import SecurityProtocol


def inter_broker_security(
    props: Mapping[str, str], listener: str, protocol: SecurityProtocol
) -> ClientSecurity | None:
    """How this broker logs in to the others' inter-broker listener: that listener's
    TLS settings (with `listener.name.<l>.` overrides), the mechanism in
    `sasl.mechanism.inter.broker.protocol` (default PLAIN here; Kafka's GSSAPI is not
    supported) and the username/password of its `sasl.jaas.config`, as Kafka reads them."""
    config = {**props, **listener_props(props, listener), "security.protocol": protocol.value}
    if protocol.uses_sasl:
        mechanism = props.get("sasl.mechanism.inter.broker.protocol", "PLAIN").upper()
        config["sasl.mechanism"] = mechanism
        prefix = f"listener.name.{listener.lower()}.{mechanism.lower()}."
        jaas = props.get(prefix + "sasl.jaas.config") or props.get("sasl.jaas.config")
        if jaas:
            config["sasl.jaas.config"] = jaas
    return ClientSecurity.from_config(config)
