"""The per-connection SASL authenticator (strandline.security.sasl_server): handshake
order, PLAIN and SCRAM exchanges as a client drives them, Kafka's error codes and
messages, oversized tokens, and KIP-368 session lifetimes and re-authentication.
Pure and fast: the clock is a variable."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from strandline.security.credentials import CredentialCache
from strandline.security.principal import user
from strandline.security.sasl_server import (
    DEFAULT_MAX_RECEIVE_SIZE,
    AuthStep,
    SaslServer,
    SaslSettings,
)
from strandline.security.scram import make_credential
from tests.security.test_scram import ScramClient

ENABLED = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def cache() -> CredentialCache:
    cache = CredentialCache()
    for name, password in (("alice", "alice-pw"), ("bob", "bob-pw")):
        cache.update_user(
            name,
            {
                "SCRAM-SHA-256": make_credential("SCRAM-SHA-256", password).format(),
                "SCRAM-SHA-512": make_credential("SCRAM-SHA-512", password, 8192).format(),
            },
        )
    return cache


def server(
    cache: CredentialCache | None,
    clock: Clock | None = None,
    reauth_ms: int = 0,
    enabled: list[str] = ENABLED,
    max_receive_size: int = DEFAULT_MAX_RECEIVE_SIZE,
) -> SaslServer:
    return SaslServer(
        enabled,
        cache,
        {"admin": "admin-pw"},
        clock or Clock(),
        reauth_ms,
        max_receive_size=max_receive_size,
    )


def scram_login(sasl: SaslServer, mechanism: str, name: str, password: str) -> AuthStep:
    """Handshake + both SCRAM round trips, as a client does; the last step."""
    assert sasl.handshake(mechanism) == (ErrorCode.none, ENABLED)
    client = ScramClient(HASHES[mechanism], name, password)
    first = sasl.authenticate(client.first())
    assert first == AuthStep(ErrorCode.none, None, first.token_out)
    assert first.token_out.startswith(f"r={client.nonce}".encode())
    last = sasl.authenticate(client.final(first.token_out))
    if last.complete:
        assert client.verify(last.token_out)
    return last


def plain_login(sasl: SaslServer, name: str, password: str) -> AuthStep:
    assert sasl.handshake("PLAIN")[0] == ErrorCode.none
    return sasl.authenticate(f"\x00{name}\x00{password}".encode())


def assert_failed(step: AuthStep, sasl: SaslServer, message: str) -> None:
    assert step == AuthStep(ErrorCode.sasl_authentication_failed, message)
    assert sasl.failed and not sasl.complete


def invalid(mechanism: str, during: str = "authentication") -> str:
    return (
        f"Authentication failed during {during} due to invalid credentials "
        f"with SASL mechanism {mechanism}"
    )


# --- settings ----------------------------------------------------------------------


def test_settings_defaults() -> None:
    settings = SaslSettings.from_props({})
    assert settings.enabled_mechanisms == ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
    assert settings.plain_users == {} and settings.reauth_ms == 0
    assert settings.max_receive_size == DEFAULT_MAX_RECEIVE_SIZE == 524288


def test_settings_from_broker_properties_with_listener_overrides() -> None:
    props = {
        "sasl.enabled.mechanisms": "SCRAM-SHA-512, PLAIN",
        "sasl.plain.users": "admin:admin-pw,app:app-pw",
        "connections.max.reauth.ms": "60000",
        "listener.name.internal.sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "listener.name.internal.connections.max.reauth.ms": "0",
    }
    external = SaslSettings.from_props(props, "EXTERNAL")
    assert external.enabled_mechanisms == ("SCRAM-SHA-512", "PLAIN")
    assert external.plain_users == {"admin": "admin-pw", "app": "app-pw"}
    assert external.reauth_ms == 60000
    assert "admin-pw" not in repr(external)
    internal = SaslSettings.from_props(props, "INTERNAL")
    assert internal.enabled_mechanisms == ("SCRAM-SHA-256",) and internal.reauth_ms == 0


@pytest.mark.parametrize(
    ("props", "match"),
    [
        ({"sasl.enabled.mechanisms": "GSSAPI"}, "GSSAPI not supported"),
        ({"sasl.enabled.mechanisms": " , "}, "No SASL mechanisms are enabled"),
        ({"connections.max.reauth.ms": "soon"}, "not an integer"),
        ({"connections.max.reauth.ms": "-1"}, "must not be negative"),
        ({"sasl.plain.users": "alice"}, "sasl.plain.users"),
    ],
)
def test_settings_errors_name_the_key(props: dict[str, str], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        SaslSettings.from_props(props)


def test_from_settings() -> None:
    settings = SaslSettings.from_props({"sasl.enabled.mechanisms": "PLAIN"})
    sasl = SaslServer.from_settings(settings, None, Clock())
    assert sasl.handshake("SCRAM-SHA-256") == (ErrorCode.unsupported_sasl_mechanism, ["PLAIN"])


# --- handshake ---------------------------------------------------------------------


def test_unsupported_mechanism_names_what_is_enabled(cache: CredentialCache) -> None:
    sasl = server(cache, enabled=["SCRAM-SHA-512", "PLAIN"])
    assert sasl.handshake("GSSAPI") == (
        ErrorCode.unsupported_sasl_mechanism,
        ["SCRAM-SHA-512", "PLAIN"],
    )
    assert sasl.failed
    # Nothing more on that connection.
    assert sasl.handshake("PLAIN") == (ErrorCode.illegal_sasl_state, [])


def test_authenticate_before_handshake_is_illegal(cache: CredentialCache) -> None:
    sasl = server(cache)
    step = sasl.authenticate(b"\x00admin\x00admin-pw")
    assert step == AuthStep(
        ErrorCode.illegal_sasl_state,
        "Unexpected Kafka request of type SASL_AUTHENTICATE during SASL handshake.",
    )
    assert sasl.failed
    assert sasl.handshake("PLAIN") == (ErrorCode.illegal_sasl_state, [])


def test_second_handshake_mid_exchange_is_illegal(cache: CredentialCache) -> None:
    sasl = server(cache)
    assert sasl.handshake("SCRAM-SHA-256")[0] == ErrorCode.none
    sasl.authenticate(ScramClient("sha256", "alice", "alice-pw").first())
    assert sasl.handshake("SCRAM-SHA-256") == (ErrorCode.illegal_sasl_state, [])
    assert sasl.failed


def test_mechanisms_can_be_rejected_by_configuration(cache: CredentialCache) -> None:
    with pytest.raises(ValueError, match="OAUTHBEARER"):
        server(cache, enabled=["OAUTHBEARER"])
    with pytest.raises(ValueError, match="No SASL mechanisms"):
        server(cache, enabled=[])


# --- exchanges ---------------------------------------------------------------------


def test_plain_login_with_a_static_user(cache: CredentialCache) -> None:
    sasl = server(cache)
    step = plain_login(sasl, "admin", "admin-pw")
    assert step == AuthStep(ErrorCode.none, None, b"", True, user("admin"), 0)
    assert sasl.complete and sasl.principal == user("admin") and sasl.mechanism == "PLAIN"
    assert sasl.session_expires_at is None and not sasl.session_expired()


def test_plain_login_with_a_scram_credential(cache: CredentialCache) -> None:
    step = plain_login(server(cache), "alice", "alice-pw")
    assert step.complete and step.principal == user("alice")


def test_plain_failures(cache: CredentialCache) -> None:
    sasl = server(cache)
    assert_failed(
        plain_login(sasl, "alice", "nope"),
        sasl,
        "Authentication failed: Invalid username or password",
    )
    sasl = server(cache)
    sasl.handshake("PLAIN")
    assert_failed(
        sasl.authenticate(b"garbage"),
        sasl,
        "Invalid SASL/PLAIN response: expected 3 tokens, got 1",
    )


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_login(cache: CredentialCache, mechanism: str) -> None:
    sasl = server(cache)
    step = scram_login(sasl, mechanism, "alice", "alice-pw")
    assert step.complete and step.principal == user("alice") and step.error_code == ErrorCode.none
    assert step.session_lifetime_ms == 0 and sasl.mechanism == mechanism


def test_scram_wrong_password_and_unknown_user_look_the_same(cache: CredentialCache) -> None:
    wrong, unknown = server(cache), server(cache)
    step_wrong = scram_login(wrong, "SCRAM-SHA-256", "alice", "bad")
    step_unknown = scram_login(unknown, "SCRAM-SHA-256", "nobody", "bad")
    assert step_wrong == step_unknown
    assert_failed(step_wrong, wrong, invalid("SCRAM-SHA-256"))
    assert_failed(step_unknown, unknown, invalid("SCRAM-SHA-256"))
    assert wrong.failure_detail == "invalid client proof"
    assert unknown.failure_detail == "unknown user"


def test_scram_without_a_credential_cache_knows_no_one() -> None:
    sasl = server(None)
    assert_failed(
        scram_login(sasl, "SCRAM-SHA-256", "alice", "alice-pw"), sasl, invalid("SCRAM-SHA-256")
    )


def test_malformed_scram_message_is_an_answer_not_an_exception(cache: CredentialCache) -> None:
    sasl = server(cache)
    sasl.handshake("SCRAM-SHA-512")
    assert_failed(sasl.authenticate(b"\x00\xff junk"), sasl, invalid("SCRAM-SHA-512"))


def test_oversized_token_is_refused_without_an_exception(cache: CredentialCache) -> None:
    sasl = server(cache)
    sasl.handshake("PLAIN")
    step = sasl.authenticate(b"\x00admin\x00" + b"x" * DEFAULT_MAX_RECEIVE_SIZE)
    assert_failed(step, sasl, "Failing SASL authentication due to invalid receive size")
    small = server(cache, max_receive_size=15)
    small.handshake("PLAIN")
    assert small.authenticate(b"\x00admin\x00admin-pw").complete  # 15 bytes exactly
    small = server(cache, max_receive_size=14)
    small.handshake("PLAIN")
    assert small.authenticate(b"\x00admin\x00admin-pw").error_code == (
        ErrorCode.sasl_authentication_failed
    )


def test_authenticate_after_success_is_illegal_but_keeps_the_session(
    cache: CredentialCache,
) -> None:
    sasl = server(cache)
    plain_login(sasl, "admin", "admin-pw")
    step = sasl.authenticate(b"\x00admin\x00admin-pw")
    assert step == AuthStep(
        ErrorCode.illegal_sasl_state,
        "SaslAuthenticate request received after successful authentication",
    )
    assert sasl.complete and not sasl.failed


def test_nothing_after_a_failure(cache: CredentialCache) -> None:
    sasl = server(cache)
    plain_login(sasl, "admin", "wrong")
    assert sasl.authenticate(b"\x00admin\x00admin-pw").error_code == ErrorCode.illegal_sasl_state
    assert sasl.failed


# --- KIP-368: session lifetime and re-authentication -------------------------------


def test_without_reauth_ms_sessions_never_expire_and_reauth_is_refused(
    cache: CredentialCache,
) -> None:
    clock = Clock()
    sasl = server(cache, clock)
    scram_login(sasl, "SCRAM-SHA-256", "alice", "alice-pw")
    clock.now += 10**9
    assert not sasl.session_expired()
    # KafkaApis' answer to a handshake on an authenticated connection; it stays usable.
    assert sasl.handshake("SCRAM-SHA-256") == (ErrorCode.illegal_sasl_state, [])
    assert sasl.complete and sasl.principal == user("alice")


def test_reauth_ms_gives_the_session_lifetime(cache: CredentialCache) -> None:
    clock = Clock()
    sasl = server(cache, clock, reauth_ms=60000)
    step = scram_login(sasl, "SCRAM-SHA-512", "alice", "alice-pw")
    assert step.session_lifetime_ms == 60000
    assert sasl.session_expires_at == clock.now + 60
    clock.now += 59.9
    assert not sasl.session_expired()
    clock.now += 0.1
    assert sasl.session_expired()


def test_reauthentication_with_the_same_principal(cache: CredentialCache) -> None:
    clock = Clock()
    sasl = server(cache, clock, reauth_ms=30000)
    scram_login(sasl, "SCRAM-SHA-256", "alice", "alice-pw")
    clock.now += 29
    step = scram_login(sasl, "SCRAM-SHA-256", "alice", "alice-pw")
    assert step.complete and step.principal == user("alice")
    assert step.session_lifetime_ms == 30000 and sasl.session_expires_at == clock.now + 30
    assert sasl.complete and not sasl.reauthenticating


def test_reauthentication_as_someone_else_fails(cache: CredentialCache) -> None:
    clock = Clock()
    sasl = server(cache, clock, reauth_ms=30000)
    plain_login(sasl, "alice", "alice-pw")
    clock.now += 20
    assert_failed(
        plain_login(sasl, "bob", "bob-pw"),
        sasl,
        "Cannot change principals during re-authentication from User.alice: User.bob",
    )


def test_reauthentication_with_a_wrong_password_says_re_authentication(
    cache: CredentialCache,
) -> None:
    clock = Clock()
    sasl = server(cache, clock, reauth_ms=30000)
    scram_login(sasl, "SCRAM-SHA-256", "alice", "alice-pw")
    clock.now += 20
    step = scram_login(sasl, "SCRAM-SHA-256", "alice", "changed")
    assert_failed(step, sasl, invalid("SCRAM-SHA-256", "re-authentication"))


def test_reauthentication_must_keep_the_mechanism(cache: CredentialCache) -> None:
    clock = Clock()
    sasl = server(cache, clock, reauth_ms=30000)
    scram_login(sasl, "SCRAM-SHA-256", "alice", "alice-pw")
    clock.now += 20
    # Accepted at the handshake, refused at the first token (as Kafka does).
    assert sasl.handshake("SCRAM-SHA-512") == (ErrorCode.none, ENABLED)
    step = sasl.authenticate(ScramClient("sha512", "alice", "alice-pw").first())
    assert_failed(
        step,
        sasl,
        "SASL mechanism 'SCRAM-SHA-512' requested by client is not supported for "
        "re-authentication of mechanism 'SCRAM-SHA-256'",
    )


def test_reauthentication_with_a_disabled_mechanism_fails(cache: CredentialCache) -> None:
    clock = Clock()
    sasl = server(cache, clock, reauth_ms=30000)
    plain_login(sasl, "alice", "alice-pw")
    clock.now += 20
    assert sasl.handshake("GSSAPI") == (ErrorCode.unsupported_sasl_mechanism, ENABLED)
    assert sasl.failed


def test_reauthentication_at_most_once_a_second(cache: CredentialCache) -> None:
    clock = Clock()
    sasl = server(cache, clock, reauth_ms=30000)
    plain_login(sasl, "alice", "alice-pw")
    assert plain_login(sasl, "alice", "alice-pw").complete  # the first may come at once
    clock.now += 0.5
    assert sasl.handshake("PLAIN") == (ErrorCode.illegal_sasl_state, [])
    assert sasl.complete
    clock.now += 0.5
    assert plain_login(sasl, "alice", "alice-pw").complete


def test_reauthentication_is_accepted_after_expiry(cache: CredentialCache) -> None:
    # The socket server lets a re-authenticating handshake through on an expired
    # session (and closes the connection on anything else).
    clock = Clock()
    sasl = server(cache, clock, reauth_ms=1000)
    plain_login(sasl, "alice", "alice-pw")
    clock.now += 5
    assert sasl.session_expired()
    assert plain_login(sasl, "alice", "alice-pw").complete
    assert not sasl.session_expired()


# --- a third-party client ----------------------------------------------------------


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_aiokafkas_scram_client_logs_in(cache: CredentialCache, mechanism: str) -> None:
    """aiokafka's own SCRAM implementation (the token steps of its connection), as a
    client written by someone else."""
    from aiokafka.conn import ScramAuthenticator

    client = ScramAuthenticator(
        loop=None,
        sasl_plain_username="alice",
        sasl_plain_password="alice-pw",
        sasl_mechanism=mechanism,
    )
    sasl = server(cache)
    assert sasl.handshake(mechanism)[0] == ErrorCode.none
    answer: bytes | None = None
    while (out := client._step(answer)) is not None:
        step = sasl.authenticate(out[0])
        assert step.error_code == ErrorCode.none, step.error_message
        answer = step.token_out
    # The generator ended: aiokafka accepted the server's signature.
    assert sasl.complete and sasl.principal == user("alice")
