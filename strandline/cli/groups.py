"""`strandline groups`: list, describe and reset consumer groups, like kafka-consumer-groups.

Everything goes over the Kafka protocol (Metadata, ListGroups on every broker,
FindCoordinator, DescribeGroups, OffsetFetch, ListOffsets, OffsetCommit), so it works
against any broker of the cluster, or any Kafka-compatible one.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import typer
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment
from kio.schema.errors import ErrorCode
from kio.static.constants import uuid_zero
from rich.console import Console
from rich.table import Table

from strandline.client.connection import KafkaConnection
from strandline.protocol.messages import build, request_module
from strandline.types import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, TopicPartition

app = typer.Typer(help="Consumer groups: list, describe, reset offsets.", no_args_is_help=True)
console = Console()

BOOTSTRAP_HELP = "HOST:PORT of any broker"
REQUEST_TIMEOUT_S = 15.0
COORDINATOR_RETRY_S = 0.2
COORDINATOR_WAIT_S = 15.0


class GroupToolError(RuntimeError):
    """Reported to the user as one line, exit code 1."""


def _request(api_key: int, version: int, message: str, /, **fields: Any) -> Any:
    return build(getattr(request_module(api_key, version), message), **fields)


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.strip().rpartition(":")
    if not host or not port.isdigit():
        raise typer.BadParameter(f"{address!r} is not HOST:PORT")
    return host, int(port)


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


class ClusterClient:
    """Connections by broker address, opened on first use."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = _split(bootstrap.split(",")[0])
        self._connections: dict[tuple[str, int], KafkaConnection] = {}
        self.brokers: dict[int, tuple[str, int]] = {}
        self.leaders: dict[TopicPartition, int] = {}

    async def __aenter__(self) -> ClusterClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        for connection in self._connections.values():
            await connection.close()

    async def send(self, address: tuple[str, int], request: Any) -> Any:
        connection = self._connections.get(address)
        if connection is None or connection.closed:
            connection = await KafkaConnection.open(*address, client_id="strandline-groups")
            self._connections[address] = connection
        return await connection.send(request, timeout=REQUEST_TIMEOUT_S)

    async def metadata(self, topics: Iterable[str] | None = None) -> None:
        wanted = (
            None
            if topics is None
            else tuple(
                _request(3, 9, "MetadataRequestTopic", name=t, topic_id=uuid_zero) for t in topics
            )
        )
        response = await self.send(
            self.bootstrap,
            _request(
                3,
                9,
                "MetadataRequest",
                topics=wanted,
                allow_auto_topic_creation=False,
                include_cluster_authorized_operations=False,
                include_topic_authorized_operations=False,
            ),
        )
        self.brokers = {int(b.node_id): (b.host, int(b.port)) for b in response.brokers}
        for topic in response.topics:
            for p in topic.partitions:
                self.leaders[TopicPartition(topic.name, p.partition_index)] = int(p.leader_id)

    async def coordinator(self, group: str) -> tuple[str, int]:
        """FindCoordinator, retried while the coordinator loads or is being created."""
        deadline = asyncio.get_running_loop().time() + COORDINATOR_WAIT_S
        while True:
            response = await self.send(
                self.bootstrap, _request(10, 2, "FindCoordinatorRequest", key=group, key_type=0)
            )
            if response.error_code == ErrorCode.none:
                return response.host, int(response.port)
            if asyncio.get_running_loop().time() > deadline:
                raise GroupToolError(
                    f"no coordinator for group {group!r}: {ErrorCode(response.error_code).name}"
                )
            await asyncio.sleep(COORDINATOR_RETRY_S)

    async def list_groups(self) -> list[tuple[str, str, str, int]]:
        await self.metadata([])
        found = []
        for broker_id, address in sorted(self.brokers.items()):
            response = await self.send(
                address, _request(16, 4, "ListGroupsRequest", states_filter=())
            )
            if response.error_code != ErrorCode.none:
                raise GroupToolError(
                    f"broker {broker_id}: ListGroups failed with "
                    f"{ErrorCode(response.error_code).name}"
                )
            found += [
                (g.group_id, g.protocol_type, g.group_state, broker_id) for g in response.groups
            ]
        return sorted(found)

    async def describe(self, group: str) -> Any:
        address = await self.coordinator(group)
        response = await self.send(
            address,
            _request(
                15, 5, "DescribeGroupsRequest", groups=(group,), include_authorized_operations=False
            ),
        )
        (described,) = response.groups
        if described.error_code != ErrorCode.none:
            raise GroupToolError(
                f"DescribeGroups {group!r}: {ErrorCode(described.error_code).name}"
            )
        return described

    async def committed(self, group: str) -> dict[TopicPartition, int]:
        address = await self.coordinator(group)
        response = await self.send(
            address,
            _request(9, 7, "OffsetFetchRequest", group_id=group, topics=None, require_stable=False),
        )
        if response.error_code != ErrorCode.none:
            raise GroupToolError(f"OffsetFetch {group!r}: {ErrorCode(response.error_code).name}")
        return {
            TopicPartition(t.name, p.partition_index): int(p.committed_offset)
            for t in response.topics
            for p in t.partitions
            if p.committed_offset >= 0
        }

    async def list_offsets(
        self, partitions: Iterable[TopicPartition], timestamp: int
    ) -> dict[TopicPartition, int]:
        """ListOffsets at each partition's leader: -2 earliest, -1 latest, else by time
        (a time past the last record answers -1; the caller maps it to the log end)."""
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in partitions:
            by_leader.setdefault(self.leaders.get(tp, -1), []).append(tp)
        out: dict[TopicPartition, int] = {}
        for leader, tps in by_leader.items():
            if leader not in self.brokers:
                continue
            topics: dict[str, list[int]] = {}
            for tp in tps:
                topics.setdefault(tp.topic, []).append(tp.partition)
            request = _request(
                2,
                7,
                "ListOffsetsRequest",
                replica_id=-1,
                isolation_level=0,
                topics=tuple(
                    _request(
                        2,
                        7,
                        "ListOffsetsTopic",
                        name=name,
                        partitions=tuple(
                            _request(
                                2,
                                7,
                                "ListOffsetsPartition",
                                partition_index=p,
                                current_leader_epoch=-1,
                                timestamp=timestamp,
                            )
                            for p in ps
                        ),
                    )
                    for name, ps in topics.items()
                ),
            )
            response = await self.send(self.brokers[leader], request)
            for t in response.topics:
                for p in t.partitions:
                    if p.error_code == ErrorCode.none:
                        out[TopicPartition(t.name, p.partition_index)] = int(p.offset)
        return out

    async def commit(self, group: str, offsets: dict[TopicPartition, int]) -> None:
        address = await self.coordinator(group)
        topics: dict[str, list[tuple[int, int]]] = {}
        for tp, offset in sorted(offsets.items()):
            topics.setdefault(tp.topic, []).append((tp.partition, offset))
        request = _request(
            8,
            7,
            "OffsetCommitRequest",
            group_id=group,
            generation_id_or_member_epoch=-1,
            member_id="",
            group_instance_id=None,
            topics=tuple(
                _request(
                    8,
                    7,
                    "OffsetCommitRequestTopic",
                    name=name,
                    partitions=tuple(
                        _request(
                            8,
                            7,
                            "OffsetCommitRequestPartition",
                            partition_index=p,
                            committed_offset=o,
                            committed_leader_epoch=-1,
                            committed_metadata="",
                        )
                        for p, o in ps
                    ),
                )
                for name, ps in topics.items()
            ),
        )
        response = await self.send(address, request)
        failed = [
            f"{t.name}-{p.partition_index}: {ErrorCode(p.error_code).name}"
            for t in response.topics
            for p in t.partitions
            if p.error_code != ErrorCode.none
        ]
        if failed:
            raise GroupToolError("OffsetCommit failed for " + ", ".join(failed))


