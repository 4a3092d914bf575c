"""`strandline groups`: list, describe, delete and reset consumer groups, like
kafka-consumer-groups.sh.

Two spellings: Kafka's flags (`strandline groups --describe --group g --members
--bootstrap-server ...`, also --list, --delete, --delete-offsets, --reset-offsets) and the
older subcommands (`strandline groups describe g --bootstrap-server ...`).

Everything goes over the Kafka protocol (Metadata, ListGroups on every broker,
FindCoordinator, DescribeGroups, OffsetFetch, ListOffsets, OffsetCommit, DeleteGroups,
OffsetDelete), so it works against any broker of the cluster, or any Kafka-compatible one.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment
from kio.schema.errors import ErrorCode
from rich.markup import escape
from rich.table import Table

from strandline.cli import tool_console
from strandline.cli.kafka_text import OUTPUT_HELP, check_output, left
from strandline.client.admin import AdminClient, AdminError, AdminSettings
from strandline.protocol.messages import build, request_module
from strandline.types import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, TopicPartition

app = typer.Typer(no_args_is_help=True)
console = tool_console()
err_console = tool_console(stderr=True)

BOOTSTRAP_HELP = "HOST:PORT of any broker"
REQUEST_TIMEOUT_S = 15.0
COORDINATOR_WAIT_S = 15.0


class GroupToolError(AdminError):
    """Reported to the user as one line, exit code 1."""


def _request(api_key: int, version: int, message: str, /, **fields: Any) -> Any:
    return build(getattr(request_module(api_key, version), message), **fields)


@dataclass(frozen=True)
class PartitionRow:
    tp: TopicPartition
    current: int | None  # None: nothing committed
    log_end: int | None
    member_id: str = "-"
    client_id: str = "-"
    host: str = "-"

    @property
    def lag(self) -> int | None:
        if self.current is None or self.log_end is None:
            return None
        return max(0, self.log_end - self.current)


class ClusterClient(AdminClient):
    """The shared admin client (strandline.client.admin) with the group APIs."""

    @property
    def partitions(self) -> dict[str, list[int]]:
        """Topics the last Metadata named that exist, with their partitions."""
        return {name: list(t.partitions) for name, t in self.topics.items()}

    async def coordinator(self, group: str) -> tuple[str, int]:
        _node, address = await self.find_coordinator(group)
        return address

    async def coordinator_node(self, group: str) -> tuple[int, str, int]:
        """FindCoordinator, retried while the coordinator loads or is being created."""
        node, (host, port) = await self.find_coordinator(group)
        return node, host, port


# What --command-config may set for this client (client.id, request.timeout.ms, TLS/SASL).
ClientSettings = AdminSettings


DEFAULT_SETTINGS = AdminSettings("strandline-groups", REQUEST_TIMEOUT_S)


def _assignment(protocol_type: str, member: Any) -> list[TopicPartition]:
    """A consumer-protocol member's assigned partitions; none for other protocols, or
    while the group rebalances (DescribeGroups then carries no assignment)."""
    if protocol_type != "consumer" or not member.member_assignment:
        return []
    try:
        assignment = ConsumerProtocolAssignment.decode(bytes(member.member_assignment))
        return sorted(TopicPartition(tp.topic, tp.partition) for tp in assignment.partitions())
    except Exception:  # noqa: BLE001 - a client's own bytes: show no assignment, not a crash
        return []


def _assigned(described: Any) -> dict[TopicPartition, Any]:
    return {
        tp: member
        for member in described.members
        for tp in _assignment(described.protocol_type, member)
    }


async def describe_group(bootstrap: str, group: str) -> tuple[str, list[PartitionRow]]:
    """The group's state and one row per committed or assigned partition."""
    async with ClusterClient(bootstrap, DEFAULT_SETTINGS) as client:
        described = await client.describe(group)
        return described.group_state, await _partition_rows(client, group, described)


async def _partition_rows(client: ClusterClient, group: str, described: Any) -> list[PartitionRow]:
    committed = await client.committed(group)
    owners = _assigned(described)
    partitions = sorted(set(committed) | set(owners))
    await client.metadata({tp.topic for tp in partitions})
    ends = await client.list_offsets(partitions, LATEST_TIMESTAMP)
    rows = []
    for tp in partitions:
        owner = owners.get(tp)
        rows.append(
            PartitionRow(
                tp,
                committed.get(tp),
                ends.get(tp),
                owner.member_id if owner else "-",
                owner.client_id if owner else "-",
                owner.client_host or "-" if owner else "-",
            )
        )
    return rows


