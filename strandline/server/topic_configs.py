"""Effective topic configuration: topic overrides (ZooKeeper) over broker defaults.

A topic-level key overrides the broker default, as in Kafka. DescribeConfigs reports
each key's value with its source; IncrementalAlterConfigs edits the overrides in
/config/topics/<t> and every broker reloads them through the change notification.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from strandline.coordination.zk_client import ZkClient
from strandline.errors import InvalidConfigError, InvalidRequestError, UnknownTopicOrPartitionError
from strandline.server.config import BrokerConfig
from strandline.storage.config import KEYS_BY_NAME, TOPIC_CONFIG_KEYS, LogConfig, config_source

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4

# DescribeConfigs config_source values.
DYNAMIC_TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5

_SOURCES = {
    "TOPIC_CONFIG": DYNAMIC_TOPIC_CONFIG,
    "STATIC_BROKER_CONFIG": STATIC_BROKER_CONFIG,
    "DEFAULT_CONFIG": DEFAULT_CONFIG,
}

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
        self._default = LogConfig.from_broker_props(config.props)

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

    def forget(self, topic: str) -> None:
        self._overrides.pop(topic, None)

    def log_config_for(self, topic: str) -> LogConfig:
        # Lenient: ZooKeeper may hold keys another tool wrote that we do not know.
        return LogConfig.from_props(self.overrides(topic), base=self._default, strict=False)

    async def describe_topic(self, topic: str) -> list[ConfigEntry]:
        if await asyncio.to_thread(self.zk.get_topic_assignment, topic) is None:
            raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
        overrides = await asyncio.to_thread(self.zk.get_topic_config, topic) or {}
        self._overrides[topic] = overrides
        effective = LogConfig.from_props(overrides, base=self._default, strict=False).to_props()
        kafka_defaults = LogConfig().to_props()
        broker = self.config.props
        entries = []
        for key in TOPIC_CONFIG_KEYS:
            source_name, origin = config_source(key.name, overrides, broker)
            synonyms = []
            if key.name in overrides:
                synonyms.append(ConfigSynonym(key.name, overrides[key.name], DYNAMIC_TOPIC_CONFIG))
            for broker_key, _factor in key.broker_keys:
                if broker_key in broker:
                    synonyms.append(
                        ConfigSynonym(broker_key, broker[broker_key], STATIC_BROKER_CONFIG)
                    )
            synonyms.append(ConfigSynonym(key.name, kafka_defaults[key.name], DEFAULT_CONFIG))
            entries.append(
                ConfigEntry(
                    key.name,
                    effective[key.name],
                    _SOURCES[source_name],
                    synonyms=tuple(synonyms),
                )
            )
        return entries

    def describe_broker(self, name: str) -> list[ConfigEntry]:
        if name not in ("", str(self.config.broker_id)):
            raise InvalidRequestError(f"this is broker {self.config.broker_id}, not {name!r}")
        return [
            ConfigEntry(k, v, STATIC_BROKER_CONFIG, read_only=True)
            for k, v in sorted(self.config.props.items())
        ]

    async def alter(self, topic: str, configs: dict[str, str], validate_only: bool) -> None:
        """AlterConfigs, the older API: `configs` replace every override of the topic
        (one left out returns to the broker default)."""
        await self._require_topic(topic)
        for name in configs:
            _check_key(name)
        await self._store(topic, dict(configs), validate_only)

    async def incremental_alter(self, topic: str, ops: list[AlterOp], validate_only: bool) -> None:
        await self._require_topic(topic)
        current = dict(await asyncio.to_thread(self.zk.get_topic_config, topic) or {})
        for op in ops:
            _check_key(op.name)
            if op.operation == OP_SET:
                if op.value is None:
                    raise InvalidConfigError(f"SET {op.name} needs a value")
                current[op.name] = op.value
            elif op.operation == OP_DELETE:
                current.pop(op.name, None)
            elif op.operation in (OP_APPEND, OP_SUBTRACT):
                base = current.get(op.name, self._default.to_props()[op.name])
                items = [i for i in base.split(",") if i]
                values = [v for v in (op.value or "").split(",") if v]
                if op.operation == OP_APPEND:
                    items += [v for v in values if v not in items]
                else:
                    items = [i for i in items if i not in values]
                current[op.name] = ",".join(items)
            else:
                raise InvalidRequestError(f"unknown config operation {op.operation}")
        await self._store(topic, current, validate_only)

    async def _require_topic(self, topic: str) -> None:
        if await asyncio.to_thread(self.zk.get_topic_assignment, topic) is None:
            raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")

    async def _store(self, topic: str, overrides: dict[str, str], validate_only: bool) -> None:
        LogConfig.from_props(overrides)  # raises InvalidConfigError naming the bad key
        if validate_only:
            return
        await asyncio.to_thread(self.zk.set_topic_config, topic, overrides)
        self.reload(topic)


def _check_key(name: str) -> None:
    if name not in KEYS_BY_NAME:
        raise InvalidConfigError(f"unknown topic config {name!r}")
