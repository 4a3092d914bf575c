"""`strandline reassign`, `strandline elect`, `strandline verify-replicas` (seed 001's tools).

`reassign` and `elect` talk to the cluster over the Kafka protocol
(AlterPartitionReassignments/ListPartitionReassignments, ElectLeaders), sending to the
controller that Metadata names, as Kafka's admin client does. `verify-replicas` reads
a local cluster's segment files directly.
"""

from __future__ import annotations

import datetime
import json
import time
from pathlib import Path
from typing import Any

import typer
from kio.schema.errors import ErrorCode
from rich.console import Console
from rich.table import Table

from strandline.client.connection import send_request
from strandline.protocol.codec import request_type
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
    bootstrap: str, wanted: dict[TopicPartition, list[int]]
) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
    cls = request_type(ALTER_PARTITION_REASSIGNMENTS, 0)
    module = __import__(cls.__module__, fromlist=["ReassignableTopic"])
    by_topic: dict[str, list[Any]] = {}
    for tp, replicas in sorted(wanted.items()):
        by_topic.setdefault(tp.topic, []).append(
            module.ReassignablePartition(partition_index=tp.partition, replicas=tuple(replicas))
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


def reassign(
    bootstrap_server: str = BOOTSTRAP,
    reassignment_json_file: Path = typer.Option(  # noqa: B008 - typer's idiom
        ..., "--reassignment-json-file", help="Kafka's reassignment JSON"
    ),
    execute: bool = typer.Option(False, "--execute", help="Start the reassignment"),
    verify: bool = typer.Option(False, "--verify", help="Report whether it completed"),
) -> None:
    """Move partitions to new replicas (kafka-reassign-partitions.sh)."""
    if execute == verify:
        raise _fail("give exactly one of --execute and --verify")
    try:
        wanted = parse_reassignment_json(reassignment_json_file.read_text())
        if execute:
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
) -> None:
    """Elect leaders: preferred replicas or, for offline partitions, unclean
    (kafka-leader-election.sh)."""
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
    data_dir: Path = typer.Option(..., "--data-dir", help="A local cluster's directory"),  # noqa: B008
    topic: str | None = typer.Option(None, "--topic", help="Only this topic"),
    offline: bool = typer.Option(
        False, "--offline", help="Take HWs from checkpoint files, not from the running cluster"
    ),
) -> None:
    """Check that every replica holds identical bytes below the high watermark
    (kafka-replica-verification.sh over the segment files)."""
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
    table = Table("partition", "high watermark", "replicas (bytes compared)", "consistent")
    inconsistent = 0
    for tp in sorted(replica_verify.partitions_in(list(data_dirs.values()))):
        if topic is not None and tp.topic != topic or tp not in hws:
            continue
        dirs = {
            b: replica_verify.partition_dir(d, tp)
            for b, d in data_dirs.items()
            if replica_verify.partition_dir(d, tp).is_dir()
        }
        result = replica_verify.compare_replicas(tp, dirs, hws[tp])
        inconsistent += not result.consistent
        table.add_row(
            f"{tp.topic}-{tp.partition}",
            str(hws[tp]),
            ", ".join(f"{b}:{n}" for b, n in result.sizes.items()),
            "yes" if result.consistent else f"[red]NO[/] (differs: {list(result.mismatched)})",
        )
    console.print(table)
    if inconsistent:
        err_console.print(f"{inconsistent} partition(s) have replicas that differ below the HW")
        raise typer.Exit(code=1)
