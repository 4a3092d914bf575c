"""`strandline reassign`, `strandline elect`, `strandline verify-replicas` (seed 001's tools).

`reassign` takes kafka-reassign-partitions.sh's --execute, --verify, --list and --cancel.

`reassign` and `elect` talk to the cluster over the Kafka protocol
(AlterPartitionReassignments/ListPartitionReassignments, ElectLeaders), sending to the
controller that Metadata names, as Kafka's admin client does. `verify-replicas` reads
a local cluster's segment files directly.
"""

from __future__ import annotations

import datetime
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import typer
from kio.schema.errors import ErrorCode
from rich.console import Console
from rich.table import Table

from strandline.client.connection import send_request
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
ALTER_PARTITION_REASSIGNMENTS = 45
LIST_PARTITION_REASSIGNMENTS = 46
METADATA = 3
ELECTION_TYPES = {"preferred": 0, "unclean": 1}
REQUEST_TIMEOUT = datetime.timedelta(seconds=30)

console = Console()
err_console = Console(stderr=True)

BOOTSTRAP = typer.Option(..., "--bootstrap-server", help="host:port[,host:port] of any broker")
COMMAND_CONFIG = typer.Option(  # Kafka's flag; read and checked (PLAINTEXT only until TLS/SASL)
    None, "--command-config", help="Client properties file"
)


def _check_command_config(path: Path | None, tool: str) -> None:
    from strandline.cli.configs import ConfigToolError, client_settings

    try:
        settings = client_settings(path, tool)
    except ConfigToolError as e:
        raise _fail(str(e)) from e
    if settings.security is not None:
        # Its requests go over plain sockets still (issue 26, not yet moved to the
        # shared admin client): refused in one line rather than a hung connection.
        protocol = settings.security.protocol.value
        raise _fail(f"security.protocol={protocol} unsupported here (PLAINTEXT only)")


class ToolError(RuntimeError):
    pass


def _fail(message: str) -> typer.Exit:
    err_console.print(f"[bold red]error:[/] {message}")
    return typer.Exit(code=1)


# --- talking to the controller -------------------------------------------------------


def _addresses(bootstrap: str) -> list[tuple[str, int]]:
    out = []
    for item in bootstrap.split(","):
        host, _, port = item.strip().rpartition(":")
        out.append((host or "127.0.0.1", int(port)))
    return out


def _metadata(bootstrap: str) -> Any:
    last: Exception | None = None
    for host, port in _addresses(bootstrap):
        try:
            request = request_type(METADATA, 12)(
                topics=None,
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
            return send_request(host, port, request, timeout=10)
        except OSError as e:
            last = e
    raise ToolError(f"no broker of {bootstrap} answered: {last}")


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


def send_to_controller(bootstrap: str, request: Any, attempts: int = 10) -> Any:
    """Send `request` to the controller, following NOT_CONTROLLER while it moves."""
    for _attempt in range(attempts):
        metadata = _metadata(bootstrap)
        brokers = {int(b.node_id): (b.host, int(b.port)) for b in metadata.brokers}
        controller = int(metadata.controller_id)
        if controller in brokers:
            host, port = brokers[controller]
            response = send_request(host, port, request, timeout=40)
            if getattr(response, "error_code", ErrorCode.none) != ErrorCode.not_controller:
                return response
        time.sleep(0.5)
    raise ToolError("could not reach the controller")


# --- reassign ---------------------------------------------------------------------------


def parse_reassignment_json(text: str) -> dict[TopicPartition, list[int]]:
    """Kafka's format: {"version":1,"partitions":[{"topic","partition","replicas"}]}
    (`log_dirs` is accepted and ignored)."""
    obj = json.loads(text)
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
    bootstrap: str, wanted: Mapping[TopicPartition, list[int] | None]
) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
    """AlterPartitionReassignments; a None target cancels that partition's move."""
    cls = request_type(ALTER_PARTITION_REASSIGNMENTS, 0)
    module = __import__(cls.__module__, fromlist=["ReassignableTopic"])
    by_topic: dict[str, list[Any]] = {}
    for tp, replicas in sorted(wanted.items()):
        by_topic.setdefault(tp.topic, []).append(
            module.ReassignablePartition(
                partition_index=tp.partition,
                replicas=None if replicas is None else tuple(replicas),
            )
        )
    request = cls(
        timeout=REQUEST_TIMEOUT,
        topics=tuple(
            module.ReassignableTopic(name=name, partitions=tuple(parts))
            for name, parts in by_topic.items()
        ),
    )
    response = send_to_controller(bootstrap, request)
    if response.error_code != ErrorCode.none:
        raise ToolError(f"{response.error_code.name}: {response.error_message}")
    return {
        TopicPartition(t.name, int(p.partition_index)): (p.error_code, p.error_message)
        for t in response.responses
        for p in t.partitions
    }


