"""The local CA (strandline.security.certs): what it writes and what it signs."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from strandline.security.certs import CaFiles, create_ca, issue


def _cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CaFiles:
    return create_ca(tmp_path_factory.mktemp("ca"), "strandline-ca")


def test_ca_is_self_signed_ca_with_private_key(ca: CaFiles) -> None:
    cert = _cert(ca.cert)
    assert cert.subject == cert.issuer
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "strandline-ca"
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert cert.extensions.get_extension_for_class(x509.KeyUsage).value.key_cert_sign
    cert.verify_directly_issued_by(cert)
    assert _mode(ca.key) == 0o600
    assert isinstance(
        serialization.load_pem_private_key(ca.key.read_bytes(), None), ec.EllipticCurvePrivateKey
    )


def test_broker_certificate(ca: CaFiles, tmp_path: Path) -> None:
    files = issue(ca, tmp_path, "broker-1", ["broker1.example", "10.1.2.3"], client=True)
    cert = _cert(files.cert)
    cert.verify_directly_issued_by(_cert(ca.cert))
    assert cert.subject.rfc4514_string() == "CN=broker-1"
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["broker1.example", "localhost"]
    assert san.get_values_for_type(x509.IPAddress) == [
        ipaddress.ip_address("10.1.2.3"),
        ipaddress.ip_address("127.0.0.1"),
    ]
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    days = (cert.not_valid_after_utc - cert.not_valid_before_utc) / datetime.timedelta(days=1)
    assert 825 <= days < 826
    assert isinstance(cert.public_key(), ec.EllipticCurvePublicKey)
    for private in (files.key, files.keystore):
        assert _mode(private) == 0o600
    assert files.ca == ca.cert
    # The key store is key + certificate + CA, loadable as one file by ssl.
    blocks = files.keystore.read_text().count("-----BEGIN ")
    assert blocks == 3
    ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(str(files.keystore))


def test_client_only_certificate(ca: CaFiles, tmp_path: Path) -> None:
    files = issue(
        ca, tmp_path, "alice", [], client=True, organization="Acme", organizational_unit="eng"
    )
    cert = _cert(files.cert)
    assert cert.subject.rfc4514_string() == "CN=alice,OU=eng,O=Acme"
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    with pytest.raises(x509.ExtensionNotFound):
        cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)


def test_server_only_certificate(ca: CaFiles, tmp_path: Path) -> None:
    cert = _cert(issue(ca, tmp_path, "srv", ["localhost"], client=False).cert)
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["localhost"]


def test_rsa_keys_and_encrypted_key(tmp_path: Path) -> None:
    ca = create_ca(tmp_path / "ca", "rsa-ca", key_type="rsa")
    files = issue(
        ca, tmp_path, "b", ["localhost"], client=True, key_type="rsa", key_password="s3cret"
    )
    key = serialization.load_pem_private_key(files.key.read_bytes(), b"s3cret")
    assert isinstance(key, rsa.RSAPrivateKey) and key.key_size == 2048
    with pytest.raises(TypeError):
        serialization.load_pem_private_key(files.key.read_bytes(), None)
    _cert(files.cert).verify_directly_issued_by(_cert(ca.cert))


def test_rewriting_a_key_keeps_it_private(ca: CaFiles, tmp_path: Path) -> None:
    (tmp_path / "b.key").write_text("old")
    (tmp_path / "b.key").chmod(0o644)
    issue(ca, tmp_path, "b", ["localhost"], client=False)
    assert _mode(tmp_path / "b.key") == 0o600
    assert "PRIVATE KEY" in (tmp_path / "b.key").read_text()


def test_a_certificate_for_nothing_is_refused(ca: CaFiles, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="must be a client certificate"):
        issue(ca, tmp_path, "x", [], client=False)
