"""SCRAM-SHA-256/512 (strandline.security.scram): RFC 7677 and RFC 5802 test vectors
byte for byte, Kafka's credential string, and every way a client-side exchange can
go wrong. Pure and fast."""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Callable

import pytest

from strandline.security.scram import (
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    SaslAuthenticationError,
    ScramCredential,
    ScramMechanism,
    ScramServer,
    invalid_credentials_message,
    make_credential,
    mechanism_by_type,
    saslname_to_username,
    scram_mechanism,
    server_nonce,
    username_to_saslname,
    verify_password,
)


class ScramClient:
    """A SCRAM client computed independently of the server (RFC 5802 section 3), used
    to drive ScramServer as a Kafka client would; test-only."""

    def __init__(
        self,
        hash_name: str,
        username: str,
        password: str,
        nonce: str = "fyko+d2lbbFgONRv9qkxdawL",
        authzid: str | None = None,
        extensions: str = "",
    ) -> None:
        self.hash_name = hash_name
        self.username = username
        self.password = password
        self.nonce = nonce
        saslname = username.replace("=", "=3D").replace(",", "=2C")
        self.gs2_header = "n," + (f"a={authzid}" if authzid is not None else "") + ","
        self.bare = f"n={saslname},r={nonce}{extensions}"
        self.server_signature = b""

    def first(self) -> bytes:
        return (self.gs2_header + self.bare).encode()

    def final(self, server_first: bytes, nonce: str | None = None) -> bytes:
        text = server_first.decode()
        attrs = dict(item.split("=", 1) for item in text.split(","))
        combined = attrs["r"] if nonce is None else nonce
        salt = base64.b64decode(attrs["s"])
        iterations = int(attrs["i"])
        salted = hashlib.pbkdf2_hmac(self.hash_name, self.password.encode(), salt, iterations)
        client_key = hmac.new(salted, b"Client Key", self.hash_name).digest()
        stored_key = hashlib.new(self.hash_name, client_key).digest()
        cbind = base64.b64encode(self.gs2_header.encode()).decode()
        without_proof = f"c={cbind},r={combined}"
        auth_message = f"{self.bare},{text},{without_proof}".encode()
        signature = hmac.new(stored_key, auth_message, self.hash_name).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = hmac.new(salted, b"Server Key", self.hash_name).digest()
        self.server_signature = hmac.new(server_key, auth_message, self.hash_name).digest()
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> bool:
        return server_final == b"v=" + base64.b64encode(self.server_signature)


# --- helpers -----------------------------------------------------------------------

Lookup = Callable[[str], ScramCredential | None]


def users(mechanism: ScramMechanism, **passwords: str) -> Lookup:
    table = {name: make_credential(mechanism, pw) for name, pw in passwords.items()}
    return table.get


def exchange(
    mechanism: ScramMechanism, lookup: Lookup, client: ScramClient, nonce: str = "srvnonce"
) -> tuple[ScramServer, bytes]:
    server = ScramServer(mechanism, lookup, lambda: nonce)
    server_first = server.evaluate(client.first())
    return server, server.evaluate(client.final(server_first))


def fails_generic(server: ScramServer, token: bytes, mechanism: str = "SCRAM-SHA-256") -> str:
    with pytest.raises(SaslAuthenticationError) as info:
        server.evaluate(token)
    assert str(info.value) == invalid_credentials_message(mechanism)
    assert info.value.generic
    assert server.failed and not server.complete
    return info.value.detail


# --- RFC test vectors --------------------------------------------------------------

RFC7677_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC7677_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC7677_SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
RFC7677_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC7677_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def rfc7677_credential() -> ScramCredential:
    return make_credential(
        SCRAM_SHA_256, "pencil", 4096, base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    )


