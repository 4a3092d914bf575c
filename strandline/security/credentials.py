"""The broker's copy of the SCRAM credentials in ZooKeeper (Kafka's CredentialCache).

Authentication reads it on every SASL exchange, so it is in memory; it is filled at
start-up (`load_all`) and kept current from the `/config/changes` notifications that
every credential change writes (`users/<sanitized name>`, see `refresh_from_change`).
Thread-safe: the notification handler, request handlers and `asyncio.to_thread`
workers all use it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Protocol

from strandline.coordination import znodes
from strandline.security.scram import SCRAM_MECHANISMS, ScramCredential

log = logging.getLogger(__name__)

USERS_ENTITY_PREFIX = "users/"


class ScramUserSource(Protocol):
    """The ZkClient methods the cache reads."""

    def get_user_scram_credentials(self, name: str) -> dict[str, str]: ...

    def list_scram_users(self) -> list[str]: ...


class CredentialCache:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users: dict[str, dict[str, ScramCredential]] = {}

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        with self._lock:
            return self._users.get(user, {}).get(mechanism)

    def users(self) -> list[str]:
        with self._lock:
            return sorted(self._users)

    def mechanisms(self, user: str) -> dict[str, int]:
        """Mechanism -> iterations of one user's credentials."""
        with self._lock:
            return {m: c.iterations for m, c in self._users.get(user, {}).items()}

    def update_user(self, name: str, credentials: Mapping[str, str]) -> None:
        """Replace one user's credentials with these ZooKeeper strings; none = forget."""
        parsed = _parse(name, credentials)
        with self._lock:
            if parsed:
                self._users[name] = parsed
            else:
                self._users.pop(name, None)

    def remove_user(self, name: str) -> None:
        with self._lock:
            self._users.pop(name, None)

    def load_all(self, zk: ScramUserSource) -> int:
        """Read every user's credentials (blocking ZooKeeper reads); returns how many
        users have one."""
        loaded = {}
        for name in zk.list_scram_users():
            parsed = _parse(name, zk.get_user_scram_credentials(name))
            if parsed:
                loaded[name] = parsed
        with self._lock:
            self._users = loaded
        return len(loaded)

    def refresh_user(self, zk: ScramUserSource, name: str) -> None:
        """Reread one user (blocking); `name` is the real user name, not sanitized."""
        self.update_user(name, zk.get_user_scram_credentials(name))

    def refresh_from_change(self, zk: ScramUserSource, entity_path: str) -> bool:
        """Handle one /config/changes entity path: `users/<sanitized name>` rereads that
        user and returns True; anything else (topics/, brokers/, a user's client or
        default quotas: `users/<u>/clients/<c>`, `users/<default>`) returns False."""
        if not entity_path.startswith(USERS_ENTITY_PREFIX):
            return False
        sanitized = entity_path.removeprefix(USERS_ENTITY_PREFIX)
        if not sanitized or "/" in sanitized or sanitized == znodes.BROKER_CONFIG_DEFAULT:
            return False
        self.refresh_user(zk, znodes.desanitize_entity_name(sanitized))
        return True


def _parse(name: str, credentials: Mapping[str, str]) -> dict[str, ScramCredential]:
    parsed = {}
    for mechanism, text in credentials.items():
        if mechanism not in SCRAM_MECHANISMS:
            continue
        try:
            parsed[mechanism] = ScramCredential.parse(text)
        except ValueError as e:
            # One bad znode must not stop the broker; this user cannot log in with it.
            log.warning("ignoring the %s credential of user %r: %s", mechanism, name, e)
    return parsed
