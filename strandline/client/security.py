"""How a client of ours connects to a secured listener: TLS, then SASL (PLAIN or
SCRAM) through SaslHandshake + SaslAuthenticate, as Kafka's clients do.

Built from a client configuration in either family's keys — librdkafka's
(`security.protocol`, `sasl.mechanism`, `sasl.username`, `sasl.password`,
`ssl.ca.location`, `ssl.certificate.location`, `ssl.key.location`, the inline
`ssl.ca.pem`, `ssl.certificate.pem`, `ssl.key.pem`) or Java's (`sasl.jaas.config`,
`ssl.truststore.location`) — so the tools' `--command-config`
and the broker's inter-broker settings share one path.

The SASL exchange itself is `sasl_login`, a generator without I/O that both the
asyncio `KafkaConnection` and the blocking connections (the Spark executors' fetch
client) drive, so there is one implementation of it.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate import v1 as sasl_authenticate_v1
from kio.schema.sasl_handshake import v1 as sasl_handshake_v1

from strandline.security.protocol import SecurityProtocol
from strandline.security.scram import scram_mechanism
from strandline.security.scram_client import ScramClient, ScramClientError
from strandline.security.tls import TlsSettings, client_context

_JAAS_VALUE = r'\s*=\s*"((?:[^"\\]|\\.)*)"'
# librdkafka's inline PEM keys -> Java's (KIP-651), which TlsSettings reads.
_LIBRDKAFKA_INLINE_PEM = {
    "ssl.ca.pem": "ssl.truststore.certificates",
    "ssl.certificate.pem": "ssl.keystore.certificate.chain",
    "ssl.key.pem": "ssl.keystore.key",
}


@dataclass(frozen=True)
class ClientSecurity:
    protocol: SecurityProtocol
    ssl_context: ssl.SSLContext | None = None
    check_hostname: bool = True
    sasl_mechanism: str | None = None
    username: str | None = None
    password: str | None = None

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> ClientSecurity | None:
        """None for PLAINTEXT (nothing to do); raises ValueError on a config that asks
        for SASL without credentials or for a mechanism we cannot speak."""
        try:
            protocol = SecurityProtocol(config.get("security.protocol", "PLAINTEXT").upper())
        except ValueError:
            raise ValueError(
                f"security.protocol={config.get('security.protocol')!r} is not one of "
                f"{[p.value for p in SecurityProtocol]}"
            ) from None
        if protocol is SecurityProtocol.PLAINTEXT:
            return None
        context = None
        check_hostname = True
        if protocol.uses_tls:
            tls = dict(config)
            # librdkafka's names -> the settings' names (both families are accepted there).
            if "ssl.ca.location" in tls and "ssl.truststore.location" not in tls:
                tls["ssl.truststore.location"] = tls["ssl.ca.location"]
            for ours, theirs in _LIBRDKAFKA_INLINE_PEM.items():
                if ours in tls and theirs not in tls:
                    tls[theirs] = tls.pop(ours)
            # librdkafka spells "no host name check" `none`, Java an empty value.
            if tls.get("ssl.endpoint.identification.algorithm", "").strip().lower() == "none":
                tls["ssl.endpoint.identification.algorithm"] = ""
            settings = TlsSettings.from_props(tls)
            context = client_context(settings)
            check_hostname = context.check_hostname
        mechanism = username = password = None
        if protocol.uses_sasl:
            mechanism = (
                config.get("sasl.mechanism") or config.get("sasl.mechanisms") or "GSSAPI"
            ).upper()
            if mechanism not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
                raise ValueError(
                    f"SASL mechanism {mechanism} is not supported (PLAIN, SCRAM-SHA-256/512)"
                )
            jaas_username, jaas_password = jaas_credentials(config.get("sasl.jaas.config", ""))
            username = config.get("sasl.username", jaas_username)
            password = config.get("sasl.password", jaas_password)
            if username is None or password is None:
                raise ValueError(
                    f"{protocol.value} with {mechanism} needs sasl.username and sasl.password "
                    '(or sasl.jaas.config with username="…" password="…")'
                )
        return cls(protocol, context, check_hostname, mechanism, username, password)


def jaas_credentials(jaas: str) -> tuple[str | None, str | None]:
    """(username, password) of a Java `sasl.jaas.config` such as
    `org.apache.kafka.common.security.scram.ScramLoginModule required username="alice"
    password="alice-pw";` (either may be None when absent)."""
    found = {
        key: match.group(1) if (match := re.search(rf"\b{key}" + _JAAS_VALUE, jaas)) else None
        for key in ("username", "password")
    }
    return found["username"], found["password"]


# --- the SASL login, sans I/O -------------------------------------------------------------


class SaslLoginError(ConnectionError):
    """The broker refused our SASL login (wrong password, unknown user, a mechanism the
    listener does not offer), or its SCRAM answers did not prove it knows our credential."""


SaslRequest = sasl_handshake_v1.SaslHandshakeRequest | sasl_authenticate_v1.SaslAuthenticateRequest
# Yields the requests to send; is sent each one's response; returns once logged in.
SaslLogin = Generator[SaslRequest, Any, None]


def sasl_login(security: ClientSecurity) -> SaslLogin:
    """The client's side of a SASL login as Kafka's clients do it, without any I/O:
    SaslHandshake v1 for the mechanism, then SaslAuthenticate v1 tokens (one for PLAIN,
    two for SCRAM, whose last answer is the server's proof). Send it each response;
    it raises SaslLoginError on a refusal. Driven by `run_sasl_login`
    (a blocking socket) and by `KafkaConnection._authenticate` (asyncio)."""
    mechanism, username, password = security.sasl_mechanism, security.username, security.password
    if mechanism is None or username is None or password is None:
        raise ValueError("a SASL login needs a mechanism, a username and a password")
    failed = f"SASL authentication as {username!r} with {mechanism} failed"

    shake = yield sasl_handshake_v1.SaslHandshakeRequest(mechanism=mechanism)
    if shake.error_code != ErrorCode.none:
        raise SaslLoginError(
            f"{failed}: SaslHandshake {shake.error_code.name} "
            f"(the listener offers {list(shake.mechanisms)})"
        )

    def authenticate(token: bytes) -> Generator[SaslRequest, Any, bytes]:
        answer = yield sasl_authenticate_v1.SaslAuthenticateRequest(auth_bytes=token)
        if answer.error_code != ErrorCode.none:
            detail = f": {answer.error_message}" if answer.error_message else ""
            raise SaslLoginError(f"{failed}: {answer.error_code.name}{detail}")
        return bytes(answer.auth_bytes)

    if mechanism == "PLAIN":
        yield from authenticate(f"\0{username}\0{password}".encode())
        return
    client = ScramClient(scram_mechanism(mechanism), username, password)
    try:
        server_first = yield from authenticate(client.first())
        client.verify((yield from authenticate(client.final(server_first))))
    except ScramClientError as exc:
        raise SaslLoginError(f"{failed}: {exc}") from exc


def run_sasl_login(security: ClientSecurity, send: Callable[[SaslRequest], Any]) -> None:
    """`sasl_login` over a blocking `send(request) -> response`."""
    login = sasl_login(security)
    request = next(login)
    while True:
        response = send(request)
        try:
            request = login.send(response)
        except StopIteration:
            return
