"""SASL/PLAIN (RFC 4616), server side, with Kafka's checks and messages (PlainSaslServer).

A user is verified against one of two sources:

- static users from the broker config, `sasl.plain.users=alice:secret,bob:pw` (our
  spelling of what Kafka reads from the JAAS entries `user_alice="secret"`): a name
  runs to the first ':', a password to the next ','; neither may contain ',' and the
  name no ':'. A static user is checked against that password only;
- otherwise the user's SCRAM credential (SCRAM-SHA-512 if it has one, else
  SCRAM-SHA-256): the password is salted with the credential's salt and iterations and
  must give its stored key, so a user created once with SCRAM can log in with PLAIN.

PLAIN sends the password in clear: only enable it on TLS listeners (SASL_SSL).
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Mapping

from strandline.security.scram import (
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    SaslAuthenticationError,
    ScramCredential,
    verify_password,
)

PLAIN = "PLAIN"

ScramLookup = Callable[[str, str], ScramCredential | None]
"""(user, mechanism name) -> that SCRAM credential or None (CredentialCache.get)."""

# Salted at the minimum for a user nobody knows, so that a wrong user name costs about
# as much time as a wrong password.
_DUMMY_SALT = b"strandline-plain-unknown-user"


def parse_plain_users(text: str) -> dict[str, str]:
    """`alice:secret,bob:pw` -> {"alice": "secret", "bob": "pw"}; empty text -> {}."""
    users: dict[str, str] = {}
    for entry in text.split(","):
        if not entry.strip():
            continue
        name, sep, password = entry.strip().partition(":")
        if not sep or not name or not password:
            raise ValueError(
                f"sasl.plain.users: expected name:password entries, got {name or entry!r}"
            )
        if name in users:
            raise ValueError(f"sasl.plain.users: user {name!r} is listed twice")
        users[name] = password
    return users


def parse_plain_message(token: bytes) -> tuple[str, str, str]:
    """`[authzid] NUL authcid NUL passwd` -> (authzid, authcid, password), with Kafka's
    messages (they are sent to the client as they are)."""
    try:
        text = token.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslAuthenticationError("Invalid SASL/PLAIN response: not UTF-8") from None
    tokens = text.split("\x00")
    if len(tokens) != 3:
        # Kafka stops counting at 4.
        raise SaslAuthenticationError(
            f"Invalid SASL/PLAIN response: expected 3 tokens, got {min(len(tokens), 4)}"
        )
    authzid, username, password = tokens
    if not username:
        raise SaslAuthenticationError("Authentication failed: username not specified")
    if not password:
        raise SaslAuthenticationError("Authentication failed: password not specified")
    return authzid, username, password


class PlainServer:
    """One SASL/PLAIN exchange: a single client message, an empty answer."""

    def __init__(
        self,
        scram_lookup: ScramLookup | None = None,
        static_users: Mapping[str, str] | None = None,
    ) -> None:
        self._scram_lookup = scram_lookup
        self._static_users = dict(static_users or {})
        self.username: str | None = None
        self.complete = False
        self.failed = False

    def evaluate(self, token: bytes) -> bytes:
        if self.complete or self.failed:
            self.failed = True
            raise SaslAuthenticationError(
                "Authentication failed: unexpected SASL/PLAIN message after the first"
            )
        try:
            authzid, username, password = parse_plain_message(token)
            try:
                authenticated = self.authenticate(username, password)
            except Exception as e:  # noqa: BLE001 - a failing lookup must not crash
                raise SaslAuthenticationError(
                    "Authentication failed: credentials for user could not be verified",
                    detail=f"credentials for {username!r} could not be verified: {e!r}",
                ) from e
            if not authenticated:
                raise SaslAuthenticationError(
                    "Authentication failed: Invalid username or password",
                    detail=f"invalid username or password for {username!r}",
                )
            if authzid and authzid != username:
                raise SaslAuthenticationError(
                    "Authentication failed: Client requested an authorization id that is "
                    "different from username"
                )
        except SaslAuthenticationError:
            self.failed = True
            raise
        self.username = username
        self.complete = True
        return b""

    def authenticate(self, username: str, password: str) -> bool:
        expected = self._static_users.get(username)
        if expected is not None:
            return hmac.compare_digest(password.encode("utf-8"), expected.encode("utf-8"))
        for mechanism in (SCRAM_SHA_512, SCRAM_SHA_256):
            credential = (
                self._scram_lookup(username, mechanism.name) if self._scram_lookup else None
            )
            if credential is not None:
                return verify_password(mechanism, credential, password)
        SCRAM_SHA_256.salted_password(password, _DUMMY_SALT, SCRAM_SHA_256.min_iterations)
        return False