def ongoing_reassignments(bootstrap: str) -> dict[TopicPartition, Any]:
    request = request_type(LIST_PARTITION_REASSIGNMENTS, 0)(timeout=REQUEST_TIMEOUT, topics=None)
    response = send_to_controller(bootstrap, request)
    if response.error_code != ErrorCode.none:
        raise ToolError(f"{response.error_code.name}: {response.error_message}")
    return {
        TopicPartition(t.name, int(p.partition_index)): p
        for t in response.topics
        for p in t.partitions
    }


def verify_reassignment(
    bootstrap: str, wanted: dict[TopicPartition, list[int]]
) -> dict[TopicPartition, str]:
    """tp -> "completed" | "in progress" | "failed" (assigned elsewhere, nothing moving)."""
    ongoing = ongoing_reassignments(bootstrap)
    assigned = _partition_replicas(_metadata(bootstrap))
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


def list_reassignments(bootstrap: str) -> None:
    """Kafka's --list: every partition being moved, with AR, adding and removing."""
    ongoing = ongoing_reassignments(bootstrap)
    if not ongoing:
        console.print("No partition reassignments found.")
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


def cancel_reassignments(bootstrap: str, wanted: dict[TopicPartition, list[int]]) -> None:
    """Kafka's --cancel: the listed partitions go back to the replicas they had before
    their move started (AlterPartitionReassignments with null replicas)."""
    results = execute_reassignment(bootstrap, dict.fromkeys(wanted))
    cancelled = sorted(tp for tp, (code, _m) in results.items() if code == ErrorCode.none)
    if cancelled:
        names = ",".join(f"{tp.topic}-{tp.partition}" for tp in cancelled)
        console.print(f"Successfully cancelled partition reassignments for: {names}")
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
    bootstrap: str, changes: Sequence[tuple[str, str, Mapping[str, str | None]]]
) -> None:
    """IncrementalAlterConfigs: (resource type "topic"|"broker", name, key -> value or
    None to delete)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    resources = [
        ConfigResource(
            ResourceType.TOPIC if kind == "topic" else ResourceType.BROKER,
            name,
            incremental_configs=[
                ConfigEntry(
                    key,
                    value or "",
                    incremental_operation=AlterConfigOpType.DELETE
                    if value is None
                    else AlterConfigOpType.SET,
                )
                for key, value in entries.items()
            ],
        )
        for kind, name, entries in changes
    ]
    # One resource per call: librdkafka sends a broker's to that broker itself.
    for resource in resources:
        for future in admin.incremental_alter_configs([resource]).values():
            try:
                future.result(timeout=30)
            except KafkaException as e:
                raise ToolError(f"altering configs of {resource}: {e.args[0].str()}") from e


def set_throttle(bootstrap: str, wanted: Mapping[TopicPartition, list[int]], rate: int) -> None:
    """What --execute --throttle sets (Kafka's ReassignPartitionsCommand): the rate on
    every broker taking part, the replica lists on each moving topic."""
    current = {
        (tp.topic, tp.partition): replicas
        for tp, (_leader, replicas) in _partition_replicas(_metadata(bootstrap)).items()
    }
    topics, brokers = reassignment_throttles(
        current, {(tp.topic, tp.partition): r for tp, r in wanted.items()}
    )
    _alter_configs(
        bootstrap,
        [("broker", str(b), {LEADER_RATE: str(rate), FOLLOWER_RATE: str(rate)}) for b in brokers]
        + [("topic", topic, dict(lists)) for topic, lists in topics.items()],
    )
    console.print(
        f"Throttle of {rate} B/s set on brokers {sorted(brokers)}. Run --verify until the "
        "reassignment completes: it removes the throttle."
    )


def clear_throttle(bootstrap: str, topics: set[str]) -> None:
    """--verify once every listed partition completed: the throttle goes, as in Kafka."""
    brokers = sorted(_broker_ids(bootstrap))
    _alter_configs(
        bootstrap,
        [("broker", str(b), {LEADER_RATE: None, FOLLOWER_RATE: None}) for b in brokers]
        + [
            ("topic", topic, {LEADER_REPLICAS: None, FOLLOWER_REPLICAS: None})
            for topic in sorted(topics)
        ],
    )
    console.print(f"Clearing broker-level throttles on brokers {brokers}")
    console.print(f"Clearing topic-level throttles on topics {sorted(topics)}")


def _broker_ids(bootstrap: str) -> list[int]:
    return [int(b.node_id) for b in _metadata(bootstrap).brokers]


def generate_reassignment(
    bootstrap: str, topics_json: str, broker_list: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(current, proposed) in Kafka's reassignment JSON for --generate."""
    obj = json.loads(topics_json)
    names = [str(t["topic"]) for t in obj.get("topics", [])]
    if not names:
        raise ToolError("--topics-to-move-json-file lists no topics")
    try:
        brokers = [int(b) for b in broker_list.split(",") if b.strip()]
    except ValueError as e:
        raise ToolError(f"--broker-list {broker_list!r}: expected ids like 1,2,3") from e
    assigned = _partition_replicas(_metadata(bootstrap))
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
                {"topic": t, "partition": p, "replicas": r}
                for t, parts in sorted(layout.items())
                for p, r in sorted(parts.items())
            ],
        }

    return as_json(current), as_json(proposed)


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
) -> None:
    """Move partitions to new replicas (kafka-reassign-partitions.sh)."""
    _check_command_config(command_config, "strandline-reassign")
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
        try:
            now, proposed = generate_reassignment(
                bootstrap_server, topics_to_move_json_file.read_text(), broker_list
            )
        except (ToolError, OSError, ValueError, KeyError, TypeError) as e:
            raise _fail(str(e)) from e
        console.print("Current partition replica assignment")
        console.print(json.dumps(now), soft_wrap=True)
        console.print("Proposed partition reassignment configuration")
        console.print(json.dumps(proposed), soft_wrap=True)
        return
    if list_:
        if reassignment_json_file is not None:
            raise _fail("--list takes no --reassignment-json-file")
        try:
            list_reassignments(bootstrap_server)
        except (ToolError, OSError, ValueError) as e:
            raise _fail(str(e)) from e
        return
    if reassignment_json_file is None:
        raise _fail(f"{chosen[0]} needs --reassignment-json-file")
    try:
        wanted = parse_reassignment_json(reassignment_json_file.read_text())
        if cancel:
            cancel_reassignments(bootstrap_server, wanted)
        elif execute:
            current = _partition_replicas(_metadata(bootstrap_server))
            console.print("Current partition replica assignment")
            console.print(
                json.dumps(
                    {
                        "version": 1,
                        "partitions": [
                            {
                                "topic": tp.topic,
                                "partition": tp.partition,
                                "replicas": current[tp][1],
                            }
                            for tp in sorted(wanted)
                            if tp in current
                        ],
                    }
                ),
                soft_wrap=True,
            )
            if throttle is not None:
                set_throttle(bootstrap_server, wanted, throttle)
            results = execute_reassignment(bootstrap_server, wanted)
            failed = {tp: r for tp, r in results.items() if r[0] != ErrorCode.none}
            for tp, (code, message) in sorted(failed.items()):
                err_console.print(f"{tp.topic}-{tp.partition}: {code.name} {message or ''}")
            if failed:
                raise typer.Exit(code=1)
            console.print(
                f"Successfully started partition reassignments for {len(results)} partitions"
            )
        else:
            status = verify_reassignment(bootstrap_server, wanted)
            for tp, state in status.items():
                console.print(f"Reassignment of partition {tp.topic}-{tp.partition} is {state}.")
            if all(state == "completed" for state in status.values()):
                clear_throttle(bootstrap_server, {tp.topic for tp in wanted})
            if any(s == "failed" for s in status.values()):
                raise typer.Exit(code=1)
    except (ToolError, OSError, ValueError, KeyError) as e:
        raise _fail(str(e)) from e