async def plan_reset(
    bootstrap: str,
    group: str,
    topics: list[str] | None,
    to_earliest: bool,
    to_latest: bool,
    to_datetime: datetime.datetime | None,
    shift_by: int | None,
    execute: bool,
    *,
    only: dict[str, list[int] | None] | None = None,
    to_offset: int | None = None,
    to_current: bool = False,
    by_duration: datetime.timedelta | None = None,
    from_file: dict[TopicPartition, int] | None = None,
    settings: ClientSettings = DEFAULT_SETTINGS,
) -> tuple[str, dict[TopicPartition, int]]:
    """New offsets per partition (clamped to the log's range); committed if `execute`.
    Like Kafka, only an inactive (Empty or unknown) group may be reset. `only` narrows
    `topics` to some of their partitions (Kafka's --topic t:0,1)."""
    async with ClusterClient(bootstrap, settings) as client:
        described = await client.describe(group)
        committed = await client.committed(group)
        if from_file is not None:
            partitions = sorted(from_file)
            await client.metadata({tp.topic for tp in partitions})
            unknown = sorted(
                f"{tp.topic}-{tp.partition}" for tp in partitions if tp not in client.leaders
            )
            if unknown:
                raise GroupToolError(f"--from-file names unknown partitions: {', '.join(unknown)}")
        elif topics:
            await client.metadata(topics)
            _check_topics(client, {t: (only or {}).get(t) for t in topics})
            chosen = only or {}
            partitions = sorted(
                tp
                for tp in client.leaders
                if tp.topic in topics
                and tp.partition in (chosen.get(tp.topic) or client.partitions[tp.topic])
            )
        else:
            partitions = sorted(committed)
            await client.metadata({tp.topic for tp in partitions})
        if not partitions:
            raise GroupToolError(f"group {group!r} has no committed offsets; name --topic")
        earliest = await client.list_offsets(partitions, EARLIEST_TIMESTAMP)
        latest = await client.list_offsets(partitions, LATEST_TIMESTAMP)
        if to_earliest:
            targets = dict(earliest)
        elif to_latest:
            targets = dict(latest)
        elif to_datetime is not None or by_duration is not None:
            when = to_datetime or datetime.datetime.now(datetime.UTC) - (
                by_duration or datetime.timedelta()
            )
            stamp = int(when.timestamp() * 1000)
            found = await client.list_offsets(partitions, stamp)
            targets = {tp: (o if o >= 0 else latest[tp]) for tp, o in found.items()}
        elif from_file is not None:
            targets = dict(from_file)
        elif to_current:
            targets = {tp: committed.get(tp, latest[tp]) for tp in partitions}
        elif to_offset is not None:
            targets = dict.fromkeys(partitions, to_offset)
        else:
            assert shift_by is not None
            targets = {tp: committed.get(tp, latest.get(tp, 0)) + shift_by for tp in partitions}
        new = {tp: min(max(o, earliest.get(tp, 0)), latest.get(tp, o)) for tp, o in targets.items()}
        state = described.group_state
        if execute:
            if state not in ("Empty", "Dead"):
                raise GroupToolError(
                    f"group {group!r} is {state}: stop its consumers before resetting offsets"
                )
            await client.commit(group, new)
        return state, new


def _fmt(value: int | None) -> str:
    return "-" if value is None else str(value)


def _fail(error: Exception | str) -> typer.Exit:
    err_console.print(f"[bold red]error:[/] {escape(str(error))}", soft_wrap=True)
    return typer.Exit(1)


def _check_topics(client: ClusterClient, wanted: dict[str, list[int] | None]) -> None:
    """Unknown topics and partitions fail here, with their names, before any request."""
    for topic, partitions in wanted.items():
        if topic not in client.partitions:
            raise GroupToolError(f"topic {topic!r} does not exist")
        missing = sorted(set(partitions or ()) - set(client.partitions[topic]))
        if missing:
            raise GroupToolError(
                f"topic {topic!r} has no partition {', '.join(map(str, missing))} "
                f"(it has {len(client.partitions[topic])})"
            )


@app.command("list")
def list_command(
    bootstrap_server: str = typer.Option(..., "--bootstrap-server", help=BOOTSTRAP_HELP),
) -> None:
    """Every group of the cluster (ListGroups on every broker)."""
    try:
        groups = asyncio.run(_list(bootstrap_server))
    except (AdminError, OSError) as e:
        raise _fail(e) from e
    table = Table("GROUP", "PROTOCOL-TYPE", "STATE", "COORDINATOR")
    for group_id, protocol_type, state, broker_id in groups:
        table.add_row(group_id, protocol_type or "-", state, str(broker_id))
    console.print(table)


async def _list(
    bootstrap: str, settings: ClientSettings = DEFAULT_SETTINGS
) -> list[tuple[str, str, str, int]]:
    async with ClusterClient(bootstrap, settings) as client:
        return await client.list_groups()


@app.command("describe")
def describe_command(
    group: str = typer.Argument(..., help="group id"),
    bootstrap_server: str = typer.Option(..., "--bootstrap-server", help=BOOTSTRAP_HELP),
) -> None:
    """Per partition: current (committed) offset, log end offset, lag and owner."""
    try:
        state, rows = asyncio.run(describe_group(bootstrap_server, group))
    except (AdminError, OSError) as e:
        raise _fail(e) from e
    console.print(_offsets_table(group, state, rows))


# kafka-consumer-groups.sh --describe --offsets, in its order.
OFFSETS_HEADER = (
    "GROUP",
    "TOPIC",
    "PARTITION",
    "CURRENT-OFFSET",
    "LOG-END-OFFSET",
    "LAG",
    "CONSUMER-ID",
    "HOST",
    "CLIENT-ID",
)


def _offsets_table(group: str, state: str, rows: list[PartitionRow]) -> Table:
    table = Table(*OFFSETS_HEADER, title=escape(f"group {group} ({state})"))
    for row in rows:
        table.add_row(
            escape(group),
            escape(row.tp.topic),
            str(row.tp.partition),
            _fmt(row.current),
            _fmt(row.log_end),
            _fmt(row.lag),
            escape(row.member_id),
            escape(row.host),
            escape(row.client_id),
        )
    return table


