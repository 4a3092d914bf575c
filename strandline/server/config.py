"""Broker configuration: `server.properties` with Kafka's key names and defaults."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from strandline.errors import ConfigError
from strandline.security.listeners import ListenerConfig, parse_listeners

__all__ = ["BrokerConfig", "ConfigError", "parse_properties"]


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
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_seconds: int = 300
    leader_imbalance_per_broker_percentage: int = 10
    log_cleaner_enable: bool = True
    log_cleaner_backoff_ms: int = 15000
    offsets_topic_segment_bytes: int = 104857600
    # How long a leader waits before creating an ISR change notification (Kafka batches
    # them for up to 5 s): the controller then hears of an ISR change after ZooKeeper
    # holds it. 0 here; tests widen the window the controller must not depend on.
    isr_change_notification_delay_ms: int = 0
    # Prometheus text on http://host:metrics.port/metrics; unset = no metrics at all.
    metrics_port: int | None = None

    @classmethod
    def from_file(cls, path: Path) -> BrokerConfig:
        return cls.from_props(parse_properties(path.read_text()))

    @classmethod
    def from_props(cls, props: dict[str, str]) -> BrokerConfig:
        def get(key: str, default: str | None = None) -> str:
            if key in props:
                return props[key]
            if default is None:
                raise ConfigError(f"missing required broker config {key!r}")
            return default

        def get_int(key: str, default: int) -> int:
            try:
                return int(get(key, str(default)))
            except ValueError as e:
                raise ConfigError(f"{key}={props.get(key)!r} is not an integer") from e

        def get_bool(key: str, default: bool) -> bool:
            value = get(key, "true" if default else "false").lower()
            if value not in ("true", "false"):
                raise ConfigError(f"{key}={value!r} must be true or false")
            return value == "true"

        listeners = parse_listeners({"listeners": "PLAINTEXT://127.0.0.1:9092", **props})
        inter_broker = listeners.listener(listeners.inter_broker_listener)
        advertised = listeners.inter_broker
        log_dirs = [
            Path(p) for p in get("log.dirs", get("log.dir", "/tmp/strandline-logs")).split(",")
        ]
        return cls(
            props=dict(props),
            broker_id=get_int("broker.id", 0),
            host=inter_broker.host or "127.0.0.1",
            port=inter_broker.port,
            advertised_host=advertised.host,
            advertised_port=advertised.port,
            listeners=listeners,
            log_dirs=log_dirs,
            zookeeper_connect=get("zookeeper.connect"),
            zookeeper_session_timeout_ms=get_int("zookeeper.session.timeout.ms", 18000),
            logs_dir=Path(get("strandline.logs.dir", str(log_dirs[0].parent / "logs"))),
            rack=props.get("broker.rack"),
            num_partitions=get_int("num.partitions", 1),
            default_replication_factor=get_int("default.replication.factor", 1),
            auto_create_topics_enable=get_bool("auto.create.topics.enable", True),
            delete_topic_enable=get_bool("delete.topic.enable", True),
            message_max_bytes=get_int("message.max.bytes", 1048588),
            socket_request_max_bytes=get_int("socket.request.max.bytes", 104857600),
            replica_lag_time_max_ms=get_int("replica.lag.time.max.ms", 30000),
            max_incremental_fetch_session_cache_slots=get_int(
                "max.incremental.fetch.session.cache.slots", 1000
            ),
            min_insync_replicas=get_int("min.insync.replicas", 1),
            unclean_leader_election_enable=get_bool("unclean.leader.election.enable", False),
            log_flush_scheduler_interval_ms=get_int("log.flush.scheduler.interval.ms", 1000),
            log_retention_check_interval_ms=get_int("log.retention.check.interval.ms", 300000),
            offsets_topic_num_partitions=get_int("offsets.topic.num.partitions", 50),
            offsets_topic_replication_factor=get_int("offsets.topic.replication.factor", 3),
            metrics_port=get_int("metrics.port", 0) or None,
            auto_leader_rebalance_enable=get_bool("auto.leader.rebalance.enable", True),
            leader_imbalance_check_interval_seconds=get_int(
                "leader.imbalance.check.interval.seconds", 300
            ),
            leader_imbalance_per_broker_percentage=get_int(
                "leader.imbalance.per.broker.percentage", 10
            ),
            log_cleaner_enable=get_bool("log.cleaner.enable", True),
            log_cleaner_backoff_ms=get_int("log.cleaner.backoff.ms", 15000),
            offsets_topic_segment_bytes=get_int("offsets.topic.segment.bytes", 104857600),
            isr_change_notification_delay_ms=get_int("isr.change.notification.delay.ms", 0),
        )
