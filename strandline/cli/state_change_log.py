"""`strandline state-change-log merge`: every broker's state-change log as one timeline.

Kafka's state change log merger (kafka.tools.StateChangeLogMerger): each broker writes
its leadership/ISR decisions and the controller requests it handled to its own
`state-change.log` (JSON lines); following one partition through a failover means
reading them all side by side. strandline/state_change_log.py reads them and orders
the entries by time (ties: broker id, then the order each file has them in); this
filters by topic, partition and time range, and prints a table or JSON lines.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from strandline.cli import tool_console
from strandline.state_change_log import (
    ALARMING,
    LOG_NAME,
    Entry,
    MergeError,
    details,
    find_logs,
    matches,
    merge,
    parse_time,
    read_log,
    where,
)

app = typer.Typer(
    help="Broker state-change logs: merge them into one timeline.", no_args_is_help=True
)


def render_table(entries: list[Entry], title: str) -> Table:
    table = Table("TIME", "BROKER", "EVENT", "PARTITION", "DETAILS", title=title)
    for entry in entries:
        event = str(entry.fields.get("event", "?"))
        style = "bold red" if any(word in event for word in ALARMING) else ""
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
