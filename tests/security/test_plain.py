"""SASL/PLAIN (strandline.security.plain): RFC 4616 message parsing with Kafka's checks
and messages, static users from `sasl.plain.users`, and SCRAM credentials reused for
PLAIN. Pure and fast."""

from __future__ import annotations

import pytest

from strandline.security.plain import (
    PlainServer,
    ScramLookup,
    parse_plain_message,
    parse_plain_users,
)
from strandline.security.scram import (
    SaslAuthenticationError,
    ScramCredential,
    make_credential,
)

INVALID = "Authentication failed: Invalid username or password"


def scram_store(**creds: dict[str, ScramCredential]) -> dict[tuple[str, str], ScramCredential]:
    return {(user, mech): c for user, by_mech in creds.items() for mech, c in by_mech.items()}


def lookup_from(store: dict[tuple[str, str], ScramCredential]) -> ScramLookup:
    def lookup(user: str, mechanism: str) -> ScramCredential | None:
        return store.get((user, mechanism))

    return lookup


def fails(server: PlainServer, token: bytes) -> str:
    with pytest.raises(SaslAuthenticationError) as info:
        server.evaluate(token)
    assert server.failed and not server.complete and server.username is None
    return str(info.value)


# --- message parsing ---------------------------------------------------------------


def test_message_without_and_with_authzid() -> None:
    assert parse_plain_message(b"\x00alice\x00secret") == ("", "alice", "secret")
    assert parse_plain_message(b"alice\x00alice\x00secret") == ("alice", "alice", "secret")
    assert parse_plain_message("\x00jürgen\x00päss".encode()) == ("", "jürgen", "päss")


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (b"", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"),
        (b"alice\x00secret", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
        (b"a\x00b\x00c\x00d", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
        (b"a\x00b\x00c\x00d\x00e\x00f", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
        (b"\x00\x00secret", "Authentication failed: username not specified"),
        (b"\x00alice\x00", "Authentication failed: password not specified"),
        (b"\x00al\xffice\x00pw", "Invalid SASL/PLAIN response: not UTF-8"),
    ],
)
def test_malformed_messages_get_kafkas_messages(token: bytes, message: str) -> None:
    with pytest.raises(SaslAuthenticationError, match="^" + message.replace("/", ".") + "$"):
        parse_plain_message(token)
    assert fails(PlainServer(static_users={"alice": "pw"}), token) == message


# --- static users ------------------------------------------------------------------


def test_static_users_config() -> None:
    assert parse_plain_users("") == {}
    assert parse_plain_users(" alice:secret , bob:pw ,") == {"alice": "secret", "bob": "pw"}
    # The password runs to the next ',' and may hold ':'.
    assert parse_plain_users("admin:a:b=c") == {"admin": "a:b=c"}


@pytest.mark.parametrize("text", ["alice", "alice:", ":pw", "alice:pw,alice:other"])
def test_static_users_config_errors(text: str) -> None:
    with pytest.raises(ValueError, match="sasl.plain.users"):
        parse_plain_users(text)


def test_static_user_logs_in() -> None:
    server = PlainServer(static_users={"alice": "secret"})
    assert server.evaluate(b"\x00alice\x00secret") == b""
    assert server.complete and server.username == "alice"


@pytest.mark.parametrize(
    "token", [b"\x00alice\x00wrong", b"\x00alice\x00secret2", b"\x00mallory\x00secret"]
)
def test_wrong_password_and_unknown_user_get_the_same_answer(token: bytes) -> None:
    assert fails(PlainServer(static_users={"alice": "secret"}), token) == INVALID


def test_authzid_must_be_the_user() -> None:
    server = PlainServer(static_users={"alice": "secret"})
    assert fails(server, b"admin\x00alice\x00secret") == (
        "Authentication failed: Client requested an authorization id that is different "
        "from username"
    )
    # Checked only after the password: a wrong password says so first.
    assert fails(PlainServer(static_users={"alice": "s"}), b"admin\x00alice\x00x") == INVALID


def test_only_one_message_per_exchange() -> None:
    server = PlainServer(static_users={"alice": "secret"})
    server.evaluate(b"\x00alice\x00secret")
    with pytest.raises(SaslAuthenticationError):
        server.evaluate(b"\x00alice\x00secret")


# --- SCRAM credentials -------------------------------------------------------------


def test_a_scram_user_can_use_plain() -> None:
    store = scram_store(alice={"SCRAM-SHA-256": make_credential("SCRAM-SHA-256", "a-pw")})
    server = PlainServer(lookup_from(store))
    server.evaluate(b"\x00alice\x00a-pw")
    assert server.complete and server.username == "alice"
    assert fails(PlainServer(lookup_from(store)), b"\x00alice\x00nope") == INVALID
    assert fails(PlainServer(lookup_from(store)), b"\x00bob\x00a-pw") == INVALID


def test_sha512_credential_is_preferred_over_sha256() -> None:
    store = scram_store(
        alice={
            "SCRAM-SHA-256": make_credential("SCRAM-SHA-256", "old"),
            "SCRAM-SHA-512": make_credential("SCRAM-SHA-512", "new", 8192),
        }
    )
    PlainServer(lookup_from(store)).evaluate(b"\x00alice\x00new")
    assert fails(PlainServer(lookup_from(store)), b"\x00alice\x00old") == INVALID


def test_a_static_user_shadows_a_scram_user_of_the_same_name() -> None:
    store = scram_store(alice={"SCRAM-SHA-256": make_credential("SCRAM-SHA-256", "scram-pw")})
    server = PlainServer(lookup_from(store), {"alice": "static-pw"})
    assert fails(server, b"\x00alice\x00scram-pw") == INVALID
    PlainServer(lookup_from(store), {"alice": "static-pw"}).evaluate(b"\x00alice\x00static-pw")


def test_a_failing_lookup_is_reported_without_crashing() -> None:
    def lookup(user: str, mechanism: str) -> ScramCredential | None:
        raise RuntimeError("boom")

    message = fails(PlainServer(lookup), b"\x00alice\x00pw")
    assert message == "Authentication failed: credentials for user could not be verified"