@app.command("reset-offsets")
def reset_offsets_command(
    group: str = typer.Argument(..., help="group id"),
    bootstrap_server: str = typer.Option(..., "--bootstrap-server", help=BOOTSTRAP_HELP),
    topic: list[str] = typer.Option(None, "--topic", help="topics to reset (default: committed)"),
    to_earliest: bool = typer.Option(False, "--to-earliest"),
    to_latest: bool = typer.Option(False, "--to-latest"),
    to_datetime: datetime.datetime | None = typer.Option(
        None, "--to-datetime", help="e.g. 2026-01-31T12:00:00 (local time unless it has a zone)"
    ),
    shift_by: int | None = typer.Option(None, "--shift-by"),
    execute: bool = typer.Option(False, "--execute", help="commit (default: dry run)"),
) -> None:
    """Compute (and with --execute commit) new offsets for an inactive group."""
    chosen = [to_earliest, to_latest, to_datetime is not None, shift_by is not None]
    if sum(chosen) != 1:
        raise typer.BadParameter(
            "give exactly one of --to-earliest, --to-latest, --to-datetime, --shift-by"
        )
    try:
        state, new = asyncio.run(
            plan_reset(
                bootstrap_server,
                group,
                topic or None,
                to_earliest,
                to_latest,
                to_datetime,
                shift_by,
                execute,
            )
        )
    except (AdminError, OSError) as e:
        raise _fail(e) from e
    console.print(_reset_table(group, state, new, execute))


def _reset_table(group: str, state: str, new: dict[TopicPartition, int], execute: bool) -> Table:
    table = Table(
        "GROUP",
        "TOPIC",
        "PARTITION",
        "NEW-OFFSET",
        title=escape(f"group {group} ({state}): {'committed' if execute else 'dry run'}"),
    )
    for tp, offset in sorted(new.items()):
        table.add_row(escape(group), escape(tp.topic), str(tp.partition), str(offset))
    return table


# == kafka-consumer-groups.sh's flags ==========================================================

ACTIONS = ("--list", "--describe", "--delete", "--delete-offsets", "--reset-offsets")
VIEWS = ("--offsets", "--members", "--state")
RESET_MODES = (
    "--to-earliest",
    "--to-latest",
    "--to-datetime",
    "--shift-by",
    "--to-offset",
    "--to-current",
    "--by-duration",
    "--from-file",
)
_DURATION = re.compile(
    r"P(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?",
    re.IGNORECASE,
)


def parse_duration(text: str) -> datetime.timedelta:
    """--by-duration as Kafka reads it: ISO-8601 PnDTnHnMnS, e.g. PT1H30M or P1D."""
    match = _DURATION.fullmatch(text.strip())
    if match is None or not any(match.groupdict().values()):
        raise GroupToolError(f"--by-duration {text!r}: expected PnDTnHnMnS, e.g. PT30M or P1DT2H")
    parts = {k: float(v or 0) for k, v in match.groupdict().items()}
    return datetime.timedelta(
        days=parts["d"], hours=parts["h"], minutes=parts["m"], seconds=parts["s"]
    )


def parse_offsets_csv(path: Path, text: str) -> dict[str, dict[TopicPartition, int]]:
    """--from-file (what --export wrote): `topic,partition,offset` lines for one group, or
    `group,topic,partition,offset` for several; group "" is the one of the first kind."""
    out: dict[str, dict[TopicPartition, int]] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        cells = [c.strip() for c in line.split(",")]
        try:
            if len(cells) == 3:
                group, (topic, partition, offset) = "", cells
            elif len(cells) == 4:
                group, topic, partition, offset = cells
            else:
                raise ValueError(f"{len(cells)} fields")
            out.setdefault(group, {})[TopicPartition(topic, int(partition))] = int(offset)
        except ValueError as e:
            raise GroupToolError(
                f"--from-file {path}: line {number} is not topic,partition,offset ({e})"
            ) from e
    if not out:
        raise GroupToolError(f"--from-file {path}: no offsets in it")
    return out


# What the errors users meet mean for the group they named.
_GROUP_ERRORS = {
    ErrorCode.group_id_not_found: "does not exist",
    ErrorCode.non_empty_group: "has active members; stop its consumers first",
    ErrorCode.invalid_group_id: "is not a valid group id",
    ErrorCode.group_authorization_failed: "is not accessible to this client",
}


def _group_error(group: str, code: ErrorCode, failed: str = "") -> str:
    """E.g. "group 'g' does not exist (GROUP_ID_NOT_FOUND)", or with `failed`="was not
    deleted": "group 'g' was not deleted: it does not exist (GROUP_ID_NOT_FOUND)"."""
    what = _GROUP_ERRORS.get(code)
    if not failed:
        return f"group {group!r} {what or 'failed'} ({code.name.upper()})"
    because = f": it {what}" if what else ""
    return f"group {group!r} {failed}{because} ({code.name.upper()})"


@dataclass(frozen=True)
class MemberView:
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    partitions: list[TopicPartition]


@dataclass(frozen=True)
class GroupView:
    """What --describe shows of one group, in all three views."""

    group: str
    state: str
    coordinator: tuple[int, str, int]
    protocol_type: str
    assignor: str
    members: list[MemberView]
    rows: list[PartitionRow]

    @property
    def exists(self) -> bool:
        # DescribeGroups answers Dead, without an error, for a group it does not know.
        return self.state != "Dead"