def test_rfc7677_scram_sha_256_exchange_byte_for_byte() -> None:
    credential = rfc7677_credential()
    seen: list[str] = []

    def lookup(name: str) -> ScramCredential | None:
        seen.append(name)
        return credential if name == "user" else None

    server = ScramServer("SCRAM-SHA-256", lookup, lambda: RFC7677_SERVER_NONCE)
    assert server.evaluate(RFC7677_CLIENT_FIRST) == RFC7677_SERVER_FIRST
    assert not server.complete
    assert server.evaluate(RFC7677_CLIENT_FINAL) == RFC7677_SERVER_FINAL
    assert server.complete and server.username == "user" and seen == ["user"]


def test_rfc7677_client_helper_agrees_with_the_vectors() -> None:
    client = ScramClient("sha256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    assert client.first() == RFC7677_CLIENT_FIRST
    assert client.final(RFC7677_SERVER_FIRST) == RFC7677_CLIENT_FINAL
    assert client.verify(RFC7677_SERVER_FINAL)


def test_rfc5802_sha1_example_through_the_same_state_machine() -> None:
    # RFC 5802 section 5 uses SHA-1; the exchange is the same with the hash swapped.
    sha1 = ScramMechanism("SCRAM-SHA-1", "sha1", 0)
    credential = make_credential(sha1, "pencil", 4096, base64.b64decode("QSXCR+Q6sek8bf92"))
    server = ScramServer(sha1, {"user": credential}.get, lambda: "3rfcNHYJY1ZVvWVs7j")
    assert server.evaluate(b"n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL") == (
        b"r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096"
    )
    final = server.evaluate(
        b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts="
    )
    assert final == b"v=rmF9pqV8S7suAoZWja4dJRkFsKQ="
    assert server.complete


@pytest.mark.parametrize(
    ("mechanism", "hash_name"), [(SCRAM_SHA_256, "sha256"), (SCRAM_SHA_512, "sha512")]
)
def test_round_trip_with_an_independent_client(mechanism: ScramMechanism, hash_name: str) -> None:
    client = ScramClient(hash_name, "alice", "alice-secret")
    server, final = exchange(mechanism, users(mechanism, alice="alice-secret"), client)
    assert server.complete and server.username == "alice"
    assert client.verify(final)


def test_default_server_nonce_is_kafkas_base36_and_fresh() -> None:
    nonces = {server_nonce() for _ in range(20)}
    assert len(nonces) == 20
    assert all(n.isalnum() and n == n.lower() and 20 <= len(n) <= 26 for n in nonces)


# --- credentials -------------------------------------------------------------------


def test_credential_string_is_kafkas_zookeeper_format() -> None:
    credential = ScramCredential(b"\x01\x02\x03", b"stored", b"server", 8192)
    text = credential.format()
    assert text == "salt=AQID,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=8192"
    assert ScramCredential.parse(text) == credential
    # Key order does not matter when reading.
    assert (
        ScramCredential.parse("iterations=8192,server_key=c2VydmVy,stored_key=c3RvcmVk,salt=AQID")
        == credential
    )


@pytest.mark.parametrize(
    "text",
    [
        "",
        "salt=AQID,stored_key=c3RvcmVk,server_key=c2VydmVy",
        "salt=AQID,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=8192,extra=1",
        "salt=AQID,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=many",
        "salt=!!!!,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=8192",
        "salt,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=8192",
        "=AQID,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=8192",
    ],
)
def test_malformed_credential_strings_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="Credentials not valid"):
        ScramCredential.parse(text)


def test_credential_repr_and_errors_never_show_keys() -> None:
    credential = make_credential(SCRAM_SHA_256, "pw", salt=b"salty")
    text = repr(credential)
    assert "iterations=4096" in text
    assert base64.b64encode(credential.stored_key).decode() not in text
    assert "salty" not in text
    with pytest.raises(ValueError) as info:
        ScramCredential.parse("salt=AQID,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=x1")
    assert "c3RvcmVk" not in str(info.value)


