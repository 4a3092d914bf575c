"""`strandline state-change-log merge`: every broker's state-change log as one timeline.

Seed 001's state change log merger (Kafka's kafka.tools.StateChangeLogMerger): each
broker writes its leadership/ISR decisions and the controller requests it handled to its
own `state-change.log` (JSON lines, see strandline/state_change_log.py); following one
partition through a failover means reading them all side by side. This reads them,
orders the entries by time (ties: broker id, then the order each file has them in),
filters by topic, partition and time range, and prints a table or JSON lines.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from strandline.cli import tool_console

app = typer.Typer(
    help="Broker state-change logs: merge them into one timeline.", no_args_is_help=True
)

LOG_NAME = "state-change.log"
# Fields every table row shows in its own column; the rest are the details.
_COLUMNS = ("ts", "broker", "event", "topic", "partition")
_ALARMING = ("unclean", "failed", "full", "fenced", "rejected", "stale")


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


def render_table(entries: list[Entry], title: str) -> Table:
    table = Table("TIME", "BROKER", "EVENT", "PARTITION", "DETAILS", title=title)
    for entry in entries:
        event = str(entry.fields.get("event", "?"))
        style = "bold red" if any(word in event for word in _ALARMING) else ""
        # Text, not markup: details hold brackets (ISR lists) that rich would parse.
        table.add_row(
            Text(str(entry.fields["ts"])),
            Text(str(entry.broker)),
            Text(event, style=style),
            Text(where(entry.fields)),
            Text(details(entry.fields)),
        )
    return table


def _sources(data_dir: Path | None, files: list[Path]) -> list[Path]:
    if data_dir is not None and files:
        raise MergeError("give either --data-dir or state-change log FILEs, not both")
    if data_dir is None and not files:
        raise MergeError("give --data-dir or one or more state-change log FILEs")
    if data_dir is not None:
        if not data_dir.is_dir():
            raise MergeError(f"{data_dir} is not a directory")
        paths = find_logs(data_dir)
        if not paths:
            raise MergeError(f"no broker-*/logs/{LOG_NAME} under {data_dir}")
        return paths
    missing = [str(p) for p in files if not p.is_file()]
    if missing:
        raise MergeError(f"no such file: {', '.join(missing)}")
    return files


@app.command("merge")
def merge_command(
    files: list[Path] = typer.Argument(  # noqa: B008 - typer's idiom
        None, help="state-change.log files (instead of --data-dir)", show_default=False
    ),
    data_dir: Path | None = typer.Option(  # noqa: B008 - typer's idiom
        None, "--data-dir", help="A `strandline cluster` data dir: read every broker's log"
    ),
    topic: str | None = typer.Option(None, "--topic", help="Only entries about this topic"),
    partition: int | None = typer.Option(
        None, "--partition", help="Only entries about this partition number"
    ),
    since: str | None = typer.Option(
        None, "--since", help="ISO 8601 time, inclusive (UTC unless it has a zone)"
    ),
    until: str | None = typer.Option(
        None, "--until", help="ISO 8601 time, inclusive (UTC unless it has a zone)"
    ),
    as_json: bool = typer.Option(False, "--json", help="JSON lines, as the brokers wrote them"),
) -> None:
    """Merge the brokers' state-change logs into one time-ordered, filtered timeline."""
    console = tool_console()
    err_console = tool_console(stderr=True, soft_wrap=True)  # whole lines, for grep
    try:
        paths = _sources(data_dir, files or [])
        start = parse_time(since) if since is not None else None
        end = parse_time(until) if until is not None else None
        if start is not None and end is not None and start > end:
            raise MergeError(f"--since {since} is after --until {until}")
        logs = []
        for source, path in enumerate(paths):
            entries, skipped = read_log(path, source)
            if skipped is not None:
                err_console.print(f"[yellow]warning:[/] {escape(skipped.describe())}")
            logs.append(
                [
                    e
                    for e in entries
                    if matches(e, topic=topic, partition=partition, since=start, until=end)
                ]
            )
    except MergeError as exc:
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}")
        raise typer.Exit(code=1) from exc
    timeline = merge(logs)
    if as_json:
        for entry in timeline:
            typer.echo(json.dumps(entry.fields, default=str))
        return
    shown = [f"{len(paths)} broker log(s)"]
    if topic is not None or partition is not None:
        shown.append(f"partition {topic or '*'}-{'*' if partition is None else partition}")
    console.print(render_table(timeline, f"state changes: {', '.join(shown)}"))
    console.print(f"{len(timeline)} entries")
