"""Consumer-group admin operations over the one admin client (strandline.client.admin):
what kafka-consumer-groups.sh asks a cluster, and what it learns, as data.

Each operation takes an open `AdminClient` and combines its group requests (ListGroups,
FindCoordinator, DescribeGroups, OffsetFetch, ListOffsets, OffsetCommit, DeleteGroups,
OffsetDelete) into one answer: a group's partitions with their lag, its members and
their assignments, the results of a deletion, a reset plan (planned by the pure
strandline.client.offset_reset). Rendering them is the command line's business.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment
from kio.schema.errors import ErrorCode

from strandline.client.admin import AdminClient, AdminError
from strandline.client.offset_reset import ResetSpec, new_offsets, resettable
from strandline.types import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, TopicPartition


class GroupToolError(AdminError):
    """Reported to the user as one line, exit code 1."""


# What the errors users meet mean for the group they named.
_GROUP_ERRORS = {
    ErrorCode.group_id_not_found: "does not exist",
    ErrorCode.non_empty_group: "has active members; stop its consumers first",
    ErrorCode.invalid_group_id: "is not a valid group id",
    ErrorCode.group_authorization_failed: "is not accessible to this client",
}


def group_error(group: str, code: ErrorCode, failed: str = "") -> str:
    """E.g. "group 'g' does not exist (GROUP_ID_NOT_FOUND)", or with `failed`="was not
    deleted": "group 'g' was not deleted: it does not exist (GROUP_ID_NOT_FOUND)"."""
    what = _GROUP_ERRORS.get(code)
    if not failed:
        return f"group {group!r} {what or 'failed'} ({code.name.upper()})"
    because = f": it {what}" if what else ""
    return f"group {group!r} {failed}{because} ({code.name.upper()})"


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


def assignment(protocol_type: str, member: Any) -> list[TopicPartition]:
    """A consumer-protocol member's assigned partitions; none for other protocols, or
    while the group rebalances (DescribeGroups then carries no assignment)."""
    if protocol_type != "consumer" or not member.member_assignment:
        return []
    try:
        decoded = ConsumerProtocolAssignment.decode(bytes(member.member_assignment))
        return sorted(TopicPartition(tp.topic, tp.partition) for tp in decoded.partitions())
    except Exception:  # noqa: BLE001 - a client's own bytes: show no assignment, not a crash
        return []


def _assigned(described: Any) -> dict[TopicPartition, Any]:
    return {
        tp: member
        for member in described.members
        for tp in assignment(described.protocol_type, member)
    }


def topic_partitions(client: AdminClient) -> dict[str, list[int]]:
    """Topics the client's last Metadata named that exist, with their partitions."""
    return {name: list(t.partitions) for name, t in client.topics.items()}


def check_topics(client: AdminClient, wanted: dict[str, list[int] | None]) -> None:
    """Unknown topics and partitions fail here, with their names, before any request."""
    known = topic_partitions(client)
    for topic, partitions in wanted.items():
        if topic not in known:
            raise GroupToolError(f"topic {topic!r} does not exist")
        missing = sorted(set(partitions or ()) - set(known[topic]))
        if missing:
            raise GroupToolError(
                f"topic {topic!r} has no partition {', '.join(map(str, missing))} "
                f"(it has {len(known[topic])})"
            )


async def group_ids(client: AdminClient, groups: list[str], all_groups: bool) -> list[str]:
    """The named groups (each once), or with `all_groups` every group of the cluster."""
    if not all_groups:
        return list(dict.fromkeys(groups))
    return sorted({g for g, _type, _state, _broker in await client.list_groups()})


async def partition_rows(client: AdminClient, group: str, described: Any) -> list[PartitionRow]:
    """One row per committed or assigned partition: offset, log end, owner."""
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


async def describe_group(client: AdminClient, group: str) -> tuple[str, list[PartitionRow]]:
    """The group's state and one row per committed or assigned partition."""
    described = await client.describe(group)
    return described.group_state, await partition_rows(client, group, described)


