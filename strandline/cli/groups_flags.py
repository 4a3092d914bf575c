"""`strandline groups` in kafka-consumer-groups.sh's flag grammar: exactly one action of
--list, --describe (--offsets, --members or --state), --delete, --delete-offsets and
--reset-offsets, with the flags that go with it and nothing else.

Thin: the flags are checked here, their values read by strandline.cli.groups_parse,
the cluster asked by strandline.client.groups, the answers printed by
strandline.cli.groups_render.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import replace
from pathlib import Path

import typer
from kio.schema.errors import ErrorCode
from rich.markup import escape

from strandline.cli.groups_parse import parse_duration, parse_offsets_csv, parse_topic_partitions
from strandline.cli.groups_render import (
    Plan,
    console,
    delete_offsets_json,
    delete_offsets_lines,
    delete_offsets_table,
    export_lines,
    fail,
    groups_json,
    groups_table,
    members_lines,
    offsets_lines,
    print_error,
    print_members,
    print_offsets,
    print_states,
    reset_json,
    reset_lines,
    reset_table,
    state_lines,
    view_json,
    warn_state,
)
from strandline.cli.kafka_text import OUTPUT_HELP, check_output
from strandline.client.admin import AdminClient, AdminError, AdminSettings, run
from strandline.client.groups import (
    GroupToolError,
    delete_groups,
    delete_offsets,
    describe_groups,
    group_error,
    group_ids,
    reset_offsets,
)
from strandline.client.offset_reset import ResetSpec
from strandline.types import TopicPartition

BOOTSTRAP_HELP = "HOST:PORT of any broker"
REQUEST_TIMEOUT_S = 15.0
DEFAULT_SETTINGS = AdminSettings("strandline-groups", REQUEST_TIMEOUT_S)

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


def command_settings(command_config: Path | None) -> AdminSettings:
    """The --command-config settings this client honours: client.id, request.timeout.ms
    and the security settings (security.protocol, ssl.*, sasl.*) as a Kafka client reads
    them; one that cannot work fails in one line."""
    return AdminSettings.from_file(
        command_config, DEFAULT_SETTINGS.client_id, DEFAULT_SETTINGS.timeout_s
    )


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
            raise fail(f"the subcommand {ctx.invoked_subcommand!r} takes its own options")
        return
    chosen = [
        flag
        for flag, on in zip(
            ACTIONS, (list_, describe_, delete, delete_offsets_, reset_offsets), strict=True
        )
        if on
    ]
    if len(chosen) != 1:
        raise fail(f"give exactly one of {', '.join(ACTIONS)}")
    action = chosen[0]
    if bootstrap_server is None:
        raise fail("--bootstrap-server is required")
    bad_output = check_output(output)
    if bad_output is not None:
        raise fail(bad_output)
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
        settings = command_settings(command_config)
        duration = parse_duration(by_duration) if by_duration is not None else None
        planned = None
        if from_file is not None:
            try:
                planned = parse_offsets_csv(from_file, from_file.read_text())
            except OSError as e:
                raise GroupToolError(f"--from-file {from_file}: {e.strerror}") from e
        if action == "--list":
            _list_flags(run(bootstrap_server, settings, lambda c: c.list_groups()), output)
        elif action == "--describe":
            _describe_flags(bootstrap_server, group, all_groups, views, verbose, settings, output)
        elif action == "--delete":
            _delete_flags(bootstrap_server, group, all_groups, settings)
        elif action == "--delete-offsets":
            _delete_offsets_flags(bootstrap_server, group[0], topic, topics, settings, output)
        else:
            spec = ResetSpec(
                to_earliest=to_earliest,
                to_latest=to_latest,
                to_datetime=to_datetime,
                by_duration=duration,
                to_current=to_current,
                to_offset=to_offset,
                shift_by=shift_by,
            )
            _reset_flags(
                bootstrap_server,
                group,
                all_groups,
                topics,
                spec,
                execute,
                settings,
                from_file=planned,
                export=export,
                output=output,
            )
    except (AdminError, typer.BadParameter) as e:
        raise fail(e) from e
    except OSError as e:
        raise fail(f"no answer from {bootstrap_server}: {e}") from e


def _list_flags(groups: list[tuple[str, str, str, int]], output: str) -> None:
    """--list: Kafka's one group id a line; the table adds type, state and coordinator."""
    if output == "kafka":
        for group_id in sorted({g[0] for g in groups}):
            print(group_id)
    elif output == "json":
        print(groups_json(groups))
    else:
        console.print(groups_table(groups))


