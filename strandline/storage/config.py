"""Topic-level log configuration, with Kafka's keys, defaults and broker-level fallbacks.

A topic config in ZooKeeper overrides the broker default, which itself comes from
`server.properties` (e.g. `segment.bytes` <- `log.segment.bytes`). TOPIC_CONFIG_KEYS
lists, for each topic key, the LogConfig field, the Kafka default and the broker keys
that set it, so DescribeConfigs can report the source of every value.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from strandline.config_catalog import TOPIC_CONFIGS, validate
from strandline.errors import InvalidConfigError
from strandline.quotas import QuotaConfigError, parse_throttled_replicas

LONG_MAX = 2**63 - 1
_HOUR_MS = 3_600_000
_MINUTE_MS = 60_000


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered == "true":
        return True
    if lowered == "false":
        return False
    raise ValueError(f"not a boolean: {text!r}")


def _parse_timestamp_type(text: str) -> str:
    value = text.strip()
    if value not in ("CreateTime", "LogAppendTime"):
        raise ValueError(f"must be CreateTime or LogAppendTime, not {value!r}")
    return value


def _parse_ratio(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"must be between 0 and 1, not {text!r}")
    return value


def _parse_cleanup_policy(text: str) -> str:
    parts = [p.strip() for p in text.replace("[", "").replace("]", "").split(",") if p.strip()]
    if not parts or any(p not in ("delete", "compact") for p in parts):
        raise ValueError(f"must be a list of delete/compact, not {text!r}")
    return ",".join(parts)


COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")


def _parse_compression_type(text: str) -> str:
    value = text.strip().lower()
    if value not in COMPRESSION_TYPES:
        raise ValueError(f"must be one of {', '.join(COMPRESSION_TYPES)}, not {text!r}")
    return value


def _parse_throttled_replicas(text: str) -> str:
    """Validated as the quota reads it; kept as text, as DescribeConfigs shows it."""
    try:
        parse_throttled_replicas(text)
    except QuotaConfigError as e:
        raise ValueError(str(e)) from e
    return ",".join(part.strip() for part in text.split(",") if part.strip())


@dataclass(frozen=True, slots=True)
class TopicConfigKey:
    name: str  # the topic-level Kafka key
    field: str  # the LogConfig attribute
    default: Any
    parse: Callable[[str], Any]
    # Broker keys that set the default, highest priority first, with the factor that
    # turns their unit into the topic key's (log.retention.hours -> retention.ms).
    broker_keys: tuple[tuple[str, int], ...]
    minimum: int | None = None


def _int_key(
    name: str, field: str, default: int, broker_keys: tuple[tuple[str, int], ...], minimum: int
) -> TopicConfigKey:
    return TopicConfigKey(name, field, default, int, broker_keys, minimum)


TOPIC_CONFIG_KEYS: tuple[TopicConfigKey, ...] = (
    _int_key("segment.bytes", "segment_bytes", 1 << 30, (("log.segment.bytes", 1),), 14),
    _int_key(
        "segment.ms",
        "segment_ms",
        7 * 24 * _HOUR_MS,
        (("log.roll.ms", 1), ("log.roll.hours", _HOUR_MS)),
        1,
    ),
    _int_key(
        "segment.jitter.ms",
        "segment_jitter_ms",
        0,
        (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", _HOUR_MS)),
        0,
    ),
    _int_key(
        "segment.index.bytes",
        "segment_index_bytes",
        10 * 1024 * 1024,
        (("log.index.size.max.bytes", 1),),
        8,
    ),
    _int_key(
        "retention.ms",
        "retention_ms",
        7 * 24 * _HOUR_MS,
        (
            ("log.retention.ms", 1),
            ("log.retention.minutes", _MINUTE_MS),
            ("log.retention.hours", _HOUR_MS),
        ),
        -1,
    ),
    _int_key("retention.bytes", "retention_bytes", -1, (("log.retention.bytes", 1),), -1),
    _int_key(
        "flush.messages", "flush_messages", LONG_MAX, (("log.flush.interval.messages", 1),), 1
    ),
    _int_key(
        "flush.ms",
        "flush_ms",
        LONG_MAX,
        (("log.flush.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1)),
        0,
    ),
    _int_key("max.message.bytes", "max_message_bytes", 1048588, (("message.max.bytes", 1),), 0),
    _int_key(
        "index.interval.bytes", "index_interval_bytes", 4096, (("log.index.interval.bytes", 1),), 0
    ),
    _int_key(
        "file.delete.delay.ms",
        "file_delete_delay_ms",
        60_000,
        (("log.segment.delete.delay.ms", 1),),
        0,
    ),
    TopicConfigKey(
        "message.timestamp.type",
        "message_timestamp_type",
        "CreateTime",
        _parse_timestamp_type,
        (("log.message.timestamp.type", 1),),
    ),
    TopicConfigKey(
        "cleanup.policy",
        "cleanup_policy",
        "delete",
        _parse_cleanup_policy,
        (("log.cleanup.policy", 1),),
    ),
    _int_key(
        "delete.retention.ms",
        "delete_retention_ms",
        24 * _HOUR_MS,
        (("log.cleaner.delete.retention.ms", 1),),
        0,
    ),
    _int_key(
        "min.compaction.lag.ms",
        "min_compaction_lag_ms",
        0,
        (("log.cleaner.min.compaction.lag.ms", 1),),
        0,
    ),
    TopicConfigKey(
        "min.cleanable.dirty.ratio",
        "min_cleanable_dirty_ratio",
        0.5,
        _parse_ratio,
        (("log.cleaner.min.cleanable.ratio", 1),),
    ),
    _int_key(
        "max.compaction.lag.ms",
        "max_compaction_lag_ms",
        LONG_MAX,
        (("log.cleaner.max.compaction.lag.ms", 1),),
        1,
    ),
    TopicConfigKey(
        "compression.type",
        "compression_type",
        "producer",
        _parse_compression_type,
        (("compression.type", 1),),
    ),
    _int_key(
        "message.timestamp.difference.max.ms",
        "message_timestamp_difference_max_ms",
        LONG_MAX,
        (("log.message.timestamp.difference.max.ms", 1),),
        0,
    ),
    _int_key(
        "message.timestamp.before.max.ms",
        "message_timestamp_before_max_ms",
        LONG_MAX,
        (("log.message.timestamp.before.max.ms", 1),),
        0,
    ),
    _int_key(
        "message.timestamp.after.max.ms",
        "message_timestamp_after_max_ms",
        LONG_MAX,
        (("log.message.timestamp.after.max.ms", 1),),
        0,
    ),
    _int_key("min.insync.replicas", "min_insync_replicas", 1, (("min.insync.replicas", 1),), 1),
    TopicConfigKey(
        "unclean.leader.election.enable",
        "unclean_leader_election_enable",
        False,
        _parse_bool,
        (("unclean.leader.election.enable", 1),),
    ),
    # Kafka keeps the replication throttle's replica lists among a topic's log configs
    # (KIP-73); the replica manager reads them, the log itself does not.
    TopicConfigKey(
        "leader.replication.throttled.replicas",
        "leader_replication_throttled_replicas",
        "",
        _parse_throttled_replicas,
        (),
    ),
    TopicConfigKey(
        "follower.replication.throttled.replicas",
        "follower_replication_throttled_replicas",
        "",
        _parse_throttled_replicas,
        (),
    ),
)

KEYS_BY_NAME: dict[str, TopicConfigKey] = {key.name: key for key in TOPIC_CONFIG_KEYS}


def _parse_value(key: TopicConfigKey, raw: str, factor: int = 1) -> Any:
    try:
        value = key.parse(str(raw))
    except ValueError as exc:
        raise InvalidConfigError(f"invalid value {raw!r} for {key.name}: {exc}") from exc
    if isinstance(value, int) and not isinstance(value, bool):
        if factor != 1 and value > 0:
            value *= factor
        if key.minimum is not None and value < key.minimum:
            raise InvalidConfigError(f"{key.name}={raw} is below the minimum {key.minimum}")
    return value


def render_value(value: Any) -> str:
    """A config value as Kafka shows it in DescribeConfigs."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * 24 * _HOUR_MS
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 * 1024 * 1024
    retention_ms: int = 7 * 24 * _HOUR_MS  # -1: keep forever
    retention_bytes: int = -1  # -1: no size limit
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    max_message_bytes: int = 1048588
    index_interval_bytes: int = 4096
    file_delete_delay_ms: int = 60_000
    message_timestamp_type: str = "CreateTime"
    cleanup_policy: str = "delete"
    delete_retention_ms: int = 24 * _HOUR_MS
    min_compaction_lag_ms: int = 0
    min_cleanable_dirty_ratio: float = 0.5
    max_compaction_lag_ms: int = LONG_MAX
    compression_type: str = "producer"
    message_timestamp_difference_max_ms: int = LONG_MAX
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    leader_replication_throttled_replicas: str = ""  # "*" or "partition:broker,..."
    follower_replication_throttled_replicas: str = ""

    @classmethod
    def from_props(
        cls, props: Mapping[str, str], base: LogConfig | None = None, *, strict: bool = True
    ) -> LogConfig:
        """Apply topic-level overrides (`retention.ms`, ...) on top of `base` (Kafka defaults).

        `strict` rejects keys this broker does not know (CreateTopics answers INVALID_CONFIG);
        pass False when reading configs another tool may have written to ZooKeeper.
        """
        changes: dict[str, Any] = {}
        for name, raw in props.items():
            key = KEYS_BY_NAME.get(name)
            if key is None:
                if strict:
                    check_no_effect_topic_config(name, raw)
                continue
            changes[key.field] = _parse_value(key, raw)
        return replace(base or cls(), **changes)

    @classmethod
    def from_broker_props(cls, props: Mapping[str, str]) -> LogConfig:
        """The broker's default topic config, from `server.properties` keys."""
        changes: dict[str, Any] = {}
        for key in TOPIC_CONFIG_KEYS:
            for broker_key, factor in key.broker_keys:
                if broker_key in props:
                    changes[key.field] = _parse_value(key, props[broker_key], factor)
                    break
        return replace(cls(), **changes)

    def to_props(self) -> dict[str, str]:
        """Every effective topic config as Kafka key -> string value."""
        return {key.name: render_value(getattr(self, key.field)) for key in TOPIC_CONFIG_KEYS}

    def value_of(self, name: str) -> Any:
        return getattr(self, KEYS_BY_NAME[name].field)

    @property
    def delete_enabled(self) -> bool:
        return "delete" in self.cleanup_policy.split(",")

    @property
    def compact_enabled(self) -> bool:
        return "compact" in self.cleanup_policy.split(",")

    @property
    def max_segment_ms(self) -> int:
        """When the active segment rolls by time: on a compacted topic no later than
        max.compaction.lag.ms, or its records could never become cleanable in time (as
        Kafka's LogConfig.maxSegmentMs)."""
        if self.compact_enabled and self.max_compaction_lag_ms < self.segment_ms:
            return self.max_compaction_lag_ms
        return self.segment_ms

    @property
    def timestamp_before_max_ms(self) -> int:
        """Kafka 3.6+ (KIP-937): before.max.ms when set, else difference.max.ms."""
        before = self.message_timestamp_before_max_ms
        return before if before != LONG_MAX else self.message_timestamp_difference_max_ms

    @property
    def timestamp_after_max_ms(self) -> int:
        after = self.message_timestamp_after_max_ms
        return after if after != LONG_MAX else self.message_timestamp_difference_max_ms

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"


