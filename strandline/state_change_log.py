"""`state-change.log`: every leadership/ISR decision and controller request, as Kafka keeps it.

One JSON object per line (timestamp, broker, event, topic/partition, details) so that
tools and people can both read it. This module owns the format both ways: the broker's
writer (`StateChangeLog`) and the reader that merges every broker's log into one
timeline (Kafka's kafka.tools.StateChangeLogMerger), used by `strandline
state-change-log merge` and the console.
"""

from __future__ import annotations

import datetime
import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from strandline.types import TopicPartition


class StateChangeLog:
    def __init__(self, path: Path | None, broker_id: int) -> None:
        self.path = path
        self.broker_id = broker_id
        self._lock = threading.Lock()
        self._file = None
        # Told each event's name (the broker's metrics count some of them).
        self.listeners: list[Callable[[str], None]] = []
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = path.open("a", buffering=1, encoding="utf-8")

    def record(self, event: str, tp: TopicPartition | None = None, **details: Any) -> None:
        now = time.time()  # one clock read for both parts of the timestamp
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now))
            + f".{int(now * 1000) % 1000:03d}Z",
            "broker": self.broker_id,
            "event": event,
        }
        if tp is not None:
            entry["topic"] = tp.topic
            entry["partition"] = tp.partition
        entry.update(details)
        for listener in self.listeners:
            listener(event)
        if self._file is not None:
            with self._lock:
                self._file.write(json.dumps(entry, default=str) + "\n")

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


# -- reading ------------------------------------------------------------------------

LOG_NAME = "state-change.log"
# Fields every table row shows in its own column; the rest are the details.
_COLUMNS = ("ts", "broker", "event", "topic", "partition")
ALARMING = ("unclean", "failed", "full", "fenced", "rejected", "stale")


class MergeError(RuntimeError):
    """Reported to the user as one line, exit code 1."""


def parse_time(text: str) -> datetime.datetime:
    """An ISO 8601 time; without a zone it is UTC, the zone every broker logs in."""
    try:
        when = datetime.datetime.fromisoformat(text.strip())
    except ValueError as exc:
        raise MergeError(f"{text!r} is not an ISO 8601 time (e.g. 2026-01-31T12:00:00Z)") from exc
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return when


@dataclass(frozen=True)
class Entry:
    when: datetime.datetime
    broker: int
    source: int  # which file, in the order the files were given
    line: int  # 1-based line in that file
    fields: dict[str, Any]

    @property
    def sort_key(self) -> tuple[datetime.datetime, int, int, int]:
        return (self.when, self.broker, self.source, self.line)


@dataclass(frozen=True)
class Skipped:
    """Lines of one file that are not state-change entries."""

    path: Path
    count: int
    first_line: int
    first_reason: str

    def describe(self) -> str:
        lines = "line" if self.count == 1 else "lines"
        return (
            f"{self.path}: skipped {self.count} malformed {lines} "
            f"(first: line {self.first_line}, {self.first_reason})"
        )


def _broker_from_path(path: Path) -> int | None:
    """`<data-dir>/broker-<id>/logs/state-change.log` names its broker."""
    for part in reversed(path.parts):
        prefix, _, rest = part.partition("-")
        if prefix == "broker" and rest.isdigit():
            return int(rest)
    return None


def _entry(raw: str, fallback_broker: int | None) -> tuple[dict[str, Any], int, datetime.datetime]:
    """(fields, broker, time) of one line; raises ValueError saying why it is not one."""
    try:
        fields = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc.msg}") from exc
    if not isinstance(fields, dict):
        raise ValueError("not a JSON object")
    ts = fields.get("ts")
    if not isinstance(ts, str):
        raise ValueError('no "ts" timestamp')
    try:
        when = parse_time(ts)
    except MergeError as exc:
        raise ValueError(f'bad "ts" {ts!r}') from exc
    broker = fields.get("broker", fallback_broker)
    if isinstance(broker, bool) or not isinstance(broker, int):
        broker = fallback_broker if fallback_broker is not None else -1
    return fields, broker, when


def read_log(path: Path, source: int) -> tuple[list[Entry], Skipped | None]:
    """The entries of one broker's log in file order, and the lines that are not entries
    (a broker killed mid-write leaves a torn last line)."""
    fallback = _broker_from_path(path)
    entries: list[Entry] = []
    bad = 0
    first: tuple[int, str] | None = None
    try:
        with path.open(encoding="utf-8", errors="replace") as f:
            for number, raw in enumerate(f, start=1):
                if not raw.strip():
                    continue
                try:
                    fields, broker, when = _entry(raw, fallback)
                except ValueError as exc:
                    bad += 1
                    if first is None:
                        first = (number, str(exc))
                    continue
                entries.append(Entry(when, broker, source, number, fields))
    except OSError as exc:
        raise MergeError(f"cannot read {path}: {exc.strerror or exc}") from exc
    skipped = Skipped(path, bad, *first) if first is not None else None
    return entries, skipped


def merge(logs: Iterable[list[Entry]]) -> list[Entry]:
    """One timeline: by time, then broker id, then each file's own order."""
    return sorted((e for entries in logs for e in entries), key=lambda e: e.sort_key)


def matches(
    entry: Entry,
    *,
    topic: str | None = None,
    partition: int | None = None,
    since: datetime.datetime | None = None,
    until: datetime.datetime | None = None,
) -> bool:
    """Whether the entry passes the filters; `since` and `until` are both inclusive.
    With --partition, entries about no partition (a broker change, a topic deletion)
    are left out: they carry no partition number to match."""
    if topic is not None and entry.fields.get("topic") != topic:
        return False
    if partition is not None and entry.fields.get("partition") != partition:
        return False
    if since is not None and entry.when < since:
        return False
    return until is None or entry.when <= until


def find_logs(data_dir: Path) -> list[Path]:
    """Every broker's state-change log under a `strandline cluster` data dir, by broker id."""
    found = [
        p for p in data_dir.glob(f"broker-*/logs/{LOG_NAME}") if _broker_from_path(p) is not None
    ]
    return sorted(found, key=lambda p: _broker_from_path(p) or 0)


def _compact(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), default=str)


def details(fields: dict[str, Any]) -> str:
    """Everything but the columns, as `key=value`, in the order the broker wrote them."""
    return " ".join(f"{k}={_compact(v)}" for k, v in fields.items() if k not in _COLUMNS)


def where(fields: dict[str, Any]) -> str:
    topic, partition = fields.get("topic"), fields.get("partition")
    if topic is None:
        return "-" if partition is None else f"?-{partition}"
    return str(topic) if partition is None else f"{topic}-{partition}"