def test_make_credential_matches_the_rfc_derivation() -> None:
    salt = b"0123456789abcdef"
    credential = make_credential("SCRAM-SHA-512", "secret", 8192, salt)
    salted = hashlib.pbkdf2_hmac("sha512", b"secret", salt, 8192)
    client_key = hmac.new(salted, b"Client Key", "sha512").digest()
    assert credential.salt == salt and credential.iterations == 8192
    assert credential.stored_key == hashlib.sha512(client_key).digest()
    assert credential.server_key == hmac.new(salted, b"Server Key", "sha512").digest()
    assert verify_password(SCRAM_SHA_512, credential, "secret")
    assert not verify_password(SCRAM_SHA_512, credential, "Secret")


def test_make_credential_salts_randomly_and_bounds_iterations() -> None:
    a, b = (make_credential(SCRAM_SHA_256, "same") for _ in range(2))
    assert a.salt != b.salt and a.stored_key != b.stored_key
    assert len(a.salt) == 32 and a.iterations == 4096
    with pytest.raises(ValueError, match="less than the minimum 4096"):
        make_credential(SCRAM_SHA_256, "pw", 4095)
    with pytest.raises(ValueError, match="more than the maximum 16384"):
        make_credential(SCRAM_SHA_512, "pw", 16385)
    assert make_credential(SCRAM_SHA_512, "pw", 16384).iterations == 16384
    with pytest.raises(ValueError, match="unknown SCRAM mechanism"):
        make_credential("SCRAM-SHA-1", "pw")


def test_mechanism_registry_uses_kafkas_type_ids() -> None:
    assert scram_mechanism("SCRAM-SHA-256") is SCRAM_SHA_256
    assert mechanism_by_type(1) is SCRAM_SHA_256
    assert mechanism_by_type(2) is SCRAM_SHA_512
    assert mechanism_by_type(0) is None and mechanism_by_type(3) is None


@pytest.mark.parametrize("name", ["a,b", "a=b", "=2C", "x=3D,=", "ünïcode", "plain"])
def test_saslname_escaping_round_trips(name: str) -> None:
    assert saslname_to_username(username_to_saslname(name)) == name


def test_escaped_user_names_reach_the_lookup_unescaped() -> None:
    asked: list[str] = []
    credential = make_credential(SCRAM_SHA_256, "pw")

    def lookup(name: str) -> ScramCredential | None:
        asked.append(name)
        return credential

    client = ScramClient("sha256", "CN=alice,O=example", "pw")
    assert b"n=CN=3Dalice=2CO=3Dexample," in client.first()
    server, final = exchange(SCRAM_SHA_256, lookup, client)
    assert asked == ["CN=alice,O=example"] and server.username == "CN=alice,O=example"
    assert client.verify(final)


# --- failures ----------------------------------------------------------------------


def test_wrong_password_fails_with_kafkas_message() -> None:
    lookup = users(SCRAM_SHA_256, alice="right")
    client = ScramClient("sha256", "alice", "wrong")
    server = ScramServer(SCRAM_SHA_256, lookup, lambda: "srv")
    final = client.final(server.evaluate(client.first()))
    detail = fails_generic(server, final)
    assert detail == "invalid client proof"
    assert str(SaslAuthenticationError("x")) == "x"
    assert invalid_credentials_message("SCRAM-SHA-256") == (
        "Authentication failed during authentication due to invalid credentials "
        "with SASL mechanism SCRAM-SHA-256"
    )


def test_unknown_user_is_indistinguishable_from_a_wrong_password() -> None:
    lookup = users(SCRAM_SHA_256, alice="right")
    known = ScramServer(SCRAM_SHA_256, lookup, lambda: "srv")
    unknown = ScramServer(SCRAM_SHA_256, lookup, lambda: "srv")
    known_first = known.evaluate(ScramClient("sha256", "alice", "x").first()).decode()
    unknown_first = unknown.evaluate(ScramClient("sha256", "mallory", "x").first()).decode()

    def shape(message: str) -> tuple[str, int, str]:
        attrs = dict(item.split("=", 1) for item in message.split(","))
        return attrs["r"], len(base64.b64decode(attrs["s"])), attrs["i"]

    # Same nonce, same salt length, same iterations: nothing tells the two apart.
    assert shape(known_first) == shape(unknown_first)
    assert list(dict(i.split("=", 1) for i in unknown_first.split(","))) == ["r", "s", "i"]
    # Both fail only at the proof, with the same message.
    wrong = ScramClient("sha256", "alice", "x")
    wrong.first()
    fails_generic(known, wrong.final(known_first.encode()))
    stranger = ScramClient("sha256", "mallory", "x")
    assert fails_generic(unknown, stranger.final(unknown_first.encode())) == "unknown user"