def _describe_flags(
    bootstrap: str,
    groups: list[str],
    all_groups: bool,
    views: list[str],
    verbose: bool,
    settings: AdminSettings,
    output: str = "kafka",
) -> None:
    view = views[0] if views else "--offsets"
    found = run(
        bootstrap,
        settings,
        lambda client: describe_groups(client, groups, all_groups, view == "--offsets"),
    )
    existing = [v for v in found if v.exists]
    if output == "json":
        print(json.dumps([view_json(v, view) for v in existing]))
    elif output == "kafka":
        # Kafka prints the groups in id order, whatever order --group named them in.
        for v in sorted(existing, key=lambda v: v.group):
            warn_state(v)
            if view == "--offsets" and v.rows:
                print("\n".join(offsets_lines(v)))
            elif view == "--members" and v.members:
                print("\n".join(members_lines(v, verbose)))
            elif view == "--state":
                print("\n".join(state_lines(v)))
    else:
        if view == "--state" and existing:
            print_states(existing)
        for v in existing:
            if view == "--offsets":
                print_offsets(v)
            elif view == "--members":
                print_members(v, verbose)
    missing = [v.group for v in found if not v.exists]
    if missing:
        for name in missing[:-1]:
            print_error(group_error(name, _NOT_FOUND))
        raise GroupToolError(group_error(missing[-1], _NOT_FOUND))
    if all_groups and not found and output == "table":
        console.print("No consumer groups.")


_NOT_FOUND = ErrorCode.group_id_not_found


def _delete_flags(
    bootstrap: str, groups: list[str], all_groups: bool, settings: AdminSettings
) -> None:
    results = run(bootstrap, settings, lambda client: delete_groups(client, groups, all_groups))
    deleted = [g for g, code in results.items() if code == ErrorCode.none]
    if deleted:
        names = ", ".join(repr(g) for g in deleted)
        console.print(f"Deletion of requested consumer groups ({escape(names)}) was successful.")
    elif not results:
        console.print("No consumer groups to delete.")
    failed = [(g, code) for g, code in results.items() if code != ErrorCode.none]
    for name, code in failed[:-1]:
        print_error(group_error(name, code, "was not deleted"))
    if failed:
        name, code = failed[-1]
        raise GroupToolError(group_error(name, code, "was not deleted"))


def _delete_offsets_flags(
    bootstrap: str,
    group: str,
    given: list[str],
    topics: dict[str, list[int] | None],
    settings: AdminSettings,
    output: str = "kafka",
) -> None:
    results = run(bootstrap, settings, lambda client: delete_offsets(client, group, topics))
    if output == "json":
        print(delete_offsets_json(results))
    elif output == "kafka":
        for line in delete_offsets_lines(group, given, results):
            print(line)
    else:
        console.print(delete_offsets_table(group, results))
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
    spec: ResetSpec,
    execute: bool,
    settings: AdminSettings,
    *,
    from_file: dict[str, dict[TopicPartition, int]] | None = None,
    export: bool = False,
    output: str = "kafka",
) -> None:
    """--reset-offsets of each group; `from_file` holds the file's offsets by group ("":
    the lines without a group), the spec's own `from_file` is set per group from it."""
    chosen = run(bootstrap, settings, lambda client: group_ids(client, groups, all_groups))
    if from_file is not None:
        named = set(from_file) - {""}
        if "" in from_file and len(chosen) != 1:
            raise GroupToolError("--from-file of topic,partition,offset lines is for one --group")
        if named - set(chosen):
            raise GroupToolError(
                f"--from-file names groups not asked for: {', '.join(sorted(named - set(chosen)))}"
            )
    exported: list[str] = []
    plans: list[Plan] = []
    for group in chosen:
        mine = None
        if from_file is not None:
            mine = from_file.get(group, from_file.get("", {}) if len(chosen) == 1 else {})
            if not mine:
                continue
        group_spec = replace(spec, from_file=mine)

        async def reset(
            client: AdminClient, group: str = group, spec: ResetSpec = group_spec
        ) -> tuple[str, dict[TopicPartition, int]]:
            return await reset_offsets(
                client, group, list(topics) or None, spec, execute, only=topics
            )

        state, new = run(bootstrap, settings, reset)
        if export:
            exported += export_lines(group, new, several=len(chosen) != 1)
        else:
            plans.append((group, state, new))
    if export:
        print("\n".join(exported))
    elif output == "json":
        print(reset_json(plans))
    elif output == "kafka":
        print("\n".join(reset_lines(plans)))
    else:
        for group, state, new in plans:
            console.print(reset_table(group, state, new, execute))