def check_no_effect_topic_config(name: str, raw: str) -> None:
    """A topic config Kafka defines whose feature Strandline lacks is accepted when Kafka
    would accept the value (config_catalog); any other name is INVALID_CONFIG."""
    definition = TOPIC_CONFIGS.get(name)
    if definition is None:
        raise InvalidConfigError(f"unknown topic config {name!r}")
    try:
        validate(definition, str(raw))
    except ValueError as exc:
        raise InvalidConfigError(f"invalid value {raw!r} for {name}: {exc}") from exc


def config_source(
    name: str, topic_overrides: Mapping[str, str], broker_props: Mapping[str, str]
) -> tuple[str, str | None]:
    """Where a topic config's value comes from, for DescribeConfigs.

    Returns ("TOPIC_CONFIG", name) for a topic override, ("STATIC_BROKER_CONFIG",
    broker_key) when server.properties sets it, else ("DEFAULT_CONFIG", None).
    """
    if name in topic_overrides:
        return "TOPIC_CONFIG", name
    key = KEYS_BY_NAME[name]
    for broker_key, _factor in key.broker_keys:
        if broker_key in broker_props:
            return "STATIC_BROKER_CONFIG", broker_key
    return "DEFAULT_CONFIG", None


assert {f.name for f in fields(LogConfig)} == {k.field for k in TOPIC_CONFIG_KEYS}