def test_fake_salt_of_an_unknown_user_is_stable_and_per_user() -> None:
    def salt_of(name: str) -> str:
        server = ScramServer(SCRAM_SHA_256, lambda _n: None, lambda: "srv")
        first = server.evaluate(ScramClient("sha256", name, "x").first()).decode()
        return dict(i.split("=", 1) for i in first.split(","))["s"]

    assert salt_of("ghost") == salt_of("ghost")
    assert salt_of("ghost") != salt_of("phantom")


def test_a_credential_below_the_minimum_iterations_cannot_log_in() -> None:
    sha256 = SCRAM_SHA_256
    salt = b"s" * 16
    weak = sha256.credential(salt, sha256.salted_password("pw", salt, 1000), 1000)
    client = ScramClient("sha256", "old", "pw")
    server = ScramServer(sha256, {"old": weak}.get, lambda: "srv")
    first = server.evaluate(client.first())
    assert b",i=4096" in first  # the fake credential's, not the stored 1000
    fails_generic(server, client.final(first))


def test_client_final_with_another_nonce_fails() -> None:
    client = ScramClient("sha256", "alice", "right")
    server = ScramServer(SCRAM_SHA_256, users(SCRAM_SHA_256, alice="right"), lambda: "srv")
    first = server.evaluate(client.first())
    detail = fails_generic(server, client.final(first, nonce=client.nonce + "other"))
    assert "nonce" in detail


def test_client_final_without_the_server_part_of_the_nonce_fails() -> None:
    client = ScramClient("sha256", "alice", "right")
    server = ScramServer(SCRAM_SHA_256, users(SCRAM_SHA_256, alice="right"), lambda: "srv")
    first = server.evaluate(client.first())
    fails_generic(server, client.final(first, nonce=client.nonce))


def test_replayed_client_final_fails_on_the_same_and_on_a_new_exchange() -> None:
    credential = make_credential(SCRAM_SHA_256, "right")
    lookup = {"alice": credential}.get
    client = ScramClient("sha256", "alice", "right")
    server = ScramServer(SCRAM_SHA_256, lookup, lambda: "first-nonce")
    replay = client.final(server.evaluate(client.first()))
    assert client.verify(server.evaluate(replay)) and server.complete
    # Once complete, nothing more is accepted.
    fails_generic(server, replay)
    # A new exchange has a new server nonce: the recorded client-final is refused.
    again = ScramServer(SCRAM_SHA_256, lookup, lambda: "second-nonce")
    again.evaluate(client.first())
    fails_generic(again, replay)


@pytest.mark.parametrize(
    "message",
    [
        b"",
        b"n=user,r=abc",  # no gs2 header
        b"p=tls-unique,,n=user,r=abc",  # channel binding
        b"y,,n=user,r=abc",  # client thinks we do not support channel binding
        b"n,,m=ext,n=user,r=abc",  # reserved mandatory extension
        b"n,,n=user",  # no nonce
        b"n,,n=,r=abc",  # empty user name
        b"n,,n=us=er,r=abc",  # '=' not escaped
        b"n,,n=user,r=ab,c",  # ',' in the nonce
        b"n,,n=user,r=ab c",  # space in the nonce
        b"n,,r=abc,n=user",  # attributes out of order
        b"n,,n=\xff\xfe,r=abc",  # not UTF-8
        b"n,,n=user,r=abc,",  # dangling comma
    ],
)
def test_malformed_client_first_messages_fail(message: bytes) -> None:
    server = ScramServer(SCRAM_SHA_256, users(SCRAM_SHA_256, user="pw"), lambda: "srv")
    fails_generic(server, message)