# --- elect ----------------------------------------------------------------------------


def elect_leaders(
    bootstrap: str, election_type: int, tps: list[TopicPartition] | None
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
    response = send_to_controller(bootstrap, request)
    if response.error_code != ErrorCode.none:
        raise ToolError(f"{response.error_code.name}")
    return {
        TopicPartition(r.topic, int(p.partition_id)): (p.error_code, p.error_message)
        for r in response.replica_election_results
        for p in r.partition_result
    }


def elect(
    bootstrap_server: str = BOOTSTRAP,
    election_type: str = typer.Option(..., "--election-type", help="preferred or unclean"),
    topic: str | None = typer.Option(None, "--topic"),
    partition: int | None = typer.Option(None, "--partition"),
    all_topic_partitions: bool = typer.Option(False, "--all-topic-partitions"),
    command_config: Path | None = COMMAND_CONFIG,
) -> None:
    """Elect leaders: preferred replicas or, for offline partitions, unclean
    (kafka-leader-election.sh)."""
    _check_command_config(command_config, "strandline-elect")
    if election_type not in ELECTION_TYPES:
        raise _fail("--election-type must be preferred or unclean")
    if all_topic_partitions == (topic is not None):
        raise _fail("give either --topic T --partition P or --all-topic-partitions")
    if topic is not None and partition is None:
        raise _fail("--topic needs --partition")
    tps = None if all_topic_partitions else [TopicPartition(str(topic), int(partition or 0))]
    try:
        results = elect_leaders(bootstrap_server, ELECTION_TYPES[election_type], tps)
    except (ToolError, OSError) as e:
        raise _fail(str(e)) from e
    elected = [tp for tp, (code, _m) in results.items() if code == ErrorCode.none]
    if elected:
        names = ", ".join(f"{tp.topic}-{tp.partition}" for tp in sorted(elected))
        console.print(f"Successfully completed leader election ({election_type}) for: {names}")
    if not results:
        console.print("Valid replica already elected for every partition")
    failed = False
    for tp, (code, message) in sorted(results.items()):
        if code == ErrorCode.election_not_needed:
            console.print(f"Valid replica already elected for partition {tp.topic}-{tp.partition}")
        elif code != ErrorCode.none:
            failed = True
            err_console.print(
                f"Election for {tp.topic}-{tp.partition} failed: {code.name} {message}"
            )
    if failed:
        raise typer.Exit(code=1)


# --- verify-replicas ----------------------------------------------------------------------


def high_watermarks(cluster_dir: Path, bootstrap: str | None) -> dict[TopicPartition, int]:
    """HWs from a running cluster (ListOffsets latest via a consumer), else from the
    brokers' replication-offset-checkpoint files (the largest a replica wrote)."""
    if bootstrap:
        from confluent_kafka import Consumer
        from confluent_kafka import TopicPartition as CkTopicPartition

        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "strandline-verify"})
        try:
            metadata = consumer.list_topics(timeout=10)
            out = {}
            for name, topic in metadata.topics.items():
                for p in topic.partitions:
                    _low, high = consumer.get_watermark_offsets(
                        CkTopicPartition(name, p), timeout=10
                    )
                    out[TopicPartition(name, p)] = int(high)
            return out
        finally:
            consumer.close()
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
    _check_command_config(command_config, "strandline-replica-verification")
    if bootstrap_server is not None:
        from strandline.client.replica_verification import VerificationError, verify

        try:
            results = verify(bootstrap_server, None if topic is None else [topic])
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
    bootstrap = None
    if not offline:
        from strandline.cli.local_cluster import ClusterError, LocalCluster

        try:
            cluster = LocalCluster.load(data_dir)
            if any(cluster.is_running(b) for b in cluster.brokers):
                bootstrap = cluster.bootstrap
        except ClusterError:
            bootstrap = None
    hws = high_watermarks(data_dir, bootstrap)
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
