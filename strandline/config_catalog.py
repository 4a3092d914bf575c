"""The one table of configs: every topic and broker config Kafka 3.x defines, with Kafka's
type, default, validation and documentation (`config_catalog_data.ROWS`), and what each
does here.

A config whose feature Strandline has takes effect: the topic ones through
`storage.config.TOPIC_CONFIG_KEYS` (LogConfig), the broker ones through
`server.config.BrokerConfig`, `server.broker_configs.BROKER_KEYS` and the modules that
read them (listed in HONOURED_BROKER). Every other one is accepted (CreateTopics,
AlterConfigs, server.properties), validated by Kafka's type and validator, stored and
described, and has no effect: `no_effect_reason` says why, DescribeConfigs puts that in
front of Kafka's documentation, and docs/configs.md lists them. Nothing is silently
pretended.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from strandline.config_catalog_data import ROWS

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class ConfigDef:
    name: str
    scope: str  # "topic" or "broker"
    type: str  # Kafka's ConfigDef.Type: BOOLEAN STRING INT SHORT LONG DOUBLE LIST CLASS PASSWORD
    default: str | None  # as DescribeConfigs shows it; None: Kafka's null
    valid: tuple[Any, ...] | None
    doc: str


TOPIC_CONFIGS: dict[str, ConfigDef] = {}
BROKER_CONFIGS: dict[str, ConfigDef] = {}
for _row in ROWS:
    _def = ConfigDef(*_row)
    (TOPIC_CONFIGS if _def.scope == "topic" else BROKER_CONFIGS)[_def.name] = _def

# Topic configs of features Strandline does not offer (the others are LogConfig fields).
TOPIC_NO_EFFECT: dict[str, str] = {
    "compression.gzip.level": "the broker recompresses with the codec's default level",
    "compression.lz4.level": "the broker recompresses with the codec's default level",
    "compression.zstd.level": "the broker recompresses with the codec's default level",
    "preallocate": "segment files are not preallocated",
    "message.format.version": (
        "deprecated in Kafka; the broker accepts and writes record batches v2 (magic 2) only"
    ),
    "message.downconversion.enable": (
        "the broker never down-converts: it serves Fetch v4+ only, which read batches v2"
    ),
    "remote.storage.enable": "tiered storage (KIP-405) is not offered",
    "local.retention.ms": "tiered storage (KIP-405) is not offered",
    "local.retention.bytes": "tiered storage (KIP-405) is not offered",
}

# Broker configs Strandline reads besides server.broker_configs.BROKER_KEYS (which are
# honoured by construction): each is read by the module named.
HONOURED_BROKER: dict[str, str] = {
    "advertised.listeners": "server.listeners",
    "authorizer.class.name": "security.authorizer",
    "connection.failed.authentication.delay.ms": "server.network",
    "connections.max.idle.ms": "server.connection_quotas",
    "connections.max.reauth.ms": "security.sasl_server",
    "group.initial.rebalance.delay.ms": "server.group_service",
    "group.max.session.timeout.ms": "server.group_service",
    "group.max.size": "server.group_service",
    "group.min.session.timeout.ms": "server.group_service",
    "inter.broker.listener.name": "server.listeners",
    "listener.security.protocol.map": "server.listeners",
    "max.connection.creation.rate": "server.connection_quotas",
    "max.connections": "server.connection_quotas",
    "max.connections.per.ip": "server.connection_quotas",
    "max.connections.per.ip.overrides": "server.connection_quotas",
    "offset.metadata.max.bytes": "server.group_service",
    "offsets.retention.check.interval.ms": "server.group_service",
    "offsets.retention.minutes": "server.group_service",
    "sasl.enabled.mechanisms": "security.sasl_server",
    "sasl.jaas.config": "security (listener JAAS: PLAIN and SCRAM logins)",
    "sasl.mechanism.inter.broker.protocol": "server.inter_broker",
    "sasl.server.max.receive.size": "security.sasl_server",
    "security.inter.broker.protocol": "server.listeners",
    "ssl.cipher.suites": "security.tls",
    "ssl.client.auth": "security.tls",
    "ssl.enabled.protocols": "security.tls",
    "ssl.endpoint.identification.algorithm": "security.tls",
    "ssl.key.password": "security.tls",
    "ssl.keystore.certificate.chain": "security.tls",
    "ssl.keystore.key": "security.tls",
    "ssl.keystore.location": "security.tls",
    "ssl.keystore.password": "security.tls",
    "ssl.keystore.type": "security.tls",
    "ssl.principal.mapping.rules": "security.tls",
    "ssl.truststore.certificates": "security.tls",
    "ssl.truststore.location": "security.tls",
    "ssl.truststore.password": "security.tls",
    "ssl.truststore.type": "security.tls",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "server.txn_service",
    "transaction.max.timeout.ms": "server.txn_service",
    "transaction.remove.expired.transaction.cleanup.interval.ms": "server.txn_service",
    "transaction.state.log.min.isr": "server.txn_service",
    "transaction.state.log.num.partitions": "server.txn_service",
    "transaction.state.log.replication.factor": "server.txn_service",
    "transaction.state.log.segment.bytes": "server.txn_service",
    "transactional.id.expiration.ms": "server.txn_service",
    "compression.type": "storage.config (the broker default of the topic config)",
    "log.cleaner.max.compaction.lag.ms": "storage.config (the topic default)",
    "log.message.timestamp.difference.max.ms": "storage.config (the topic default)",
    "log.message.timestamp.before.max.ms": "storage.config (the topic default)",
    "log.message.timestamp.after.max.ms": "storage.config (the topic default)",
}

# Why a broker config of a feature Strandline does not offer has no effect, by prefix
# (the longest matching prefix wins; "" is the fallback).
_BROKER_NO_EFFECT_PREFIXES: dict[str, str] = {
    "sasl.kerberos.": "Kerberos (GSSAPI) is not offered; SASL here is PLAIN and SCRAM",
    "sasl.oauthbearer.": "OAUTHBEARER is not offered; SASL here is PLAIN and SCRAM",
    "sasl.login.": "SASL login modules are not pluggable here (PLAIN and SCRAM built in)",
    "sasl.server.callback.handler.class": "SASL callbacks are not pluggable here",
    "sasl.client.callback.handler.class": "SASL callbacks are not pluggable here",
    "zookeeper.ssl.": "ZooKeeper over TLS is not offered: the broker talks to ZooKeeper in plain",
    "zookeeper.clientCnxnSocket": "ZooKeeper over TLS is not offered",
    "zookeeper.set.acl": "ZooKeeper ACLs on the broker's znodes are not set",
    "remote.log.": "tiered storage (KIP-405) is not offered",
    "log.local.retention.": "tiered storage (KIP-405) is not offered",
    "controller.": "KRaft is not offered: this is the ZooKeeper design",
    "process.roles": "KRaft is not offered: this is the ZooKeeper design",
    "node.id": "KRaft is not offered: broker.id names the broker",
    "metadata.": "KRaft is not offered: metadata lives in ZooKeeper",
    "broker.heartbeat.interval.ms": "KRaft is not offered",
    "broker.session.timeout.ms": "KRaft is not offered",
    "initial.broker.registration.timeout.ms": "KRaft is not offered",
    "early.start.listeners": "KRaft is not offered",
    "server.max.startup.time.ms": "KRaft is not offered",
    "eligible.leader.replicas.enable": "KRaft is not offered (KIP-966)",
    "zookeeper.metadata.migration.enable": "KRaft migration is not offered",
    "num.network.threads": "the broker is one asyncio event loop: no thread pool to size",
    "num.io.threads": "the broker is one asyncio event loop: no thread pool to size",
    "background.threads": "the broker is one asyncio event loop: no thread pool to size",
    "num.replica.fetchers": "one fetcher task per source broker, not a configurable pool",
    "num.recovery.threads.per.data.dir": "recovery runs in the event loop's thread",
    "log.cleaner.threads": "one cleaner task",
    "log.cleaner.dedupe.buffer.size": "the cleaner keeps its key map in Python memory",
    "log.cleaner.io.": "the cleaner is not I/O throttled",
    "queued.max.": "requests are served as the event loop reads them; no request queue",
    "metric.reporters": "metrics are Prometheus text on metrics.port; no reporters, no JMX",
    "metrics.": "metrics are Prometheus text on metrics.port; no reporters, no JMX",
    "kafka.metrics.": "metrics are Prometheus text on metrics.port; no reporters, no JMX",
    "auto.include.jmx.reporter": "no JMX",
    "delegation.token.": "delegation tokens are not offered",
    "group.consumer.": "the new consumer group protocol (KIP-848) is not offered",
    "group.coordinator.": "the new group coordinator (KIP-848) is not offered",
    "group.share.": "share groups (KIP-932) are not offered",
    "password.encoder.": "dynamic password configs are not encoded in ZooKeeper here",
    "principal.builder.class": "principals are built in (User:<name> or the TLS subject)",
    "ssl.provider": "TLS is Python's ssl module (OpenSSL): no JSSE provider",
    "ssl.engine.factory.class": "TLS is Python's ssl module (OpenSSL): no engine factory",
    "ssl.secure.random.implementation": "TLS is Python's ssl module (OpenSSL)",
    "ssl.keymanager.algorithm": "TLS is Python's ssl module (OpenSSL): no key manager",
    "ssl.trustmanager.algorithm": "TLS is Python's ssl module (OpenSSL): no trust manager",
    "ssl.protocol": "TLS is Python's ssl module: ssl.enabled.protocols bounds the versions",
    "ssl.allow.": "TLS is Python's ssl module (OpenSSL)",
    "security.providers": "no JCA security providers",
    "create.topic.policy.class.name": "topic policies are not pluggable",
    "alter.config.policy.class.name": "config policies are not pluggable",
    "client.quota.callback.class": "quotas are not pluggable",
    "client.telemetry.": "client telemetry (KIP-714) is not offered",
    "telemetry.": "client telemetry (KIP-714) is not offered",
    "inter.broker.protocol.version": "one inter-broker protocol (the one this broker speaks)",
    "log.message.format.version": "deprecated in Kafka; batches v2 (magic 2) only",
    "log.message.downconversion.enable": "the broker never down-converts (Fetch v4+ only)",
    "log.preallocate": "segment files are not preallocated",
    "compression.gzip.level": "the broker recompresses with the codec's default level",
    "compression.lz4.level": "the broker recompresses with the codec's default level",
    "compression.zstd.level": "the broker recompresses with the codec's default level",
    "controlled.shutdown.": "controlled shutdown always runs, with fixed retries",
    "producer.id.expiration.ms": "idle producer ids are not expired",
    "replica.fetch.": "followers fetch with fixed sizes and waits (replica_fetcher.py)",
    "replica.socket.": "followers use fixed socket settings (replica_fetcher.py)",
    "socket.": "socket buffer sizes and the listen backlog are not configurable here",
    "quota.window.": "quota windows are fixed (quotas.py)",
    "replication.quota.window.": "the replication throttle's window is fixed",
    "alter.log.dirs.replication.quota.": "AlterReplicaLogDirs is not offered",
    "num.replica.alter.log.dirs.threads": "AlterReplicaLogDirs is not offered",
    "": "Strandline does not read it; where the behaviour exists, it has a fixed value",
}


def validate(definition: ConfigDef, raw: str) -> None:
    """Kafka's parse and validator for the value; raises ValueError saying why not."""
    kind = definition.type
    value: Any
    text = raw.strip()
    if kind == "BOOLEAN":
        if text.lower() not in ("true", "false"):
            raise ValueError(f"expected true or false, not {raw!r}")
        return
    if kind in ("INT", "SHORT", "LONG"):
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"expected an integer, not {raw!r}") from None
        bound = {"INT": INT_MAX, "SHORT": 2**15 - 1, "LONG": LONG_MAX}[kind]
        if not -bound - 1 <= value <= bound:
            raise ValueError(f"{raw} is out of range for a {kind.lower()}")
    elif kind == "DOUBLE":
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"expected a number, not {raw!r}") from None
    elif kind == "LIST":
        value = [item.strip() for item in text.split(",") if item.strip()]
    else:
        value = text
    valid = definition.valid
    if valid is None:
        return
    rule = valid[0]
    if rule == "at_least" and value < valid[1]:
        raise ValueError(f"{raw} is below the minimum {valid[1]}")
    if rule == "between" and not valid[1] <= value <= valid[2]:
        raise ValueError(f"{raw} is not between {valid[1]} and {valid[2]}")
    if rule == "in_or_between" and value != valid[1] and not valid[2] <= value <= valid[3]:
        raise ValueError(f"{raw} is neither {valid[1]} nor between {valid[2]} and {valid[3]}")
    if rule == "in":
        allowed = {str(v).lower() for v in valid[1]}
        items = value if isinstance(value, list) else [value]
        bad = [i for i in items if str(i).lower() not in allowed]
        if bad:
            raise ValueError(f"{bad[0]!r} is not one of {', '.join(map(str, valid[1]))}")