def parse_topic_partitions(values: Iterable[str]) -> dict[str, list[int] | None]:
    """Kafka's --topic values: `t` (every partition) or `t:0,2`."""
    out: dict[str, list[int] | None] = {}
    for value in values:
        topic, sep, spec = value.partition(":")
        try:
            partitions = sorted({int(p) for p in spec.split(",")}) if sep else None
        except ValueError:
            partitions = []
        if not topic or partitions == [] or any(p < 0 for p in partitions or ()):
            raise GroupToolError(
                f"--topic expects TOPIC or TOPIC:PARTITION,PARTITION, got {value!r}"
            )
        previous = out.get(topic, [])
        merged = None if previous is None or partitions is None else {*previous, *partitions}
        out[topic] = None if merged is None else sorted(merged)
    return out


def _settings(command_config: Path | None) -> AdminSettings:
    """The --command-config settings this client honours: client.id, request.timeout.ms
    and the security settings (security.protocol, ssl.*, sasl.*) as a Kafka client reads
    them; one that cannot work fails in one line."""
    return AdminSettings.from_file(
        command_config, DEFAULT_SETTINGS.client_id, DEFAULT_SETTINGS.timeout_s
    )


async def _group_ids(client: ClusterClient, groups: list[str], all_groups: bool) -> list[str]:
    if not all_groups:
        return list(dict.fromkeys(groups))
    return sorted({g for g, _type, _state, _broker in await client.list_groups()})


async def describe_groups(
    bootstrap: str, groups: list[str], all_groups: bool, offsets: bool, settings: ClientSettings
) -> list[GroupView]:
    """One view per group (--all-groups: every group ListGroups finds); the partition rows
    only when `offsets`, since they cost an OffsetFetch and ListOffsets per group."""
    views = []
    async with ClusterClient(bootstrap, settings) as client:
        for group in await _group_ids(client, groups, all_groups):
            coordinator = await client.coordinator_node(group)
            described = await client.describe(group)
            members = [
                MemberView(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host or "-",
                    _assignment(described.protocol_type, m),
                )
                for m in described.members
            ]
            rows = []
            if offsets and described.group_state != "Dead":
                rows = await _partition_rows(client, group, described)
            views.append(
                GroupView(
                    group,
                    described.group_state,
                    coordinator,
                    described.protocol_type,
                    described.protocol_data,
                    members,
                    rows,
                )
            )
    return views


async def delete_groups(
    bootstrap: str, groups: list[str], all_groups: bool, settings: ClientSettings
) -> dict[str, ErrorCode]:
    async with ClusterClient(bootstrap, settings) as client:
        return {
            group: await client.delete_group(group)
            for group in await _group_ids(client, groups, all_groups)
        }


async def delete_offsets(
    bootstrap: str, group: str, topics: dict[str, list[int] | None], settings: ClientSettings
) -> dict[TopicPartition, ErrorCode]:
    """OffsetDelete for the named partitions (a bare topic: all of its partitions)."""
    async with ClusterClient(bootstrap, settings) as client:
        await client.metadata(topics)
        _check_topics(client, topics)
        partitions = [
            TopicPartition(topic, p)
            for topic, ps in topics.items()
            for p in (client.partitions[topic] if ps is None else ps)
        ]
        code, results = await client.delete_offsets(group, partitions)
        if code != ErrorCode.none:
            if code == ErrorCode.non_empty_group:
                # Kafka's answer for a group with members that is not a consumer group: it
                # cannot tell which topics those members use.
                raise GroupToolError(
                    f"group {group!r} has active members and is not a consumer group; "
                    f"stop them first (NON_EMPTY_GROUP)"
                )
            raise GroupToolError(_group_error(group, code))
        return results


def _partitions_text(partitions: list[TopicPartition]) -> str:
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return ",".join(f"{t}({','.join(map(str, ps))})" for t, ps in sorted(by_topic.items()))


def _warn_state(view: GroupView) -> None:
    """What kafka-consumer-groups.sh tells stderr about a group before its lines."""
    if view.state == "Empty":
        print(f"\nConsumer group '{view.group}' has no active members.", file=sys.stderr)
    elif view.state in ("PreparingRebalance", "CompletingRebalance"):
        print(f"\nWarning: Consumer group '{view.group}' is rebalancing.", file=sys.stderr)


def _row_cells(group: str, row: PartitionRow) -> list[str]:
    return [
        group,
        row.tp.topic,
        str(row.tp.partition),
        _fmt(row.current),
        _fmt(row.log_end),
        _fmt(row.lag),
        row.member_id,
        row.host,
        row.client_id,
    ]


def offsets_lines(view: GroupView) -> list[str]:
    """kafka-consumer-groups.sh --describe [--offsets]: a blank line, the header, a line
    per partition; columns as wide as their content (15 at least), as Kafka sizes them."""
    rows = [_row_cells(view.group, r) for r in view.rows]
    header = list(OFFSETS_HEADER)
    width = {i: max([15] + [len(r[i]) for r in rows]) for i in (0, 1, 6, 7)}
    width.update({2: 10, 3: 15, 4: 15, 5: 15})
    return [""] + [
        " ".join(left(cell, width[i]) for i, cell in enumerate(cells[:8])) + " " + cells[8]
        for cells in [header, *rows]
    ]