def _assigned(described: Any) -> dict[TopicPartition, Any]:
    owners: dict[TopicPartition, Any] = {}
    if described.protocol_type != "consumer":
        return owners
    for member in described.members:
        if not member.member_assignment:
            continue
        assignment = ConsumerProtocolAssignment.decode(bytes(member.member_assignment))
        for tp in assignment.partitions():
            owners[TopicPartition(tp.topic, tp.partition)] = member
    return owners


async def describe_group(bootstrap: str, group: str) -> tuple[str, list[PartitionRow]]:
    """The group's state and one row per committed or assigned partition."""
    async with ClusterClient(bootstrap) as client:
        described = await client.describe(group)
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
        return described.group_state, rows


async def plan_reset(
    bootstrap: str,
    group: str,
    topics: list[str] | None,
    to_earliest: bool,
    to_latest: bool,
    to_datetime: datetime.datetime | None,
    shift_by: int | None,
    execute: bool,
) -> tuple[str, dict[TopicPartition, int]]:
    """New offsets per partition (clamped to the log's range); committed if `execute`.
    Like Kafka, only an inactive (Empty or unknown) group may be reset."""
    async with ClusterClient(bootstrap) as client:
        described = await client.describe(group)
        committed = await client.committed(group)
        if topics:
            await client.metadata(topics)
            partitions = sorted(tp for tp in client.leaders if tp.topic in topics)
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
        elif to_datetime is not None:
            stamp = int(to_datetime.timestamp() * 1000)
            found = await client.list_offsets(partitions, stamp)
            targets = {tp: (o if o >= 0 else latest[tp]) for tp, o in found.items()}
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


