"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), server side, as Kafka does it.

Pure: stdlib hashing only, no I/O; the credential lookup and the nonce source are
passed in. Kafka's choices are kept where the RFCs leave room:

- passwords are not SASLprep-normalized (Kafka's ScramFormatter.normalize is plain
  UTF-8), so a credential made by any Kafka tool or client verifies here;
- only the gs2 header `n` (no channel binding) is accepted; an authzid, if given,
  must equal the user name;
- extensions are ignored except `tokenauth`, which asks for delegation-token
  authentication: there are no delegation tokens, so it fails;
- credentials are stored in ZooKeeper as `salt=<b64>,stored_key=<b64>,server_key=<b64>,
  iterations=<n>` (ScramCredentialUtils).

An unknown user is answered with a server-first message built from a fake credential
(deterministic per user name, RFC 5802 section 9) and fails only at the proof, with
the same message as a wrong password, so a client cannot probe which users exist.
"""

from __future__ import annotations

import base64
import binascii
import enum
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field

DEFAULT_ITERATIONS = 4096


@dataclass(frozen=True)
class ScramMechanism:
    """One SCRAM hash. `type_id` is the int8 that DescribeUserScramCredentials and
    AlterUserScramCredentials use (Kafka's ScramMechanism.type)."""

    name: str
    hash_name: str
    type_id: int
    min_iterations: int = 4096
    max_iterations: int = 16384

    def digest(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()

    def salted_password(self, password: str, salt: bytes, iterations: int) -> bytes:
        # Hi() of RFC 5802 is PBKDF2 with one block of the hash's length.
        return hashlib.pbkdf2_hmac(self.hash_name, password.encode("utf-8"), salt, iterations)

    def credential(self, salt: bytes, salted_password: bytes, iterations: int) -> ScramCredential:
        """What the server keeps: never the salted password itself."""
        client_key = self.hmac(salted_password, b"Client Key")
        return ScramCredential(
            salt=salt,
            stored_key=self.digest(client_key),
            server_key=self.hmac(salted_password, b"Server Key"),
            iterations=iterations,
        )


SCRAM_SHA_256 = ScramMechanism("SCRAM-SHA-256", "sha256", 1)
SCRAM_SHA_512 = ScramMechanism("SCRAM-SHA-512", "sha512", 2)
SCRAM_MECHANISMS: dict[str, ScramMechanism] = {m.name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}


def scram_mechanism(name: str) -> ScramMechanism:
    try:
        return SCRAM_MECHANISMS[name]
    except KeyError:
        known = ", ".join(SCRAM_MECHANISMS)
        raise ValueError(f"unknown SCRAM mechanism {name!r} (known: {known})") from None


def mechanism_by_type(type_id: int) -> ScramMechanism | None:
    """The mechanism of an admin API's int8, None for UNKNOWN (0) or anything else."""
    return next((m for m in SCRAM_MECHANISMS.values() if m.type_id == type_id), None)


# --- credentials -------------------------------------------------------------------


@dataclass(frozen=True)
class ScramCredential:
    # Kept out of repr so that a logged credential does not hand out its keys.
    salt: bytes = field(repr=False)
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)
    iterations: int

    def format(self) -> str:
        """Kafka's ZooKeeper form (ScramCredentialUtils.credentialToString)."""
        b64 = base64.b64encode
        return (
            f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
            f"server_key={b64(self.server_key).decode()},iterations={self.iterations}"
        )

    @classmethod
    def parse(cls, text: str) -> ScramCredential:
        """Kafka's ScramCredentialUtils.credentialFromString: exactly the four keys."""
        props: dict[str, str] = {}
        for token in text.split(","):
            key, sep, value = token.partition("=")
            if not sep or not key:
                raise ValueError("Credentials not valid: not key=value pairs")
            props[key] = value
        if set(props) != {"salt", "stored_key", "server_key", "iterations"}:
            raise ValueError(
                "Credentials not valid: expected salt, stored_key, server_key and iterations"
            )
        try:
            return cls(
                salt=base64.b64decode(props["salt"], validate=True),
                stored_key=base64.b64decode(props["stored_key"], validate=True),
                server_key=base64.b64decode(props["server_key"], validate=True),
                iterations=int(props["iterations"]),
            )
        except (binascii.Error, ValueError) as e:
            # The message never quotes the text: it holds the keys.
            raise ValueError(f"Credentials not valid: {type(e).__name__}") from None


def check_iterations(mechanism: ScramMechanism, iterations: int) -> None:
    if iterations < mechanism.min_iterations:
        raise ValueError(
            f"Iterations {iterations} is less than the minimum {mechanism.min_iterations} "
            f"required for {mechanism.name}"
        )
    if iterations > mechanism.max_iterations:
        raise ValueError(
            f"Iterations {iterations} is more than the maximum {mechanism.max_iterations} "
            f"allowed for {mechanism.name}"
        )


def make_credential(
    mechanism: str | ScramMechanism,
    password: str,
    iterations: int = DEFAULT_ITERATIONS,
    salt: bytes | None = None,
) -> ScramCredential:
    """A new credential for `password` (a fresh random salt unless one is given)."""
    mech = scram_mechanism(mechanism) if isinstance(mechanism, str) else mechanism
    check_iterations(mech, iterations)
    salt = secrets.token_bytes(32) if salt is None else salt
    return mech.credential(salt, mech.salted_password(password, salt, iterations), iterations)


def verify_password(mechanism: ScramMechanism, credential: ScramCredential, password: str) -> bool:
    """Whether `password` is the one `credential` was made from (SASL/PLAIN uses this)."""
    salted = mechanism.salted_password(password, credential.salt, credential.iterations)
    stored_key = mechanism.digest(mechanism.hmac(salted, b"Client Key"))
    return hmac.compare_digest(stored_key, credential.stored_key)


# --- errors ------------------------------------------------------------------------


def invalid_credentials_message(mechanism: str, reauthentication: bool = False) -> str:
    """What Kafka's SaslServerAuthenticator tells a client whose exchange failed."""
    during = "re-authentication" if reauthentication else "authentication"
    return (
        f"Authentication failed during {during} due to invalid credentials "
        f"with SASL mechanism {mechanism}"
    )


class SaslAuthenticationError(Exception):
    """A SASL exchange failed. `str(e)` is what the client may be told; `detail` is for
    the broker's log only (it may say whether the user exists).

    `generic` marks Kafka's standard invalid-credentials message, which the
    authenticator rewords for a re-authentication; the other messages are specific
    ones Kafka passes to the client as they are (e.g. an authzid mismatch).
    """

    def __init__(self, message: str, detail: str = "", generic: bool = False) -> None:
        super().__init__(message)
        self.detail = detail or message
        self.generic = generic


# --- message syntax (RFC 5802 section 7) -------------------------------------------

_SASLNAME = r"(?:[^\x00=,]|=2C|=3D)+"
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_B64 = r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{2}==)?"
# Kafka accepts multi-letter extension names (`tokenauth=true`); RFC 5802 has one letter.
_EXTENSIONS = r"(?:,[A-Za-z]+=[^\x00,]+)*"

