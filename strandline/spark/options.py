"""Data source options, with the names and meanings of Spark's Kafka connector.

PySpark hands options over as a case-insensitive dict (`dict(options)` lower-cases the
keys), so every lookup here is by lower-case name; values keep their case.

`kafka.<key>` options are client settings, security ones included. They may be written
in librdkafka's names or in the Java client's, as Spark's Kafka connector is given
them (`kafka.sasl.jaas.config`, `kafka.ssl.truststore.location`): `_kafka_config`
turns the Java-only ones into librdkafka's and drops those that mean nothing to a
Python client, so one config serves the driver's Consumer, the sink's Producer and the
executors' fetch client (which reads it with `ClientSecurity.from_config`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from strandline.client.security import ClientSecurity, jaas_credentials
from strandline.types import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, TopicPartition

# Kafka-JSON sentinels inside startingOffsets/endingOffsets, as in Spark's Kafka source.
EARLIEST = EARLIEST_TIMESTAMP  # -2
LATEST = LATEST_TIMESTAMP  # -1

# "earliest", "latest", or explicit per-partition offsets (which may hold EARLIEST/LATEST).
OffsetSpec = str | dict[TopicPartition, int]

KAFKA_PREFIX = "kafka."
# `kafka.isolation.level`: the source reads read_committed unless told otherwise, on
# every topic (a topic without transactions reads the same either way; see docs/spark.md).
ISOLATION_LEVEL = "isolation.level"
READ_COMMITTED, READ_UNCOMMITTED = "read_committed", "read_uncommitted"
DEFAULT_POLL_TIMEOUT_MS = 120_000


class OptionError(ValueError):
    """An option is missing, unknown in this context, or malformed."""


# Java client keys -> librdkafka's (PEM files and inline PEM; see docs/spark.md).
_JAVA_RENAMED = {
    "ssl.truststore.location": "ssl.ca.location",
    "ssl.truststore.certificates": "ssl.ca.pem",
    "ssl.keystore.certificate.chain": "ssl.certificate.pem",
    "ssl.keystore.key": "ssl.key.pem",
}
# Java-only keys librdkafka refuses and nothing here needs: TLS 1.2/1.3 is negotiated,
# a PEM trust store has no password, JVM classes and algorithms cannot be loaded.
# (`ssl.truststore.type`/`ssl.keystore.type` are dropped too, once checked to be PEM.)
_JAVA_DROPPED = frozenset(
    {
        "ssl.truststore.password",
        "ssl.enabled.protocols",
        "ssl.protocol",
        "ssl.keymanager.algorithm",
        "ssl.trustmanager.algorithm",
        "ssl.secure.random.implementation",
        "ssl.engine.factory.class",
        "sasl.login.class",
        "sasl.login.callback.handler.class",
        "sasl.client.callback.handler.class",
    }
)


def _librdkafka_keys(conf: dict[str, str]) -> dict[str, str]:
    """The Java client's security keys rewritten as librdkafka's (see the module doc)."""
    out = dict(conf)
    for key in ("ssl.truststore.type", "ssl.keystore.type"):
        kind = out.pop(key, "PEM").strip().upper()
        if kind != "PEM":
            raise OptionError(
                f"option 'kafka.{key}={kind}': only PEM files are read (Python's ssl and "
                f"librdkafka): convert the store to PEM and set 'kafka.ssl.ca.location' "
                f"(trusted CAs) or 'kafka.ssl.certificate.location' + 'kafka.ssl.key.location'"
            )
        if key == "ssl.keystore.type" and "ssl.keystore.location" in out:
            # Java's PEM key store is one file with the key and the chain; librdkafka's
            # ssl.keystore.location would be PKCS#12.
            pem = out.pop("ssl.keystore.location")
            out.setdefault("ssl.certificate.location", pem)
            out.setdefault("ssl.key.location", pem)
    for java, ours in _JAVA_RENAMED.items():
        if java not in out:
            continue
        value = out.pop(java)
        if out.setdefault(ours, value) != value:
            raise OptionError(f"options 'kafka.{java}' and 'kafka.{ours}' disagree; set one")
    jaas = out.pop("sasl.jaas.config", None)
    if jaas is not None:
        username, password = jaas_credentials(jaas)
        if username is None or password is None:
            raise OptionError(
                "option 'kafka.sasl.jaas.config' needs a PLAIN or SCRAM login module with "
                'username="…" password="…" (or set kafka.sasl.username and kafka.sasl.password)'
            )
        out.setdefault("sasl.username", username)
        out.setdefault("sasl.password", password)
    if out.get("ssl.endpoint.identification.algorithm", "https").strip() == "":
        out["ssl.endpoint.identification.algorithm"] = "none"  # Java's "" is librdkafka's none
    for key in _JAVA_DROPPED & out.keys():
        del out[key]
    return out


def _kafka_config(options: Mapping[str, str]) -> dict[str, str]:
    """librdkafka settings: `bootstrap.servers`, plus any `kafka.<key>` (librdkafka's
    names, or the Java client's security keys, translated); the security settings are
    checked here, on the driver, so a bad one fails the query before any task runs."""
    conf = {k[len(KAFKA_PREFIX) :]: v for k, v in options.items() if k.startswith(KAFKA_PREFIX)}
    if "bootstrap.servers" in options:
        conf["bootstrap.servers"] = options["bootstrap.servers"]
    if not conf.get("bootstrap.servers"):
        raise OptionError("option 'bootstrap.servers' (or 'kafka.bootstrap.servers') is required")
    conf = _librdkafka_keys(conf)
    try:
        ClientSecurity.from_config(conf)
    except ValueError as exc:
        raise OptionError(f"kafka security options: {exc}") from exc
    return conf


def parse_offset_spec(text: str, option: str) -> OffsetSpec:
    """`earliest` | `latest` | `{"topic": {"0": 23, "1": -2}}` (-2 earliest, -1 latest)."""
    lowered = text.strip().lower()
    if lowered in ("earliest", "latest"):
        return lowered
    try:
        raw = json.loads(text)
        return {
            TopicPartition(topic, int(p)): int(offset)
            for topic, parts in raw.items()
            for p, offset in parts.items()
        }
    except (ValueError, AttributeError, TypeError) as exc:
        raise OptionError(
            f"option '{option}' must be 'earliest', 'latest' or JSON like "
            f'{{"topic": {{"0": 23}}}}, got {text!r}'
        ) from exc


def _positive_int(options: Mapping[str, str], key: str) -> int | None:
    if key not in options:
        return None
    try:
        value = int(options[key])
    except ValueError as exc:
        raise OptionError(f"option '{key}' must be a positive integer") from exc
    if value <= 0:
        raise OptionError(f"option '{key}' must be a positive integer, got {value}")
    return value


def _bool(options: Mapping[str, str], key: str, default: bool) -> bool:
    text = options.get(key)
    if text is None:
        return default
    if text.strip().lower() not in ("true", "false"):
        raise OptionError(f"option '{key}' must be 'true' or 'false', got {text!r}")
    return text.strip().lower() == "true"


@dataclass(frozen=True)
class SourceOptions:
    kafka_config: dict[str, str]
    subscribe: tuple[str, ...] = ()
    subscribe_pattern: str | None = None
    starting_offsets: OffsetSpec = "earliest"
    ending_offsets: OffsetSpec = "latest"
    max_offsets_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS
    # startingOffsetsByTimestamp: epoch-ms per partition; wins over startingOffsets.
    starting_timestamps: dict[TopicPartition, int] | None = None

    @property
    def read_committed(self) -> bool:
        return self.kafka_config.get(ISOLATION_LEVEL) == READ_COMMITTED

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
        opts = {k.lower(): v for k, v in options.items()}
        subscribe = tuple(t.strip() for t in opts.get("subscribe", "").split(",") if t.strip())
        pattern = opts.get("subscribepattern")
        if bool(subscribe) == bool(pattern):
            raise OptionError("exactly one of 'subscribe' and 'subscribePattern' is required")
        if pattern is not None:
            re.compile(pattern)  # fail at planning, not in a worker
        if streaming and "endingoffsets" in opts:
            raise OptionError("option 'endingOffsets' is for batch queries only")
        if not streaming and "maxoffsetspertrigger" in opts:
            raise OptionError("option 'maxOffsetsPerTrigger' is for streaming queries only")
        # Spark's defaults: a batch read starts at the earliest offsets, a stream at the latest.
        starting = parse_offset_spec(
            opts.get("startingoffsets", "latest" if streaming else "earliest"), "startingOffsets"
        )
        ending = parse_offset_spec(opts.get("endingoffsets", "latest"), "endingOffsets")
        if ending == "earliest" or (isinstance(ending, dict) and EARLIEST in ending.values()):
            raise OptionError("option 'endingOffsets' cannot be 'earliest' (-2)")
        if starting == "latest" and not streaming:
            raise OptionError("option 'startingOffsets' cannot be 'latest' for batch queries")
        poll = _positive_int(opts, "kafkaconsumer.polltimeoutms")
        by_time = None
        if "startingoffsetsbytimestamp" in opts:
            spec = parse_offset_spec(
                opts["startingoffsetsbytimestamp"], "startingOffsetsByTimestamp"
            )
            if not isinstance(spec, dict):
                raise OptionError("option 'startingOffsetsByTimestamp' must be JSON")
            by_time = spec
        kafka_config = _kafka_config(opts)
        isolation = kafka_config.get(ISOLATION_LEVEL, READ_COMMITTED).strip().lower()
        if isolation not in (READ_COMMITTED, READ_UNCOMMITTED):
            raise OptionError(
                f"option 'kafka.{ISOLATION_LEVEL}' must be '{READ_COMMITTED}' or "
                f"'{READ_UNCOMMITTED}', got {isolation!r}"
            )
        # One value for the driver's consumer (ListOffsets: the LSO) and the executors'
        # Fetch requests.
        kafka_config[ISOLATION_LEVEL] = isolation
        return cls(
            kafka_config=kafka_config,
            subscribe=subscribe,
            subscribe_pattern=pattern,
            starting_offsets=starting,
            ending_offsets=ending,
            max_offsets_per_trigger=_positive_int(opts, "maxoffsetspertrigger"),
            fail_on_data_loss=_bool(opts, "failondataloss", True),
            min_partitions=_positive_int(opts, "minpartitions"),
            max_records_per_partition=_positive_int(opts, "maxrecordsperpartition"),
            poll_timeout_ms=poll if poll is not None else DEFAULT_POLL_TIMEOUT_MS,
            starting_timestamps=by_time,
        )

    def subscribes_to(self, topic: str) -> bool:
        if self.subscribe_pattern is not None:
            # Like a Kafka consumer's pattern subscription: internal topics stay out.
            if topic.startswith("__"):
                return False
            return re.fullmatch(self.subscribe_pattern, topic) is not None
        return topic in self.subscribe


@dataclass(frozen=True)
class SinkOptions:
    kafka_config: dict[str, str]
    topic: str | None = None
    # exactlyOnce: one Kafka transaction per Spark task and micro-batch (sink.py).
    exactly_once: bool = False
    # transactionalIdPrefix: transactional ids and marker groups are `<prefix>-<task partition>`.
    transactional_id_prefix: str | None = None
    # batchId: the micro-batch a batch write belongs to (default: Spark's own, set for
    # writes inside foreachBatch).
    batch_id: int | None = None
    # testDelayPerRowMs (tests only): sleep after each row, so a test can kill a query
    # while a transaction is open with records in the log.
    row_delay_ms: int = 0

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SinkOptions:
        opts = {k.lower(): v for k, v in options.items()}
        exactly_once = _bool(opts, "exactlyonce", False)
        topic = opts.get("topic") or None
        if exactly_once and topic is None:
            raise OptionError(
                "option 'exactlyOnce' needs the option 'topic': the sink records which "
                "micro-batches it wrote as consumer-group offsets of that topic"
            )
        batch_id = None
        if "batchid" in opts:
            try:
                batch_id = int(opts["batchid"])
            except ValueError as exc:
                raise OptionError("option 'batchId' must be a non-negative integer") from exc
            if batch_id < 0:
                raise OptionError(
                    f"option 'batchId' must be a non-negative integer, got {batch_id}"
                )
        prefix = (opts.get("transactionalidprefix") or "").strip() or None
        return cls(
            kafka_config=_kafka_config(opts),
            topic=topic,
            exactly_once=exactly_once,
            transactional_id_prefix=prefix,
            batch_id=batch_id,
            row_delay_ms=_positive_int(opts, "testdelayperrowms") or 0,
        )
