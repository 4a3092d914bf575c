"""`strandline reassign`, `strandline elect`, `strandline verify-replicas` (docs/tools.md).

`reassign` takes kafka-reassign-partitions.sh's --execute, --verify, --list and --cancel.

`reassign` and `elect` talk to the cluster over the Kafka protocol through the shared
admin client (strandline.client.admin: AlterPartitionReassignments,
ListPartitionReassignments, ElectLeaders sent to the controller that Metadata names, as
Kafka's admin client does; IncrementalAlterConfigs for the throttle), so
`--command-config` carries their TLS/SASL settings as it does every tool's.
`verify-replicas` fetches every replica over the network, or reads a local cluster's
segment files directly.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import typer
from kio.schema.errors import ErrorCode
from rich.markup import escape
from rich.table import Table

from strandline.cli import tool_console
from strandline.cli.configs import Entity, alter_entity
from strandline.cli.kafka_text import OUTPUT_HELP, check_output
from strandline.client.admin import AdminClient, AdminError, AdminSettings, BlockingAdmin
from strandline.controller.assignment import propose_reassignment
from strandline.errors import KafkaError
from strandline.protocol.codec import request_type
from strandline.quotas import (
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
    reassignment_throttles,
)
from strandline.storage import replica_verify
from strandline.types import TopicPartition

ELECT_LEADERS = 43
LIST_PARTITION_REASSIGNMENTS = 46
ELECTION_TYPES = {"preferred": 0, "unclean": 1}
REQUEST_TIMEOUT = datetime.timedelta(seconds=30)

console = tool_console()
err_console = tool_console(stderr=True)

BOOTSTRAP = typer.Option(..., "--bootstrap-server", help="host:port[,host:port] of any broker")
COMMAND_CONFIG = typer.Option(  # noqa: B008 - typer's idiom
    None,
    "--command-config",
    help="Client properties file: client.id, request.timeout.ms, TLS/SASL settings",
)
# The controller's requests carry a 30 s timeout of their own.
TOOL_TIMEOUT_S = 40.0


def connect(bootstrap: str, command_config: Path | None, tool: str) -> BlockingAdmin:
    """The shared admin client with the --command-config's settings (one line on error)."""
    try:
        return BlockingAdmin(
            bootstrap, AdminSettings.from_file(command_config, tool, TOOL_TIMEOUT_S)
        )
    except AdminError as e:
        raise _fail(str(e)) from e


class ToolError(AdminError):
    pass


def _fail(message: str) -> typer.Exit:
    err_console.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)
    return typer.Exit(code=1)


# --- talking to the controller -------------------------------------------------------


Admin = BlockingAdmin | str  # a bootstrap string: a PLAINTEXT client for this one call


def _with(admin: Admin, work: Any) -> Any:
    """`work(client)` on the admin's AdminClient (a bootstrap string gets its own)."""
    if isinstance(admin, str):
        with BlockingAdmin(admin, AdminSettings("strandline-admin", TOOL_TIMEOUT_S)) as own:
            return own.do(work)
    return admin.do(work)


def _metadata(admin: Admin) -> Any:
    async def work(client: AdminClient) -> Any:
        return await client.metadata()

    return _with(admin, work)


def _partition_replicas(metadata: Any) -> dict[TopicPartition, tuple[int, list[int]]]:
    """tp -> (leader, replicas) as Metadata reports them."""
    return {
        TopicPartition(t.name, int(p.partition_index)): (
            int(p.leader_id),
            [int(r) for r in p.replica_nodes],
        )
        for t in metadata.topics
        for p in t.partitions
    }


def send_to_controller(admin: Admin, request: Any) -> Any:
    """Send `request` to the controller, following NOT_CONTROLLER while it moves."""

    async def work(client: AdminClient) -> Any:
        return await client.send_to_controller(request)

    return _with(admin, work)


# --- reassign ---------------------------------------------------------------------------


def read_json_file(path: Path, flag: str) -> Any:
    """A JSON file a flag names; an unreadable or malformed one is one line naming both."""
    try:
        text = path.read_text()
    except OSError as e:
        raise ToolError(f"{flag} {path}: cannot read it: {e.strerror}") from e
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ToolError(f"{flag} {path}: not valid JSON ({e})") from e