_CLIENT_FIRST = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,"
    rf"(?P<bare>n=(?P<saslname>{_SASLNAME}),r=(?P<nonce>{_PRINTABLE})(?P<ext>{_EXTENSIONS}))"
)
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<cbind>{_B64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS}),"
    rf"p=(?P<proof>{_B64})"
)
_SASLNAME_ESCAPE = re.compile(r"=2C|=3D")


def saslname_to_username(saslname: str) -> str:
    return _SASLNAME_ESCAPE.sub(lambda m: "," if m.group() == "=2C" else "=", saslname)


def username_to_saslname(username: str) -> str:
    return username.replace("=", "=3D").replace(",", "=2C")


def server_nonce() -> str:
    """Kafka's ScramFormatter.secureRandomString: 130 random bits in base 36."""
    value, digits = secrets.randbits(130), []
    while value:
        value, digit = divmod(value, 36)
        digits.append("0123456789abcdefghijklmnopqrstuvwxyz"[digit])
    return "".join(reversed(digits)) or "0"


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


# One per process: fake credentials for unknown users stay the same for the broker's
# lifetime (a prober asking twice sees the same salt), yet are unpredictable.
_FAKE_CREDENTIAL_KEY = secrets.token_bytes(32)


class _State(enum.Enum):
    CLIENT_FIRST = "client-first"
    CLIENT_FINAL = "client-final"
    COMPLETE = "complete"
    FAILED = "failed"


