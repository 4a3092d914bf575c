"""What `strandline groups` prints: rich tables (--output table and the subcommands),
kafka-consumer-groups.sh's lines (--output kafka, the default: scripts parse them, so
they match Kafka's column for column) and JSON documents (--output json)."""

from __future__ import annotations

import json
import sys
from typing import Any

import typer
from kio.schema.errors import ErrorCode
from rich.markup import escape
from rich.table import Table

from strandline.cli import tool_console
from strandline.cli.kafka_text import left
from strandline.client.groups import GroupView, PartitionRow
from strandline.types import TopicPartition

console = tool_console()
err_console = tool_console(stderr=True)

# A reset plan: (group, its state, its new offsets).
Plan = tuple[str, str, dict[TopicPartition, int]]

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


def print_error(message: str) -> None:
    err_console.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)


def fail(error: Exception | str) -> typer.Exit:
    """The error on stderr, and the exit (code 1) to raise."""
    print_error(str(error))
    return typer.Exit(1)


def fmt(value: int | None) -> str:
    return "-" if value is None else str(value)


# == rich tables ===============================================================================


def groups_table(groups: list[tuple[str, str, str, int]], *, markup: bool = True) -> Table:
    """--list: group, protocol type, state, coordinator. `markup=False` leaves the cells
    unescaped, as the `list` subcommand always has."""
    table = Table("GROUP", "PROTOCOL-TYPE", "STATE", "COORDINATOR")
    if not markup:
        for group_id, protocol_type, state, broker_id in groups:
            table.add_row(group_id, protocol_type or "-", state, str(broker_id))
        return table
    for group_id, protocol_type, state, broker_id in sorted(groups):
        table.add_row(escape(group_id), escape(protocol_type or "-"), state, str(broker_id))
    return table


def offsets_table(group: str, state: str, rows: list[PartitionRow]) -> Table:
    table = Table(*OFFSETS_HEADER, title=escape(f"group {group} ({state})"))
    for row in rows:
        table.add_row(
            escape(group),
            escape(row.tp.topic),
            str(row.tp.partition),
            fmt(row.current),
            fmt(row.log_end),
            fmt(row.lag),
            escape(row.member_id),
            escape(row.host),
            escape(row.client_id),
        )
    return table


def reset_table(group: str, state: str, new: dict[TopicPartition, int], execute: bool) -> Table:
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


def print_offsets(view: GroupView) -> None:
    if not view.members:
        console.print(f"Consumer group {escape(repr(view.group))} has no active members.")
    console.print(offsets_table(view.group, view.state, view.rows))


def _partitions_text(partitions: list[TopicPartition]) -> str:
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return ",".join(f"{t}({','.join(map(str, ps))})" for t, ps in sorted(by_topic.items()))


def print_members(view: GroupView, verbose: bool) -> None:
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


def print_states(views: list[GroupView]) -> None:
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


# == kafka-consumer-groups.sh lines ============================================================


def warn_state(view: GroupView) -> None:
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
        fmt(row.current),
        fmt(row.log_end),
        fmt(row.lag),
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


def reset_lines(plans: list[Plan]) -> list[str]:
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


def export_lines(group: str, new: dict[TopicPartition, int], *, several: bool) -> list[str]:
    """--export, as --from-file reads it: one group's lines without the group, several
    groups' with it (Kafka's export)."""
    return [
        f"{group},{tp.topic},{tp.partition},{offset}"
        if several
        else f"{tp.topic},{tp.partition},{offset}"
        for tp, offset in sorted(new.items())
    ]


# == JSON =====================================================================================


def view_json(view: GroupView, view_name: str) -> dict[str, Any]:
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


def groups_json(groups: list[tuple[str, str, str, int]]) -> str:
    return json.dumps(
        [
            {"group": g, "protocol_type": t or None, "state": s, "coordinator": b}
            for g, t, s, b in sorted(groups)
        ]
    )


def reset_json(plans: list[Plan]) -> str:
    return json.dumps(
        [
            {"group": g, "topic": tp.topic, "partition": tp.partition, "new_offset": o}
            for g, _state, new in plans
            for tp, o in sorted(new.items())
        ]
    )


# == --delete-offsets, in all three outputs ===================================================


def _status(code: ErrorCode) -> str:
    return "Successful" if code == ErrorCode.none else f"Error: {code.name.upper()}"


def delete_offsets_json(results: dict[TopicPartition, ErrorCode]) -> str:
    return json.dumps(
        [
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "error": None if code == ErrorCode.none else code.name.upper(),
            }
            for tp, code in sorted(results.items())
        ]
    )


def delete_offsets_lines(
    group: str, given: list[str], results: dict[TopicPartition, ErrorCode]
) -> list[str]:
    """kafka-consumer-groups.sh --delete-offsets: the success line (when every partition
    succeeded), then a blank line, the header and a line per partition."""
    out = []
    if all(code == ErrorCode.none for code in results.values()):
        out.append(
            f"Request succeed for deleting offsets with topic {', '.join(given)} group {group}"
        )
    lines = [("TOPIC", "PARTITION", "STATUS")] + [
        (tp.topic, str(tp.partition), _status(code)) for tp, code in sorted(results.items())
    ]
    out.append("".join(f"\n{left(t, 30)} {left(p, 15)} {left(st, 15)}" for t, p, st in lines))
    return out


def delete_offsets_table(group: str, results: dict[TopicPartition, ErrorCode]) -> Table:
    table = Table("TOPIC", "PARTITION", "STATUS", title=escape(f"group {group}"))
    for tp, code in sorted(results.items()):
        table.add_row(escape(tp.topic), str(tp.partition), _status(code))
    return table