async def describe_groups(
    client: AdminClient, groups: list[str], all_groups: bool, offsets: bool
) -> list[GroupView]:
    """One view per group (--all-groups: every group ListGroups finds); the partition rows
    only when `offsets`, since they cost an OffsetFetch and ListOffsets per group."""
    views = []
    for group in await group_ids(client, groups, all_groups):
        node, (host, port) = await client.find_coordinator(group)
        described = await client.describe(group)
        members = [
            MemberView(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host or "-",
                assignment(described.protocol_type, m),
            )
            for m in described.members
        ]
        rows = []
        if offsets and described.group_state != "Dead":
            rows = await partition_rows(client, group, described)
        views.append(
            GroupView(
                group,
                described.group_state,
                (node, host, port),
                described.protocol_type,
                described.protocol_data,
                members,
                rows,
            )
        )
    return views


async def delete_groups(
    client: AdminClient, groups: list[str], all_groups: bool
) -> dict[str, ErrorCode]:
    """DeleteGroups, one group at a time: each group's answer."""
    return {
        group: await client.delete_group(group)
        for group in await group_ids(client, groups, all_groups)
    }


async def delete_offsets(
    client: AdminClient, group: str, topics: dict[str, list[int] | None]
) -> dict[TopicPartition, ErrorCode]:
    """OffsetDelete for the named partitions (a bare topic: all of its partitions)."""
    await client.metadata(topics)
    check_topics(client, topics)
    known = topic_partitions(client)
    partitions = [
        TopicPartition(topic, p)
        for topic, ps in topics.items()
        for p in (known[topic] if ps is None else ps)
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
        raise GroupToolError(group_error(group, code))
    return results


async def _reset_partitions(
    client: AdminClient,
    group: str,
    topics: list[str] | None,
    only: dict[str, list[int] | None] | None,
    from_file: dict[TopicPartition, int] | None,
    committed: dict[TopicPartition, int],
) -> list[TopicPartition]:
    """The partitions a reset moves: the file's, the topics' (`only` narrowing them to
    some partitions), else those the group has committed offsets for."""
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
        check_topics(client, {t: (only or {}).get(t) for t in topics})
        chosen = only or {}
        known = topic_partitions(client)
        partitions = sorted(
            tp
            for tp in client.leaders
            if tp.topic in topics and tp.partition in (chosen.get(tp.topic) or known[tp.topic])
        )
    else:
        partitions = sorted(committed)
        await client.metadata({tp.topic for tp in partitions})
    if not partitions:
        raise GroupToolError(f"group {group!r} has no committed offsets; name --topic")
    return partitions


async def reset_offsets(
    client: AdminClient,
    group: str,
    topics: list[str] | None,
    spec: ResetSpec,
    execute: bool,
    *,
    only: dict[str, list[int] | None] | None = None,
) -> tuple[str, dict[TopicPartition, int]]:
    """The group's state and its new offsets per partition (clamped to the log's range);
    committed if `execute`. Like Kafka, only an inactive (Empty or unknown) group may be
    reset. `only` narrows `topics` to some of their partitions (Kafka's --topic t:0,1)."""
    described = await client.describe(group)
    committed = await client.committed(group)
    partitions = await _reset_partitions(client, group, topics, only, spec.from_file, committed)
    earliest = await client.list_offsets(partitions, EARLIEST_TIMESTAMP)
    latest = await client.list_offsets(partitions, LATEST_TIMESTAMP)
    stamp = spec.timestamp(datetime.datetime.now(datetime.UTC))
    by_time = None if stamp is None else await client.list_offsets(partitions, stamp)
    new = new_offsets(spec, partitions, committed, earliest, latest, by_time)
    state = described.group_state
    if execute:
        if not resettable(state):
            raise GroupToolError(
                f"group {group!r} is {state}: stop its consumers before resetting offsets"
            )
        await client.commit(group, new)
    return state, new