def _assignment_text(partitions: list[TopicPartition]) -> str:
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return (
        ", ".join(sorted(f"{t}({','.join(map(str, sorted(ps)))})" for t, ps in by_topic.items()))
        or "-"
    )


def members_lines(view: GroupView, verbose: bool) -> list[str]:
    """--describe --members: GROUP-INSTANCE-ID only when a member has one, ASSIGNMENT with
    --verbose, as kafka-consumer-groups.sh prints them (its trailing spaces included)."""
    with_instance = any(m.group_instance_id for m in view.members)
    rows = [
        [view.group, m.member_id]
        + ([m.group_instance_id or ""] if with_instance else [])
        + [m.host, m.client_id, str(len(m.partitions))]
        for m in view.members
    ]
    header = ["GROUP", "CONSUMER-ID"]
    header += ["GROUP-INSTANCE-ID"] if with_instance else []
    header += ["HOST", "CLIENT-ID", "#PARTITIONS"]
    minimum = [15, 15] + ([17] if with_instance else []) + [15, 15, 15]
    widths = [
        max([m] + [len(r[i]) for r in rows]) if i < len(header) - 1 else m
        for i, m in enumerate(minimum)
    ]

    def line(cells: list[str]) -> str:
        return "".join(f"{left(c, w)} " for c, w in zip(cells, widths, strict=True))

    out = ["", line(header) + ("ASSIGNMENT" if verbose else "")]
    for cells, m in zip(rows, view.members, strict=True):
        out.append(line(cells) + (_assignment_text(m.partitions) if verbose else ""))
    return out


def state_lines(view: GroupView) -> list[str]:
    """--describe --state: a blank line, the header and the group's line, per group.
    Kafka sizes the first column by the coordinator's text (and gives the coordinator
    column 25); so do we, for scripts that cut columns by position."""
    node, host, port = view.coordinator
    coordinator = f"{host}:{port}  ({node})"
    first = max(25, len(coordinator))
    cells = [
        ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
        [view.group, coordinator, view.assignor, view.state, str(len(view.members))],
    ]
    return [""] + [
        f"{left(c[0], first)} {left(c[1], 25)} {left(c[2], 20)} {left(c[3], 15)} {c[4]}"
        for c in cells
    ]


def _view_json(view: GroupView, view_name: str) -> dict[str, Any]:
    node, host, port = view.coordinator
    out: dict[str, Any] = {"group": view.group, "state": view.state}
    if view_name == "--offsets":
        out["partitions"] = [
            {
                "topic": r.tp.topic,
                "partition": r.tp.partition,
                "current_offset": r.current,
                "log_end_offset": r.log_end,
                "lag": r.lag,
                "consumer_id": None if r.member_id == "-" else r.member_id,
                "host": None if r.host == "-" else r.host,
                "client_id": None if r.client_id == "-" else r.client_id,
            }
            for r in view.rows
        ]
    elif view_name == "--members":
        out["members"] = [
            {
                "consumer_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "host": m.host,
                "client_id": m.client_id,
                "partitions": [
                    {"topic": tp.topic, "partition": tp.partition} for tp in m.partitions
                ],
            }
            for m in view.members
        ]
    else:
        out["coordinator"] = {"id": node, "host": host, "port": port}
        out["assignment_strategy"] = view.assignor
        out["members"] = len(view.members)
    return out


def _print_offsets(view: GroupView) -> None:
    if not view.members:
        console.print(f"Consumer group {escape(repr(view.group))} has no active members.")
    console.print(_offsets_table(view.group, view.state, view.rows))


def _print_members(view: GroupView, verbose: bool) -> None:
    if not view.members:
        console.print(f"Consumer group {escape(repr(view.group))} has no active members.")
        return
    columns = ["GROUP", "CONSUMER-ID"]
    columns += ["GROUP-INSTANCE-ID"] if verbose else []
    columns += ["HOST", "CLIENT-ID", "#PARTITIONS"]
    columns += ["ASSIGNMENT"] if verbose else []
    table = Table(*columns, title=escape(f"group {view.group} ({view.state})"))
    for m in view.members:
        cells = [view.group, m.member_id]
        cells += [m.group_instance_id or "-"] if verbose else []
        cells += [m.host, m.client_id, str(len(m.partitions))]
        cells += [_partitions_text(m.partitions) or "-"] if verbose else []
        table.add_row(*(escape(c) for c in cells))
    console.print(table)


def _print_states(views: list[GroupView]) -> None:
    table = Table("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS")
    for view in views:
        node, host, port = view.coordinator
        table.add_row(
            escape(view.group),
            escape(f"{host}:{port} ({node})"),
            escape(view.assignor or "-"),
            view.state,
            str(len(view.members)),
        )
    console.print(table)


