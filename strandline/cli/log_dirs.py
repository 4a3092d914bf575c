"""`strandline log-dirs describe`: what each broker stores in which log dir, like
kafka-log-dirs.sh.

One DescribeLogDirs (API 35) per broker, sent to that broker: per log dir, every
partition replica's size in bytes, its offset lag (Kafka's: how far its log end trails
its high watermark, 0 on a leader) and whether it is a future replica. `--json` prints
Kafka's JSON shape:

    {"version":1,"brokers":[{"broker":1,"logDirs":[{"logDir":"/data","error":null,
     "partitions":[{"partition":"orders-0","size":1234,"offsetLag":0,"isFuture":false}]}]}]}
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from kio.schema.errors import ErrorCode
from rich.markup import escape
from rich.table import Table

from strandline.cli import tool_console
from strandline.cli.configs import (
    AdminSession,
    ConfigToolError,
    client_settings,
    request,
)
from strandline.client.admin import AdminError

app = typer.Typer(
    help="Log directories: replica sizes and lag per broker (kafka-log-dirs.sh).",
    no_args_is_help=True,
)
console = tool_console()
err_console = tool_console(stderr=True)

DESCRIBE_LOG_DIRS = 35


@dataclass(frozen=True)
class ReplicaInfo:
    topic: str
    partition: int
    size: int
    offset_lag: int
    is_future: bool

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True)
class LogDirInfo:
    broker: int
    path: str
    error: str | None  # Kafka's error name, None when the dir is fine
    replicas: tuple[ReplicaInfo, ...]


def parse_ids(text: str) -> list[int]:
    ids = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if not part.lstrip("-").isdigit():
            raise ConfigToolError(f"--broker-list: {part!r} is not a broker id")
        ids.append(int(part))
    if not ids:
        raise ConfigToolError("--broker-list names no broker")
    return ids


def parse_topics(text: str) -> list[str]:
    topics = [t.strip() for t in text.split(",") if t.strip()]
    if not topics:
        raise ConfigToolError("--topic-list names no topic")
    return topics


async def describe_log_dirs(
    session: AdminSession, broker_ids: list[int] | None, topics: list[str] | None
) -> list[LogDirInfo]:
    # v1..v4: what every broker since Kafka 2.0 answers; v5 adds nothing we show.
    v = session.version(DESCRIBE_LOG_DIRS, 1, 4, "DescribeLogDirs")
    brokers = sorted(session.brokers) if broker_ids is None else broker_ids
    for broker_id in brokers:
        session.require_broker(broker_id)
    wanted: tuple[Any, ...] | None = None
    if topics is not None:
        missing = [t for t in topics if t not in session.topics]
        if missing:
            raise ConfigToolError(f"topic {missing[0]!r} does not exist")
        wanted = tuple(
            request(
                DESCRIBE_LOG_DIRS,
                v,
                "DescribableLogDirTopic",
                topic=t,
                partitions=session.topics[t].partitions,
            )
            for t in topics
        )
    message = request(DESCRIBE_LOG_DIRS, v, "DescribeLogDirsRequest", topics=wanted)
    responses = await asyncio.gather(*(session.send(message, b) for b in brokers))
    found = []
    for broker_id, response in zip(brokers, responses, strict=True):
        top_error = getattr(response, "error_code", ErrorCode.none)
        if top_error != ErrorCode.none:
            raise ConfigToolError(f"broker {broker_id} answered {top_error.name.upper()}")
        for result in response.results:
            found.append(
                LogDirInfo(
                    broker_id,
                    str(result.log_dir),
                    None if result.error_code == ErrorCode.none else result.error_code.name.upper(),
                    tuple(
                        sorted(
                            (
                                ReplicaInfo(
                                    str(t.name),
                                    int(p.partition_index),
                                    int(p.partition_size),
                                    int(p.offset_lag),
                                    bool(p.is_future_key),
                                )
                                for t in result.topics
                                for p in t.partitions
                            ),
                            key=lambda r: (r.topic, r.partition),
                        )
                    ),
                )
            )
    return found


def as_json(dirs: list[LogDirInfo]) -> str:
    brokers: dict[int, list[dict[str, Any]]] = {}
    for d in dirs:
        brokers.setdefault(d.broker, []).append(
            {
                "logDir": d.path,
                "error": d.error,
                "partitions": [
                    {
                        "partition": r.name,
                        "size": r.size,
                        "offsetLag": r.offset_lag,
                        "isFuture": r.is_future,
                    }
                    for r in d.replicas
                ],
            }
        )
    return json.dumps(
        {
            "version": 1,
            "brokers": [{"broker": b, "logDirs": dirs} for b, dirs in sorted(brokers.items())],
        },
        separators=(",", ":"),
    )


def print_table(dirs: list[LogDirInfo]) -> None:
    table = Table("Broker", "Log dir", "Partition", "Size (bytes)", "Offset lag", "Future")
    for d in dirs:
        if d.error is not None:
            table.add_row(str(d.broker), escape(d.path), f"[red]{d.error}[/]", "", "", "")
        elif not d.replicas:
            table.add_row(str(d.broker), escape(d.path), "-", "", "", "")
        for r in d.replicas:
            lag = str(r.offset_lag) if r.offset_lag <= 0 else f"[yellow]{r.offset_lag}[/]"
            table.add_row(
                str(d.broker),
                escape(d.path),
                escape(r.name),
                str(r.size),
                lag,
                "yes" if r.is_future else "no",
            )
    console.print(table)


def _fail(message: str) -> typer.Exit:
    err_console.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)
    return typer.Exit(code=1)


@app.command("describe")
def describe_command(
    bootstrap_server: str | None = typer.Option(
        None, "--bootstrap-server", help="host:port[,host:port] of any broker"
    ),
    broker_list: str | None = typer.Option(
        None, "--broker-list", help="Broker ids to ask, e.g. 1,2 (default: every broker)"
    ),
    topic_list: str | None = typer.Option(
        None, "--topic-list", help="Only these topics, e.g. t1,t2 (default: every topic)"
    ),
    json_: bool = typer.Option(False, "--json", help="Kafka's JSON instead of a table"),
    output: str = typer.Option(
        "table",
        "--output",
        help="table, json, or kafka: kafka-log-dirs.sh's lines (what `log-dirs --describe` prints)",
    ),
    command_config: Path | None = typer.Option(  # noqa: B008 - typer's idiom
        None,
        "--command-config",
        help="Client properties file (client.id, request.timeout.ms, TLS/SASL)",
    ),
) -> None:
    """Every log dir of the brokers with its replicas' sizes and offset lag."""
    if output not in ("table", "json", "kafka"):
        raise _fail(f"--output must be table, json or kafka, not {output!r}")
    try:
        if not bootstrap_server:
            raise ConfigToolError("--bootstrap-server is required")
        broker_ids = parse_ids(broker_list) if broker_list is not None else None
        topics = parse_topics(topic_list) if topic_list is not None else None
        settings = client_settings(command_config, "strandline-log-dirs")
        bootstrap = bootstrap_server

        async def run() -> list[LogDirInfo]:
            async with AdminSession(bootstrap, settings) as session:
                return await describe_log_dirs(session, broker_ids, topics)

        dirs = asyncio.run(run())
    except AdminError as e:
        raise _fail(str(e)) from e
    if output == "kafka":
        print("Querying brokers for log directories information")
        answered = ",".join(str(b) for b in sorted({d.broker for d in dirs}))
        print(f"Received log directory information from brokers {answered}")
        print(as_json(dirs))
    elif json_ or output == "json":
        print(as_json(dirs))
    else:
        print_table(dirs)
