"""TLS for SSL and SASL_SSL listeners: Python `ssl` contexts from Kafka-named settings,
and the principal of a TLS client as Kafka's DefaultKafkaPrincipalBuilder names it.

Kafka reads Java key stores; Python's `ssl` reads PEM, so keys and certificates are
PEM only (Kafka's `ssl.keystore.type=PEM` form, KIP-651). A JKS or PKCS12 store is a
ConfigError saying how to convert it. Supported keys (all optionally per listener as
`listener.name.<listener>.<key>`, see `settings_for_listener`):

- own certificate and key, one of:
  `ssl.keystore.location` (PEM file with the private key and the certificate chain),
  `ssl.certificate.location` + `ssl.key.location` (files, librdkafka's names),
  `ssl.keystore.certificate.chain` + `ssl.keystore.key` (PEM text inline, KIP-651);
  `ssl.keystore.type` must be PEM (the default here); `ssl.key.password` decrypts the key.
- trusted CAs: `ssl.truststore.location` or `ssl.ca.location` (PEM file), or
  `ssl.truststore.certificates` (PEM text inline); `ssl.truststore.type` must be PEM.
  None: the system's default CAs, as Java falls back to its own trust store.
- `ssl.client.auth`: none (default) | requested | required.
- `ssl.enabled.protocols`: default TLSv1.2,TLSv1.3.
- `ssl.cipher.suites`: OpenSSL names, or IANA names for the common ECDHE/DHE GCM and
  ChaCha20 suites (translated). TLS 1.3 suites cannot be restricted through Python's
  `ssl` and are accepted and left at OpenSSL's defaults.
- `ssl.endpoint.identification.algorithm`: https (default: the client checks the
  server's name against its certificate) or empty (no name check).
- `ssl.principal.mapping.rules`: DEFAULT and `RULE:pattern/replacement/[LU]` rules.
"""

from __future__ import annotations

import enum
import os
import re
import ssl
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509

from strandline.errors import ConfigError
from strandline.security.listeners import listener_prefix, listener_props
from strandline.security.principal import ANONYMOUS, KafkaPrincipal, user
from strandline.security.protocol import SecurityProtocol

DEFAULT_PROTOCOLS = ("TLSv1.2", "TLSv1.3")
DEFAULT_PRINCIPAL_MAPPING_RULES = "DEFAULT"

