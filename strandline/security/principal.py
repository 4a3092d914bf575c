"""KafkaPrincipal: who a connection is, as Kafka names it (`User:alice`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class KafkaPrincipal:
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """`User:alice` -> KafkaPrincipal("User", "alice"); the name may contain ':'."""
        kind, sep, name = text.partition(":")
        if not sep or not kind or not name:
            raise ValueError(f"a principal is written Type:name (e.g. User:alice), not {text!r}")
        return cls(kind, name)


def user(name: str) -> KafkaPrincipal:
    return KafkaPrincipal("User", name)


# What an unauthenticated PLAINTEXT (or SSL without a client certificate) connection is.
ANONYMOUS = user("ANONYMOUS")