def _fail(error: Exception) -> typer.Exit:
    console.print(f"[red]error:[/red] {error}")
    return typer.Exit(1)


@app.command("list")
def list_command(
    bootstrap_server: str = typer.Option(..., "--bootstrap-server", help=BOOTSTRAP_HELP),
) -> None:
    """Every group of the cluster (ListGroups on every broker)."""
    try:
        groups = asyncio.run(_list(bootstrap_server))
    except (GroupToolError, OSError) as e:
        raise _fail(e) from e
    table = Table("GROUP", "PROTOCOL-TYPE", "STATE", "COORDINATOR")
    for group_id, protocol_type, state, broker_id in groups:
        table.add_row(group_id, protocol_type or "-", state, str(broker_id))
    console.print(table)


async def _list(bootstrap: str) -> list[tuple[str, str, str, int]]:
    async with ClusterClient(bootstrap) as client:
        return await client.list_groups()


@app.command("describe")
def describe_command(
    group: str = typer.Argument(..., help="group id"),
    bootstrap_server: str = typer.Option(..., "--bootstrap-server", help=BOOTSTRAP_HELP),
) -> None:
    """Per partition: current (committed) offset, log end offset, lag and owner."""
    try:
        state, rows = asyncio.run(describe_group(bootstrap_server, group))
    except (GroupToolError, OSError) as e:
        raise _fail(e) from e
    table = Table(
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
        title=f"group {group} ({state})",
    )
    for row in rows:
        table.add_row(
            group,
            row.tp.topic,
            str(row.tp.partition),
            _fmt(row.current),
            _fmt(row.log_end),
            _fmt(row.lag),
            row.member_id,
            row.host,
            row.client_id,
        )
    console.print(table)


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
    except (GroupToolError, OSError) as e:
        raise _fail(e) from e
    table = Table(
        "GROUP",
        "TOPIC",
        "PARTITION",
        "NEW-OFFSET",
        title=f"group {group} ({state}): {'committed' if execute else 'dry run'}",
    )
    for tp, offset in sorted(new.items()):
        table.add_row(group, tp.topic, str(tp.partition), str(offset))
    console.print(table)