def _json_shape(path: Path, flag: str, parse: Any, obj: Any) -> Any:
    """parse(obj), a missing key or a wrong type named with the file."""
    try:
        return parse(obj)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        what = f"missing key {e}" if isinstance(e, KeyError) else str(e)
        raise ToolError(f"{flag} {path}: not the expected JSON: {what}") from e


def parse_reassignment_json(text: str | Any) -> dict[TopicPartition, list[int]]:
    """Kafka's format: {"version":1,"partitions":[{"topic","partition","replicas"}]}
    (`log_dirs` is accepted and ignored)."""
    obj = json.loads(text) if isinstance(text, str) else text
    if int(obj.get("version", 1)) != 1:
        raise ToolError(f"unsupported reassignment JSON version {obj.get('version')}")
    wanted: dict[TopicPartition, list[int]] = {}
    for entry in obj["partitions"]:
        tp = TopicPartition(str(entry["topic"]), int(entry["partition"]))
        if tp in wanted:
            raise ToolError(f"partition {tp} is listed twice")
        wanted[tp] = [int(r) for r in entry["replicas"]]
    if not wanted:
        raise ToolError("the reassignment JSON lists no partitions")
    return wanted


def execute_reassignment(
    admin: Admin, wanted: Mapping[TopicPartition, list[int] | None]
) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
    """AlterPartitionReassignments; a None target cancels that partition's move."""

    async def work(client: AdminClient) -> Any:
        return await client.alter_partition_reassignments(wanted)

    error, message, answers = _with(admin, work)
    if error != ErrorCode.none:
        raise ToolError(f"{error.name}: {message}")
    return answers  # type: ignore[no-any-return]


def ongoing_reassignments(admin: Admin) -> dict[TopicPartition, Any]:
    request = request_type(LIST_PARTITION_REASSIGNMENTS, 0)(timeout=REQUEST_TIMEOUT, topics=None)
    response = send_to_controller(admin, request)
    if response.error_code != ErrorCode.none:
        raise ToolError(f"{response.error_code.name}: {response.error_message}")
    return {
        TopicPartition(t.name, int(p.partition_index)): p
        for t in response.topics
        for p in t.partitions
    }


def verify_reassignment(
    admin: Admin, wanted: dict[TopicPartition, list[int]]
) -> dict[TopicPartition, str]:
    """tp -> "completed" | "in progress" | "failed" (assigned elsewhere, nothing moving)."""
    ongoing = ongoing_reassignments(admin)
    assigned = _partition_replicas(_metadata(admin))
    status = {}
    for tp, replicas in sorted(wanted.items()):
        if tp in ongoing:
            status[tp] = "in progress"
        elif tp in assigned and assigned[tp][1] == replicas:
            status[tp] = "completed"
        else:
            status[tp] = "failed"
    return status


def _ids(ids: Any) -> str:
    return ",".join(str(int(i)) for i in ids) or "-"


def list_reassignments(admin: Admin, output: str = "kafka") -> None:
    """Kafka's --list: every partition being moved, with AR, adding and removing."""
    ongoing = ongoing_reassignments(admin)
    if output == "json":
        print(
            json.dumps(
                [
                    {
                        "topic": tp.topic,
                        "partition": tp.partition,
                        "replicas": [int(r) for r in p.replicas],
                        "adding": [int(r) for r in p.adding_replicas],
                        "removing": [int(r) for r in p.removing_replicas],
                    }
                    for tp, p in sorted(ongoing.items())
                ]
            )
        )
        return
    if not ongoing:
        print("No partition reassignments found.")
        return
    if output == "kafka":
        # kafka-reassign-partitions.sh's lines; adding/removing only when there are some.
        print("Current partition reassignments:")
        for tp, p in sorted(ongoing.items()):
            adding = f" adding: {_ids(p.adding_replicas)}." if p.adding_replicas else ""
            removing = f" removing: {_ids(p.removing_replicas)}." if p.removing_replicas else ""
            print(f"{tp.topic}-{tp.partition}: replicas: {_ids(p.replicas)}.{adding}{removing}")
        return
    table = Table("TOPIC", "PARTITION", "REPLICAS", "ADDING", "REMOVING")
    for tp, p in sorted(ongoing.items()):
        table.add_row(
            tp.topic,
            str(tp.partition),
            _ids(p.replicas),
            _ids(p.adding_replicas),
            _ids(p.removing_replicas),
        )
    console.print(table)