_TLS_VERSIONS = {
    "TLSv1": ssl.TLSVersion.TLSv1,
    "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
_TLS13_SUITES = frozenset(
    {
        "TLS_AES_128_GCM_SHA256",
        "TLS_AES_256_GCM_SHA384",
        "TLS_CHACHA20_POLY1305_SHA256",
        "TLS_AES_128_CCM_SHA256",
        "TLS_AES_128_CCM_8_SHA256",
    }
)
# Java (IANA) suite names operators copy from Kafka docs -> OpenSSL's names.
_IANA_TO_OPENSSL = {
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256": "DHE-RSA-AES128-GCM-SHA256",
    "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384": "DHE-RSA-AES256-GCM-SHA384",
}


class ClientAuth(enum.Enum):
    NONE = "none"
    REQUESTED = "requested"
    REQUIRED = "required"


@dataclass(frozen=True)
class TlsSettings:
    """The TLS keys of one listener (or of the inter-broker client), validated."""

    cert_file: Path | None = None
    key_file: Path | None = None
    cert_pem: str | None = None
    key_pem: str | None = None
    key_password: str | None = None
    ca_file: Path | None = None
    ca_pem: str | None = None
    client_auth: ClientAuth = ClientAuth.NONE
    protocols: tuple[str, ...] = DEFAULT_PROTOCOLS
    cipher_suites: tuple[str, ...] = ()
    check_hostname: bool = True
    principal_mapping_rules: str = DEFAULT_PRINCIPAL_MAPPING_RULES

    @property
    def has_certificate(self) -> bool:
        return self.cert_file is not None or self.cert_pem is not None

    def principal_mapper(self) -> SslPrincipalMapper:
        return SslPrincipalMapper.from_rules(self.principal_mapping_rules)

    @classmethod
    def from_props(cls, props: Mapping[str, str]) -> TlsSettings:
        def get(key: str) -> str | None:
            value = props.get(key)
            return value.strip() if value is not None and value.strip() else None

        for key in ("ssl.keystore.type", "ssl.truststore.type"):
            kind = (get(key) or "PEM").upper()
            if kind != "PEM":
                raise ConfigError(
                    f"{key}={kind}: this broker reads PEM only (Python's ssl). Convert with "
                    f"`keytool -importkeystore -deststoretype PKCS12` then `openssl pkcs12 "
                    f"-nodes` and set {key}=PEM"
                )

        cert_file, key_file = _keystore_files(get)
        cert_pem, key_pem = get("ssl.keystore.certificate.chain"), get("ssl.keystore.key")
        if (cert_pem is None) != (key_pem is None):
            raise ConfigError(
                "ssl.keystore.certificate.chain and ssl.keystore.key go together (inline PEM)"
            )
        if cert_pem is not None and cert_file is not None:
            raise ConfigError(
                "set the certificate either inline (ssl.keystore.certificate.chain) or as a "
                "file (ssl.keystore.location / ssl.certificate.location), not both"
            )

        ca_locations = {
            k: v for k in ("ssl.truststore.location", "ssl.ca.location") if (v := get(k))
        }
        if len(set(ca_locations.values())) > 1:
            raise ConfigError(f"{' and '.join(ca_locations)} disagree; set one")
        ca_file = Path(next(iter(ca_locations.values()))) if ca_locations else None
        ca_pem = get("ssl.truststore.certificates")
        if ca_pem is not None and ca_file is not None:
            raise ConfigError(
                "set trusted CAs either inline (ssl.truststore.certificates) or as a file "
                "(ssl.truststore.location), not both"
            )

        auth_text = (get("ssl.client.auth") or "none").lower()
        try:
            client_auth = ClientAuth(auth_text)
        except ValueError:
            raise ConfigError(
                f"ssl.client.auth={auth_text!r}: expected none, requested or required"
            ) from None

        protocols = tuple(_csv(get("ssl.enabled.protocols") or ",".join(DEFAULT_PROTOCOLS)))
        for name in protocols:
            if name not in _TLS_VERSIONS:
                raise ConfigError(
                    f"ssl.enabled.protocols: {name!r} is not one of {', '.join(_TLS_VERSIONS)}"
                )
        if not protocols:
            raise ConfigError("ssl.enabled.protocols is empty")
        # OpenSSL enables a range of versions, min to max: a list with a gap would
        # silently enable what it leaves out (TLSv1,TLSv1.3 would allow 1.1 and 1.2 too).
        order = list(_TLS_VERSIONS)
        indexes = sorted({order.index(name) for name in protocols})
        missing = [order[i] for i in range(indexes[0], indexes[-1] + 1) if i not in indexes]
        if missing:
            raise ConfigError(
                f"ssl.enabled.protocols={','.join(protocols)} leaves out {', '.join(missing)}: "
                "only a contiguous range of TLS versions can be enabled; list every version "
                "between the lowest and the highest, or drop the lowest"
            )

        algorithm = props.get("ssl.endpoint.identification.algorithm", "https").strip()
        if algorithm.lower() not in ("https", ""):
            raise ConfigError(
                f"ssl.endpoint.identification.algorithm={algorithm!r}: expected https or empty"
            )
        rules = get("ssl.principal.mapping.rules") or DEFAULT_PRINCIPAL_MAPPING_RULES
        SslPrincipalMapper.from_rules(rules)  # fail at startup, not on the first client

        return cls(
            cert_file=cert_file,
            key_file=key_file,
            cert_pem=cert_pem,
            key_pem=key_pem,
            key_password=props.get("ssl.key.password") or None,
            ca_file=ca_file,
            ca_pem=ca_pem,
            client_auth=client_auth,
            protocols=protocols,
            cipher_suites=tuple(_csv(get("ssl.cipher.suites") or "")),
            check_hostname=algorithm.lower() == "https",
            principal_mapping_rules=rules,
        )


def _keystore_files(get: Callable[[str], str | None]) -> tuple[Path | None, Path | None]:
    keystore = get("ssl.keystore.location")
    cert, key = get("ssl.certificate.location"), get("ssl.key.location")
    if keystore is not None and (cert is not None or key is not None):
        raise ConfigError(
            "set ssl.keystore.location (key and chain in one PEM file) or "
            "ssl.certificate.location + ssl.key.location, not both"
        )
    if keystore is not None:
        return Path(keystore), None
    if key is not None and cert is None:
        raise ConfigError("ssl.key.location is set without ssl.certificate.location")
    return (Path(cert) if cert else None), (Path(key) if key else None)


def settings_for_listener(
    props: Mapping[str, str], listener: str, protocol: SecurityProtocol
) -> TlsSettings:
    """TlsSettings for one listener: `listener.name.<listener>.ssl.*` override the
    unprefixed keys. As Kafka (KIP-684), a SASL_SSL listener authenticates clients
    with SASL and ignores an unprefixed `ssl.client.auth`; only the prefixed one
    asks for client certificates there."""
    view = listener_props(props, listener)
    if protocol is SecurityProtocol.SASL_SSL:
        prefixed = listener_prefix(listener) + "ssl.client.auth"
        view["ssl.client.auth"] = props.get(prefixed, "none")
    return TlsSettings.from_props(view)


def server_context(settings: TlsSettings, *, listener: str = "") -> ssl.SSLContext:
    """The context an SSL/SASL_SSL listener wraps accepted connections with."""
    if not settings.has_certificate:
        where = f"listener {listener}" if listener else "a TLS listener"
        raise ConfigError(
            f"{where} needs a certificate: set ssl.keystore.location (PEM with key and chain) "
            f"or ssl.certificate.location + ssl.key.location"
        )
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _common(ctx, settings)
    _load_own_certificate(ctx, settings)
    if settings.client_auth is not ClientAuth.NONE:
        _load_trust(ctx, settings, ssl.Purpose.CLIENT_AUTH)
        ctx.verify_mode = (
            ssl.CERT_REQUIRED if settings.client_auth is ClientAuth.REQUIRED else ssl.CERT_OPTIONAL
        )
    return ctx


def client_context(settings: TlsSettings) -> ssl.SSLContext:
    """The context a client (another broker, a tool, a test) connects with: the server
    is always verified against the trusted CAs; its name too unless
    `ssl.endpoint.identification.algorithm` is empty. Presents its own certificate
    when one is configured (for listeners that want client authentication)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _common(ctx, settings)
    ctx.check_hostname = settings.check_hostname
    ctx.verify_mode = ssl.CERT_REQUIRED
    _load_trust(ctx, settings, ssl.Purpose.SERVER_AUTH)
    if settings.has_certificate:
        _load_own_certificate(ctx, settings)
    return ctx


def _common(ctx: ssl.SSLContext, settings: TlsSettings) -> None:
    versions = sorted(_TLS_VERSIONS[name] for name in settings.protocols)
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    suites = [s for s in settings.cipher_suites if s not in _TLS13_SUITES]
    if suites:
        try:
            ctx.set_ciphers(":".join(_IANA_TO_OPENSSL.get(s, s) for s in suites))
        except ssl.SSLError as e:
            raise ConfigError(
                f"ssl.cipher.suites={','.join(settings.cipher_suites)}: no usable cipher ({e})"
            ) from e


def _load_own_certificate(ctx: ssl.SSLContext, settings: TlsSettings) -> None:
    password = settings.key_password
    try:
        if settings.cert_pem is not None and settings.key_pem is not None:
            with _private_file(settings.key_pem + "\n" + settings.cert_pem) as path:
                ctx.load_cert_chain(path, password=password)
        elif settings.cert_file is not None:
            key = str(settings.key_file) if settings.key_file else None
            ctx.load_cert_chain(str(settings.cert_file), key, password=password)
    except FileNotFoundError as e:
        raise ConfigError(f"TLS certificate or key file not found: {e.filename}") from e
    except ssl.SSLError as e:
        raise ConfigError(
            f"cannot load the TLS certificate and key ({_own_source(settings)}): {e}; "
            f"is ssl.key.password right, and does the key match the certificate?"
        ) from e


def _load_trust(ctx: ssl.SSLContext, settings: TlsSettings, purpose: ssl.Purpose) -> None:
    try:
        if settings.ca_file is not None:
            ctx.load_verify_locations(cafile=str(settings.ca_file))
        elif settings.ca_pem is not None:
            ctx.load_verify_locations(cadata=settings.ca_pem)
        else:
            ctx.load_default_certs(purpose)
    except FileNotFoundError as e:
        raise ConfigError(f"ssl.truststore.location: file not found: {e.filename}") from e
    except ssl.SSLError as e:
        raise ConfigError(f"cannot load trusted CA certificates: {e}") from e


def _own_source(settings: TlsSettings) -> str:
    if settings.cert_pem is not None:
        return "ssl.keystore.certificate.chain/ssl.keystore.key"
    if settings.key_file is not None:
        return (
            f"ssl.certificate.location={settings.cert_file}, ssl.key.location={settings.key_file}"
        )
    return f"ssl.keystore.location={settings.cert_file}"


@contextmanager
def _private_file(text: str) -> Iterator[str]:
    # Python's ssl loads keys only from files: inline PEM goes through a 0600 temp file.
    fd, path = tempfile.mkstemp(prefix="strandline-tls-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        yield path
    finally:
        os.unlink(path)


def is_tls_client_hello(head: bytes) -> bool:
    """True if a connection's first bytes are a TLS handshake record: lets a PLAINTEXT
    listener log "TLS client on a PLAINTEXT listener" instead of "frame too large"."""
    return len(head) >= 3 and head[0] == 0x16 and head[1] == 0x03 and head[2] <= 0x04


# --- principals ---------------------------------------------------------------------


class NoMatchingRule(ValueError):
    """No `ssl.principal.mapping.rules` rule applies to a certificate's DN: Kafka fails
    the authentication."""


_RULE = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)")
_RULE_PARSER = re.compile(_RULE)


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None = DEFAULT
    replacement: str = ""
    case: str = ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        result = self.pattern.sub(lambda m: _java_replacement(self.replacement, m), dn)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result

    def __str__(self) -> str:
        if self.pattern is None:
            return "DEFAULT"
        case = f"/{self.case}" if self.case else ""
        return f"RULE:{self.pattern.pattern}/{self.replacement}{case}"


def _java_replacement(replacement: str, match: re.Match[str]) -> str:
    """Java's Matcher.appendReplacement: `$n` is a group, `\\c` a literal c. As Kafka
    (escapeLiteralBackReferences), `$n` beyond the group count is literal text, and
    digits after `$` extend the group number only while it stays a valid group."""
    groups = match.re.groups
    out: list[str] = []
    i = 0
    while i < len(replacement):
        c = replacement[i]
        if c == "\\" and i + 1 < len(replacement):
            out.append(replacement[i + 1])
            i += 2
        elif c == "$" and i + 1 < len(replacement) and replacement[i + 1].isdigit():
            j = i + 2
            number = int(replacement[i + 1])
            while j < len(replacement) and replacement[j].isdigit():
                longer = number * 10 + int(replacement[j])
                if longer > groups:
                    break
                number, j = longer, j + 1
            if number > groups:
                out.append(replacement[i:j])
            else:
                out.append(match.group(number) or "")
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


class SslPrincipalMapper:
    """Kafka's `ssl.principal.mapping.rules`: the first rule that matches the whole DN
    gives the principal name; DEFAULT gives the DN itself."""

    def __init__(self, rules: list[_Rule]) -> None:
        self.rules = rules

    @classmethod
    def from_rules(cls, text: str | None) -> SslPrincipalMapper:
        """None means DEFAULT; "" means no rules at all, as in Kafka."""
        text = (DEFAULT_PRINCIPAL_MAPPING_RULES if text is None else text).strip()
        rules: list[_Rule] = []
        for split in _RULE_SPLITTER.finditer(text):
            rule = split.group(1)
            parsed = _RULE_PARSER.match(rule)
            if parsed is None or parsed.end() != len(rule):
                raise ConfigError(f"ssl.principal.mapping.rules: invalid rule {rule!r}")
            if parsed.group(1) is not None:
                rules.append(_Rule(None))
            elif parsed.group(2) is not None:
                try:
                    pattern = re.compile(parsed.group(2))
                except re.error as e:
                    raise ConfigError(
                        f"ssl.principal.mapping.rules: {parsed.group(2)!r} is not a regular "
                        f"expression: {e}"
                    ) from e
                rules.append(_Rule(pattern, parsed.group(4), parsed.group(6)))
            # An empty entry (e.g. a trailing comma) is ignored, as in Kafka.
        return cls(rules)

    def __repr__(self) -> str:
        return f"SslPrincipalMapper(rules = [{', '.join(str(r) for r in self.rules)}])"

    def name(self, dn: str) -> str:
        for rule in self.rules:
            name = rule.apply(dn)
            if name is not None:
                return name
        raise NoMatchingRule(f"no ssl.principal.mapping.rules rule applies to {dn!r}")


def peer_principal(
    ssl_object: ssl.SSLObject | ssl.SSLSocket | None, mapper: SslPrincipalMapper
) -> KafkaPrincipal:
    """The principal of a TLS connection (`writer.get_extra_info("ssl_object")`):
    `User:<mapped subject DN>` when the client presented a (verified) certificate,
    else ANONYMOUS, as Kafka's DefaultKafkaPrincipalBuilder. NoMatchingRule
    propagates: the connection must then be closed."""
    if ssl_object is None:
        return ANONYMOUS
    der = ssl_object.getpeercert(binary_form=True)
    if not der:
        return ANONYMOUS
    return user(mapper.name(subject_dn(der)))


# --- the subject DN as Java's X500Principal.getName() ---------------------------------

# RFC 2253 keywords (Java's AVAKeyword entries marked RFC 2253); other attributes are
# written as a dotted OID with the DER value in hex.
_KEYWORDS = {
    "2.5.4.3": "CN",
    "2.5.4.6": "C",
    "2.5.4.7": "L",
    "2.5.4.8": "ST",
    "2.5.4.10": "O",
    "2.5.4.11": "OU",
    "2.5.4.9": "STREET",
    "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
# Java's isDerString: PrintableString, T61String, IA5String, GeneralString, BMPString,
# UTF8String are written as text.
_STRING_TAGS = frozenset({0x13, 0x14, 0x16, 0x1B, 0x1E, 0x0C})
_ESCAPED = ',=+<>#;"\\'


def subject_dn(der_cert: bytes) -> str:
    """The certificate's subject as Java's `X500Principal.getName()` (RFC 2253) writes
    it, which is the string Kafka's principal mapping sees: last RDN first, e.g.
    `CN=alice,OU=eng,O=Acme,C=US`; multi-valued RDNs joined with `+`."""
    name_der = x509.load_der_x509_certificate(der_cert).subject.public_bytes()
    rdns = []
    for rdn in _der_children(name_der, 0x30, 0x31):
        avas = []
        for ava in _der_children(rdn, 0x31, 0x30):
            (_, oid_value), (value_tag, value) = list(_der_items(ava, 0x30))
            avas.append(_ava_string(_decode_oid(oid_value), value_tag, value))
        rdns.append("+".join(avas))
    return ",".join(reversed(rdns))


def _ava_string(oid: str, tag: int, value: bytes) -> str:
    keyword = _KEYWORDS.get(oid)
    if keyword is None or tag not in _STRING_TAGS:
        return f"{keyword or oid}=#{_der_encode(tag, value).hex()}"
    # Java decodes the raw bytes as UTF-8 whatever the string type (BMPString included).
    text = value.decode("utf-8", errors="replace")
    escaped = "".join("\\00" if c == "\0" else ("\\" + c if c in _ESCAPED else c) for c in text)
    # Java then escapes leading and trailing spaces (and carriage returns).
    body = escaped.lstrip(" \r")
    lead = escaped[: len(escaped) - len(body)]
    core = body.rstrip(" \r")
    trail = body[len(core) :]
    return f"{keyword}=" + "".join("\\" + c for c in lead) + core + "".join("\\" + c for c in trail)


def _der_items(data: bytes, outer_tag: int) -> Iterator[tuple[int, bytes]]:
    tag, content, rest = _der_read(data)
    if tag != outer_tag or rest:
        raise ValueError(f"unexpected DER: tag {tag:#x}, wanted {outer_tag:#x}")
    while content:
        tag, value, content = _der_read(content)
        yield tag, value


def _der_children(data: bytes, outer_tag: int, child_tag: int) -> Iterator[bytes]:
    # Each child re-encoded so it can be walked with _der_items.
    for tag, value in _der_items(data, outer_tag):
        if tag != child_tag:
            raise ValueError(f"unexpected DER tag {tag:#x} in a Name")
        yield _der_encode(tag, value)


def _der_read(data: bytes) -> tuple[int, bytes, bytes]:
    if len(data) < 2:
        raise ValueError("truncated DER")
    tag, length, pos = data[0], data[1], 2
    if length & 0x80:
        count = length & 0x7F
        length = int.from_bytes(data[2 : 2 + count], "big")
        pos = 2 + count
    if pos + length > len(data):
        raise ValueError("truncated DER")
    return tag, data[pos : pos + length], data[pos + length :]


def _der_encode(tag: int, value: bytes) -> bytes:
    n = len(value)
    if n < 0x80:
        return bytes([tag, n]) + value
    size = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([tag, 0x80 | len(size)]) + size + value


def _decode_oid(value: bytes) -> str:
    parts: list[int] = []
    n = 0
    for byte in value:
        n = (n << 7) | (byte & 0x7F)
        if not byte & 0x80:
            parts.append(n)
            n = 0
    first = parts[0]
    head = [min(first // 40, 2), first - 40 * min(first // 40, 2)]
    return ".".join(str(p) for p in head + parts[1:])


def _csv(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]
