"""Broker configuration: `server.properties` with Kafka's key names and defaults."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from strandline.config_catalog import BROKER_CONFIGS
from strandline.errors import ConfigError
from strandline.security.listeners import ListenerConfig, parse_listeners

__all__ = ["BrokerConfig", "ConfigError", "broker_default", "parse_properties"]

# Every other default is Kafka's, from the config catalog (Kafka 3.8's definitions).
STRANDLINE_DEFAULTS: dict[str, str] = {
    # A broker started with an almost empty server.properties is a local, first broker.
    "broker.id": "0",
    "listeners": "PLAINTEXT://127.0.0.1:9092",
    "log.dir": "/tmp/strandline-logs",
    # How often the flush scheduler looks at flush.ms (Kafka's default never looks).
    "log.flush.scheduler.interval.ms": "1000",
    # Ours, not Kafka's: 0 = no metrics endpoint; tests widen the ISR notification window.
    "metrics.port": "0",
    "isr.change.notification.delay.ms": "0",
}


def broker_default(key: str) -> str | None:
    """The value a broker config has when server.properties leaves it out (None: unset)."""
    if key in STRANDLINE_DEFAULTS:
        return STRANDLINE_DEFAULTS[key]
    definition = BROKER_CONFIGS.get(key)
    return None if definition is None else definition.default


def parse_properties(text: str) -> dict[str, str]:
    """Java .properties subset: `key=value` or `key: value`, `#`/`!` comments."""
    props: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if sep < 0:
            raise ConfigError(f"line without '=': {raw!r}")
        props[line[:sep].strip()] = line[sep + 1 :].strip()
    return props


@dataclass(frozen=True)
class BrokerConfig:
    """The broker-level settings the shell uses. Topic-level defaults stay in `props`
    and are turned into a LogConfig by the storage layer (`log.*` keys)."""

    props: dict[str, str] = field(repr=False)
    broker_id: int
    # The inter-broker listener (what the controller and followers connect to).
    host: str
    port: int
    advertised_host: str
    advertised_port: int
    listeners: ListenerConfig
    log_dirs: list[Path]
    zookeeper_connect: str
    zookeeper_session_timeout_ms: int
    logs_dir: Path
    rack: str | None
    num_partitions: int
    default_replication_factor: int
    auto_create_topics_enable: bool
    delete_topic_enable: bool
    message_max_bytes: int
    socket_request_max_bytes: int
    replica_lag_time_max_ms: int
    # KIP-227: how many fetch sessions the broker keeps (0: none, every fetch is full).
    max_incremental_fetch_session_cache_slots: int
    min_insync_replicas: int
    unclean_leader_election_enable: bool
    log_flush_scheduler_interval_ms: int
    log_retention_check_interval_ms: int
    offsets_topic_num_partitions: int
    offsets_topic_replication_factor: int
    auto_leader_rebalance_enable: bool
    leader_imbalance_check_interval_seconds: int
    leader_imbalance_per_broker_percentage: int
    log_cleaner_enable: bool
    log_cleaner_backoff_ms: int
    offsets_topic_segment_bytes: int
    # How long a leader waits before creating an ISR change notification (Kafka batches
    # them for up to 5 s): the controller then hears of an ISR change after ZooKeeper
    # holds it. 0 here; tests widen the window the controller must not depend on.
    isr_change_notification_delay_ms: int
    # Prometheus text on http://host:metrics.port/metrics; unset = no metrics at all.
    metrics_port: int | None

    @classmethod
    def from_file(cls, path: Path) -> BrokerConfig:
        return cls.from_props(parse_properties(path.read_text()))

    @classmethod
    def from_props(cls, props: dict[str, str]) -> BrokerConfig:
        def get(key: str, default: str | None = None) -> str:
            value = props.get(key, default if default is not None else broker_default(key))
            if value is None:
                raise ConfigError(f"missing required broker config {key!r}")
            return value

        def get_int(key: str) -> int:
            try:
                return int(get(key))
            except ValueError as e:
                raise ConfigError(f"{key}={props.get(key)!r} is not an integer") from e

        def get_bool(key: str) -> bool:
            value = get(key).lower()
            if value not in ("true", "false"):
                raise ConfigError(f"{key}={value!r} must be true or false")
            return value == "true"

        listeners = parse_listeners({"listeners": get("listeners"), **props})
        inter_broker = listeners.listener(listeners.inter_broker_listener)
        advertised = listeners.inter_broker
        log_dirs = [Path(p) for p in get("log.dirs", get("log.dir")).split(",")]
        return cls(
            props=dict(props),
            broker_id=get_int("broker.id"),
            host=inter_broker.host or "127.0.0.1",
            port=inter_broker.port,
            advertised_host=advertised.host,
            advertised_port=advertised.port,
            listeners=listeners,
            log_dirs=log_dirs,
            zookeeper_connect=get("zookeeper.connect"),
            zookeeper_session_timeout_ms=get_int("zookeeper.session.timeout.ms"),
            logs_dir=Path(get("strandline.logs.dir", str(log_dirs[0].parent / "logs"))),
            rack=props.get("broker.rack"),
            num_partitions=get_int("num.partitions"),
            default_replication_factor=get_int("default.replication.factor"),
            auto_create_topics_enable=get_bool("auto.create.topics.enable"),
            delete_topic_enable=get_bool("delete.topic.enable"),
            message_max_bytes=get_int("message.max.bytes"),
            socket_request_max_bytes=get_int("socket.request.max.bytes"),
            replica_lag_time_max_ms=get_int("replica.lag.time.max.ms"),
            max_incremental_fetch_session_cache_slots=get_int(
                "max.incremental.fetch.session.cache.slots"
            ),
            min_insync_replicas=get_int("min.insync.replicas"),
            unclean_leader_election_enable=get_bool("unclean.leader.election.enable"),
            log_flush_scheduler_interval_ms=get_int("log.flush.scheduler.interval.ms"),
            log_retention_check_interval_ms=get_int("log.retention.check.interval.ms"),
            offsets_topic_num_partitions=get_int("offsets.topic.num.partitions"),
            offsets_topic_replication_factor=get_int("offsets.topic.replication.factor"),
            metrics_port=get_int("metrics.port") or None,
            auto_leader_rebalance_enable=get_bool("auto.leader.rebalance.enable"),
            leader_imbalance_check_interval_seconds=get_int(
                "leader.imbalance.check.interval.seconds"
            ),
            leader_imbalance_per_broker_percentage=get_int(
                "leader.imbalance.per.broker.percentage"
            ),
            log_cleaner_enable=get_bool("log.cleaner.enable"),
            log_cleaner_backoff_ms=get_int("log.cleaner.backoff.ms"),
            offsets_topic_segment_bytes=get_int("offsets.topic.segment.bytes"),
            isr_change_notification_delay_ms=get_int("isr.change.notification.delay.ms"),
        )
