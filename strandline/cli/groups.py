"""`strandline groups`: list, describe, delete and reset consumer groups, like
kafka-consumer-groups.sh.

Two spellings: Kafka's flags (`strandline groups --describe --group g --members
--bootstrap-server ...`, also --list, --delete, --delete-offsets, --reset-offsets) and the
older subcommands (`strandline groups describe g --bootstrap-server ...`).

Everything goes over the Kafka protocol (Metadata, ListGroups on every broker,
FindCoordinator, DescribeGroups, OffsetFetch, ListOffsets, OffsetCommit, DeleteGroups,
OffsetDelete), so it works against any broker of the cluster, or any Kafka-compatible one.

This module is the app and the subcommands; Kafka's flags are strandline.cli.groups_flags,
the requests strandline.client.groups, the output strandline.cli.groups_render.
"""

from __future__ import annotations

import datetime

import typer

from strandline.cli.groups_flags import BOOTSTRAP_HELP, DEFAULT_SETTINGS, groups_flags
from strandline.cli.groups_render import console, fail, groups_table, offsets_table, reset_table
from strandline.client.admin import AdminError, run
from strandline.client.groups import describe_group, reset_offsets
from strandline.client.offset_reset import ResetSpec

app = typer.Typer(no_args_is_help=True)
app.callback(
    invoke_without_command=True,
    help="Consumer groups, like kafka-consumer-groups.sh: --list, --describe, --delete, "
    "--delete-offsets, --reset-offsets (or the subcommands below).",
)(groups_flags)


@app.command("list")
def list_command(
    bootstrap_server: str = typer.Option(..., "--bootstrap-server", help=BOOTSTRAP_HELP),
) -> None:
    """Every group of the cluster (ListGroups on every broker)."""
    try:
        groups = run(bootstrap_server, DEFAULT_SETTINGS, lambda c: c.list_groups())
    except (AdminError, OSError) as e:
        raise fail(e) from e
    console.print(groups_table(groups, markup=False))


@app.command("describe")
def describe_command(
    group: str = typer.Argument(..., help="group id"),
    bootstrap_server: str = typer.Option(..., "--bootstrap-server", help=BOOTSTRAP_HELP),
) -> None:
    """Per partition: current (committed) offset, log end offset, lag and owner."""
    try:
        state, rows = run(bootstrap_server, DEFAULT_SETTINGS, lambda c: describe_group(c, group))
    except (AdminError, OSError) as e:
        raise fail(e) from e
    console.print(offsets_table(group, state, rows))


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
    spec = ResetSpec(
        to_earliest=to_earliest, to_latest=to_latest, to_datetime=to_datetime, shift_by=shift_by
    )
    try:
        state, new = run(
            bootstrap_server,
            DEFAULT_SETTINGS,
            lambda c: reset_offsets(c, group, topic or None, spec, execute),
        )
    except (AdminError, OSError) as e:
        raise fail(e) from e
    console.print(reset_table(group, state, new, execute))
