"""The message browser: records of one partition from an offset or a time, with their
key, value and headers, read as a consumer would (read_uncommitted or read_committed).

kafka-python (a pinned dependency) does the fetching and decoding — batches,
compression, control records and aborted transactions under read_committed — so the
console does not carry a second record decoder.
"""

from __future__ import annotations

import datetime
import time
from dataclasses import dataclass, field
from typing import Any

from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition
from kafka.errors import KafkaError

from strandline.console.sources import ConsoleError

DEFAULT_LIMIT = 20
MAX_LIMIT = 200
SHOWN_BYTES = 4096  # of a key or value; the rest is counted, not shown
POLL_TIMEOUT_S = 3.0
POLL_TIMEOUT_MS = int(POLL_TIMEOUT_S * 1000)
ISOLATION = ("read_uncommitted", "read_committed")

# librdkafka-style client settings (cluster.json's client_config, --command-config) ->
# kafka-python's arguments
_SETTINGS = {
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.mechanisms": "sasl_mechanism",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "ssl.ca.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
}


@dataclass(frozen=True)
class Shown:
    """Bytes as the page shows them: text when they are UTF-8, else hex."""

    text: str | None  # None: the record has no key / a null value (a tombstone)
    size: int
    binary: bool
    cut: bool


@dataclass(frozen=True)
class Message:
    offset: int
    timestamp: int  # ms since the epoch
    timestamp_type: str
    key: Shown
    value: Shown
    headers: list[tuple[str, Shown]]


@dataclass(frozen=True)
class MessageQuery:
    offset: int | None = None
    timestamp_ms: int | None = None
    isolation: str = "read_uncommitted"
    limit: int = DEFAULT_LIMIT


@dataclass
class MessagesView:
    topic: str
    partition: int
    query: MessageQuery
    start: int | None  # the offset reading began at
    low: int | None  # log start, as this isolation level sees it
    high: int | None  # HW (read_uncommitted) or last stable offset (read_committed)
    messages: list[Message]
    next_offset: int | None
    errors: list[str] = field(default_factory=list)
    taken_at: float = 0.0


def parse_query(params: dict[str, str]) -> MessageQuery:
    """The form's fields; a bad one raises ValueError with a message for the page."""
    offset = params.get("offset", "").strip()
    when = params.get("timestamp", "").strip()
    isolation = params.get("isolation", "").strip() or "read_uncommitted"
    limit = params.get("limit", "").strip()
    if offset and when:
        raise ValueError("give an offset or a timestamp, not both")
    if isolation not in ISOLATION:
        raise ValueError(f"isolation must be one of {', '.join(ISOLATION)}, got {isolation!r}")
    if offset and not offset.isdigit():
        raise ValueError(f"offset must be a number >= 0, got {offset!r}")
    count = DEFAULT_LIMIT
    if limit:
        if not limit.isdigit() or not 1 <= int(limit) <= MAX_LIMIT:
            raise ValueError(f"limit must be 1..{MAX_LIMIT}, got {limit!r}")
        count = int(limit)
    return MessageQuery(
        offset=int(offset) if offset else None,
        timestamp_ms=parse_timestamp(when) if when else None,
        isolation=isolation,
        limit=count,
    )


def parse_timestamp(text: str) -> int:
    """Milliseconds since the epoch, or an ISO 8601 time (UTC unless it says)."""
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"timestamp must be ms since the epoch or ISO 8601 (2026-01-31T12:00:00), got {text!r}"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return int(when.timestamp() * 1000)


def _shown(data: bytes | None) -> Shown:
    if data is None:
        return Shown(None, 0, False, False)
    cut = len(data) > SHOWN_BYTES
    part = data[:SHOWN_BYTES]
    try:
        return Shown(part.decode("utf-8"), len(data), False, cut)
    except UnicodeDecodeError:
        return Shown(part.hex(" "), len(data), True, cut)


def consumer_settings(client_config: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in client_config.items():
        name = _SETTINGS.get(key)
        if name is not None:
            out[name] = value.upper() if name in ("security_protocol",) else value
    if client_config.get("ssl.endpoint.identification.algorithm", "").lower() == "none":
        out["ssl_check_hostname"] = False
    return out


def browse(
    bootstrap: str, client_config: dict[str, str], topic: str, partition: int, q: MessageQuery
) -> MessagesView:
    started = time.time()
    errors: list[str] = []
    try:
        consumer = KafkaConsumer(
            bootstrap_servers=bootstrap.split(","),
            client_id="strandline-console",
            group_id=None,
            enable_auto_commit=False,
            isolation_level=q.isolation,
            request_timeout_ms=POLL_TIMEOUT_MS + 2000,
            bootstrap_timeout_ms=POLL_TIMEOUT_MS + 2000,
            **consumer_settings(client_config),
        )
    except KafkaError as exc:
        raise ConsoleError(f"cannot read messages: {exc}") from exc
    try:
        tp = KpTopicPartition(topic, partition)
        consumer.assign([tp])
        low = consumer.beginning_offsets([tp], timeout_ms=POLL_TIMEOUT_MS).get(tp)
        high = consumer.end_offsets([tp], timeout_ms=POLL_TIMEOUT_MS).get(tp)
        start: int | None
        if q.timestamp_ms is not None:
            found = consumer.offsets_for_times(
                {tp: q.timestamp_ms}, timeout_ms=POLL_TIMEOUT_MS
            ).get(tp)
            start = found.offset if found is not None else None
            if start is None:
                errors.append("no record at or after that time")
        elif q.offset is not None:
            start = q.offset
        else:  # the last `limit` records
            start = max((high or 0) - q.limit, low or 0)
        messages: list[Message] = []
        if start is not None and high is not None and start < high:
            if low is not None and start < low:
                errors.append(f"offset {start} is below the log start {low}: reading from {low}")
                start = low
            consumer.seek(tp, start)
            deadline = time.monotonic() + POLL_TIMEOUT_S
            while len(messages) < q.limit and time.monotonic() < deadline:
                batch = consumer.poll(timeout_ms=300, max_records=q.limit - len(messages))
                for record in batch.get(tp, []):
                    messages.append(
                        Message(
                            offset=record.offset,
                            timestamp=record.timestamp,
                            timestamp_type="log append" if record.timestamp_type else "create",
                            key=_shown(record.key),
                            value=_shown(record.value),
                            headers=[(str(k), _shown(v)) for k, v in (record.headers or [])],
                        )
                    )
                if consumer.position(tp) >= high:
                    break
        elif start is not None and high is not None and start >= high:
            errors.append(f"offset {start} is at or past the end ({high}): nothing to show yet")
        next_offset = messages[-1].offset + 1 if messages else start
        return MessagesView(
            topic, partition, q, start, low, high, messages, next_offset, errors, started
        )
    except KafkaError as exc:
        raise ConsoleError(f"cannot read {topic}-{partition}: {exc}") from exc
    finally:
        consumer.close()
