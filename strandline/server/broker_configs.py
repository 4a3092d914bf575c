"""Broker configs: `server.properties` under the dynamic configs kept in ZooKeeper.

Kafka's ZooKeeper-era layers, highest priority first, each with the DescribeConfigs
source it reports:

    /config/brokers/<id>        DYNAMIC_BROKER_CONFIG           this broker only
    /config/brokers/<default>   DYNAMIC_DEFAULT_BROKER_CONFIG   every broker
    server.properties           STATIC_BROKER_CONFIG
    Kafka's default             DEFAULT_CONFIG

Which configs can change without a restart (DYNAMIC_KEYS):

- the broker-wide topic defaults, one broker key per topic config, as Kafka's
  DynamicLogConfig has them: log.segment.bytes, log.roll.ms, log.roll.jitter.ms,
  log.index.size.max.bytes, log.retention.ms, log.retention.bytes,
  log.flush.interval.messages, log.flush.interval.ms, message.max.bytes,
  log.index.interval.bytes, log.segment.delete.delay.ms, log.message.timestamp.type,
  log.cleanup.policy, log.cleaner.delete.retention.ms, log.cleaner.min.compaction.lag.ms,
  log.cleaner.min.cleanable.ratio, min.insync.replicas, unclean.leader.election.enable.
  A change reaches every hosted log of a topic without its own override at once
  (segment rolling, retention, flushing, min.insync.replicas on produce) and the next
  unclean-election decision of the controller;
- leader.replication.throttled.rate and follower.replication.throttled.rate: the
  replication throttle's quotas (strandline/server/replication_throttle.py), in force
  from the next fetch.

Everything else (listeners, log.dirs, zookeeper.*, the hour/minute spellings of the
retention and roll times, ...) is read once at start-up: DescribeConfigs marks it
read-only and altering it is INVALID_CONFIG, like an unknown name or a bad value.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from itertools import dropwhile

from strandline.config_catalog import (
    BROKER_CONFIGS,
    KAFKA_DYNAMIC_BROKER_CONFIGS,
    broker_no_effect_reason,
    documentation,
    validate,
)
from strandline.coordination.zk_client import ZkClient
from strandline.coordination.znodes import BROKER_CONFIG_DEFAULT
from strandline.errors import InvalidConfigError, InvalidRequestError
from strandline.server.config import BrokerConfig, broker_default
from strandline.storage.config import LONG_MAX, TOPIC_CONFIG_KEYS, LogConfig, render_value

log = logging.getLogger(__name__)

# DescribeConfigs config_source values.
DYNAMIC_TOPIC_CONFIG = 1
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5

# DescribeConfigs config_type values (v3+).
TYPE_BOOLEAN, TYPE_STRING, TYPE_INT, TYPE_LONG, TYPE_DOUBLE, TYPE_LIST = 1, 2, 3, 5, 6, 7
TYPE_PASSWORD = 9
# Kafka's ConfigDef.Type -> DescribeConfigs config_type.
TYPE_CODES = {
    "BOOLEAN": TYPE_BOOLEAN,
    "STRING": TYPE_STRING,
    "INT": TYPE_INT,
    "SHORT": 4,
    "LONG": TYPE_LONG,
    "DOUBLE": TYPE_DOUBLE,
    "LIST": TYPE_LIST,
    "CLASS": 8,
    "PASSWORD": TYPE_PASSWORD,
}


@dataclass(frozen=True, slots=True)
class BrokerKey:
    name: str
    default: str | None  # None: Kafka's null (unset, a synonym decides)
    dynamic: bool
    config_type: int = TYPE_STRING
    validate: Callable[[str], None] | None = None  # raises InvalidConfigError


@dataclass(frozen=True, slots=True)
class Layered:
    """One value a broker key has in one layer."""

    name: str
    value: str | None
    source: int


def _topic_default_validator(broker_key: str) -> Callable[[str], None]:
    def validate(value: str) -> None:
        # Parses the value the way start-up would, with its unit and minimum.
        try:
            LogConfig.from_broker_props({broker_key: value})
        except InvalidConfigError as e:
            # The storage layer names the topic key; the user typed the broker key.
            raise InvalidConfigError(f"{broker_key}={value!r} is invalid: {e}") from e

    return validate


def _long_at_least_zero(name: str) -> Callable[[str], None]:
    def validate(value: str) -> None:
        try:
            parsed = int(value)
        except ValueError:
            raise InvalidConfigError(f"invalid value {value!r} for {name}: not a long") from None
        if not 0 <= parsed <= LONG_MAX:
            raise InvalidConfigError(f"{name}={value} must be between 0 and {LONG_MAX}")

    return validate


def _topic_default_keys() -> list[BrokerKey]:
    # Kafka leaves the millisecond spellings null when an hour/minute one has a default.
    null_by_default = {
        "log.roll.ms",
        "log.roll.jitter.ms",
        "log.retention.ms",
        "log.retention.minutes",
        "log.flush.interval.ms",
    }
    keys = []
    for topic_key in TOPIC_CONFIG_KEYS:
        if isinstance(topic_key.default, bool):
            config_type = TYPE_BOOLEAN
        elif isinstance(topic_key.default, int):
            config_type = TYPE_LONG
        elif isinstance(topic_key.default, float):
            config_type = TYPE_DOUBLE
        elif topic_key.name == "cleanup.policy":
            config_type = TYPE_LIST
        else:
            config_type = TYPE_STRING
        for i, (broker_key, factor) in enumerate(topic_key.broker_keys):
            if broker_key in null_by_default:
                default: str | None = None
            elif factor > 1:
                default = str(topic_key.default // factor)
            else:
                default = render_value(topic_key.default)
            keys.append(
                BrokerKey(
                    broker_key,
                    default,
                    # Only the highest-priority spelling is dynamic, as in Kafka.
                    dynamic=i == 0,
                    config_type=config_type,
                    validate=_topic_default_validator(broker_key),
                )
            )
    return keys


def _static(name: str) -> BrokerKey:
    """A key read once at start-up, with the default and type BrokerConfig uses."""
    return BrokerKey(
        name, broker_default(name), dynamic=False, config_type=TYPE_CODES[BROKER_CONFIGS[name].type]
    )


def _throttle(name: str) -> BrokerKey:
    return BrokerKey(name, str(LONG_MAX), True, TYPE_LONG, _long_at_least_zero(name))


BROKER_KEYS: tuple[BrokerKey, ...] = (
    # What BrokerConfig reads at start-up.
    _static("broker.id"),
    _static("listeners"),
    _static("advertised.listeners"),
    _static("log.dirs"),
    _static("log.dir"),
    _static("zookeeper.connect"),
    _static("zookeeper.session.timeout.ms"),
    _static("broker.rack"),
    _static("num.partitions"),
    _static("default.replication.factor"),
    _static("auto.create.topics.enable"),
    _static("delete.topic.enable"),
    _static("socket.request.max.bytes"),
    _static("replica.lag.time.max.ms"),
    _static("max.incremental.fetch.session.cache.slots"),
    _static("log.retention.check.interval.ms"),
    _static("offsets.topic.num.partitions"),
    _static("offsets.topic.replication.factor"),
    _static("offsets.topic.segment.bytes"),
    _static("offsets.commit.timeout.ms"),
    _static("auto.leader.rebalance.enable"),
    _static("leader.imbalance.check.interval.seconds"),
    _static("leader.imbalance.per.broker.percentage"),
    _static("log.cleaner.enable"),
    _static("log.cleaner.backoff.ms"),
    *_topic_default_keys(),
    _throttle("leader.replication.throttled.rate"),
    _throttle("follower.replication.throttled.rate"),
)
BROKER_KEYS_BY_NAME: dict[str, BrokerKey] = {k.name: k for k in BROKER_KEYS}
DYNAMIC_KEYS: frozenset[str] = frozenset(k.name for k in BROKER_KEYS if k.dynamic)

# Broker keys whose values are read elsewhere (the group coordinator): known, so that
# altering one says "needs a restart" rather than "unknown".
_OTHER_STATIC_KEYS = frozenset(
    {
        "group.min.session.timeout.ms",
        "group.max.session.timeout.ms",
        "group.initial.rebalance.delay.ms",
        "group.max.size",
        "offsets.retention.minutes",
        "offsets.retention.check.interval.ms",
        "offset.metadata.max.bytes",
    }
)

# Keys that share a value, highest priority first (log.retention.ms over .hours).
_SYNONYM_GROUPS: dict[str, tuple[str, ...]] = {
    broker_key: tuple(k for k, _f in topic_key.broker_keys)
    for topic_key in TOPIC_CONFIG_KEYS
    for broker_key, _factor in topic_key.broker_keys
}


# Kafka's PASSWORD-type broker keys, plus ours that hold one (sasl.plain.users). Their
# value never leaves the broker: DescribeConfigs answers null and is_sensitive=true.
PASSWORD_KEYS: frozenset[str] = frozenset(
    {
        "sasl.jaas.config",
        "sasl.plain.users",
        "ssl.key.password",
        "ssl.keystore.password",
        "ssl.truststore.password",
        "ssl.keystore.key",
        "ssl.keystore.certificate.chain",
        "ssl.truststore.certificates",
        "password.encoder.secret",
        "password.encoder.old.secret",
        "delegation.token.master.key",
        "delegation.token.secret.key",
        "zookeeper.ssl.keystore.password",
        "zookeeper.ssl.truststore.password",
        "zookeeper.clientCnxnSocket.password",
    }
)
# A key we do not know may hold anything; Kafka treats an unknown type as sensitive.
# Ours is narrower (keys are shown by default) but hides whatever is named like a secret.
_SECRET_WORDS = ("password", "secret", "jaas", "credential", "token", "plain.users")


def is_sensitive(name: str) -> bool:
    """Whether `name` (possibly `listener.name.<l>.` and `<mechanism>.` prefixed, as the
    per-listener JAAS keys are) holds a secret."""
    base = name
    if base.startswith("listener.name."):
        parts = base.split(".", 3)
        base = parts[3] if len(parts) == 4 else base
    if base in PASSWORD_KEYS or base.split(".", 1)[-1] in PASSWORD_KEYS:
        return True
    lowered = name.lower()
    return any(word in lowered for word in _SECRET_WORDS)


_HONOURED: frozenset[str] = frozenset(BROKER_KEYS_BY_NAME) | _OTHER_STATIC_KEYS


def no_effect_reason(name: str) -> str | None:
    """Why a broker config Kafka defines does nothing here; None when it is read."""
    return broker_no_effect_reason(name, _HONOURED)


def _accepted_without_effect(name: str) -> bool:
    """A config Kafka lets AlterConfigs change whose feature we lack: stored, described,
    no effect (as Kafka's AllDynamicConfigs; the others need a restart there too)."""
    return (
        name in BROKER_CONFIGS
        and name in KAFKA_DYNAMIC_BROKER_CONFIGS
        and no_effect_reason(name) is not None
    )


def check_dynamic_update(name: str, value: str | None) -> None:
    """INVALID_CONFIG unless `name` may be set to `value` (None: deleted) live."""
    key = BROKER_KEYS_BY_NAME.get(name)
    if key is None and _accepted_without_effect(name):
        if value is not None:
            try:
                validate(BROKER_CONFIGS[name], value)
            except ValueError as e:
                raise InvalidConfigError(f"invalid value {value!r} for {name}: {e}") from e
        return
    if key is None and name not in _OTHER_STATIC_KEYS and name not in BROKER_CONFIGS:
        raise InvalidConfigError(f"unknown broker config {name!r}")
    if key is None or not key.dynamic:
        raise InvalidConfigError(
            f"broker config {name!r} cannot be updated dynamically: "
            "set it in server.properties and restart the broker"
        )
    if value is not None and key.validate is not None:
        key.validate(value)


def _usable(entity: str, config: dict[str, str]) -> dict[str, str]:
    """What another tool wrote to ZooKeeper, minus what this broker cannot apply (Kafka
    too logs and skips invalid dynamic configs rather than refuse to start)."""
    usable = {}
    for name, value in config.items():
        try:
            check_dynamic_update(name, value)
        except InvalidConfigError as e:
            log.warning("ignoring dynamic config %s of brokers/%s: %s", name, entity, e)
            continue
        usable[name] = value
    return usable


@dataclass(frozen=True)
class BrokerConfigLayers:
    """The three configured layers of one broker at one moment."""

    broker_id: int
    static: dict[str, str]
    default: dict[str, str]  # /config/brokers/<default>
    own: dict[str, str]  # /config/brokers/<id>

    def effective(self) -> dict[str, str]:
        return {**self.static, **self.default, **self.own}

    def log_config(self) -> LogConfig:
        """The default topic config this broker applies (topic overrides go on top)."""
        return LogConfig.from_broker_props(self.effective())

    def layers_of(self, name: str) -> list[Layered]:
        """Every configured value of one key, highest priority first."""
        found = []
        for layer, source in (
            (self.own, DYNAMIC_BROKER_CONFIG),
            (self.default, DYNAMIC_DEFAULT_BROKER_CONFIG),
            (self.static, STATIC_BROKER_CONFIG),
        ):
            if name in layer:
                found.append(Layered(name, layer[name], source))
        return found

    def synonyms(self, name: str) -> list[Layered]:
        """Kafka's synonym list (ConfigHelper.configSynonyms): layer by layer, the keys of
        the group that are set there, then their defaults; and, as Kafka does, without
        the entries ahead of `name`'s own first one, so log.retention.hours never takes
        its source from a log.retention.ms set somewhere."""
        group = _SYNONYM_GROUPS.get(name, (name,))
        found: list[Layered] = []
        for layer, source in (
            (self.own, DYNAMIC_BROKER_CONFIG),
            (self.default, DYNAMIC_DEFAULT_BROKER_CONFIG),
            (self.static, STATIC_BROKER_CONFIG),
        ):
            found.extend(Layered(k, layer[k], source) for k in group if k in layer)
        for key_name in group:
            key = BROKER_KEYS_BY_NAME.get(key_name)
            if key is not None and key.default is not None:
                found.append(Layered(key_name, key.default, DEFAULT_CONFIG))
        return list(dropwhile(lambda s: s.name != name, found))


@dataclass(frozen=True)
class BrokerConfigEntry:
    name: str
    value: str | None
    source: int
    read_only: bool
    config_type: int
    synonyms: tuple[Layered, ...]
    sensitive: bool = False
    documentation: str | None = None


class BrokerConfigs:
    """This broker's view of its configs; `current` changes only through `reload`."""

    def __init__(self, config: BrokerConfig, zk: ZkClient) -> None:
        self.broker_id = config.broker_id
        self.static = dict(config.props)
        self.zk = zk
        self.current = BrokerConfigLayers(self.broker_id, self.static, {}, {})

    def fetch(self) -> BrokerConfigLayers:
        """The layers as ZooKeeper has them now (blocking: two reads)."""
        return BrokerConfigLayers(
            self.broker_id,
            self.static,
            _usable(BROKER_CONFIG_DEFAULT, self.zk.get_broker_config(BROKER_CONFIG_DEFAULT)),
            _usable(str(self.broker_id), self.zk.get_broker_config(str(self.broker_id))),
        )

    def reload(self) -> BrokerConfigLayers:
        self.current = self.fetch()
        return self.current

    def concerns_me(self, entity: str) -> bool:
        """Whether a change of /config/brokers/<entity> can change this broker's values."""
        return entity in (BROKER_CONFIG_DEFAULT, str(self.broker_id))

    def entity_of(self, resource_name: str) -> str:
        """The znode name a BROKER resource addresses; Kafka's rule: the empty name is
        the cluster default, any other must be the id of the broker asked."""
        if resource_name == "":
            return BROKER_CONFIG_DEFAULT
        if resource_name != str(self.broker_id):
            raise InvalidRequestError(
                f"unexpected broker id, expected {self.broker_id} or the empty string "
                f"(cluster default), got {resource_name!r}"
            )
        return resource_name

    @staticmethod
    def describe(layers: BrokerConfigLayers, entity: str) -> list[BrokerConfigEntry]:
        if entity == BROKER_CONFIG_DEFAULT:
            # Kafka answers the default resource with its dynamic configs only.
            return [
                _redacted(
                    BrokerConfigEntry(
                        name,
                        value,
                        DYNAMIC_DEFAULT_BROKER_CONFIG,
                        read_only=False,
                        config_type=_type_of(name),
                        synonyms=(Layered(name, value, DYNAMIC_DEFAULT_BROKER_CONFIG),),
                    )
                )
                for name, value in sorted(layers.default.items())
            ]
        names = sorted(
            set(BROKER_KEYS_BY_NAME) | set(BROKER_CONFIGS) | set(layers.static) | set(layers.own)
        )
        entries = []
        for name in names:
            key = BROKER_KEYS_BY_NAME.get(name)
            definition = BROKER_CONFIGS.get(name)
            own = layers.layers_of(name)
            if own:
                value = own[0].value
            elif key is not None:
                value = key.default
            else:
                value = definition.default if definition is not None else None
            synonyms = layers.synonyms(name)
            if not synonyms and key is None and definition is not None:
                if definition.default is not None:
                    synonyms = [Layered(name, definition.default, DEFAULT_CONFIG)]
            entries.append(
                _redacted(
                    BrokerConfigEntry(
                        name,
                        value,
                        # Kafka's rule: the source is that of the first synonym.
                        synonyms[0].source if synonyms else DEFAULT_CONFIG,
                        read_only=name not in DYNAMIC_KEYS and not _accepted_without_effect(name),
                        config_type=_type_of(name),
                        synonyms=tuple(synonyms),
                        documentation=(
                            documentation(definition, no_effect_reason(name))
                            if definition is not None
                            else None
                        ),
                    )
                )
            )
        return entries


def _redacted(entry: BrokerConfigEntry) -> BrokerConfigEntry:
    """A password-type entry as Kafka answers it: null value (synonyms too), sensitive."""
    if not is_sensitive(entry.name):
        return entry
    return BrokerConfigEntry(
        entry.name,
        None,
        entry.source,
        entry.read_only,
        TYPE_PASSWORD,
        tuple(Layered(s.name, None, s.source) for s in entry.synonyms),
        sensitive=True,
        documentation=entry.documentation,
    )


def _type_of(name: str) -> int:
    key = BROKER_KEYS_BY_NAME.get(name)
    if key is not None:
        return key.config_type
    definition = BROKER_CONFIGS.get(name)
    return TYPE_CODES[definition.type] if definition is not None else TYPE_STRING
