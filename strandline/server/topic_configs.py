"""Effective topic configuration: topic overrides (ZooKeeper) over broker defaults.

A topic-level key overrides the broker default, as in Kafka. DescribeConfigs reports
each key's value with its source; IncrementalAlterConfigs edits the overrides in
/config/topics/<t> and every broker reloads them through the change notification.

The broker defaults are themselves layered (strandline.server.broker_configs):
dynamic broker configs in /config/brokers/<id> and /config/brokers/<default> over
server.properties; the BROKER resource of the same APIs reads and edits those.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from strandline.config_catalog import TOPIC_CONFIGS, TOPIC_NO_EFFECT, documentation
from strandline.coordination.zk_client import ZkClient
from strandline.coordination.zk_retry import zk_request
from strandline.errors import InvalidConfigError, InvalidRequestError, UnknownTopicOrPartitionError
from strandline.server.broker_configs import (
    BROKER_KEYS_BY_NAME,
    DEFAULT_CONFIG,
    DYNAMIC_TOPIC_CONFIG,
    TYPE_CODES,
    TYPE_LIST,
    BrokerConfigLayers,
    BrokerConfigs,
    check_dynamic_update,
)
from strandline.server.config import BrokerConfig
from strandline.storage.config import KEYS_BY_NAME, TOPIC_CONFIG_KEYS, LogConfig

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4

OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3


@dataclass(frozen=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: int


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None
    source: int
    read_only: bool = False
    config_type: int = 0
    synonyms: tuple[ConfigSynonym, ...] = field(default=())
    sensitive: bool = False
    documentation: str | None = None


@dataclass(frozen=True)
class AlterOp:
    name: str
    operation: int
    value: str | None


class TopicConfigs:
    def __init__(
        self,
        config: BrokerConfig,
        zk: ZkClient,
        on_change: Callable[[str], None],
    ) -> None:
        self.config = config
        self.zk = zk
        self.on_change = on_change
        self._overrides: dict[str, dict[str, str]] = {}
        self.brokers = BrokerConfigs(config, zk)
        # Told the broker's effective configs after each reload (the replication
        # throttle's rates live there).
        self.broker_listeners: list[Callable[[Mapping[str, str]], None]] = []
        # Blocking, but at start-up before anything is served: logs must open with the
        # dynamic defaults already applied.
        self._apply_broker_layers(self.brokers.reload())

    def _apply_broker_layers(self, layers: BrokerConfigLayers) -> None:
        self._default = layers.log_config()
        self.broker_effective = layers.effective()
        for listener in self.broker_listeners:
            listener(self.broker_effective)

    def default_log_config(self) -> LogConfig:
        return self._default

    def overrides(self, topic: str) -> dict[str, str]:
        cached = self._overrides.get(topic)
        if cached is None:
            cached = self.zk.get_topic_config(topic) or {}
            self._overrides[topic] = cached
        return cached

    def reload(self, topic: str) -> None:
        self._overrides.pop(topic, None)
        self.on_change(topic)

    def reload_broker(self, entity: str) -> bool:
        """A change notification for /config/brokers/<entity>; True when it concerns this
        broker, and the caller must then hand every hosted topic its new LogConfig."""
        if not self.brokers.concerns_me(entity):
            return False
        self._apply_broker_layers(self.brokers.reload())
        return True

    def forget(self, topic: str) -> None:
        self._overrides.pop(topic, None)

    def log_config_for(self, topic: str) -> LogConfig:
        # Lenient: ZooKeeper may hold keys another tool wrote that we do not know.
        return LogConfig.from_props(self.overrides(topic), base=self._default, strict=False)

    async def describe_topic(self, topic: str) -> list[ConfigEntry]:
        if await zk_request(self.zk.get_topic_assignment, topic) is None:
            raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
        overrides = await zk_request(self.zk.get_topic_config, topic) or {}
        self._overrides[topic] = overrides
        # Read now rather than taken from memory: the change notification of a broker
        # default altered through another broker may still be on its way here.
        layers = await zk_request(self.brokers.fetch)
        base = layers.log_config()
        effective = LogConfig.from_props(overrides, base=base, strict=False).to_props()
        kafka_defaults = LogConfig().to_props()
        entries = []
        for key in TOPIC_CONFIG_KEYS:
            synonyms = []
            if key.name in overrides:
                synonyms.append(ConfigSynonym(key.name, overrides[key.name], DYNAMIC_TOPIC_CONFIG))
            # Key order first, then layer: the order the merged layers resolve in (the
            # first broker key set anywhere wins, its highest layer giving the value).
            for broker_key, _factor in key.broker_keys:
                synonyms.extend(
                    ConfigSynonym(s.name, s.value, s.source) for s in layers.layers_of(broker_key)
                )
            synonyms.append(ConfigSynonym(key.name, kafka_defaults[key.name], DEFAULT_CONFIG))
            definition = TOPIC_CONFIGS[key.name]
            entries.append(
                ConfigEntry(
                    key.name,
                    effective[key.name],
                    synonyms[0].source,
                    config_type=TYPE_CODES[definition.type],
                    synonyms=tuple(synonyms),
                    documentation=definition.doc,
                )
            )
        # Kafka's topic configs of features we lack: accepted and shown, with no effect.
        for name, reason in TOPIC_NO_EFFECT.items():
            definition = TOPIC_CONFIGS[name]
            synonyms = []
            if name in overrides:
                synonyms.append(ConfigSynonym(name, overrides[name], DYNAMIC_TOPIC_CONFIG))
            synonyms.append(ConfigSynonym(name, definition.default, DEFAULT_CONFIG))
            entries.append(
                ConfigEntry(
                    name,
                    synonyms[0].value,
                    synonyms[0].source,
                    config_type=TYPE_CODES[definition.type],
                    synonyms=tuple(synonyms),
                    documentation=documentation(definition, reason),
                )
            )
        return entries

    async def describe_broker(self, name: str) -> list[ConfigEntry]:
        entity = self.brokers.entity_of(name)
        layers = await zk_request(self.brokers.fetch)
        return [
            ConfigEntry(
                e.name,
                e.value,
                e.source,
                read_only=e.read_only,
                config_type=e.config_type,
                synonyms=tuple(ConfigSynonym(s.name, s.value, s.source) for s in e.synonyms),
                sensitive=e.sensitive,
                documentation=e.documentation,
            )
            for e in self.brokers.describe(layers, entity)
        ]

    async def alter_broker(self, name: str, configs: dict[str, str], validate_only: bool) -> None:
        """AlterConfigs on a BROKER resource: `configs` replace every dynamic config of
        this broker (or, for the empty name, of the cluster default)."""
        entity = self.brokers.entity_of(name)
        for key, value in configs.items():
            check_dynamic_update(key, value)
        await self._store_broker(entity, dict(configs), validate_only)

    async def incremental_alter_broker(
        self, name: str, ops: list[AlterOp], validate_only: bool
    ) -> None:
        entity = self.brokers.entity_of(name)
        current = dict(await zk_request(self.zk.get_broker_config, entity))
        for op in ops:
            if op.operation == OP_SET:
                if op.value is None:
                    raise InvalidConfigError(f"SET {op.name} needs a value")
                check_dynamic_update(op.name, op.value)
                current[op.name] = op.value
            elif op.operation == OP_DELETE:
                check_dynamic_update(op.name, None)
                current.pop(op.name, None)
            elif op.operation in (OP_APPEND, OP_SUBTRACT):
                check_dynamic_update(op.name, None)
                key = BROKER_KEYS_BY_NAME[op.name]
                if key.config_type != TYPE_LIST:
                    raise InvalidConfigError(f"{op.name} is not a list: it cannot be appended to")
                current[op.name] = _edit_list(
                    current.get(op.name, key.default or ""), op.value, op.operation == OP_APPEND
                )
                check_dynamic_update(op.name, current[op.name])
            else:
                raise InvalidRequestError(f"unknown config operation {op.operation}")
        await self._store_broker(entity, current, validate_only)

    async def _store_broker(self, entity: str, config: dict[str, str], validate_only: bool) -> None:
        if validate_only:
            return
        await zk_request(self.zk.set_broker_config, entity, config)
        # Our own describes see it at once; the logs get it from the change notification,
        # which every broker, this one included, acts on.
        if self.brokers.concerns_me(entity):
            self._apply_broker_layers(await zk_request(self.brokers.reload))

    async def alter(self, topic: str, configs: dict[str, str], validate_only: bool) -> None:
        """AlterConfigs, the older API: `configs` replace every override of the topic
        (one left out returns to the broker default)."""
        await self._require_topic(topic)
        for name in configs:
            _check_key(name)
        await self._store(topic, dict(configs), validate_only)

    async def incremental_alter(self, topic: str, ops: list[AlterOp], validate_only: bool) -> None:
        await self._require_topic(topic)
        current = dict(await zk_request(self.zk.get_topic_config, topic) or {})
        for op in ops:
            _check_key(op.name)
            if op.operation == OP_SET:
                if op.value is None:
                    raise InvalidConfigError(f"SET {op.name} needs a value")
                current[op.name] = op.value
            elif op.operation == OP_DELETE:
                current.pop(op.name, None)
            elif op.operation in (OP_APPEND, OP_SUBTRACT):
                current[op.name] = _edit_list(
                    current.get(op.name, _topic_default(self._default, op.name)),
                    op.value,
                    op.operation == OP_APPEND,
                )
            else:
                raise InvalidRequestError(f"unknown config operation {op.operation}")
        await self._store(topic, current, validate_only)

    async def _require_topic(self, topic: str) -> None:
        if await zk_request(self.zk.get_topic_assignment, topic) is None:
            raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")

    async def _store(self, topic: str, overrides: dict[str, str], validate_only: bool) -> None:
        LogConfig.from_props(overrides)  # raises InvalidConfigError naming the bad key
        if validate_only:
            return
        await zk_request(self.zk.set_topic_config, topic, overrides)
        self.reload(topic)


def _edit_list(base: str, value: str | None, append: bool) -> str:
    items = [i for i in base.split(",") if i]
    values = [v for v in (value or "").split(",") if v]
    if append:
        items += [v for v in values if v not in items]
    else:
        items = [i for i in items if i not in values]
    return ",".join(items)


def _check_key(name: str) -> None:
    if name not in KEYS_BY_NAME and name not in TOPIC_CONFIGS:
        raise InvalidConfigError(f"unknown topic config {name!r}")


def _topic_default(default: LogConfig, name: str) -> str:
    if name in KEYS_BY_NAME:
        return default.to_props()[name]
    return TOPIC_CONFIGS[name].default or ""