def _validate(
    action: str,
    *,
    groups: list[str],
    all_groups: bool,
    topics: list[str],
    all_topics: bool,
    views: list[str],
    verbose: bool,
    reset_modes: list[str],
    execute: bool,
    dry_run: bool,
) -> None:
    """The flag combinations kafka-consumer-groups.sh accepts; anything else is one line."""
    if views and action != "--describe":
        raise GroupToolError(f"{', '.join(VIEWS)} only go with --describe")
    if len(views) > 1:
        raise GroupToolError(f"give at most one of {', '.join(VIEWS)}")
    if verbose and not (action == "--describe" and views == ["--members"]):
        raise GroupToolError("--verbose only goes with --describe --members")
    if action == "--list":
        if groups or all_groups:
            raise GroupToolError("--list takes no --group or --all-groups")
    elif action == "--delete-offsets":
        if all_groups or len(groups) != 1:
            raise GroupToolError("--delete-offsets needs exactly one --group")
    elif groups and all_groups:
        raise GroupToolError("give --group or --all-groups, not both")
    elif not groups and not all_groups:
        raise GroupToolError(f"{action} needs --group (repeatable) or --all-groups")
    if action == "--delete-offsets" and not topics:
        raise GroupToolError("--delete-offsets needs --topic TOPIC[:PARTITION,...]")
    if action == "--reset-offsets":
        if reset_modes == ["--from-file"]:
            if topics or all_topics:
                raise GroupToolError("--from-file names its partitions: no --topic/--all-topics")
        elif bool(topics) == all_topics:
            raise GroupToolError("--reset-offsets needs --topic (repeatable) or --all-topics")
        if len(reset_modes) != 1:
            raise GroupToolError(f"--reset-offsets needs exactly one of {', '.join(RESET_MODES)}")
        if execute and dry_run:
            raise GroupToolError("give --execute or --dry-run, not both")
    else:
        if topics and action != "--delete-offsets":
            raise GroupToolError("--topic only goes with --delete-offsets or --reset-offsets")
        extra = reset_modes + (["--all-topics"] if all_topics else [])
        extra += ["--execute"] if execute else []
        extra += ["--dry-run"] if dry_run else []
        if extra:
            raise GroupToolError(f"{extra[0]} only goes with --reset-offsets")


@app.callback(
    invoke_without_command=True,
    help="Consumer groups, like kafka-consumer-groups.sh: --list, --describe, --delete, "
    "--delete-offsets, --reset-offsets (or the subcommands below).",
)
def groups_flags(
    ctx: typer.Context,
    bootstrap_server: str | None = typer.Option(None, "--bootstrap-server", help=BOOTSTRAP_HELP),
    command_config: Path | None = typer.Option(  # noqa: B008 - typer's idiom
        None,
        "--command-config",
        help="Client properties file (client.id, request.timeout.ms, security settings)",
    ),
    list_: bool = typer.Option(False, "--list", help="Every group id, one a line"),
    describe_: bool = typer.Option(
        False, "--describe", help="Offsets (default), --members or --state of groups"
    ),
    delete: bool = typer.Option(False, "--delete", help="Delete groups without active members"),
    delete_offsets_: bool = typer.Option(
        False, "--delete-offsets", help="Delete one group's committed offsets of --topic"
    ),
    reset_offsets: bool = typer.Option(
        False, "--reset-offsets", help="Compute (--execute: commit) new offsets"
    ),
    group: list[str] = typer.Option(  # noqa: B008 - typer's idiom
        [], "--group", help="Group id (repeatable)"
    ),
    all_groups: bool = typer.Option(False, "--all-groups", help="Every group of the cluster"),
    topic: list[str] = typer.Option(  # noqa: B008 - typer's idiom
        [], "--topic", help="TOPIC or TOPIC:PARTITION,PARTITION (repeatable)"
    ),
    all_topics: bool = typer.Option(
        False, "--all-topics", help="Every topic the group has offsets for (--reset-offsets)"
    ),
    offsets: bool = typer.Option(False, "--offsets", help="Per partition: offset, end, lag"),
    members: bool = typer.Option(False, "--members", help="Per member: host, client, partitions"),
    state: bool = typer.Option(
        False, "--state", help="Coordinator, assignment strategy, state, member count"
    ),
    verbose: bool = typer.Option(False, "--verbose", help="--members: with assignments"),
    to_earliest: bool = typer.Option(False, "--to-earliest"),
    to_latest: bool = typer.Option(False, "--to-latest"),
    to_datetime: datetime.datetime | None = typer.Option(
        None, "--to-datetime", help="e.g. 2026-01-31T12:00:00 (local time unless it has a zone)"
    ),
    shift_by: int | None = typer.Option(None, "--shift-by"),
    to_offset: int | None = typer.Option(None, "--to-offset"),
    to_current: bool = typer.Option(False, "--to-current", help="The committed offsets"),
    by_duration: str | None = typer.Option(
        None, "--by-duration", help="Offsets of this long ago: PnDTnHnMnS, e.g. PT30M"
    ),
    from_file: Path | None = typer.Option(  # noqa: B008 - typer's idiom
        None, "--from-file", help="CSV of topic,partition,offset (as --export writes)"
    ),
    export: bool = typer.Option(
        False, "--export", help="--reset-offsets: print the plan as CSV for --from-file"
    ),
    execute: bool = typer.Option(False, "--execute", help="--reset-offsets: commit"),
    dry_run: bool = typer.Option(False, "--dry-run", help="--reset-offsets: only show (default)"),
    output: str = typer.Option("kafka", "--output", help=OUTPUT_HELP),
) -> None:
    given = [
        name
        for name, value in ctx.params.items()
        if value not in (None, False, [], ()) and not (name == "output" and value == "kafka")
    ]
    if ctx.invoked_subcommand is not None:
        if given:
            raise _fail(f"the subcommand {ctx.invoked_subcommand!r} takes its own options")
        return
    chosen = [
        flag
        for flag, on in zip(
            ACTIONS, (list_, describe_, delete, delete_offsets_, reset_offsets), strict=True
        )
        if on
    ]
    if len(chosen) != 1:
        raise _fail(f"give exactly one of {', '.join(ACTIONS)}")
    action = chosen[0]
    if bootstrap_server is None:
        raise _fail("--bootstrap-server is required")
    bad_output = check_output(output)
    if bad_output is not None:
        raise _fail(bad_output)
    views = [flag for flag, on in zip(VIEWS, (offsets, members, state), strict=True) if on]
    reset_modes = [
        flag
        for flag, on in zip(
            RESET_MODES,
            (
                to_earliest,
                to_latest,
                to_datetime is not None,
                shift_by is not None,
                to_offset is not None,
                to_current,
                by_duration is not None,
                from_file is not None,
            ),
            strict=True,
        )
        if on
    ]
    try:
        _validate(
            action,
            groups=group,
            all_groups=all_groups,
            topics=topic,
            all_topics=all_topics,
            views=views,
            verbose=verbose,
            reset_modes=reset_modes,
            execute=execute,
            dry_run=dry_run,
        )
        if export and action != "--reset-offsets":
            raise GroupToolError("--export only goes with --reset-offsets")
        topics = parse_topic_partitions(topic)
        settings = _settings(command_config)
        duration = parse_duration(by_duration) if by_duration is not None else None
        planned = None
        if from_file is not None:
            try:
                planned = parse_offsets_csv(from_file, from_file.read_text())
            except OSError as e:
                raise GroupToolError(f"--from-file {from_file}: {e.strerror}") from e
        if action == "--list":
            _list_flags(asyncio.run(_list(bootstrap_server, settings)), output)
        elif action == "--describe":
            _describe_flags(bootstrap_server, group, all_groups, views, verbose, settings, output)
        elif action == "--delete":
            _delete_flags(bootstrap_server, group, all_groups, settings)
        elif action == "--delete-offsets":
            _delete_offsets_flags(bootstrap_server, group[0], topic, topics, settings, output)
        else:
            _reset_flags(
                bootstrap_server,
                group,
                all_groups,
                topics,
                to_earliest,
                to_latest,
                to_datetime,
                shift_by,
                to_offset,
                execute,
                settings,
                to_current=to_current,
                by_duration=duration,
                from_file=planned,
                export=export,
                output=output,
            )
    except (AdminError, typer.BadParameter) as e:
        raise _fail(e) from e
    except OSError as e:
        raise _fail(f"no answer from {bootstrap_server}: {e}") from e


