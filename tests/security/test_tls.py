"""TLS contexts from Kafka-named settings, with real handshakes over local asyncio
servers, and principals from client certificates (strandline.security.tls)."""

from __future__ import annotations

import asyncio
import datetime
import ssl
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from strandline.protocol.framing import ProtocolError, read_frame
from strandline.security.certs import CaFiles, CertFiles, create_ca, issue
from strandline.security.principal import ANONYMOUS, KafkaPrincipal
from strandline.security.tls import (
    ClientAuth,
    NoMatchingRule,
    SslPrincipalMapper,
    TlsSettings,
    client_context,
    is_tls_client_hello,
    peer_principal,
    server_context,
    settings_for_listener,
    subject_dn,
)
from strandline.server.config import ConfigError
from strandline.server.session import SecurityProtocol

T = TypeVar("T")
TIMEOUT = 10.0


@dataclass(frozen=True)
class Pki:
    ca: CaFiles
    broker: CertFiles
    alice: CertFiles
    other_ca: CaFiles
    stranger: CertFiles  # a client certificate from a CA the broker does not trust


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    root = tmp_path_factory.mktemp("pki")
    ca = create_ca(root / "ca", "test-ca")
    other = create_ca(root / "other", "other-ca")
    return Pki(
        ca=ca,
        broker=issue(ca, root / "b", "broker-0", ["broker0.test"], client=True),
        alice=issue(
            ca, root / "c", "alice", [], client=True, organization="Acme", organizational_unit="eng"
        ),
        other_ca=other,
        stranger=issue(other, root / "s", "mallory", [], client=True),
    )


def _server_settings(pki: Pki, /, **extra: str) -> TlsSettings:
    return TlsSettings.from_props(
        {
            "ssl.keystore.location": str(pki.broker.keystore),
            "ssl.truststore.location": str(pki.ca.cert),
            **extra,
        }
    )


def _client_settings(ca: Path, cert: CertFiles | None = None, /, **extra: str) -> TlsSettings:
    props = {"ssl.truststore.location": str(ca), **extra}
    if cert is not None:
        props["ssl.certificate.location"] = str(cert.cert)
        props["ssl.key.location"] = str(cert.key)
    return TlsSettings.from_props(props)


def _run(coro: Awaitable[T]) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(coro, TIMEOUT)

    return asyncio.run(bounded())


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


