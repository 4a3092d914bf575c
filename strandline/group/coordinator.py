"""The classic group coordinator as a pure state machine (Kafka's GroupCoordinator).

Requests and timer ticks go in with an explicit `now_ms`; effects come out: `Respond`
(answer a possibly long-parked request) and `AppendToOffsetsTopic` (group metadata and
offset commits, tombstones on deletion/expiry). The shell calls `tick(now_ms)` no later
than `next_deadline_ms()`; that single timer covers Kafka's DelayedJoin,
InitialDelayedJoin, DelayedHeartbeat, pending-member expiry and the offsets cleanup.

The coordinator never computes an assignment. It relays each member's protocol metadata
to the leader and the leader's assignment to each member, byte for byte. That is all the
eager assignors (range, roundrobin) and the incremental cooperative-sticky assignor
need from the classic protocol: cooperative-sticky encodes owned partitions in the
subscription and revokes in a follow-up rebalance, both decided by the clients.

Transactional offsets (KIP-98): TxnOffsetCommit writes a transactional batch of the
producer and keeps its offsets pending per (group, producer id) until the producer's
marker on the offsets partition is reported (`complete_txn_offsets`): commit makes each
the committed offset unless a later-written one is already committed, abort drops them.
OffsetFetch with `require_stable` answers UNSTABLE_OFFSET_COMMIT where offsets are
pending. Pending offsets keep their group alive: expiry never retires it, DeleteGroups
answers NON_EMPTY_GROUP, and deleting or expiring a committed offset leaves the pending
one of that partition alone, so memory always matches what a replay of the log gives.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Callable, Iterable
from typing import TypeAlias

from kio.schema.errors import ErrorCode

from strandline.group.loading import load as replay_records
from strandline.group.metadata import GroupMetadata, MemberMetadata
from strandline.group.model import (
    UNKNOWN_MEMBER_ID,
    AppendToOffsetsTopic,
    DescribedGroup,
    DescribedMember,
    FetchedOffset,
    GroupConfig,
    GroupState,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeavingMember,
    ListedGroup,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    Respond,
    SyncGroupRequest,
    SyncGroupResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)
from strandline.group.partitioning import partition_for
from strandline.group.records import (
    NO_PRODUCER_ID,
    OffsetCommitValue,
    OffsetsBatch,
    RawRecord,
    group_metadata_record,
    offset_commit_record,
)
from strandline.types import TopicPartition

Effect = Respond | AppendToOffsetsTopic

# Kafka's GroupCoordinator logs each rebalance step at INFO; a slow takeover is explained
# by these lines and nothing else (they cost nothing between rebalances).
log = logging.getLogger(__name__)
E = ErrorCode
AppendCallback: TypeAlias = Callable[[ErrorCode, int], list[Effect]]
# Told also where the batch landed (its base offset), to order offset commits.
PositionedCallback: TypeAlias = Callable[[ErrorCode, int, int], list[Effect]]

# How Kafka's GroupMetadataManager translates a failed append into the client's error.
_GROUP_STORE_ERRORS = {
    E.unknown_topic_or_partition: E.coordinator_not_available,
    E.not_enough_replicas: E.coordinator_not_available,
    E.not_enough_replicas_after_append: E.coordinator_not_available,
    E.not_leader_or_follower: E.not_coordinator,
    E.kafka_storage_error: E.not_coordinator,
    E.request_timed_out: E.rebalance_in_progress,
    E.message_too_large: E.unknown_server_error,
    E.record_list_too_large: E.unknown_server_error,
    E.invalid_fetch_size: E.unknown_server_error,
}
_OFFSET_STORE_ERRORS = {
    **_GROUP_STORE_ERRORS,
    E.request_timed_out: E.request_timed_out,
    E.message_too_large: E.invalid_commit_offset_size,
    E.record_list_too_large: E.invalid_commit_offset_size,
    E.invalid_fetch_size: E.invalid_commit_offset_size,
}


def _no_follow_up(error: ErrorCode, now_ms: int) -> list[Effect]:
    del error, now_ms  # metadata-only writes (Empty group, tombstones): nobody waits
    return []


def _random_member_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4()}"


class GroupCoordinator:
    def __init__(
        self,
        config: GroupConfig,
        offsets_topic_num_partitions: int,
        new_member_id: Callable[[str], str] = _random_member_id,
    ) -> None:
        self.config = config
        self.num_partitions = offsets_topic_num_partitions
        self._new_member_id = new_member_id
        self._groups: dict[str, GroupMetadata] = {}
        self._owned: set[int] = set()
        self._loading: set[int] = set()
        self._next_cleanup_ms: int | None = None
        self._next_append_id = 0
        self._pending_appends: dict[int, PositionedCallback] = {}
        # Groups with offsets of an open transaction, per producer id (Kafka's
        # openGroupsForProducer): where a producer's marker has to look.
        self._producer_groups: dict[int, set[str]] = {}
        # Stands in for a log position when `append_done` is not told one (tests): one
        # past the highest position seen, so later appends order after earlier ones.
        self._position_floor = 0

    # == partition ownership ====================================================================

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def begin_loading(self, partition: int) -> None:
        """This broker became leader of the partition: answer COORDINATOR_LOAD_IN_PROGRESS."""
        self._loading.add(partition)

    def load(
        self, partition: int, records: Iterable[OffsetsBatch | RawRecord], now_ms: int
    ) -> None:
        """Replay the partition's log (batches, or bare non-transactional records) and start
        serving it. Transactions still open at the end of the log keep their offsets
        pending until `complete_txn_offsets`."""
        loaded = replay_records(records)
        for base_offset, index, why in loaded.skipped:
            log.warning(
                "loading __consumer_offsets-%d: skipped record %d of the batch at offset %d: %s",
                partition,
                index,
                base_offset,
                why,
            )
        self._position_floor = max(self._position_floor, loaded.end_position)
        for group_id in loaded.group_ids():
            if self.partition_for(group_id) != partition:
                continue
            value = loaded.groups.get(group_id)
            if value is not None:
                group = GroupMetadata.from_record_value(group_id, value, now_ms)
            else:
                group = GroupMetadata(group_id, state_timestamp_ms=now_ms)
            group.offsets = dict(loaded.offsets.get(group_id, {}))
            group.offset_positions = dict(loaded.positions.get(group_id, {}))
            group.pending_txn_offsets = {
                producer_id: dict(offsets)
                for producer_id, offsets in loaded.pending.get(group_id, {}).items()
            }
            for producer_id in group.pending_txn_offsets:
                self._producer_groups.setdefault(producer_id, set()).add(group_id)
            self._groups[group_id] = group
        self._loading.discard(partition)
        self._owned.add(partition)

    def unload(self, partition: int) -> list[Effect]:
        """Leadership moved away: forget the partition's groups, bounce parked requests."""
        out: list[Effect] = []
        self._owned.discard(partition)
        self._loading.discard(partition)
        for group_id in [g for g in self._groups if self.partition_for(g) == partition]:
            group = self._groups.pop(group_id)
            for producer_id in group.pending_txn_offsets:
                self._forget_producer_group(producer_id, group_id)
            for member in group.members.values():
                self._answer_parked(member, E.not_coordinator, out)
            group.transition_to(GroupState.DEAD, group.state_timestamp_ms)
        return out

    def owns(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self._owned

    def _coordinator_error(self, group_id: str) -> ErrorCode | None:
        partition = self.partition_for(group_id)
        if partition in self._loading:
            return E.coordinator_load_in_progress
        if partition not in self._owned:
            return E.not_coordinator
        return None

    # == JoinGroup ==============================================================================

    def join_group(self, req: JoinGroupRequest, now_ms: int) -> list[Effect]:
        out: list[Effect] = []

        def fail(error: ErrorCode) -> list[Effect]:
            out.append(Respond(req.token, JoinGroupResponse(error, member_id=req.member_id)))
            return out

        if not req.group_id:
            return fail(E.invalid_group_id)
        error = self._coordinator_error(req.group_id)
        if error is not None:
            return fail(error)
        cfg = self.config
        if not (
            cfg.group_min_session_timeout_ms
            <= req.session_timeout_ms
            <= cfg.group_max_session_timeout_ms
        ):
            return fail(E.invalid_session_timeout)

        is_unknown = req.member_id == UNKNOWN_MEMBER_ID
        group = self._groups.get(req.group_id)
        if group is None:
            if not is_unknown:
                return fail(E.unknown_member_id)
            group = GroupMetadata(req.group_id, state_timestamp_ms=now_ms)
            self._groups[req.group_id] = group
        if group.state is GroupState.DEAD:
            # Another thread of Kafka just removed it; the client rediscovers the coordinator.
            return fail(E.coordinator_not_available)
        if not group.supports_protocols(req.protocol_type, req.protocols):
            self._forget_if_unused(group)
            return fail(E.inconsistent_group_protocol)

        if is_unknown:
            self._join_unknown_member(group, req, now_ms, out)
        else:
            self._join_known_member(group, req, now_ms, out)
        self._forget_if_unused(group)
        return out

    def _join_unknown_member(
        self, group: GroupMetadata, req: JoinGroupRequest, now_ms: int, out: list[Effect]
    ) -> None:
        instance_id = req.group_instance_id
        if instance_id is not None and instance_id in group.static_members:
            new_id = self._new_member_id(instance_id)
            self._replace_static_member(group, req, new_id, now_ms, out)
            return
        if len(group.members) + len(group.pending_members) >= self.config.group_max_size:
            out.append(Respond(req.token, JoinGroupResponse(E.group_max_size_reached)))
            return
        if instance_id is not None:
            new_id = self._new_member_id(instance_id)
            self._add_member_and_rebalance(group, req, new_id, now_ms, out)
            return
        new_id = self._new_member_id(req.client_id)
        if req.require_known_member_id:
            # KIP-394: the member comes back with this id, so a lost response leaks no member.
            group.pending_members[new_id] = now_ms + req.session_timeout_ms
            out.append(
                Respond(req.token, JoinGroupResponse(E.member_id_required, member_id=new_id))
            )
            return
        self._add_member_and_rebalance(group, req, new_id, now_ms, out)

    def _join_known_member(
        self, group: GroupMetadata, req: JoinGroupRequest, now_ms: int, out: list[Effect]
    ) -> None:
        member_id = req.member_id
        if member_id in group.pending_members:
            self._add_member_and_rebalance(group, req, member_id, now_ms, out)
            return
        if group.is_static_member_fenced(member_id, req.group_instance_id):
            out.append(
                Respond(req.token, JoinGroupResponse(E.fenced_instance_id, member_id=member_id))
            )
            return
        member = group.members.get(member_id)
        if member is None or group.state in (GroupState.EMPTY, GroupState.DEAD):
            out.append(
                Respond(req.token, JoinGroupResponse(E.unknown_member_id, member_id=member_id))
            )
            return
        if group.state is GroupState.PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, req, now_ms, out)
        elif group.state is GroupState.COMPLETING_REBALANCE:
            if member.matches(req.protocols):
                # The member lost our JoinGroup response: send it again.
                out.append(Respond(req.token, self._current_join_response(group, member_id)))
            else:
                self._update_member_and_rebalance(group, member, req, now_ms, out)
        else:  # Stable
            if group.is_leader(member_id) or not member.matches(req.protocols):
                # The leader rejoining means it wants a new assignment (e.g. metadata changed).
                self._update_member_and_rebalance(group, member, req, now_ms, out)
            else:
                out.append(Respond(req.token, self._current_join_response(group, member_id)))

    def _current_join_response(self, group: GroupMetadata, member_id: str) -> JoinGroupResponse:
        is_leader = group.is_leader(member_id)
        return JoinGroupResponse(
            error=E.none,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=group.leader_id or "",
            member_id=member_id,
            members=group.join_members() if is_leader else (),
        )

    def _add_member_and_rebalance(
        self,
        group: GroupMetadata,
        req: JoinGroupRequest,
        member_id: str,
        now_ms: int,
        out: list[Effect],
    ) -> None:
        member = MemberMetadata(
            member_id=member_id,
            group_instance_id=req.group_instance_id,
            client_id=req.client_id,
            client_host=req.client_host,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            session_timeout_ms=req.session_timeout_ms,
            protocol_type=req.protocol_type,
            protocols=tuple(req.protocols),
            join_token=req.token,
            heartbeat_deadline_ms=now_ms + req.session_timeout_ms,
        )
        group.add(member)
        if group.initial_delay_remaining_ms is not None:
            group.new_member_added = True
        self._maybe_prepare_rebalance(group, now_ms, out)

    def _update_member_and_rebalance(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        req: JoinGroupRequest,
        now_ms: int,
        out: list[Effect],
    ) -> None:
        if member.join_token is not None and member.join_token != req.token:
            # A retried JoinGroup supersedes the earlier one; don't leave it parked forever.
            out.append(
                Respond(
                    member.join_token,
                    JoinGroupResponse(E.rebalance_in_progress, member_id=member.member_id),
                )
            )
        member.protocols = tuple(req.protocols)
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        member.client_id = req.client_id or member.client_id
        member.client_host = req.client_host or member.client_host
        member.join_token = req.token
        self._maybe_prepare_rebalance(group, now_ms, out)

    def _replace_static_member(
        self,
        group: GroupMetadata,
        req: JoinGroupRequest,
        new_id: str,
        now_ms: int,
        out: list[Effect],
    ) -> None:
        assert req.group_instance_id is not None
        old_id = group.static_members[req.group_instance_id]
        old = group.members[old_id]
        # The previous incarnation is fenced: whatever it still waits for fails.
        self._answer_parked(old, E.fenced_instance_id, out)
        member = group.replace_static_member(req.group_instance_id, old_id, new_id)
        member.protocols = tuple(req.protocols)
        member.client_id = req.client_id or member.client_id
        member.client_host = req.client_host or member.client_host
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        member.heartbeat_deadline_ms = now_ms + req.session_timeout_ms

        if group.state is GroupState.STABLE:
            if group.select_protocol() == group.protocol_name:
                # KIP-345: a static member restarting does not cause a rebalance; it keeps
                # its assignment. Persist the new member id so a new coordinator fences the old.
                token, generation = req.token, group.generation_id

                def answer(error: ErrorCode, now_ms: int) -> list[Effect]:
                    del now_ms
                    if error is not E.none:
                        # Not persisted: the member retries; a new id replaces this one again.
                        mapped = _GROUP_STORE_ERRORS.get(error, error)
                        return [Respond(token, JoinGroupResponse(mapped, member_id=new_id))]
                    if self._groups.get(group.group_id) is not group or new_id not in group.members:
                        return [Respond(token, JoinGroupResponse(E.unknown_member_id))]
                    if group.state is not GroupState.STABLE or group.generation_id != generation:
                        # The group moved on while the write was in flight: join the new round.
                        error = E.rebalance_in_progress
                        return [Respond(token, JoinGroupResponse(error, member_id=new_id))]
                    response = self._current_join_response(group, new_id)
                    if group.is_leader(new_id):
                        # v9+: the leader must not recompute what the group already runs on.
                        response = dataclasses.replace(response, skip_assignment=True)
                    return [Respond(token, response)]

                self._append(group, (self._group_record(group),), answer, out)
                return
            member.join_token = req.token
            self._prepare_rebalance(group, now_ms, out)
        elif group.state is GroupState.COMPLETING_REBALANCE:
            member.join_token = req.token
            self._prepare_rebalance(group, now_ms, out)
        else:  # PreparingRebalance: the replacement simply takes part in this rebalance.
            member.join_token = req.token
            self._try_complete_join(group, now_ms, out)

    # == rebalance ==============================================================================

    def _maybe_prepare_rebalance(
        self, group: GroupMetadata, now_ms: int, out: list[Effect]
    ) -> None:
        if group.state in (
            GroupState.STABLE,
            GroupState.COMPLETING_REBALANCE,
            GroupState.EMPTY,
        ):
            self._prepare_rebalance(group, now_ms, out)
        elif group.state is GroupState.PREPARING_REBALANCE:
            self._try_complete_join(group, now_ms, out)

    def _prepare_rebalance(self, group: GroupMetadata, now_ms: int, out: list[Effect]) -> None:
        log.info(
            "preparing to rebalance group %s in state %s with old generation %d",
            group.group_id,
            group.state.value,
            group.generation_id,
        )
        if group.state is GroupState.COMPLETING_REBALANCE:
            # Members waiting in SyncGroup learn the generation they joined is over.
            for member in group.members.values():
                member.assignment = b""
                if member.sync_token is not None:
                    out.append(
                        Respond(member.sync_token, SyncGroupResponse(E.rebalance_in_progress))
                    )
                    member.sync_token = None
        delay = self.config.group_initial_rebalance_delay_ms
        if group.state is GroupState.EMPTY and delay > 0:
            # group.initial.rebalance.delay.ms: wait for more members before the first
            # generation, extending while members keep arriving, up to the rebalance timeout.
            group.join_deadline_ms = now_ms + delay
            group.initial_delay_remaining_ms = max(group.rebalance_timeout_ms - delay, 0)
            group.new_member_added = False
        else:
            group.join_deadline_ms = now_ms + group.rebalance_timeout_ms
            group.initial_delay_remaining_ms = None
        group.transition_to(GroupState.PREPARING_REBALANCE, now_ms)
        self._try_complete_join(group, now_ms, out)

    def _try_complete_join(self, group: GroupMetadata, now_ms: int, out: list[Effect]) -> None:
        if (
            group.state is GroupState.PREPARING_REBALANCE
            and group.initial_delay_remaining_ms is None
            and group.has_all_members_joined()
        ):
            self._complete_join(group, now_ms, out)

    def _complete_join(self, group: GroupMetadata, now_ms: int, out: list[Effect]) -> None:
        # Dynamic members that did not rejoin within the rebalance timeout are out; static
        # ones stay (their session timeout decides), as in Kafka.
        for member in list(group.members.values()):
            if not member.awaiting_join and member.group_instance_id is None:
                group.remove(member.member_id)
        if group.leader_id is not None and not group.members[group.leader_id].awaiting_join:
            joined = [m.member_id for m in group.members.values() if m.awaiting_join]
            if joined:
                group.leader_id = joined[0]
        group.join_deadline_ms = None
        group.initial_delay_remaining_ms = None
        group.new_member_added = False
        group.init_next_generation(now_ms)
        log.info(
            "stabilized group %s generation %d with %d members",
            group.group_id,
            group.generation_id,
            len(group.members),
        )
        if group.state is GroupState.EMPTY:
            self._store_group(group, out)
            return
        members = group.join_members()
        for member in group.members.values():
            if member.join_token is None:
                continue
            is_leader = group.is_leader(member.member_id)
            response = JoinGroupResponse(
                error=E.none,
                generation_id=group.generation_id,
                protocol_type=group.protocol_type,
                protocol_name=group.protocol_name,
                leader=group.leader_id or "",
                member_id=member.member_id,
                members=members if is_leader else (),
            )
            out.append(Respond(member.join_token, response))
            member.join_token = None
            member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms

    def _remove_member_and_update_group(
        self, group: GroupMetadata, member_id: str, now_ms: int, out: list[Effect]
    ) -> None:
        member = group.members.get(member_id)
        if member is None:
            return
        self._answer_parked(member, E.unknown_member_id, out)
        group.remove(member_id)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, now_ms, out)
        elif group.state is GroupState.PREPARING_REBALANCE:
            self._try_complete_join(group, now_ms, out)

    @staticmethod
    def _answer_parked(member: MemberMetadata, error: ErrorCode, out: list[Effect]) -> None:
        if member.join_token is not None:
            out.append(
                Respond(member.join_token, JoinGroupResponse(error, member_id=member.member_id))
            )
            member.join_token = None
        if member.sync_token is not None:
            out.append(Respond(member.sync_token, SyncGroupResponse(error)))
            member.sync_token = None

    # == SyncGroup ==============================================================================

    def sync_group(self, req: SyncGroupRequest, now_ms: int) -> list[Effect]:
        out: list[Effect] = []

        def fail(error: ErrorCode) -> list[Effect]:
            out.append(Respond(req.token, SyncGroupResponse(error)))
            return out

        if not req.group_id:
            return fail(E.invalid_group_id)
        error = self._coordinator_error(req.group_id)
        if error is not None:
            return fail(error)
        group = self._groups.get(req.group_id)
        if group is None:
            return fail(E.unknown_member_id)
        if group.state is GroupState.DEAD:
            return fail(E.coordinator_not_available)
        if group.is_static_member_fenced(req.member_id, req.group_instance_id):
            return fail(E.fenced_instance_id)
        member = group.members.get(req.member_id)
        if member is None:
            return fail(E.unknown_member_id)
        if req.generation_id != group.generation_id:
            return fail(E.illegal_generation)
        if (req.protocol_type is not None and req.protocol_type != group.protocol_type) or (
            req.protocol_name is not None and req.protocol_name != group.protocol_name
        ):
            return fail(E.inconsistent_group_protocol)
        if group.state is GroupState.PREPARING_REBALANCE:
            return fail(E.rebalance_in_progress)
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        if group.state is GroupState.STABLE:
            out.append(Respond(req.token, self._sync_response(group, member.assignment)))
            return out
        # CompletingRebalance: followers wait for the leader's assignment.
        if member.sync_token is not None and member.sync_token != req.token:
            out.append(Respond(member.sync_token, SyncGroupResponse(E.rebalance_in_progress)))
        member.sync_token = req.token
        if group.is_leader(req.member_id) and not group.assignment_store_pending:
            self._store_assignment(group, dict(req.assignments), out)
        return out

    def _store_assignment(
        self, group: GroupMetadata, assignments: dict[str, bytes], out: list[Effect]
    ) -> None:
        """Persist the leader's assignment; hand it out only once the write is committed."""
        generation = group.generation_id
        group.assignment_store_generation = generation

        def propagate(error: ErrorCode, now_ms: int) -> list[Effect]:
            follow_up: list[Effect] = []
            if group.assignment_store_generation == generation:
                group.assignment_store_generation = None
            still_current = (
                self._groups.get(group.group_id) is group
                and group.state is GroupState.COMPLETING_REBALANCE
                and group.generation_id == generation
            )
            if not still_current:
                return follow_up  # whatever moved the group on has answered the waiters
            if error is not E.none:
                mapped = _GROUP_STORE_ERRORS.get(error, error)
                for m in group.members.values():
                    m.assignment = b""
                    if m.sync_token is not None:
                        follow_up.append(Respond(m.sync_token, SyncGroupResponse(mapped)))
                        m.sync_token = None
                self._prepare_rebalance(group, now_ms, follow_up)
                return follow_up
            for m in group.members.values():
                m.assignment = assignments.get(m.member_id, b"")
                if m.sync_token is not None:
                    response = self._sync_response(group, m.assignment)
                    follow_up.append(Respond(m.sync_token, response))
                    m.sync_token = None
            group.transition_to(GroupState.STABLE, now_ms)
            log.info(
                "assignment of group %s generation %d handed to its members",
                group.group_id,
                generation,
            )
            return follow_up

        self._append(group, (self._group_record(group, assignments),), propagate, out)

    @staticmethod
    def _sync_response(group: GroupMetadata, assignment: bytes) -> SyncGroupResponse:
        return SyncGroupResponse(E.none, assignment, group.protocol_type, group.protocol_name)

    # == Heartbeat ==============================================================================

    def heartbeat(self, req: HeartbeatRequest, now_ms: int) -> list[Effect]:
        return [Respond(req.token, HeartbeatResponse(self._heartbeat(req, now_ms)))]

    def _heartbeat(self, req: HeartbeatRequest, now_ms: int) -> ErrorCode:
        if not req.group_id:
            return E.invalid_group_id
        error = self._coordinator_error(req.group_id)
        if error is not None:
            return error
        group = self._groups.get(req.group_id)
        if group is None:
            return E.unknown_member_id
        if group.state is GroupState.DEAD:
            return E.coordinator_not_available
        if group.is_static_member_fenced(req.member_id, req.group_instance_id):
            return E.fenced_instance_id
        member = group.members.get(req.member_id)
        if member is None:
            return E.unknown_member_id
        if req.generation_id != group.generation_id:
            return E.illegal_generation
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        if group.state is GroupState.PREPARING_REBALANCE:
            return E.rebalance_in_progress
        return E.none

    # == LeaveGroup =============================================================================

    def leave_group(self, req: LeaveGroupRequest, now_ms: int) -> list[Effect]:
        out: list[Effect] = []
        error = self._coordinator_error(req.group_id) if req.group_id else E.invalid_group_id
        if error is not None:
            out.append(Respond(req.token, LeaveGroupResponse(error)))
            return out
        group = self._groups.get(req.group_id)
        if group is None:
            results = tuple((m, E.unknown_member_id) for m in req.members)
            out.append(Respond(req.token, LeaveGroupResponse(E.none, results)))
            return out
        if group.state is GroupState.DEAD:
            out.append(Respond(req.token, LeaveGroupResponse(E.coordinator_not_available)))
            return out
        per_member: list[tuple[LeavingMember, ErrorCode]] = []
        for leaving in req.members:
            per_member.append((leaving, self._leave_one(group, leaving, now_ms, out)))
        # Rebalance effects (parked answers, metadata) precede the LeaveGroup answer.
        out.append(Respond(req.token, LeaveGroupResponse(E.none, tuple(per_member))))
        return out

    def _leave_one(
        self, group: GroupMetadata, leaving: LeavingMember, now_ms: int, out: list[Effect]
    ) -> ErrorCode:
        if leaving.group_instance_id is not None:
            member_id = group.static_members.get(leaving.group_instance_id)
            if member_id is None:
                return E.unknown_member_id
            if leaving.member_id not in (UNKNOWN_MEMBER_ID, member_id):
                return E.fenced_instance_id
            self._remove_member_and_update_group(group, member_id, now_ms, out)
            return E.none
        if leaving.member_id in group.pending_members:
            del group.pending_members[leaving.member_id]
            self._try_complete_join(group, now_ms, out)
            return E.none
        if leaving.member_id not in group.members:
            return E.unknown_member_id
        log.info("member %s left group %s", leaving.member_id, group.group_id)
        self._remove_member_and_update_group(group, leaving.member_id, now_ms, out)
        return E.none

    # == offsets ================================================================================

    def offset_commit(self, req: OffsetCommitRequest, now_ms: int) -> list[Effect]:
        out: list[Effect] = []

        def answer_all(error: ErrorCode) -> list[Effect]:
            errors = tuple((tp, error) for tp, _ in req.offsets)
            out.append(Respond(req.token, OffsetCommitResponse(errors)))
            return out

        error = self._coordinator_error(req.group_id)
        if error is not None:
            return answer_all(error)
        group = self._groups.get(req.group_id)
        if group is None:
            if req.generation_id >= 0:
                # A commit from a generation of a group that no longer exists.
                return answer_all(E.illegal_generation)
            # A group that uses Kafka only to store offsets (no group management).
            group = GroupMetadata(req.group_id, state_timestamp_ms=now_ms)
            self._groups[req.group_id] = group
        if group.state is GroupState.DEAD:
            return answer_all(E.coordinator_not_available)
        if group.is_static_member_fenced(req.member_id, req.group_instance_id):
            return answer_all(E.fenced_instance_id)
        if not (req.generation_id < 0 and group.state is GroupState.EMPTY):
            member = group.members.get(req.member_id)
            if member is None:
                return answer_all(E.unknown_member_id)
            if req.generation_id != group.generation_id:
                return answer_all(E.illegal_generation)
            if group.state is GroupState.COMPLETING_REBALANCE:
                # Valid member and generation, but assignments are not out yet.
                return answer_all(E.rebalance_in_progress)
            # Stable or PreparingRebalance: commits of the finishing generation still count.
            member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        self._store_offsets(group, req, now_ms, out)
        return out

    def _store_offsets(
        self, group: GroupMetadata, req: OffsetCommitRequest, now_ms: int, out: list[Effect]
    ) -> None:
        records: list[RawRecord] = []
        errors: list[tuple[TopicPartition, ErrorCode]] = []
        values: dict[TopicPartition, OffsetCommitValue] = {}
        for tp, committed in req.offsets:
            if len(committed.metadata.encode("utf-8")) > self.config.offset_metadata_max_bytes:
                errors.append((tp, E.offset_metadata_too_large))
                continue
            value = OffsetCommitValue(
                offset=committed.offset,
                metadata=committed.metadata,
                commit_timestamp=now_ms,
                leader_epoch=committed.leader_epoch,
                expire_timestamp=(
                    now_ms + req.retention_time_ms if req.retention_time_ms >= 0 else None
                ),
            )
            values[tp] = value
            records.append(offset_commit_record(group.group_id, tp.topic, tp.partition, value))
            errors.append((tp, E.none))
        token = req.token
        if not records:
            out.append(Respond(token, OffsetCommitResponse(tuple(errors))))
            return
        group.pending_offset_commits += 1

        def complete(error: ErrorCode, now_ms: int, position: int) -> list[Effect]:
            del now_ms
            group.pending_offset_commits -= 1
            if error is E.none:
                # Only now visible to OffsetFetch, as Kafka's pendingOffsetCommits.
                for tp, value in values.items():
                    group.commit_offset(tp, value, position)
                return [Respond(token, OffsetCommitResponse(tuple(errors)))]
            mapped = _OFFSET_STORE_ERRORS.get(error, error)
            failed = tuple((tp, mapped if tp in values else e) for tp, e in errors)
            return [Respond(token, OffsetCommitResponse(failed))]

        self._append_positioned(group, tuple(records), complete, out)

    # == TxnOffsetCommit ========================================================================

    def txn_offset_commit(self, req: TxnOffsetCommitRequest, now_ms: int) -> list[Effect]:
        """TxnOffsetCommit (28), Kafka's handleTxnCommitOffsets: the offsets are written now
        as a transactional batch of the producer and stay pending, invisible to
        OffsetFetch, until `complete_txn_offsets` reports the producer's marker."""
        out: list[Effect] = []

        def answer_all(error: ErrorCode) -> list[Effect]:
            errors = tuple((tp, error) for tp, _ in req.offsets)
            out.append(Respond(req.token, TxnOffsetCommitResponse(errors)))
            return out

        error = self._coordinator_error(req.group_id)
        if error is not None:
            return answer_all(error)
        if req.producer_id == NO_PRODUCER_ID:
            return answer_all(E.invalid_producer_id_mapping)
        group = self._groups.get(req.group_id)
        if group is None:
            # Kafka creates the group (Empty) for any transactional commit.
            group = GroupMetadata(req.group_id, state_timestamp_ms=now_ms)
            self._groups[req.group_id] = group
        error = self._validate_txn_commit(group, req)
        if error is not None:
            self._forget_if_unused(group)
            return answer_all(error)
        self._store_txn_offsets(group, req, now_ms, out)
        return out

    @staticmethod
    def _validate_txn_commit(group: GroupMetadata, req: TxnOffsetCommitRequest) -> ErrorCode | None:
        """Kafka's validateOffsetCommit(isTransactional = true). Before v3 a request has no
        member or generation: it may commit to any group, as in Kafka."""
        if group.state is GroupState.DEAD:
            return E.coordinator_not_available
        if req.generation_id < 0 and group.state is GroupState.EMPTY:
            return None  # a producer outside group management (or an admin) may commit
        if (
            req.generation_id >= 0
            or req.member_id != UNKNOWN_MEMBER_ID
            or req.group_instance_id is not None
        ):
            if req.group_instance_id is not None:
                known = group.static_members.get(req.group_instance_id)
                if known is None:
                    return E.unknown_member_id
                if known != req.member_id:
                    return E.fenced_instance_id
            if req.member_id not in group.members:
                return E.unknown_member_id
            if req.generation_id != group.generation_id:
                return E.illegal_generation
        return None

    def _store_txn_offsets(
        self, group: GroupMetadata, req: TxnOffsetCommitRequest, now_ms: int, out: list[Effect]
    ) -> None:
        errors: list[tuple[TopicPartition, ErrorCode]] = []
        values: dict[TopicPartition, OffsetCommitValue] = {}
        for tp, committed in req.offsets:
            if len(committed.metadata.encode("utf-8")) > self.config.offset_metadata_max_bytes:
                errors.append((tp, E.offset_metadata_too_large))
                continue
            values[tp] = OffsetCommitValue(
                offset=committed.offset,
                metadata=committed.metadata,
                commit_timestamp=now_ms,
                leader_epoch=committed.leader_epoch,
            )
            errors.append((tp, E.none))
        token, producer_id = req.token, req.producer_id
        if not values:
            self._forget_if_unused(group)
            out.append(Respond(token, TxnOffsetCommitResponse(tuple(errors))))
            return
        records = tuple(
            offset_commit_record(group.group_id, tp.topic, tp.partition, value)
            for tp, value in values.items()
        )
        # Pending from now on: OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT.
        group.prepare_txn_offsets(producer_id, values)
        self._producer_groups.setdefault(producer_id, set()).add(group.group_id)

        def complete(error: ErrorCode, now_ms: int, position: int) -> list[Effect]:
            del now_ms
            if error is E.none:
                group.on_txn_offsets_appended(producer_id, values, position)
                return [Respond(token, TxnOffsetCommitResponse(tuple(errors)))]
            group.fail_txn_offsets(producer_id, values)
            if producer_id not in group.pending_txn_offsets:
                self._forget_producer_group(producer_id, group.group_id)
            if self._groups.get(group.group_id) is group:
                self._forget_if_unused(group)  # nothing was written for it
            # Fencing (INVALID_PRODUCER_EPOCH, PRODUCER_FENCED) passes through unchanged.
            mapped = _OFFSET_STORE_ERRORS.get(error, error)
            failed = tuple((tp, mapped if tp in values else e) for tp, e in errors)
            return [Respond(token, TxnOffsetCommitResponse(failed))]

        self._append_positioned(
            group,
            records,
            complete,
            out,
            producer_id=producer_id,
            producer_epoch=req.producer_epoch,
        )

    def complete_txn_offsets(
        self, partition: int, producer_id: int, commit: bool, now_ms: int
    ) -> list[Effect]:
        """The producer's transaction marker is written (replicated) on this offsets
        partition (Kafka's handleTxnCompletion): on commit its pending offsets in the
        partition's groups become committed, each unless a later-written offset is already
        there; on abort they are dropped.

        While the partition is still loading nothing is to be done: the shell's replay
        reads the log up to its end after the marker was appended, so the marker is part
        of what gets loaded."""
        del now_ms  # no timer depends on it; kept for a uniform event signature
        if partition not in self._owned:
            return []
        for group_id in sorted(self._producer_groups.get(producer_id, ())):
            if self.partition_for(group_id) != partition:
                continue
            self._forget_producer_group(producer_id, group_id)
            group = self._groups.get(group_id)
            if group is None or group.state is GroupState.DEAD:
                continue
            changed = group.complete_txn_offsets(producer_id, commit)
            # A group that only ever held this aborted transaction's offsets is gone, as it
            # would be after a reload of the partition.
            self._forget_if_unused(group)
            log.debug(
                "transaction of producer %d %s in group %s (%d offsets changed)",
                producer_id,
                "committed" if commit else "aborted",
                group_id,
                len(changed),
            )
        return []

    def _forget_producer_group(self, producer_id: int, group_id: str) -> None:
        groups = self._producer_groups.get(producer_id)
        if groups is None:
            return
        groups.discard(group_id)
        if not groups:
            del self._producer_groups[producer_id]

    def offset_fetch(self, req: OffsetFetchRequest, now_ms: int) -> list[Effect]:
        del now_ms  # fetching never changes state; kept for a uniform handler signature
        error = self._coordinator_error(req.group_id)
        if error is not None:
            return [Respond(req.token, OffsetFetchResponse(error))]
        group = self._groups.get(req.group_id)
        if group is not None and group.state is GroupState.DEAD:
            group = None
        committed = group.offsets if group is not None else {}
        wanted = sorted(committed) if req.partitions is None else list(req.partitions)
        offsets = []
        for tp in wanted:
            value = committed.get(tp)
            if req.require_stable and group is not None and group.has_pending_txn_offset(tp):
                # An open transaction will change it: the client retries (Kafka's getOffsets).
                offsets.append((tp, FetchedOffset(-1, error=E.unstable_offset_commit)))
            elif value is None:
                offsets.append((tp, FetchedOffset(-1)))
            else:
                offsets.append(
                    (tp, FetchedOffset(value.offset, value.leader_epoch, value.metadata))
                )
        return [Respond(req.token, OffsetFetchResponse(E.none, tuple(offsets)))]

    # == admin ==================================================================================

    def describe_groups(self, group_ids: Iterable[str]) -> list[DescribedGroup]:
        described = []
        for group_id in group_ids:
            error = self._coordinator_error(group_id)
            group = self._groups.get(group_id)
            if error is not None or group is None:
                described.append(DescribedGroup(error or E.none, group_id, GroupState.DEAD.value))
                continue
            stable = group.state is GroupState.STABLE
            protocol = group.protocol_name if stable and group.protocol_name else ""
            members = tuple(
                DescribedMember(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    metadata=m.metadata_for(protocol) if protocol else b"",
                    assignment=m.assignment if stable else b"",
                )
                for m in group.members.values()
            )
            described.append(
                DescribedGroup(
                    E.none,
                    group_id,
                    group.state.value,
                    group.protocol_type or "",
                    protocol,
                    members,
                )
            )
        return described

    def list_groups(
        self, states: Iterable[str] | None = None
    ) -> tuple[ErrorCode, list[ListedGroup]]:
        wanted = {s.lower() for s in states} if states else None
        error = E.coordinator_load_in_progress if self._loading else E.none
        listed = [
            ListedGroup(g.group_id, g.protocol_type or "", g.state.value)
            for g in self._groups.values()
            if self.partition_for(g.group_id) in self._owned
            and (wanted is None or g.state.value.lower() in wanted)
        ]
        return error, sorted(listed, key=lambda g: g.group_id)

    def delete_groups(
        self, group_ids: Iterable[str], now_ms: int
    ) -> tuple[dict[str, ErrorCode], list[Effect]]:
        results: dict[str, ErrorCode] = {}
        out: list[Effect] = []
        for group_id in group_ids:
            error = self._coordinator_error(group_id)
            group = self._groups.get(group_id)
            if error is not None:
                results[group_id] = error
            elif group is None or group.state is GroupState.DEAD:
                results[group_id] = E.group_id_not_found
            elif group.state is not GroupState.EMPTY or group.pending_txn_offsets:
                # Offsets of an open transaction count as a member still at work: deleting
                # now would lose them in memory while its commit marker brings them back
                # on the next load of the partition.
                results[group_id] = E.non_empty_group
            else:
                group.pending_members.clear()  # they would get UNKNOWN_MEMBER_ID on return
                self._delete_group(group, list(group.offsets), now_ms, out)
                results[group_id] = E.none
        return results, out

    def _delete_group(
        self,
        group: GroupMetadata,
        expired: list[TopicPartition],
        now_ms: int,
        out: list[Effect],
        then: AppendCallback = _no_follow_up,
    ) -> bool:
        """Tombstone the given offsets and, once none are left, the group itself (Kafka's
        cleanupGroupMetadata). False if there was nothing to write (`then` is not called)."""
        records: list[RawRecord] = [
            offset_commit_record(group.group_id, tp.topic, tp.partition, None) for tp in expired
        ]
        for tp in expired:
            group.remove_offset(tp)
        if (
            group.state is GroupState.EMPTY
            and not group.offsets
            and not group.pending_members
            and not group.pending_offset_commits
            and not group.pending_txn_offsets
        ):
            group.transition_to(GroupState.DEAD, now_ms)
            del self._groups[group.group_id]
            records.append(group_metadata_record(group.group_id, None))
        if not records:
            return False
        self._append(group, tuple(records), then, out)
        return True

    def offset_delete(self, req: OffsetDeleteRequest, now_ms: int) -> list[Effect]:
        """OffsetDelete (47), Kafka's handleDeleteOffsets: an Empty group loses any of its
        offsets; a consumer group with members keeps those of topics its members subscribe
        to (GROUP_SUBSCRIBED_TO_TOPIC); any other group with members is NON_EMPTY_GROUP.

        The offsets leave memory at once and are tombstoned in `__consumer_offsets`, so a
        coordinator that loads the partition later does not bring them back. The answer
        waits for that write (Kafka answers before it): a tool that reports success has
        made the deletion durable."""
        out: list[Effect] = []

        def fail(error: ErrorCode) -> list[Effect]:
            out.append(Respond(req.token, OffsetDeleteResponse(error)))
            return out

        if not req.group_id:
            return fail(E.invalid_group_id)
        error = self._coordinator_error(req.group_id)
        if error is not None:
            return fail(error)
        group = self._groups.get(req.group_id)
        if group is None or group.state is GroupState.DEAD:
            return fail(E.group_id_not_found)
        refused: dict[TopicPartition, ErrorCode] = {}
        if group.state is GroupState.EMPTY:
            eligible = list(req.partitions)
        elif group.protocol_type == "consumer":
            # Unknown subscriptions (unparseable metadata) count as subscribed to
            # everything, as in Kafka: better to refuse than to drop offsets in use.
            subscribed = group.subscribed_topics()
            eligible = []
            for tp in req.partitions:
                if subscribed is None or tp.topic in subscribed:
                    refused[tp] = E.group_subscribed_to_topic
                else:
                    eligible.append(tp)
        else:
            return fail(E.non_empty_group)
        removed = [tp for tp in dict.fromkeys(eligible) if tp in group.offsets]
        token = req.token

        def answer(error: ErrorCode) -> OffsetDeleteResponse:
            mapped = _OFFSET_STORE_ERRORS.get(error, error)
            return OffsetDeleteResponse(
                E.none, tuple((tp, refused.get(tp, mapped)) for tp in req.partitions)
            )

        def written(error: ErrorCode, now_ms: int) -> list[Effect]:
            del now_ms
            return [Respond(token, answer(error))]

        if removed:
            log.info(
                "deleting offsets of group %s: %s",
                group.group_id,
                ", ".join(f"{tp.topic}-{tp.partition}" for tp in removed),
            )
        # Like Kafka, only a request with something eligible may retire an Empty group.
        if not eligible or not self._delete_group(group, removed, now_ms, out, written):
            out.append(Respond(token, answer(E.none)))
        return out

    # == timers =================================================================================

    def next_deadline_ms(self) -> int | None:
        deadlines: list[int] = []
        if self._next_cleanup_ms is not None:
            deadlines.append(self._next_cleanup_ms)
        for group in self._groups.values():
            if group.join_deadline_ms is not None:
                deadlines.append(group.join_deadline_ms)
            deadlines.extend(group.pending_members.values())
            deadlines.extend(
                m.heartbeat_deadline_ms for m in group.members.values() if not self._kept_alive(m)
            )
        return min(deadlines, default=None)

    @staticmethod
    def _kept_alive(member: MemberMetadata) -> bool:
        # A member parked in JoinGroup or SyncGroup cannot heartbeat; the rebalance timeout,
        # not the session timeout, bounds how long it may wait.
        return member.join_token is not None or member.sync_token is not None

    def tick(self, now_ms: int) -> list[Effect]:
        out: list[Effect] = []
        for group in list(self._groups.values()):
            self._expire_join(group, now_ms, out)
            for member_id, deadline in list(group.pending_members.items()):
                if deadline <= now_ms:
                    del group.pending_members[member_id]
                    self._try_complete_join(group, now_ms, out)
            for member in list(group.members.values()):
                if not self._kept_alive(member) and member.heartbeat_deadline_ms <= now_ms:
                    log.info(
                        "member %s of group %s missed its session timeout (%d ms); removing it",
                        member.member_id,
                        group.group_id,
                        member.session_timeout_ms,
                    )
                    self._remove_member_and_update_group(group, member.member_id, now_ms, out)
        if self._next_cleanup_ms is None:
            self._next_cleanup_ms = now_ms + self.config.offsets_retention_check_interval_ms
        elif now_ms >= self._next_cleanup_ms:
            self.cleanup_expired_offsets(now_ms, out)
            self._next_cleanup_ms = now_ms + self.config.offsets_retention_check_interval_ms
        return out

    def _expire_join(self, group: GroupMetadata, now_ms: int, out: list[Effect]) -> None:
        if (
            group.state is not GroupState.PREPARING_REBALANCE
            or group.join_deadline_ms is None
            or group.join_deadline_ms > now_ms
        ):
            return
        remaining = group.initial_delay_remaining_ms
        if remaining is not None and group.new_member_added and remaining > 0:
            delay = min(self.config.group_initial_rebalance_delay_ms, remaining)
            group.initial_delay_remaining_ms = remaining - delay
            group.join_deadline_ms = now_ms + delay
            group.new_member_added = False
            return
        self._complete_join(group, now_ms, out)

    def cleanup_expired_offsets(self, now_ms: int, out: list[Effect] | None = None) -> list[Effect]:
        """Kafka's cleanupGroupMetadata: expire offsets per `offsets.retention.minutes`."""
        out = [] if out is None else out
        retention = self.config.offsets_retention_ms
        for group in list(self._groups.values()):
            if self.partition_for(group.group_id) not in self._owned:
                continue
            expired = []
            subscribed = group.subscribed_topics() if group.state is GroupState.STABLE else None
            for tp, value in group.offsets.items():
                if value.expire_timestamp is not None:
                    # Explicit retention from an old OffsetCommit (value v1).
                    if now_ms >= value.expire_timestamp:
                        expired.append(tp)
                elif group.protocol_type is None:
                    # Simple consumer: each offset lives from its own commit.
                    if now_ms - value.commit_timestamp >= retention:
                        expired.append(tp)
                elif group.state is GroupState.EMPTY:
                    # KIP-211: the clock starts when the group became empty.
                    if now_ms - group.state_timestamp_ms >= retention:
                        expired.append(tp)
                elif subscribed is not None and tp.topic not in subscribed:
                    # KIP-496: a live consumer group drops offsets of topics it left.
                    if now_ms - value.commit_timestamp >= retention:
                        expired.append(tp)
            if expired or (group.state is GroupState.EMPTY and not group.offsets):
                self._delete_group(group, expired, now_ms, out)
        return out

    # == helpers ================================================================================

    def _store_group(self, group: GroupMetadata, out: list[Effect]) -> None:
        self._append(group, (self._group_record(group),), _no_follow_up, out)

    @staticmethod
    def _group_record(
        group: GroupMetadata, assignments: dict[str, bytes] | None = None
    ) -> RawRecord:
        return group_metadata_record(group.group_id, group.to_record_value(assignments))

    def _append(
        self,
        group: GroupMetadata,
        records: tuple[RawRecord, ...],
        then: AppendCallback,
        out: list[Effect],
    ) -> None:
        self._append_positioned(group, records, lambda error, now, _at: then(error, now), out)

    def _append_positioned(
        self,
        group: GroupMetadata,
        records: tuple[RawRecord, ...],
        then: PositionedCallback,
        out: list[Effect],
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = -1,
    ) -> None:
        self._next_append_id += 1
        self._pending_appends[self._next_append_id] = then
        partition = self.partition_for(group.group_id)
        out.append(
            AppendToOffsetsTopic(
                partition, records, self._next_append_id, producer_id, producer_epoch
            )
        )

    def append_done(
        self, append_id: int, error: ErrorCode, now_ms: int, base_offset: int | None = None
    ) -> list[Effect]:
        """The shell's report on an `AppendToOffsetsTopic`: committed (none) or failed;
        `base_offset` is where the batch landed (None: order of the reports)."""
        then = self._pending_appends.pop(append_id, None)
        if then is None:
            raise KeyError(f"unknown or already completed append {append_id}")
        position = self._position_floor if base_offset is None else base_offset
        self._position_floor = max(self._position_floor, position + 1)
        return then(error, now_ms, position)

    def pending_appends(self) -> int:
        return len(self._pending_appends)

    def _forget_if_unused(self, group: GroupMetadata) -> None:
        """Drop a group created by a request that then failed, leaving nothing behind."""
        if (
            group.state is GroupState.EMPTY
            and not group.members
            and not group.pending_members
            and not group.offsets
            and not group.pending_txn_offsets
            and group.generation_id == 0
        ):
            self._groups.pop(group.group_id, None)

    # == introspection (tools, tests) ===========================================================

    def group(self, group_id: str) -> GroupMetadata | None:
        return self._groups.get(group_id)

    def group_ids(self) -> list[str]:
        return sorted(self._groups)