def _list_flags(groups: list[tuple[str, str, str, int]], output: str) -> None:
    """--list: Kafka's one group id a line; the table adds type, state and coordinator."""
    if output == "kafka":
        for group_id in sorted({g[0] for g in groups}):
            print(group_id)
    elif output == "json":
        print(
            json.dumps(
                [
                    {"group": g, "protocol_type": t or None, "state": s, "coordinator": b}
                    for g, t, s, b in sorted(groups)
                ]
            )
        )
    else:
        table = Table("GROUP", "PROTOCOL-TYPE", "STATE", "COORDINATOR")
        for group_id, protocol_type, state, broker_id in sorted(groups):
            table.add_row(escape(group_id), escape(protocol_type or "-"), state, str(broker_id))
        console.print(table)


def _describe_flags(
    bootstrap: str,
    groups: list[str],
    all_groups: bool,
    views: list[str],
    verbose: bool,
    settings: ClientSettings,
    output: str = "kafka",
) -> None:
    view = views[0] if views else "--offsets"
    found = asyncio.run(
        describe_groups(bootstrap, groups, all_groups, view == "--offsets", settings)
    )
    existing = [v for v in found if v.exists]
    if output == "json":
        print(json.dumps([_view_json(v, view) for v in existing]))
    elif output == "kafka":
        # Kafka prints the groups in id order, whatever order --group named them in.
        for v in sorted(existing, key=lambda v: v.group):
            _warn_state(v)
            if view == "--offsets" and v.rows:
                print("\n".join(offsets_lines(v)))
            elif view == "--members" and v.members:
                print("\n".join(members_lines(v, verbose)))
            elif view == "--state":
                print("\n".join(state_lines(v)))
    else:
        if view == "--state" and existing:
            _print_states(existing)
        for v in existing:
            if view == "--offsets":
                _print_offsets(v)
            elif view == "--members":
                _print_members(v, verbose)
    missing = [v.group for v in found if not v.exists]
    if missing:
        for name in missing[:-1]:
            message = _group_error(name, _NOT_FOUND)
            err_console.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)
        raise GroupToolError(_group_error(missing[-1], _NOT_FOUND))
    if all_groups and not found and output == "table":
        console.print("No consumer groups.")


_NOT_FOUND = ErrorCode.group_id_not_found


def _delete_flags(
    bootstrap: str, groups: list[str], all_groups: bool, settings: ClientSettings
) -> None:
    results = asyncio.run(delete_groups(bootstrap, groups, all_groups, settings))
    deleted = [g for g, code in results.items() if code == ErrorCode.none]
    if deleted:
        names = ", ".join(repr(g) for g in deleted)
        console.print(f"Deletion of requested consumer groups ({escape(names)}) was successful.")
    elif not results:
        console.print("No consumer groups to delete.")
    failed = [(g, code) for g, code in results.items() if code != ErrorCode.none]
    for name, code in failed[:-1]:
        message = _group_error(name, code, "was not deleted")
        err_console.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)
    if failed:
        name, code = failed[-1]
        raise GroupToolError(_group_error(name, code, "was not deleted"))


