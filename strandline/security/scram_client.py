"""The client side of SCRAM (RFC 5802/7677): what a broker sends when it logs in to
another broker's SASL listener, and the tools when they talk to a secured cluster."""

from __future__ import annotations

import base64
import hmac

from strandline.security.scram import ScramMechanism, server_nonce, username_to_saslname

_GS2_HEADER = "n,,"  # no channel binding, no authzid: what Kafka's clients send


class ScramClientError(Exception):
    """The server's answers do not prove it knows our credential."""


class ScramClient:
    def __init__(self, mechanism: ScramMechanism, username: str, password: str) -> None:
        self.mechanism = mechanism
        self.password = password
        self.nonce = server_nonce()
        self._bare = f"n={username_to_saslname(username)},r={self.nonce}"
        self._server_signature = b""

    def first(self) -> bytes:
        return (_GS2_HEADER + self._bare).encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode("utf-8")
        attrs = dict(item.split("=", 1) for item in text.split(",") if "=" in item)
        combined, salt_b64, iterations = attrs.get("r", ""), attrs.get("s"), attrs.get("i")
        if not combined.startswith(self.nonce) or salt_b64 is None or iterations is None:
            raise ScramClientError(f"unexpected server-first-message {text!r}")
        m = self.mechanism
        salted = m.salted_password(self.password, base64.b64decode(salt_b64), int(iterations))
        client_key = m.hmac(salted, b"Client Key")
        without_proof = f"c={base64.b64encode(_GS2_HEADER.encode()).decode()},r={combined}"
        auth_message = f"{self._bare},{text},{without_proof}".encode()
        signature = m.hmac(m.digest(client_key), auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = m.hmac(m.hmac(salted, b"Server Key"), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        expected = b"v=" + base64.b64encode(self._server_signature)
        if not hmac.compare_digest(server_final, expected):
            raise ScramClientError("the server's signature does not match: not our broker")