def test_authzid_must_be_the_user_name() -> None:
    lookup = users(SCRAM_SHA_256, alice="pw")
    other = ScramServer(SCRAM_SHA_256, lookup, lambda: "srv")
    with pytest.raises(SaslAuthenticationError) as info:
        other.evaluate(ScramClient("sha256", "alice", "pw", authzid="admin").first())
    assert str(info.value) == (
        "Authentication failed: Client requested an authorization id that is different "
        "from username"
    )
    assert not info.value.generic and other.failed
    # The same name is fine, and the gs2 header (with it) must come back as c=.
    client = ScramClient("sha256", "alice", "pw", authzid="alice")
    server, final = exchange(SCRAM_SHA_256, lookup, client)
    assert server.complete and client.verify(final)


def test_channel_binding_data_must_echo_the_gs2_header() -> None:
    client = ScramClient("sha256", "alice", "pw")
    server = ScramServer(SCRAM_SHA_256, users(SCRAM_SHA_256, alice="pw"), lambda: "srv")
    final = client.final(server.evaluate(client.first()))
    tampered = final.replace(b"c=biws", b"c=eSws")  # "y,,"
    assert "channel binding" in fails_generic(server, tampered)


def test_unknown_extensions_are_ignored_and_tokenauth_is_refused() -> None:
    lookup = users(SCRAM_SHA_256, alice="pw")
    client = ScramClient("sha256", "alice", "pw", extensions=",foo=bar")
    server, final = exchange(SCRAM_SHA_256, lookup, client)
    assert server.complete and client.verify(final)
    token = ScramClient("sha256", "alice", "pw", extensions=",tokenauth=true")
    detail = fails_generic(ScramServer(SCRAM_SHA_256, lookup, lambda: "srv"), token.first())
    assert "tokenauth" in detail


@pytest.mark.parametrize(
    "mangle",
    [
        lambda f: f.split(b",p=")[0],  # no proof
        lambda f: f + b",x=1",  # something after the proof
        lambda f: f.replace(b",p=", b",p=!"),  # proof not base64
        lambda f: f.split(b",p=")[0] + b",p=AAAA",  # proof of the wrong length
        lambda f: f.replace(b"c=biws,", b""),  # no channel binding attribute
        lambda f: b"\xff" + f,  # not UTF-8
    ],
)
def test_malformed_client_final_messages_fail(mangle: Callable[[bytes], bytes]) -> None:
    client = ScramClient("sha256", "alice", "pw")
    server = ScramServer(SCRAM_SHA_256, users(SCRAM_SHA_256, alice="pw"), lambda: "srv")
    final = client.final(server.evaluate(client.first()))
    fails_generic(server, mangle(final))


def test_a_failing_lookup_is_an_authentication_failure() -> None:
    def lookup(_name: str) -> ScramCredential | None:
        raise RuntimeError("zookeeper is down")

    server = ScramServer(SCRAM_SHA_256, lookup, lambda: "srv")
    detail = fails_generic(server, ScramClient("sha256", "alice", "pw").first())
    assert "zookeeper is down" in detail


def test_a_bad_server_nonce_source_fails_cleanly() -> None:
    server = ScramServer(SCRAM_SHA_256, users(SCRAM_SHA_256, a="pw"), lambda: "has,comma")
    fails_generic(server, ScramClient("sha256", "a", "pw").first())


def test_sha512_failure_names_its_mechanism() -> None:
    client = ScramClient("sha512", "alice", "wrong")
    server = ScramServer(SCRAM_SHA_512, users(SCRAM_SHA_512, alice="right"), lambda: "srv")
    final = client.final(server.evaluate(client.first()))
    fails_generic(server, final, "SCRAM-SHA-512")