def cancel_reassignments(admin: Admin, wanted: dict[TopicPartition, list[int]]) -> None:
    """Kafka's --cancel: the listed partitions go back to the replicas they had before
    their move started (AlterPartitionReassignments with null replicas)."""
    results = execute_reassignment(admin, dict.fromkeys(wanted))
    cancelled = sorted(tp for tp, (code, _m) in results.items() if code == ErrorCode.none)
    if cancelled:
        names = ",".join(f"{tp.topic}-{tp.partition}" for tp in cancelled)
        plural = "" if len(cancelled) == 1 else "s"
        print(f"Successfully cancelled partition reassignment{plural} for: {names}")
    failed = {tp: r for tp, r in sorted(results.items()) if r[0] != ErrorCode.none}
    for tp, (code, message) in failed.items():
        reason = (
            "no reassignment in progress"
            if code == ErrorCode.no_reassignment_in_progress
            else message or code.name
        )
        err_console.print(
            f"[bold red]error:[/] cannot cancel the reassignment of {tp.topic}-{tp.partition}: "
            f"{reason} ({code.name.upper()})",
            soft_wrap=True,
        )
    if failed:
        raise typer.Exit(code=1)


def _alter_configs(
    admin: Admin, changes: Sequence[tuple[str, str, Mapping[str, str | None]]]
) -> None:
    """IncrementalAlterConfigs: (resource type "topic"|"broker", name, key -> value or
    None to delete); a broker's are sent to that broker, as Kafka's AdminClient does."""

    async def work(client: AdminClient) -> None:
        await client.metadata(())
        for kind, name, entries in changes:
            entity = Entity("topics" if kind == "topic" else "brokers", name)
            add = {k: v for k, v in entries.items() if v is not None}
            delete = [k for k, v in entries.items() if v is None]
            try:
                await alter_entity(client, entity, add, delete)
            except AdminError as e:
                raise ToolError(f"altering configs of {kind} {name}: {e}") from e

    _with(admin, work)


def set_throttle(admin: Admin, wanted: Mapping[TopicPartition, list[int]], rate: int) -> None:
    """What --execute --throttle sets (Kafka's ReassignPartitionsCommand): the rate on
    every broker taking part, the replica lists on each moving topic."""
    current = {
        (tp.topic, tp.partition): replicas
        for tp, (_leader, replicas) in _partition_replicas(_metadata(admin)).items()
    }
    topics, brokers = reassignment_throttles(
        current, {(tp.topic, tp.partition): r for tp, r in wanted.items()}
    )
    _alter_configs(
        admin,
        [("broker", str(b), {LEADER_RATE: str(rate), FOLLOWER_RATE: str(rate)}) for b in brokers]
        + [("topic", topic, dict(lists)) for topic, lists in topics.items()],
    )
    # Kafka's line; the brokers it was set on are ours (Kafka does not name them).
    print(
        f"The inter-broker throttle limit was set to {rate} B/s (brokers {_ids(sorted(brokers))})"
    )


def clear_throttle(admin: Admin, topics: set[str]) -> None:
    """--verify once every listed partition completed: the throttle goes, as in Kafka."""
    brokers = sorted(_broker_ids(admin))
    _alter_configs(
        admin,
        [("broker", str(b), {LEADER_RATE: None, FOLLOWER_RATE: None}) for b in brokers]
        + [
            ("topic", topic, {LEADER_REPLICAS: None, FOLLOWER_REPLICAS: None})
            for topic in sorted(topics)
        ],
    )
    # kafka-reassign-partitions.sh's lines.
    plural = "" if len(brokers) == 1 else "s"
    print(f"Clearing broker-level throttles on broker{plural} {_ids(brokers)}")
    plural = "" if len(topics) == 1 else "s"
    print(f"Clearing topic-level throttles on topic{plural} {','.join(sorted(topics))}")


def _broker_ids(admin: Admin) -> list[int]:
    return [int(b.node_id) for b in _metadata(admin).brokers]