class ScramServer:
    """One server-side SCRAM exchange: `evaluate(client-first)` -> server-first,
    `evaluate(client-final)` -> server-final; then `complete` and `username`.

    `lookup(username)` returns the user's credential for this mechanism or None;
    `nonce()` the server's part of the nonce (printable ASCII without ',').
    Every failure raises SaslAuthenticationError and leaves the exchange FAILED.
    """

    def __init__(
        self,
        mechanism: str | ScramMechanism,
        lookup: Callable[[str], ScramCredential | None],
        nonce: Callable[[], str] = server_nonce,
    ) -> None:
        self.mechanism = scram_mechanism(mechanism) if isinstance(mechanism, str) else mechanism
        self._lookup = lookup
        self._nonce = nonce
        self._state = _State.CLIENT_FIRST
        self.username: str | None = None
        self._credential: ScramCredential | None = None
        self._known_user = False
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._combined_nonce = ""

    @property
    def complete(self) -> bool:
        return self._state is _State.COMPLETE

    @property
    def failed(self) -> bool:
        return self._state is _State.FAILED

    def evaluate(self, token: bytes) -> bytes:
        try:
            if self._state is _State.CLIENT_FIRST:
                return self._client_first(token).encode("utf-8")
            if self._state is _State.CLIENT_FINAL:
                return self._client_final(token).encode("utf-8")
            raise self._fail(f"unexpected SCRAM message in state {self._state.value}")
        except SaslAuthenticationError:
            self._state = _State.FAILED
            self._credential = None
            raise

    def _fail(self, detail: str) -> SaslAuthenticationError:
        return SaslAuthenticationError(
            invalid_credentials_message(self.mechanism.name), detail=detail, generic=True
        )

    def _decode(self, token: bytes, what: str) -> str:
        try:
            return token.decode("utf-8")
        except UnicodeDecodeError:
            raise self._fail(f"SCRAM {what} message is not UTF-8") from None

    def _client_first(self, token: bytes) -> str:
        message = self._decode(token, "client first")
        match = _CLIENT_FIRST.fullmatch(message)
        if match is None:
            if message[:2] in ("p=", "y,"):
                raise self._fail("SCRAM channel binding is not supported (gs2 header must be n)")
            raise self._fail("invalid SCRAM client first message format")
        username = saslname_to_username(match["saslname"])
        extensions = dict(item.split("=", 1) for item in match["ext"].split(",") if item)
        if extensions.get("tokenauth", "").lower() == "true":
            raise self._fail("delegation-token authentication (tokenauth) is not supported")
        authzid = match["authzid"]
        if authzid is not None and saslname_to_username(authzid) != username:
            # Kafka's own wording, sent to the client as is; it says nothing about
            # whether the user exists.
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        try:
            credential = self._lookup(username)
        except Exception as e:  # noqa: BLE001 - any lookup failure is an auth failure
            raise self._fail(f"credentials could not be obtained: {e!r}") from e
        self._known_user = (
            credential is not None and credential.iterations >= self.mechanism.min_iterations
        )
        if credential is None or not self._known_user:
            credential = self._fake_credential(username)
        snonce = self._nonce()
        if not re.fullmatch(_PRINTABLE, snonce):
            raise self._fail("the server nonce is not printable ASCII without ','")
        self.username = username
        self._credential = credential
        self._gs2_header = message[: match.start("bare")]
        self._client_first_bare = match["bare"]
        self._combined_nonce = match["nonce"] + snonce
        self._server_first = (
            f"r={self._combined_nonce},s={base64.b64encode(credential.salt).decode()},"
            f"i={credential.iterations}"
        )
        self._state = _State.CLIENT_FINAL
        return self._server_first

    def _fake_credential(self, username: str) -> ScramCredential:
        seed = hmac.new(
            _FAKE_CREDENTIAL_KEY,
            f"{self.mechanism.name}\x00{username}".encode(),
            "sha512",
        ).digest()
        salt, keys = seed[:32], seed[32:]
        return ScramCredential(
            salt=salt,
            stored_key=self.mechanism.digest(keys),
            server_key=self.mechanism.hmac(keys, b"Server Key"),
            iterations=DEFAULT_ITERATIONS,
        )

    def _client_final(self, token: bytes) -> str:
        message = self._decode(token, "client final")
        match = _CLIENT_FINAL.fullmatch(message)
        if match is None:
            raise self._fail("invalid SCRAM client final message format")
        if base64.b64decode(match["cbind"]) != self._gs2_header.encode("utf-8"):
            raise self._fail("SCRAM channel binding data does not match the gs2 header")
        # librdkafka before 2.6.1 (Debian's kcat) sends the client nonce twice here
        # (librdkafka#4895); Kafka 3.8.1-3.9 accept a nonce that ends with the expected
        # one, and so do we: the whole expected nonce must still be there.
        received = match["nonce"].encode()
        expected = self._combined_nonce.encode()
        if len(received) < len(expected) or not hmac.compare_digest(
            received[len(received) - len(expected) :], expected
        ):
            raise self._fail("invalid client nonce in the final client message")
        assert self._credential is not None
        auth_message = (
            f"{self._client_first_bare},{self._server_first},{match['without_proof']}"
        ).encode()
        proof = base64.b64decode(match["proof"])
        client_signature = self.mechanism.hmac(self._credential.stored_key, auth_message)
        if len(proof) != len(client_signature):
            raise self._fail("SCRAM client proof has the wrong length")
        # The same work for a fake credential as for a real one: timing tells nothing.
        computed = self.mechanism.digest(_xor(proof, client_signature))
        matches = hmac.compare_digest(computed, self._credential.stored_key)
        if not (matches and self._known_user):
            raise self._fail("unknown user" if not self._known_user else "invalid client proof")
        server_signature = self.mechanism.hmac(self._credential.server_key, auth_message)
        self._credential = None
        self._state = _State.COMPLETE
        return f"v={base64.b64encode(server_signature).decode()}"
