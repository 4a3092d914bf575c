"""A small certificate authority for local clusters and tests: one CA, and leaf
certificates for brokers (server + client use, for TLS between brokers) and clients.

Files are PEM, the form `strandline.security.tls` loads: `<name>.crt` (certificate),
`<name>.key` (private key, mode 0600), and for leaves `<name>.keystore.pem`, Kafka's
PEM key store (key, certificate, CA: `ssl.keystore.type=PEM` + `ssl.keystore.location`).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

KeyType = Literal["ec", "rsa"]
PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey

# 825 days: the longest leaf validity that macOS/iOS still accept for server certificates.
LEAF_DAYS = 825
CA_DAYS = 3650
# Always in a server certificate's SAN, so every local tool can connect by either name.
LOCAL_NAMES = ("localhost", "127.0.0.1")


@dataclass(frozen=True)
class CaFiles:
    name: str
    cert: Path
    key: Path


@dataclass(frozen=True)
class CertFiles:
    name: str
    cert: Path
    key: Path
    # Key, certificate and CA in one file: Kafka's PEM key store.
    keystore: Path
    # The issuing CA's certificate: the trust store for this certificate's peers.
    ca: Path


def create_ca(dir: Path, name: str, *, key_type: KeyType = "ec", days: int = CA_DAYS) -> CaFiles:
    """A self-signed CA: `dir/<name>.crt` and `dir/<name>.key` (0600)."""
    dir.mkdir(parents=True, exist_ok=True)
    key = _new_key(key_type)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    files = CaFiles(name, dir / f"{name}.crt", dir / f"{name}.key")
    _write_key(files.key, key, None)
    files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return files


def issue(
    ca: CaFiles,
    dir: Path,
    name: str,
    hosts: Sequence[str],
    client: bool,
    *,
    organization: str | None = None,
    organizational_unit: str | None = None,
    key_type: KeyType = "ec",
    days: int = LEAF_DAYS,
    key_password: str | None = None,
) -> CertFiles:
    """A leaf certificate signed by `ca`, subject `CN=<name>[,OU=..][,O=..]`.

    `hosts` non-empty: a server certificate (serverAuth) for those names and addresses
    plus localhost and 127.0.0.1. `client`: also (or only, with no hosts) clientAuth,
    which a broker needs to connect to other brokers' listeners that require client
    certificates. `key_password` encrypts the key (Kafka's `ssl.key.password`).
    """
    if not hosts and not client:
        raise ValueError("a certificate with no hosts must be a client certificate")
    dir.mkdir(parents=True, exist_ok=True)
    ca_cert = x509.load_pem_x509_certificate(ca.cert.read_bytes())
    ca_key = serialization.load_pem_private_key(ca.key.read_bytes(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise ValueError(f"{ca.key}: unsupported CA key type {type(ca_key).__name__}")

    attributes = []
    if organization:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    if organizational_unit:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, organizational_unit))
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, name))

    key = _new_key(key_type)
    usages = []
    if hosts:
        usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
    if client:
        usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
    now = _now()
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(attributes))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                # RSA key exchange (TLS 1.2 without ECDHE) encrypts to the key.
                key_encipherment=key_type == "rsa",
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    if hosts:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(_san(list(hosts) + list(LOCAL_NAMES))), critical=False
        )
    cert = builder.sign(ca_key, hashes.SHA256())

    files = CertFiles(
        name,
        cert=dir / f"{name}.crt",
        key=dir / f"{name}.key",
        keystore=dir / f"{name}.keystore.pem",
        ca=ca.cert,
    )
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    key_pem = _write_key(files.key, key, key_password)
    files.cert.write_bytes(cert_pem)
    _write_private(files.keystore, key_pem + cert_pem + ca.cert.read_bytes())
    return files


def _san(hosts: Sequence[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = []
    seen: set[str] = set()
    for host in hosts:
        if host in seen or not host:
            continue
        seen.add(host)
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


def _new_key(key_type: KeyType) -> PrivateKey:
    if key_type == "ec":
        return ec.generate_private_key(ec.SECP256R1())
    if key_type == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    raise ValueError(f"key_type must be 'ec' or 'rsa', not {key_type!r}")


def _write_key(path: Path, key: PrivateKey, password: str | None) -> bytes:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode())
        if password
        else serialization.NoEncryption()
    )
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
    )
    _write_private(path, pem)
    return pem


def _write_private(path: Path, data: bytes) -> None:
    # Created 0600 rather than chmod-ed after, so the key is never readable by others.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        os.fchmod(fd, 0o600)  # an existing file keeps its mode through O_CREAT
        f.write(data)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)
