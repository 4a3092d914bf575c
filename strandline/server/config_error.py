"""ConfigError: a broker setting is missing or malformed (its own module, so the
parsers of listeners, TLS and connection limits can raise it without importing the
whole BrokerConfig)."""

from __future__ import annotations


class ConfigError(ValueError):
    """A broker config value is missing or malformed; the message names the key."""