def generate_reassignment(
    admin: Admin, topics_json: str | Any, broker_list: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(current, proposed) in Kafka's reassignment JSON for --generate."""
    obj = json.loads(topics_json) if isinstance(topics_json, str) else topics_json
    names = [str(t["topic"]) for t in obj.get("topics", [])]
    if not names:
        raise ToolError("--topics-to-move-json-file lists no topics")
    try:
        brokers = [int(b) for b in broker_list.split(",") if b.strip()]
    except ValueError as e:
        raise ToolError(f"--broker-list {broker_list!r}: expected ids like 1,2,3") from e
    metadata = _metadata(admin)
    live = sorted(int(b.node_id) for b in metadata.brokers)
    unknown = sorted(set(brokers) - set(live))
    if unknown:
        raise ToolError(
            f"--broker-list {broker_list}: no broker {', '.join(map(str, unknown))} in the "
            f"cluster (its brokers: {', '.join(map(str, live))})"
        )
    assigned = _partition_replicas(metadata)
    current: dict[str, dict[int, list[int]]] = {}
    for tp, (_leader, replicas) in sorted(assigned.items()):
        if tp.topic in names:
            current.setdefault(tp.topic, {})[tp.partition] = list(replicas)
    missing = sorted(set(names) - set(current))
    if missing:
        raise ToolError(f"unknown topic(s): {', '.join(missing)}")
    try:
        proposed = propose_reassignment(current, brokers)
    except KafkaError as e:
        raise ToolError(str(e)) from e

    def as_json(layout: Mapping[str, Mapping[int, list[int]]]) -> dict[str, Any]:
        return {
            "version": 1,
            "partitions": [
                {"topic": t, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
                for t, parts in sorted(layout.items())
                for p, r in sorted(parts.items())
            ],
        }

    return as_json(current), as_json(proposed)


def _compact(document: Any) -> str:
    """JSON as Kafka's tools write it: no spaces."""
    return json.dumps(document, separators=(",", ":"))


REASSIGN_ACTIONS = ("--execute", "--verify", "--list", "--cancel", "--generate")


def reassign(
    bootstrap_server: str = BOOTSTRAP,
    reassignment_json_file: Path | None = typer.Option(  # noqa: B008 - typer's idiom
        None, "--reassignment-json-file", help="Kafka's reassignment JSON"
    ),
    execute: bool = typer.Option(False, "--execute", help="Start the reassignment"),
    verify: bool = typer.Option(False, "--verify", help="Report whether it completed"),
    list_: bool = typer.Option(False, "--list", help="Partitions being reassigned now"),
    cancel: bool = typer.Option(
        False, "--cancel", help="Move the file's partitions back to their original replicas"
    ),
    generate: bool = typer.Option(
        False, "--generate", help="Propose a layout of --topics-to-move-json-file's topics"
    ),
    topics_to_move_json_file: Path | None = typer.Option(  # noqa: B008 - typer's idiom
        None, "--topics-to-move-json-file", help='{"version":1,"topics":[{"topic":"t"}]}'
    ),
    broker_list: str | None = typer.Option(
        None, "--broker-list", help="Brokers to lay the topics over (--generate): 1,2,3"
    ),
    throttle: int | None = typer.Option(
        None, "--throttle", min=1, help="Replication bytes/s while moving (--execute)"
    ),
    command_config: Path | None = COMMAND_CONFIG,
    output: str = typer.Option("kafka", "--output", help=f"--list: {OUTPUT_HELP}"),
) -> None:
    """Move partitions to new replicas (kafka-reassign-partitions.sh)."""
    bad_output = check_output(output)
    if bad_output is not None:
        raise _fail(bad_output)
    with connect(bootstrap_server, command_config, "strandline-reassign") as admin:
        chosen = [
            flag
            for flag, on in zip(
                REASSIGN_ACTIONS, (execute, verify, list_, cancel, generate), strict=True
            )
            if on
        ]
        if len(chosen) != 1:
            raise _fail(f"give exactly one of {', '.join(REASSIGN_ACTIONS)}")
        if throttle is not None and not execute:
            raise _fail("--throttle only goes with --execute")
        if generate:
            if topics_to_move_json_file is None or broker_list is None:
                raise _fail("--generate needs --topics-to-move-json-file and --broker-list")
            flag = "--topics-to-move-json-file"
            try:
                topics_obj = read_json_file(topics_to_move_json_file, flag)
                now, proposed = _json_shape(
                    topics_to_move_json_file,
                    flag,
                    lambda obj: generate_reassignment(admin, obj, broker_list),
                    topics_obj,
                )
            except (AdminError, OSError, ValueError, KeyError, TypeError) as e:
                raise _fail(str(e)) from e
            # kafka-reassign-partitions.sh's lines and compact JSON.
            print(f"Current partition replica assignment\n{_compact(now)}\n")
            print(f"Proposed partition reassignment configuration\n{_compact(proposed)}")
            return
        if list_:
            if reassignment_json_file is not None:
                raise _fail("--list takes no --reassignment-json-file")
            try:
                list_reassignments(admin, output)
            except (AdminError, OSError, ValueError) as e:
                raise _fail(str(e)) from e
            return
        if reassignment_json_file is None:
            raise _fail(f"{chosen[0]} needs --reassignment-json-file")
        try:
            flag = "--reassignment-json-file"
            wanted = _json_shape(
                reassignment_json_file,
                flag,
                parse_reassignment_json,
                read_json_file(reassignment_json_file, flag),
            )
            if cancel:
                cancel_reassignments(admin, wanted)
            elif execute:
                current = _partition_replicas(_metadata(admin))
                # kafka-reassign-partitions.sh's: the rollback plan, then the outcome.
                rollback = {
                    "version": 1,
                    "partitions": [
                        {
                            "topic": tp.topic,
                            "partition": tp.partition,
                            "replicas": current[tp][1],
                            "log_dirs": ["any"] * len(current[tp][1]),
                        }
                        for tp in sorted(wanted)
                        if tp in current
                    ],
                }
                print(f"Current partition replica assignment\n\n{_compact(rollback)}\n")
                print("Save this to use as the --reassignment-json-file option during rollback")
                if throttle is not None:
                    print(
                        "Warning: You must run --verify periodically, until the reassignment "
                        "completes, to ensure the throttle is removed."
                    )
                    set_throttle(admin, wanted, throttle)
                results = execute_reassignment(admin, wanted)
                failed = {tp: r for tp, r in results.items() if r[0] != ErrorCode.none}
                for tp, (code, message) in sorted(failed.items()):
                    err_console.print(f"{tp.topic}-{tp.partition}: {code.name} {message or ''}")
                if failed:
                    raise typer.Exit(code=1)
                names = ",".join(f"{tp.topic}-{tp.partition}" for tp in sorted(results))
                plural = "" if len(results) == 1 else "s"
                print(f"Successfully started partition reassignment{plural} for {names}")
            else:
                status = verify_reassignment(admin, wanted)
                # kafka-reassign-partitions.sh's sentences.
                print("Status of partition reassignment:")
                now = _partition_replicas(_metadata(admin)) if "failed" in status.values() else {}
                for tp, state in status.items():
                    name = f"{tp.topic}-{tp.partition}"
                    if state == "completed":
                        print(f"Reassignment of partition {name} is completed.")
                    elif state == "in progress":
                        print(f"Reassignment of partition {name} is still in progress.")
                    else:
                        actual = _ids(now[tp][1]) if tp in now else "-"
                        print(
                            f"There is no active reassignment of partition {name}, but "
                            f"replica set is {actual} rather than {_ids(wanted[tp])}."
                        )
                if all(state == "completed" for state in status.values()):
                    clear_throttle(admin, {tp.topic for tp in wanted})
                if any(s == "failed" for s in status.values()):
                    raise typer.Exit(code=1)
        except (AdminError, OSError, ValueError, KeyError) as e:
            raise _fail(str(e)) from e


# --- elect ----------------------------------------------------------------------------


def elect_leaders(
    admin: Admin, election_type: int, tps: list[TopicPartition] | None
) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
    cls = request_type(ELECT_LEADERS, 2)
    module = __import__(cls.__module__, fromlist=["TopicPartitions"])
    topic_partitions = None
    if tps is not None:
        by_topic: dict[str, list[int]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        topic_partitions = tuple(
            module.TopicPartitions(topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()
        )
    request = cls(
        election_type=election_type, topic_partitions=topic_partitions, timeout=REQUEST_TIMEOUT
    )
    response = send_to_controller(admin, request)
    if response.error_code != ErrorCode.none:
        raise ToolError(f"{response.error_code.name}")
    return {
        TopicPartition(r.topic, int(p.partition_id)): (p.error_code, p.error_message)
        for r in response.replica_election_results
        for p in r.partition_result
    }


def elect(
    bootstrap_server: str = BOOTSTRAP,
    election_type: str = typer.Option(
        ..., "--election-type", help="PREFERRED or UNCLEAN (any case)"
    ),
    topic: str | None = typer.Option(None, "--topic"),
    partition: int | None = typer.Option(None, "--partition"),
    all_topic_partitions: bool = typer.Option(False, "--all-topic-partitions"),
    path_to_json_file: Path | None = typer.Option(  # noqa: B008 - typer's idiom
        None,
        "--path-to-json-file",
        help='The partitions: {"partitions":[{"topic":"t","partition":0}]}',
    ),
    command_config: Path | None = COMMAND_CONFIG,
) -> None:
    """Elect leaders: preferred replicas or, for offline partitions, unclean
    (kafka-leader-election.sh)."""
    election_type = election_type.lower()
    if election_type not in ELECTION_TYPES:
        raise _fail("--election-type must be PREFERRED or UNCLEAN")
    chosen = [all_topic_partitions, topic is not None, path_to_json_file is not None]
    if sum(chosen) != 1:
        raise _fail(
            "give one of --topic T --partition P, --all-topic-partitions, --path-to-json-file"
        )
    if topic is not None and partition is None:
        raise _fail("--topic needs --partition")
    tps: list[TopicPartition] | None = None
    if topic is not None:
        tps = [TopicPartition(topic, int(partition or 0))]
    elif path_to_json_file is not None:
        flag = "--path-to-json-file"
        try:
            tps = _json_shape(
                path_to_json_file,
                flag,
                lambda obj: [
                    TopicPartition(str(p["topic"]), int(p["partition"])) for p in obj["partitions"]
                ],
                read_json_file(path_to_json_file, flag),
            )
        except ToolError as e:
            raise _fail(str(e)) from e
        if not tps:
            raise _fail(f"{flag} {path_to_json_file} lists no partitions")
    with connect(bootstrap_server, command_config, "strandline-elect") as admin:
        try:
            results = elect_leaders(admin, ELECTION_TYPES[election_type], tps)
        except (AdminError, OSError) as e:
            raise _fail(str(e)) from e
        # kafka-leader-election.sh's lines: the elected, the ones that needed none, then
        # each failure, and a non-zero exit if any failed.
        kind = election_type.upper()

        def names(wanted: Any) -> str:
            return ", ".join(
                f"{tp.topic}-{tp.partition}" for tp, (code, _m) in sorted(results.items())
                if wanted(code)
            )  # fmt: skip

        elected = names(lambda code: code == ErrorCode.none)
        if elected:
            print(f"Successfully completed leader election ({kind}) for partitions {elected}")
        noop = names(lambda code: code == ErrorCode.election_not_needed)
        if noop:
            print(f"Valid replica already elected for partitions {noop}")
        if not results:
            print("Valid replica already elected for every partition")
        failed = {
            tp: (code, message)
            for tp, (code, message) in sorted(results.items())
            if code not in (ErrorCode.none, ErrorCode.election_not_needed)
        }
        for tp, (code, message) in failed.items():
            print(
                f"Error completing leader election ({kind}) for partition: "
                f"{tp.topic}-{tp.partition}: {code.name.upper()}{f': {message}' if message else ''}"
            )
        if failed:
            raise _fail(f"{len(failed)} replica(s) could not be elected")


# --- verify-replicas ----------------------------------------------------------------------


def high_watermarks(cluster_dir: Path, admin: BlockingAdmin | None) -> dict[TopicPartition, int]:
    """HWs from a running cluster (ListOffsets latest at each leader), else from the
    brokers' replication-offset-checkpoint files (the largest a replica wrote)."""
    if admin is not None:

        async def work(client: AdminClient) -> dict[TopicPartition, int]:
            await client.metadata()
            return await client.list_offsets(list(client.leaders), -1)

        running: dict[TopicPartition, int] = admin.do(work)
        return running
    hws: dict[TopicPartition, int] = {}
    for data_dir in sorted(cluster_dir.glob("broker-*/data")):
        for tp in replica_verify.partitions_in([data_dir]):
            hw = replica_verify.checkpointed_high_watermark(data_dir, tp)
            if hw is not None:
                hws[tp] = max(hws.get(tp, 0), hw)
    return hws


def verify_replicas(
    data_dir: Path | None = typer.Option(  # noqa: B008 - typer's idiom
        None, "--data-dir", help="A local cluster's directory (reads its segment files)"
    ),
    bootstrap_server: str | None = typer.Option(
        None, "--bootstrap-server", help="Any cluster: fetch every replica from its broker"
    ),
    topic: str | None = typer.Option(None, "--topic", help="Only this topic"),
    offline: bool = typer.Option(
        False, "--offline", help="Take HWs from checkpoint files, not from the running cluster"
    ),
    command_config: Path | None = COMMAND_CONFIG,
) -> None:
    """Check that every replica holds identical bytes below the high watermark
    (kafka-replica-verification.sh): over the network with --bootstrap-server, or from a
    local cluster's segment files with --data-dir."""
    if (data_dir is None) == (bootstrap_server is None):
        raise _fail("give exactly one of --data-dir, --bootstrap-server")
    try:
        settings = AdminSettings.from_file(
            command_config, "strandline-replica-verification", TOOL_TIMEOUT_S
        )
    except AdminError as e:
        raise _fail(str(e)) from e
    if bootstrap_server is not None:
        from strandline.client.replica_verification import VerificationError, verify

        try:
            results = verify(bootstrap_server, None if topic is None else [topic], settings)
        except VerificationError as e:
            raise _fail(str(e)) from e
        _print_comparisons(results)
        return
    assert data_dir is not None
    data_dirs = {
        int(d.parent.name.removeprefix("broker-")): d
        for d in sorted(data_dir.glob("broker-*/data"))
    }
    if not data_dirs:
        raise _fail(f"no broker-*/data directories under {data_dir}")
    admin = None
    if not offline:
        from strandline.launcher.local_cluster import ClusterError, LocalCluster

        try:
            cluster = LocalCluster.load(data_dir)
            if any(cluster.is_running(b) for b in cluster.brokers):
                if command_config is None and cluster.client_config:
                    # A secured local cluster: its own client settings (the super user).
                    settings = AdminSettings.from_properties(
                        cluster.client_config, settings.client_id, settings.timeout_s
                    )
                admin = BlockingAdmin(cluster.bootstrap, settings)
        except (ClusterError, AdminError):
            admin = None
    try:
        hws = high_watermarks(data_dir, admin)
    except AdminError as e:
        raise _fail(str(e)) from e
    finally:
        if admin is not None:
            admin.close()
    results = []
    for tp in sorted(replica_verify.partitions_in(list(data_dirs.values()))):
        if topic is not None and tp.topic != topic or tp not in hws:
            continue
        dirs = {
            b: replica_verify.partition_dir(d, tp)
            for b, d in data_dirs.items()
            if replica_verify.partition_dir(d, tp).is_dir()
        }
        results.append(replica_verify.compare_replicas(tp, dirs, hws[tp]))
    _print_comparisons(results)


def _print_comparisons(results: list[replica_verify.ReplicaComparison]) -> None:
    table = Table("partition", "high watermark", "replicas (bytes compared)", "consistent")
    inconsistent = 0
    for result in results:
        tp = result.tp
        inconsistent += not result.consistent
        table.add_row(
            f"{tp.topic}-{tp.partition}",
            str(result.below),
            ", ".join(f"{b}:{n}" for b, n in result.sizes.items()),
            "yes" if result.consistent else f"[red]NO[/] (differs: {list(result.mismatched)})",
        )
    console.print(table)
    if inconsistent:
        err_console.print(f"{inconsistent} partition(s) have replicas that differ below the HW")
        raise typer.Exit(code=1)