def _delete_offsets_flags(
    bootstrap: str,
    group: str,
    given: list[str],
    topics: dict[str, list[int] | None],
    settings: ClientSettings,
    output: str = "kafka",
) -> None:
    results = asyncio.run(delete_offsets(bootstrap, group, topics, settings))

    def status(code: ErrorCode) -> str:
        return "Successful" if code == ErrorCode.none else f"Error: {code.name.upper()}"

    if output == "json":
        print(
            json.dumps(
                [
                    {
                        "topic": tp.topic,
                        "partition": tp.partition,
                        "error": None if code == ErrorCode.none else code.name.upper(),
                    }
                    for tp, code in sorted(results.items())
                ]
            )
        )
    elif output == "kafka":
        if all(code == ErrorCode.none for code in results.values()):
            print(
                f"Request succeed for deleting offsets with topic {', '.join(given)} group {group}"
            )
        lines = [("TOPIC", "PARTITION", "STATUS")] + [
            (tp.topic, str(tp.partition), status(code)) for tp, code in sorted(results.items())
        ]
        print("".join(f"\n{left(t, 30)} {left(p, 15)} {left(st, 15)}" for t, p, st in lines))
    else:
        table = Table("TOPIC", "PARTITION", "STATUS", title=escape(f"group {group}"))
        for tp, code in sorted(results.items()):
            table.add_row(escape(tp.topic), str(tp.partition), status(code))
        console.print(table)
    failed = {tp: code for tp, code in results.items() if code != ErrorCode.none}
    if not failed:
        return
    subscribed = sorted(
        {tp.topic for tp, c in failed.items() if c == ErrorCode.group_subscribed_to_topic}
    )
    if subscribed and len(subscribed) == len({tp.topic for tp in failed}):
        names = ", ".join(repr(t) for t in subscribed)
        raise GroupToolError(
            f"offsets of group {group!r} kept: its active members are subscribed to "
            f"{names} (GROUP_SUBSCRIBED_TO_TOPIC)"
        )
    raise GroupToolError(
        f"offsets of group {group!r} not deleted for "
        + ", ".join(
            f"{tp.topic}-{tp.partition} ({code.name.upper()})"
            for tp, code in sorted(failed.items())
        )
    )


def _reset_flags(
    bootstrap: str,
    groups: list[str],
    all_groups: bool,
    topics: dict[str, list[int] | None],
    to_earliest: bool,
    to_latest: bool,
    to_datetime: datetime.datetime | None,
    shift_by: int | None,
    to_offset: int | None,
    execute: bool,
    settings: ClientSettings,
    *,
    to_current: bool = False,
    by_duration: datetime.timedelta | None = None,
    from_file: dict[str, dict[TopicPartition, int]] | None = None,
    export: bool = False,
    output: str = "kafka",
) -> None:
    async def ids() -> list[str]:
        async with ClusterClient(bootstrap, settings) as client:
            return await _group_ids(client, groups, all_groups)

    chosen = asyncio.run(ids())
    if from_file is not None:
        named = set(from_file) - {""}
        if "" in from_file and len(chosen) != 1:
            raise GroupToolError("--from-file of topic,partition,offset lines is for one --group")
        if named - set(chosen):
            raise GroupToolError(
                f"--from-file names groups not asked for: {', '.join(sorted(named - set(chosen)))}"
            )
    exported: list[str] = []
    plans: list[tuple[str, str, dict[TopicPartition, int]]] = []
    for group in chosen:
        mine = None
        if from_file is not None:
            mine = from_file.get(group, from_file.get("", {}) if len(chosen) == 1 else {})
            if not mine:
                continue
        state, new = asyncio.run(
            plan_reset(
                bootstrap,
                group,
                list(topics) or None,
                to_earliest,
                to_latest,
                to_datetime,
                shift_by,
                execute,
                only=topics,
                to_offset=to_offset,
                to_current=to_current,
                by_duration=by_duration,
                from_file=mine,
                settings=settings,
            )
        )
        if export:
            # Kafka's export: one group's lines without the group, several groups' with it.
            exported += [
                f"{tp.topic},{tp.partition},{offset}"
                if len(chosen) == 1
                else f"{group},{tp.topic},{tp.partition},{offset}"
                for tp, offset in sorted(new.items())
            ]
        else:
            plans.append((group, state, new))
    if export:
        print("\n".join(exported))
    elif output == "json":
        print(
            json.dumps(
                [
                    {"group": g, "topic": tp.topic, "partition": tp.partition, "new_offset": o}
                    for g, _state, new in plans
                    for tp, o in sorted(new.items())
                ]
            )
        )
    elif output == "kafka":
        print("\n".join(reset_lines(plans)))
    else:
        for group, state, new in plans:
            console.print(_reset_table(group, state, new, execute))


def reset_lines(plans: list[tuple[str, str, dict[TopicPartition, int]]]) -> list[str]:
    """kafka-consumer-groups.sh's reset plan: one header for every group's lines."""
    rows = [
        (g, tp.topic, str(tp.partition), str(o))
        for g, _s, new in plans
        for tp, o in sorted(new.items())
    ]
    if not rows:
        return [""]
    return [""] + [
        f"{left(g, 30)} {left(t, 30)} {left(p, 10)} {left(o, 15)}"
        for g, t, p, o in [("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"), *rows]
    ]
