"""The config znodes of ZkClient: /config/topics, /config/brokers, /config/users (SCRAM
credentials) and the /config/changes notifications every broker's config watcher reads
(Kafka's AdminZkClient.changeConfigs)."""

from __future__ import annotations

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError

from strandline.coordination import znodes


class ConfigZnodes:
    """A part of ZkClient; blocking calls on its session."""

    @property
    def kazoo(self) -> KazooClient:
        raise NotImplementedError  # the session: ZkClient.kazoo

    def get_topic_config(self, name: str) -> dict[str, str]:
        try:
            data, _ = self.kazoo.get(znodes.topic_config_path(name))
        except NoNodeError:
            return {}
        return znodes.decode_topic_config(data)

    def set_topic_config(self, name: str, config: dict[str, str]) -> None:
        """Replace the topic's overrides and announce it under /config/changes, so every
        broker's config watcher reloads the topic (Kafka's AdminZkClient.changeConfigs)."""
        self._set_or_create(znodes.topic_config_path(name), znodes.encode_topic_config(config))
        self._announce_config_change(f"topics/{name}")

    def get_broker_config(self, entity: str) -> dict[str, str]:
        """Dynamic configs of one broker (`entity` = its id) or of every broker
        (znodes.BROKER_CONFIG_DEFAULT); {} when none were ever set."""
        try:
            data, _ = self.kazoo.get(znodes.broker_config_path(entity))
        except NoNodeError:
            return {}
        return znodes.decode_broker_config(data)

    def set_broker_config(self, entity: str, config: dict[str, str]) -> None:
        """Replace /config/brokers/<entity> and announce it, as Kafka's
        AdminZkClient.changeBrokerConfig does; an empty config stays as an empty znode."""
        self._set_or_create(znodes.broker_config_path(entity), znodes.encode_broker_config(config))
        self._announce_config_change(f"brokers/{entity}")

    def _announce_config_change(self, entity_path: str) -> None:
        self.kazoo.create(
            f"{znodes.CONFIG_CHANGES_PATH}/{znodes.CONFIG_CHANGE_PREFIX}",
            znodes.encode_config_change(entity_path),
            sequence=True,
        )

    def get_config_changes(self) -> dict[str, str]:
        """Sequential change-notification name -> entity path ("topics/<name>",
        "brokers/<id>" or "brokers/<default>")."""
        changes: dict[str, str] = {}
        for child in sorted(self.kazoo.get_children(znodes.CONFIG_CHANGES_PATH)):
            try:
                data, _ = self.kazoo.get(f"{znodes.CONFIG_CHANGES_PATH}/{child}")
            except NoNodeError:
                continue
            changes[child] = znodes.decode_config_change(data)
        return changes

    def _set_or_create(self, path: str, data: bytes) -> None:
        try:
            self.kazoo.set(path, data)
        except NoNodeError:
            try:
                self.kazoo.create(path, data, makepath=True)
            except NodeExistsError:
                self.kazoo.set(path, data)

    # --- SCRAM credentials (/config/users/<sanitized name>) ---------------------------

    def get_user_scram_credentials(self, name: str) -> dict[str, str]:
        """Mechanism -> Kafka's credential string (`salt=...,iterations=N`); {} when the
        user has none. Other keys of the user's config (quotas) are left out."""
        try:
            data, _ = self.kazoo.get(znodes.user_config_path(name))
        except NoNodeError:
            return {}
        # A parent made for /config/users/<u>/clients/<c> may hold no data at all.
        config = znodes.decode_user_config(data) if data else {}
        return {k: v for k, v in config.items() if k in znodes.SCRAM_CONFIG_KEYS}

    def set_user_scram_credential(self, name: str, mechanism: str, credential: str | None) -> None:
        """Set one mechanism's credential, or delete it (None)."""
        self.alter_user_scram_credentials(name, {mechanism: credential})

    def alter_user_scram_credentials(self, name: str, changes: dict[str, str | None]) -> None:
        """Set (str) or delete (None) several mechanisms of one user in one write, keep
        its other configs, remove the znode once it holds nothing, and announce
        `users/<sanitized name>` under /config/changes (AdminZkClient.changeConfigs).
        The read-modify-write is conditional on the znode's version, so concurrent
        alterations of one user from different brokers do not lose each other."""
        path = znodes.user_config_path(name)
        while True:
            try:
                data, stat = self.kazoo.get(path)
                config = znodes.decode_user_config(data) if data else {}
                version = int(stat.version)
            except NoNodeError:
                config, version = {}, None
            for mechanism, credential in changes.items():
                if credential is None:
                    config.pop(mechanism, None)
                else:
                    config[mechanism] = credential
            encoded = znodes.encode_user_config(config)
            try:
                if version is None:
                    if not config:
                        return  # deleting from a user who has nothing: no change
                    self.kazoo.create(path, encoded, makepath=True)
                elif config:
                    self.kazoo.set(path, encoded, version)
                else:
                    try:
                        self.kazoo.delete(path, version)
                    except NotEmptyError:
                        # /config/users/<u>/clients/<c> quotas hang below: keep it, empty.
                        self.kazoo.set(path, encoded, version)
            except (NodeExistsError, BadVersionError, NoNodeError):
                continue  # changed under us: read again
            break
        self._announce_config_change(f"users/{znodes.sanitize_entity_name(name)}")

    def list_scram_users(self) -> list[str]:
        """Users (desanitized names) with at least one SCRAM credential, sorted."""
        try:
            children = self.kazoo.get_children(znodes.CONFIG_USERS_PATH)
        except NoNodeError:
            return []
        pending = [
            (child, self.kazoo.get_async(f"{znodes.CONFIG_USERS_PATH}/{child}"))
            for child in children
        ]
        users = []
        for child, result in pending:
            try:
                data, _ = result.get()
            except NoNodeError:
                continue
            config = znodes.decode_user_config(data) if data else {}
            if any(k in znodes.SCRAM_CONFIG_KEYS for k in config):
                users.append(znodes.desanitize_entity_name(child))
        return sorted(users)