@dataclass
class EchoServer:
    """Answers each Kafka frame with the same frame; records who connected."""

    principals: list[KafkaPrincipal] = field(default_factory=list)
    versions: list[str | None] = field(default_factory=list)
    ciphers: list[str] = field(default_factory=list)
    handled: int = 0
    server: asyncio.Server | None = None
    mapper: SslPrincipalMapper = field(default_factory=lambda: SslPrincipalMapper.from_rules(None))

    @property
    def port(self) -> int:
        assert self.server is not None
        return int(self.server.sockets[0].getsockname()[1])

    async def on_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.handled += 1
        ssl_object = writer.get_extra_info("ssl_object")
        if ssl_object is not None:
            self.versions.append(ssl_object.version())
            self.ciphers.append(ssl_object.cipher()[0])
        try:
            self.principals.append(peer_principal(ssl_object, self.mapper))
            while (frame := await read_frame(reader, 1 << 20)) is not None:
                writer.write(_frame(frame))
                await writer.drain()
        except (ProtocolError, ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()

    async def start(
        self, ctx: ssl.SSLContext | None, handshake_timeout: float | None = None
    ) -> None:
        self.server = await asyncio.start_server(
            self.on_connection,
            "127.0.0.1",
            0,
            ssl=ctx,
            ssl_handshake_timeout=handshake_timeout if ctx is not None else None,
        )

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()


async def _round_trip(
    port: int, ctx: ssl.SSLContext | None, host: str = "127.0.0.1", **kw: Any
) -> bytes:
    reader, writer = await asyncio.open_connection(host, port, ssl=ctx, **kw)
    try:
        writer.write(_frame(b"ping"))
        await writer.drain()
        answer = await read_frame(reader, 1 << 20)
        if answer is None:
            raise ConnectionError("server closed the connection")
        return answer
    finally:
        writer.close()


async def _serve(ctx: ssl.SSLContext | None, body: Callable[[EchoServer], Awaitable[T]]) -> T:
    server = EchoServer()
    await server.start(ctx, handshake_timeout=2.0)
    try:
        return await body(server)
    finally:
        await server.stop()


# --- handshakes ----------------------------------------------------------------------


def test_server_certificate_verified_by_ca(pki: Pki) -> None:
    async def body(server: EchoServer) -> None:
        client = client_context(_client_settings(pki.ca.cert))
        assert await _round_trip(server.port, client) == b"ping"
        assert await _round_trip(server.port, client, host="localhost") == b"ping"
        assert server.principals == [ANONYMOUS, ANONYMOUS]
        assert server.versions == ["TLSv1.3", "TLSv1.3"]

    _run(_serve(server_context(_server_settings(pki)), body))


def test_server_from_another_ca_is_refused(pki: Pki) -> None:
    async def body(server: EchoServer) -> None:
        client = client_context(_client_settings(pki.other_ca.cert))
        with pytest.raises(ssl.SSLCertVerificationError, match="certificate verify failed"):
            await _round_trip(server.port, client)

    _run(_serve(server_context(_server_settings(pki)), body))


def test_hostname_checked_unless_endpoint_identification_is_empty(pki: Pki) -> None:
    async def body(server: EchoServer) -> None:
        checking = client_context(_client_settings(pki.ca.cert))
        with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch"):
            await _round_trip(server.port, checking, server_hostname="elsewhere.test")
        assert await _round_trip(server.port, checking, server_hostname="broker0.test") == b"ping"
        lax = client_context(
            _client_settings(pki.ca.cert, **{"ssl.endpoint.identification.algorithm": ""})
        )
        assert not lax.check_hostname and lax.verify_mode == ssl.CERT_REQUIRED
        assert await _round_trip(server.port, lax, server_hostname="elsewhere.test") == b"ping"

    _run(_serve(server_context(_server_settings(pki)), body))


def test_client_auth_required_gives_the_principal_of_the_client_certificate(pki: Pki) -> None:
    async def body(server: EchoServer) -> None:
        client = client_context(_client_settings(pki.ca.cert, pki.alice))
        assert await _round_trip(server.port, client) == b"ping"
        assert server.principals == [KafkaPrincipal("User", "CN=alice,OU=eng,O=Acme")]

    ctx = server_context(_server_settings(pki, **{"ssl.client.auth": "required"}))
    assert ctx.verify_mode == ssl.CERT_REQUIRED
    _run(_serve(ctx, body))


def test_principal_mapping_rules_apply_to_client_certificates(pki: Pki) -> None:
    async def body(server: EchoServer) -> None:
        server.mapper = SslPrincipalMapper.from_rules(rules)
        client = client_context(_client_settings(pki.ca.cert, pki.alice))
        assert await _round_trip(server.port, client) == b"ping"
        assert server.principals == [KafkaPrincipal("User", "ALICE")]

    rules = "RULE:^CN=(.*?),.*$/$1/U,DEFAULT"
    settings = _server_settings(
        pki, **{"ssl.client.auth": "required", "ssl.principal.mapping.rules": rules}
    )
    assert settings.principal_mapping_rules == rules
    assert settings.principal_mapper().name("CN=bob,O=x") == "BOB"
    _run(_serve(server_context(settings), body))


@pytest.mark.parametrize("cert", ["none", "stranger"])
def test_client_auth_required_refuses_clients_without_a_trusted_certificate(
    pki: Pki, cert: str
) -> None:
    async def body(server: EchoServer) -> None:
        client = client_context(
            _client_settings(pki.ca.cert, None if cert == "none" else pki.stranger)
        )
        # TLS 1.3: the client learns of the refusal when it next reads.
        with pytest.raises((ssl.SSLError, ConnectionError)):
            await _round_trip(server.port, client)
        assert server.handled == 0

    _run(_serve(server_context(_server_settings(pki, **{"ssl.client.auth": "required"})), body))


def test_client_auth_requested_allows_anonymous_clients(pki: Pki) -> None:
    async def body(server: EchoServer) -> None:
        assert (
            await _round_trip(server.port, client_context(_client_settings(pki.ca.cert))) == b"ping"
        )
        with_cert = client_context(_client_settings(pki.ca.cert, pki.alice))
        assert await _round_trip(server.port, with_cert) == b"ping"
        assert server.principals == [ANONYMOUS, KafkaPrincipal("User", "CN=alice,OU=eng,O=Acme")]

    ctx = server_context(_server_settings(pki, **{"ssl.client.auth": "requested"}))
    assert ctx.verify_mode == ssl.CERT_OPTIONAL
    _run(_serve(ctx, body))


def test_plaintext_client_on_a_tls_listener_is_closed(pki: Pki) -> None:
    async def body(server: EchoServer) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(_frame(b"\x00\x12\x00\x03\x00\x00\x00\x01\xff\xff"))  # ApiVersions-ish
        await writer.drain()
        # At most a TLS alert comes back, then EOF: never a Kafka response, never a hang.
        received = await reader.read(1 << 16)
        while chunk := await reader.read(1 << 16):
            received += chunk
        writer.close()
        assert not received or received[0] == 0x15  # an alert record
        assert server.handled == 0

    _run(_serve(server_context(_server_settings(pki)), body))


def test_tls_client_on_a_plaintext_listener_fails(pki: Pki) -> None:
    async def body(server: EchoServer) -> None:
        client = client_context(_client_settings(pki.ca.cert))
        with pytest.raises((ssl.SSLError, ConnectionError)):
            await _round_trip(server.port, client)

    _run(_serve(None, body))


def test_silent_client_is_cut_off_by_the_handshake_timeout(pki: Pki) -> None:
    async def body(server: EchoServer) -> float:
        loop = asyncio.get_running_loop()
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        started = loop.time()
        assert await reader.read(1) == b""
        writer.close()
        return loop.time() - started

    elapsed = _run(_serve(server_context(_server_settings(pki)), body))
    assert 1.5 < elapsed < 10.0  # the 2 s timeout, with room for a loaded machine


def test_start_tls_after_a_plain_accept(pki: Pki) -> None:
    """What the socket server does to count a connection (connection quotas) before
    spending a handshake on it: accept plain, then upgrade, with a bound."""
    ctx = server_context(_server_settings(pki, **{"ssl.client.auth": "required"}))
    outcomes: list[str] = []
    mapper = SslPrincipalMapper.from_rules(None)

    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            # No await before start_tls: bytes read into `reader` first would be lost.
            await writer.start_tls(ctx, ssl_handshake_timeout=1.0)
            outcomes.append(str(peer_principal(writer.get_extra_info("ssl_object"), mapper)))
            frame = await read_frame(reader, 1 << 20)
            assert frame is not None
            writer.write(_frame(frame))
            await writer.drain()
        except (ssl.SSLError, ConnectionError, TimeoutError) as e:
            outcomes.append(type(e).__name__)
        finally:
            writer.close()

    async def body() -> None:
        server = await asyncio.start_server(on_connection, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            client = client_context(_client_settings(pki.ca.cert, pki.alice))
            assert await _round_trip(port, client) == b"ping"
            # A peer that connects and says nothing is dropped at the bound.
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            assert await reader.read(1) == b""
            writer.close()
        finally:
            server.close()
            await server.wait_closed()

    _run(body())
    assert outcomes[0] == "User:CN=alice,OU=eng,O=Acme"
    # asyncio reports a handshake timeout as ConnectionAbortedError.
    assert outcomes[1:] == ["ConnectionAbortedError"], outcomes


def test_is_tls_client_hello(pki: Pki) -> None:
    captured: list[bytes] = []

    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        captured.append(await reader.read(8))
        writer.close()

    async def body() -> None:
        server = await asyncio.start_server(on_connection, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        with pytest.raises((ssl.SSLError, ConnectionError)):
            await _round_trip(port, client_context(_client_settings(pki.ca.cert)))
        server.close()
        await server.wait_closed()

    _run(body())
    assert is_tls_client_hello(captured[0])
    assert not is_tls_client_hello(_frame(b"\x00\x12\x00\x03"))
    assert not is_tls_client_hello(b"\x16")


# --- settings ------------------------------------------------------------------------


def test_protocol_versions(pki: Pki) -> None:
    async def body(server: EchoServer) -> None:
        client = client_context(_client_settings(pki.ca.cert))
        assert await _round_trip(server.port, client) == b"ping"
        assert server.versions == ["TLSv1.2"]
        only13 = client_context(
            _client_settings(pki.ca.cert, **{"ssl.enabled.protocols": "TLSv1.3"})
        )
        with pytest.raises((ssl.SSLError, ConnectionError)):
            await _round_trip(server.port, only13)

    settings = _server_settings(pki, **{"ssl.enabled.protocols": "TLSv1.2"})
    _run(_serve(server_context(settings), body))


def test_cipher_suites_accept_java_names(pki: Pki) -> None:
    async def body(server: EchoServer) -> None:
        client = client_context(_client_settings(pki.ca.cert))
        assert await _round_trip(server.port, client) == b"ping"
        assert server.ciphers == ["ECDHE-ECDSA-AES256-GCM-SHA384"]

    settings = _server_settings(
        pki,
        **{
            "ssl.enabled.protocols": "TLSv1.2",
            "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,TLS_AES_128_GCM_SHA256",
        },
    )
    _run(_serve(server_context(settings), body))
    with pytest.raises(ConfigError, match="no usable cipher"):
        server_context(_server_settings(pki, **{"ssl.cipher.suites": "NOT-A-CIPHER"}))


def test_certificate_forms(pki: Pki, tmp_path: Path) -> None:
    """Key store file, librdkafka-style cert + key files, and KIP-651 inline PEM all
    give the same working server; an encrypted key needs ssl.key.password."""
    locked = issue(pki.ca, tmp_path, "locked", ["localhost"], client=False, key_password="pw")
    forms = [
        {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.broker.keystore)},
        {
            "ssl.certificate.location": str(pki.broker.cert),
            "ssl.key.location": str(pki.broker.key),
        },
        {
            "ssl.keystore.certificate.chain": pki.broker.cert.read_text(),
            "ssl.keystore.key": pki.broker.key.read_text(),
        },
        {"ssl.keystore.location": str(locked.keystore), "ssl.key.password": "pw"},
    ]

    async def body(server: EchoServer) -> None:
        inline_trust = TlsSettings.from_props(
            {"ssl.truststore.certificates": pki.ca.cert.read_text()}
        )
        assert await _round_trip(server.port, client_context(inline_trust)) == b"ping"

    for props in forms:
        _run(_serve(server_context(TlsSettings.from_props(props)), body))

    with pytest.raises(ConfigError, match="ssl.key.password"):
        server_context(
            TlsSettings.from_props(
                {"ssl.keystore.location": str(locked.keystore), "ssl.key.password": "wrong"}
            )
        )
    with pytest.raises(ConfigError, match="not found"):
        server_context(TlsSettings.from_props({"ssl.keystore.location": str(tmp_path / "no")}))
    with pytest.raises(ConfigError, match="needs a certificate"):
        server_context(TlsSettings.from_props({}), listener="SSL")


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"ssl.keystore.type": "JKS"}, "reads PEM only"),
        ({"ssl.truststore.type": "PKCS12"}, "reads PEM only"),
        ({"ssl.client.auth": "always"}, "expected none, requested or required"),
        ({"ssl.enabled.protocols": "TLSv1.2,SSLv3"}, "'SSLv3' is not one of"),
        # OpenSSL would enable TLSv1.1 and TLSv1.2 as well.
        ({"ssl.enabled.protocols": "TLSv1,TLSv1.3"}, "leaves out TLSv1.1, TLSv1.2"),
        ({"ssl.endpoint.identification.algorithm": "ldaps"}, "expected https or empty"),
        ({"ssl.keystore.key": "x"}, "go together"),
        ({"ssl.key.location": "/k.pem"}, "without ssl.certificate.location"),
        (
            {"ssl.keystore.location": "/a.pem", "ssl.certificate.location": "/b.pem"},
            "not both",
        ),
        (
            {"ssl.truststore.location": "/a.pem", "ssl.ca.location": "/b.pem"},
            "disagree",
        ),
        ({"ssl.principal.mapping.rules": "RULE:^CN=(.*?)$/$1/X"}, "invalid rule"),
        ({"ssl.principal.mapping.rules": "RULE:^CN=(.*?$/$1/"}, "not a regular expression"),
    ],
)
def test_bad_settings(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        TlsSettings.from_props(props)
    assert message in str(err.value)


def test_defaults() -> None:
    settings = TlsSettings.from_props({"ssl.ca.location": "/ca.pem"})
    assert settings.ca_file == Path("/ca.pem")
    assert settings.client_auth is ClientAuth.NONE
    assert settings.protocols == ("TLSv1.2", "TLSv1.3")
    assert settings.check_hostname
    assert settings.principal_mapping_rules == "DEFAULT"


def test_settings_for_listener() -> None:
    props = {
        "ssl.keystore.location": "/broker.pem",
        "ssl.client.auth": "required",
        "listener.name.external.ssl.keystore.location": "/external.pem",
        "listener.name.sasl_ssl.ssl.client.auth": "requested",
    }
    internal = settings_for_listener(props, "INTERNAL", SecurityProtocol.SSL)
    assert internal.cert_file == Path("/broker.pem") and internal.client_auth is ClientAuth.REQUIRED
    external = settings_for_listener(props, "EXTERNAL", SecurityProtocol.SSL)
    assert external.cert_file == Path("/external.pem")
    # KIP-684: a SASL_SSL listener asks for client certificates only if told so by name.
    sasl = settings_for_listener(props, "SASL_EXT", SecurityProtocol.SASL_SSL)
    assert sasl.client_auth is ClientAuth.NONE
    prefixed = settings_for_listener(props, "SASL_SSL", SecurityProtocol.SASL_SSL)
    assert prefixed.client_auth is ClientAuth.REQUESTED


# --- principal mapping (cases from Kafka's SslPrincipalMapperTest) --------------------


@pytest.mark.parametrize(
    "rules",
    [
        "DEFAULT",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
        "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
        "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
        "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
    ],
)
def test_valid_rules(rules: str) -> None:
    SslPrincipalMapper.from_rules(rules)


@pytest.mark.parametrize(
    "rules",
    [
        "default",
        "DEFAUL",
        "DEFAULT/L",
        "DEFAULT/U",
        "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
        "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
    ],
)
def test_invalid_rules(rules: str) -> None:
    with pytest.raises(ConfigError):
        SslPrincipalMapper.from_rules(rules)


def test_mapping() -> None:
    mapper = SslPrincipalMapper.from_rules(
        ", ".join(
            [
                "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
                "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
                "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
                "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
                "DEFAULT",
            ]
        )
    )
    assert mapper.name("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "duke"
    assert mapper.name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert mapper.name("cn=duke,ou=sme,dc=mycp,dc=com") == "DUKE@SME"
    assert mapper.name("cN=duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"
    assert (
        mapper.name("OU=JavaSoft,O=Sun Microsystems,C=US") == "OU=JavaSoft,O=Sun Microsystems,C=US"
    )


def test_comma_with_whitespace() -> None:
    mapper = SslPrincipalMapper.from_rules(r"RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.name(r"CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz") == r"Tkac\, Adam"


def test_replacement_back_references() -> None:
    # $n past the group count is literal text (Kafka's escapeLiteralBackReferences);
    # $12 with one group is group 1 then "2"; \$ is a literal dollar.
    mapper = SslPrincipalMapper.from_rules(r"RULE:^CN=(\w+)$/$1-$2-$12-\$1/")
    assert mapper.name("CN=bob") == "bob-$2-bob2-$1"


def test_no_matching_rule() -> None:
    mapper = SslPrincipalMapper.from_rules("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/")
    with pytest.raises(NoMatchingRule, match="CN=x,OU=Other"):
        mapper.name("CN=x,OU=Other")


@pytest.mark.parametrize(
    ("expected", "rules"),
    [
        ("[]", ""),
        ("[DEFAULT]", "DEFAULT"),
        ("[RULE:/]", "RULE://"),
        ("[RULE:/.*]", "RULE:/.*/"),
        ("[RULE:/.*/L]", "RULE:/.*/L"),
        ("[RULE:/, DEFAULT]", "RULE://,DEFAULT"),
        ("[RULE:/, DEFAULT]", "  RULE:// ,  DEFAULT  "),
        ("[RULE:   /     , DEFAULT]", "  RULE:   /     / ,  DEFAULT  "),
        ("[RULE:  /     /U, DEFAULT]", "  RULE:  /     /U   ,DEFAULT  "),
        (
            "[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]",
            "  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ",
        ),
        ("[]", ",   , , ,      , , ,   "),
        ("[RULE:/, DEFAULT]", ",,RULE://,,,DEFAULT,,"),
        ("[RULE: /   , DEFAULT]", ",  , RULE: /   /    ,,,   DEFAULT, ,   "),
        ("[RULE:   /  /U, DEFAULT]", "     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,"),
        (r"[RULE:\/\\\(\)\n\t/\/\/]", r"RULE:\/\\\(\)\n\t/\/\//"),
        (r"[RULE:\**\/+/*/L, RULE:\/*\**/**]", r"RULE:\**\/+/*/L,RULE:\/*\**/**/"),
        (
            r"[RULE:,RULE:,/,RULE:,\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, "
            r"/DEFAULT, DEFAULT]",
            r"RULE:,RULE:,/,RULE:,\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, "
            r"/DEFAULT/,DEFAULT",
        ),
    ],
)
def test_rules_splitting(expected: str, rules: str) -> None:
    assert repr(SslPrincipalMapper.from_rules(rules)) == f"SslPrincipalMapper(rules = {expected})"


# --- the subject DN as Java writes it --------------------------------------------------


def _self_signed(name: x509.Name) -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.DER)


def _attr(oid: x509.ObjectIdentifier, value: str) -> x509.NameAttribute:
    return x509.NameAttribute(oid, value)


def test_subject_dn_order_and_keywords() -> None:
    name = x509.Name(
        [
            _attr(NameOID.COUNTRY_NAME, "US"),
            _attr(NameOID.STATE_OR_PROVINCE_NAME, "MD"),
            _attr(NameOID.LOCALITY_NAME, "Fulton"),
            _attr(NameOID.ORGANIZATION_NAME, "Acme"),
            _attr(NameOID.ORGANIZATIONAL_UNIT_NAME, "eng"),
            _attr(NameOID.DOMAIN_COMPONENT, "example"),
            _attr(NameOID.USER_ID, "u1"),
            _attr(NameOID.COMMON_NAME, "alice"),
        ]
    )
    assert subject_dn(_self_signed(name)) == (
        "CN=alice,UID=u1,DC=example,OU=eng,O=Acme,L=Fulton,ST=MD,C=US"
    )


def test_subject_dn_escapes_as_java() -> None:
    name = x509.Name([_attr(NameOID.COMMON_NAME, ' Tkac, Adam+1 <a=b> #"x"; \\ ')])
    assert subject_dn(_self_signed(name)) == r"CN=\ Tkac\, Adam\+1 \<a\=b\> \#\"x\"\; \\\ "


def test_subject_dn_non_keyword_attributes_are_hex() -> None:
    name = x509.Name(
        [
            _attr(NameOID.ORGANIZATION_NAME, "Acme"),
            _attr(NameOID.EMAIL_ADDRESS, "a@b.c"),
            _attr(NameOID.COMMON_NAME, "alice"),
        ]
    )
    # emailAddress is an IA5String (tag 0x16): Java writes the OID and the DER value.
    assert subject_dn(_self_signed(name)) == (
        "CN=alice,1.2.840.113549.1.9.1=#1605" + b"a@b.c".hex() + ",O=Acme"
    )


def test_subject_dn_multi_valued_rdn() -> None:
    name = x509.Name(
        [
            x509.RelativeDistinguishedName([_attr(NameOID.ORGANIZATION_NAME, "Acme")]),
            x509.RelativeDistinguishedName(
                [_attr(NameOID.COMMON_NAME, "alice"), _attr(NameOID.USER_ID, "42")]
            ),
        ]
    )
    dn = subject_dn(_self_signed(name))
    assert dn in ("CN=alice+UID=42,O=Acme", "UID=42+CN=alice,O=Acme")


def test_peer_principal_without_tls_is_anonymous() -> None:
    assert peer_principal(None, SslPrincipalMapper.from_rules(None)) == ANONYMOUS