def topic_no_effect_reason(name: str) -> str | None:
    return TOPIC_NO_EFFECT.get(name)


def broker_no_effect_reason(name: str, honoured: frozenset[str] | set[str]) -> str | None:
    """None when the broker reads `name` (in `honoured` or HONOURED_BROKER)."""
    if name in honoured or name in HONOURED_BROKER:
        return None
    best = max((p for p in _BROKER_NO_EFFECT_PREFIXES if name.startswith(p)), key=len)
    return _BROKER_NO_EFFECT_PREFIXES[best]


def documentation(definition: ConfigDef, no_effect: str | None) -> str:
    """DescribeConfigs' documentation: Kafka's, after the reason when it has no effect."""
    if no_effect is None:
        return definition.doc
    text = f"No effect in Strandline: {no_effect}."
    return f"{text} Kafka: {definition.doc}" if definition.doc else text


# Broker configs Kafka 3.8 lets AlterConfigs change (DynamicBrokerConfig.AllDynamicConfigs,
# core/src/main/scala/kafka/server/DynamicBrokerConfig.scala): beyond the topic defaults,
# which server.broker_configs already lists.
KAFKA_DYNAMIC_BROKER_CONFIGS: frozenset[str] = frozenset(
    {
        # SslConfigs.RECONFIGURABLE_CONFIGS and DynamicListenerConfig
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
        "ssl.truststore.certificates",
        "advertised.listeners",
        "listeners",
        "listener.security.protocol.map",
        "principal.builder.class",
        "ssl.protocol",
        "ssl.provider",
        "ssl.cipher.suites",
        "ssl.enabled.protocols",
        "ssl.keymanager.algorithm",
        "ssl.trustmanager.algorithm",
        "ssl.endpoint.identification.algorithm",
        "ssl.secure.random.implementation",
        "ssl.client.auth",
        "ssl.engine.factory.class",
        "sasl.mechanism.inter.broker.protocol",
        "sasl.jaas.config",
        "sasl.enabled.mechanisms",
        "sasl.kerberos.service.name",
        "sasl.kerberos.kinit.cmd",
        "sasl.kerberos.ticket.renew.window.factor",
        "sasl.kerberos.ticket.renew.jitter",
        "sasl.kerberos.min.time.before.relogin",
        "sasl.kerberos.principal.to.local.rules",
        "sasl.login.refresh.window.factor",
        "sasl.login.refresh.window.jitter",
        "sasl.login.refresh.min.period.seconds",
        "sasl.login.refresh.buffer.seconds",
        "max.connections",
        "max.connection.creation.rate",
        # SocketServer
        "max.connections.per.ip",
        "max.connections.per.ip.overrides",
        # LogCleaner
        "log.cleaner.threads",
        "log.cleaner.dedupe.buffer.size",
        "log.cleaner.io.buffer.load.factor",
        "log.cleaner.io.buffer.size",
        "log.cleaner.io.max.bytes.per.second",
        "log.cleaner.backoff.ms",
        # DynamicThreadPool
        "num.io.threads",
        "num.replica.fetchers",
        "num.recovery.threads.per.data.dir",
        "background.threads",
        "num.network.threads",
        # metrics, producer state, remote log
        "metric.reporters",
        "producer.id.expiration.ms",
        "transaction.partition.verification.enable",
        "remote.log.index.file.cache.total.size.bytes",
        "remote.fetch.max.wait.ms",
        "remote.log.manager.copy.max.bytes.per.second",
        "remote.log.manager.fetch.max.bytes.per.second",
    }
)
