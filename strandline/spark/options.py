"""Data source options, with the names and meanings of Spark's Kafka connector.

PySpark hands options over as a case-insensitive dict (`dict(options)` lower-cases the
keys), so every lookup here is by lower-case name; values keep their case.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from strandline.types import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, TopicPartition

# Kafka-JSON sentinels inside startingOffsets/endingOffsets, as in Spark's Kafka source.
EARLIEST = EARLIEST_TIMESTAMP  # -2
LATEST = LATEST_TIMESTAMP  # -1

# "earliest", "latest", or explicit per-partition offsets (which may hold EARLIEST/LATEST).
OffsetSpec = str | dict[TopicPartition, int]

KAFKA_PREFIX = "kafka."
DEFAULT_POLL_TIMEOUT_MS = 120_000


class OptionError(ValueError):
    """An option is missing, unknown in this context, or malformed."""


def _kafka_config(options: Mapping[str, str]) -> dict[str, str]:
    """librdkafka settings: `bootstrap.servers`, plus any `kafka.<librdkafka key>`."""
    conf = {k[len(KAFKA_PREFIX) :]: v for k, v in options.items() if k.startswith(KAFKA_PREFIX)}
    if "bootstrap.servers" in options:
        conf["bootstrap.servers"] = options["bootstrap.servers"]
    if not conf.get("bootstrap.servers"):
        raise OptionError("option 'bootstrap.servers' (or 'kafka.bootstrap.servers') is required")
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
        return cls(
            kafka_config=_kafka_config(opts),
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

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SinkOptions:
        opts = {k.lower(): v for k, v in options.items()}
        return cls(kafka_config=_kafka_config(opts), topic=opts.get("topic") or None)
