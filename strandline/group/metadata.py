"""Mutable state of one classic group and its members (Kafka's GroupMetadata/MemberMetadata).

Only the coordinator mutates these; the transitions themselves live in `coordinator.py`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from strandline.group.model import (
    NO_GENERATION,
    GroupState,
    JoinGroupMember,
    Token,
)
from strandline.group.records import (
    GroupMetadataValue,
    OffsetCommitValue,
    StoredMember,
    subscribed_topics,
)
from strandline.types import TopicPartition

_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(
        {
            GroupState.STABLE,
            GroupState.PREPARING_REBALANCE,
            GroupState.COMPLETING_REBALANCE,
            GroupState.EMPTY,
            GroupState.DEAD,
        }
    ),
}


@dataclass
class PendingTxnOffset:
    """An offset of an open transaction (Kafka's CommitRecordMetadataAndOffset in
    pendingTransactionalOffsetCommits)."""

    value: OffsetCommitValue
    # Base offset of the batch in `__consumer_offsets` that holds it; None while the
    # append is in flight. Commit order between offsets follows this position.
    position: int | None = None


class IllegalGroupTransition(RuntimeError):
    """A coordinator bug: Kafka's state diagram does not allow this transition."""


@dataclass
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    assignment: bytes = b""
    # Parked JoinGroup / SyncGroup requests, answered when the rebalance moves on.
    join_token: Token | None = None
    sync_token: Token | None = None
    heartbeat_deadline_ms: int = 0

    @property
    def awaiting_join(self) -> bool:
        return self.join_token is not None

    def metadata_for(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: tuple[tuple[str, bytes], ...]) -> bool:
        return tuple(protocols) == tuple(self.protocols)

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError("member supports none of the candidate protocols")


@dataclass
class GroupMetadata:
    group_id: str
    state: GroupState = GroupState.EMPTY
    state_timestamp_ms: int = -1
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, MemberMetadata] = field(default_factory=dict)
    # Dynamic members told MEMBER_ID_REQUIRED: member id -> deadline to come back.
    pending_members: dict[str, int] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    offsets: dict[TopicPartition, OffsetCommitValue] = field(default_factory=dict)
    # Where in `__consumer_offsets` each committed offset was written (batch base offset):
    # a transaction's offset replaces the committed one only if written after it, as in
    # Kafka. An offset without a position counts as older than anything.
    offset_positions: dict[TopicPartition, int] = field(default_factory=dict)
    # TxnOffsetCommits of open transactions: producer id -> partition -> pending offset.
    # Invisible to OffsetFetch until the producer's commit marker is written.
    pending_txn_offsets: dict[int, dict[TopicPartition, PendingTxnOffset]] = field(
        default_factory=dict
    )
    # The rebalance (join) timer while PreparingRebalance.
    join_deadline_ms: int | None = None
    # Remaining extension budget of `group.initial.rebalance.delay.ms`; None = normal join.
    initial_delay_remaining_ms: int | None = None
    new_member_added: bool = False
    # Generation whose leader assignment is being written; members get it once committed.
    assignment_store_generation: int | None = None
    # Offset commits appended but not yet committed: the group must not expire meanwhile.
    pending_offset_commits: int = 0

    # -- offsets ----------------------------------------------------------------------------

    def commit_offset(self, tp: TopicPartition, value: OffsetCommitValue, position: int) -> bool:
        """Make `value` (written at `position`) the committed offset unless a later-written
        one is already committed (Kafka's olderThan check). True if it was taken."""
        current = self.offset_positions.get(tp)
        if tp in self.offsets and current is not None and current > position:
            return False
        self.offsets[tp] = value
        self.offset_positions[tp] = position
        return True

    def remove_offset(self, tp: TopicPartition) -> None:
        """Forget a committed offset (deleted or expired). Pending transactional offsets of
        the partition stay: the transaction's marker decides them, as a reload of the log
        would (its tombstone does not touch a transaction's record)."""
        self.offsets.pop(tp, None)
        self.offset_positions.pop(tp, None)

    def prepare_txn_offsets(
        self, producer_id: int, values: dict[TopicPartition, OffsetCommitValue]
    ) -> None:
        pending = self.pending_txn_offsets.setdefault(producer_id, {})
        for tp, value in values.items():
            pending[tp] = PendingTxnOffset(value)

    def on_txn_offsets_appended(
        self, producer_id: int, values: dict[TopicPartition, OffsetCommitValue], position: int
    ) -> None:
        """The batch is in the log: remember where, for ordering at commit time. A later
        TxnOffsetCommit of the same partition may already have replaced the entry."""
        pending = self.pending_txn_offsets.get(producer_id, {})
        for tp, value in values.items():
            entry = pending.get(tp)
            if entry is not None and entry.value == value:
                entry.position = position

    def fail_txn_offsets(
        self, producer_id: int, values: dict[TopicPartition, OffsetCommitValue]
    ) -> None:
        """The append failed: nothing was written, the client retries (Kafka's
        failPendingTxnOffsetCommit)."""
        pending = self.pending_txn_offsets.get(producer_id)
        if pending is None:
            return
        for tp, value in values.items():
            entry = pending.get(tp)
            if entry is not None and entry.value == value:
                del pending[tp]
        if not pending:
            del self.pending_txn_offsets[producer_id]

    def complete_txn_offsets(self, producer_id: int, commit: bool) -> list[TopicPartition]:
        """The producer's marker is written: on commit its offsets become the committed
        ones where newer; on abort they vanish. Returns the partitions that changed."""
        pending = self.pending_txn_offsets.pop(producer_id, None)
        if not commit or not pending:
            return []
        changed = []
        for tp, entry in pending.items():
            if entry.position is None:
                # Its append has not finished, so it lies after the marker in the log:
                # not part of this transaction (Kafka would fail loudly here).
                continue
            if self.commit_offset(tp, entry.value, entry.position):
                changed.append(tp)
        return changed

    def has_pending_txn_offset(self, tp: TopicPartition) -> bool:
        return any(tp in pending for pending in self.pending_txn_offsets.values())

    # -- state ------------------------------------------------------------------------------

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[target]:
            raise IllegalGroupTransition(f"group {self.group_id}: {self.state} -> {target}")
        self.state = target
        self.state_timestamp_ms = now_ms

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    @property
    def assignment_store_pending(self) -> bool:
        return self.assignment_store_generation == self.generation_id

    def has_all_members_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    # -- membership -------------------------------------------------------------------------

    def add(self, member: MemberMetadata) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        self.pending_members.pop(member.member_id, None)
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.group_instance_id is not None:
            self.static_members.pop(member.group_instance_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> MemberMetadata:
        """Give an existing static member a new member id, keeping its place and assignment."""
        old = self.members[old_id]
        old.member_id = new_id
        self.members = {(new_id if k == old_id else k): v for k, v in self.members.items()}
        self.static_members[instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        return old

    def is_static_member_fenced(self, member_id: str, instance_id: str | None) -> bool:
        if instance_id is None:
            return False
        known = self.static_members.get(instance_id)
        return known is not None and known != member_id

    # -- protocols --------------------------------------------------------------------------

    def candidate_protocols(self) -> list[str]:
        """Protocols every member supports, in the first member's preference order."""
        members = list(self.members.values())
        if not members:
            return []
        common = set.intersection(*({name for name, _ in m.protocols} for m in members))
        return [name for name, _ in members[0].protocols if name in common]

    def supports_protocols(
        self, protocol_type: str, protocols: tuple[tuple[str, bytes], ...]
    ) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        counts = Counter(name for m in self.members.values() for name, _ in m.protocols)
        return self.protocol_type == protocol_type and any(
            counts[name] == len(self.members) for name, _ in protocols
        )

    def select_protocol(self) -> str:
        candidates = self.candidate_protocols()
        if not candidates:
            raise ValueError(f"group {self.group_id}: no protocol supported by all members")
        votes = Counter(m.vote(set(candidates)) for m in self.members.values())
        # Ties go to the protocol earliest in preference order, so every run picks the same one.
        return max(candidates, key=lambda name: (votes[name], -candidates.index(name)))

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY, now_ms)

    def subscribed_topics(self) -> set[str] | None:
        """Union of the members' subscriptions for a "consumer" group; None if unknown."""
        if self.protocol_type != "consumer" or self.protocol_name is None or not self.members:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            parsed = subscribed_topics(member.metadata_for(self.protocol_name))
            if parsed is None:
                return None
            topics.update(parsed)
        return topics

    def join_members(self) -> tuple[JoinGroupMember, ...]:
        """What the leader receives in its JoinGroup response: every member's metadata."""
        assert self.protocol_name is not None
        return tuple(
            JoinGroupMember(m.member_id, m.group_instance_id, m.metadata_for(self.protocol_name))
            for m in self.members.values()
        )

    # -- persistence ------------------------------------------------------------------------

    def to_record_value(self, assignments: dict[str, bytes] | None = None) -> GroupMetadataValue:
        """The GroupMetadataValue to persist; `assignments` overrides the members' current."""
        protocol = self.protocol_name
        return GroupMetadataValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation_id,
            protocol=protocol,
            leader=self.leader_id,
            current_state_timestamp=self.state_timestamp_ms,
            members=tuple(
                StoredMember(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    session_timeout_ms=m.session_timeout_ms,
                    subscription=m.metadata_for(protocol) if protocol else b"",
                    assignment=(
                        m.assignment if assignments is None else assignments.get(m.member_id, b"")
                    ),
                )
                for m in self.members.values()
            ),
        )

    @classmethod
    def from_record_value(
        cls, group_id: str, value: GroupMetadataValue, now_ms: int
    ) -> GroupMetadata:
        group = cls(
            group_id=group_id,
            generation_id=value.generation,
            protocol_type=value.protocol_type or None,
            protocol_name=value.protocol,
            leader_id=value.leader,
            state_timestamp_ms=(
                value.current_state_timestamp if value.current_state_timestamp >= 0 else now_ms
            ),
        )
        for stored in value.members:
            protocols = ((value.protocol, stored.subscription),) if value.protocol else ()
            group.members[stored.member_id] = MemberMetadata(
                member_id=stored.member_id,
                group_instance_id=stored.group_instance_id,
                client_id=stored.client_id,
                client_host=stored.client_host,
                rebalance_timeout_ms=stored.rebalance_timeout_ms,
                session_timeout_ms=stored.session_timeout_ms,
                protocol_type=value.protocol_type,
                protocols=protocols,
                assignment=stored.assignment,
                heartbeat_deadline_ms=now_ms + stored.session_timeout_ms,
            )
            if stored.group_instance_id is not None:
                group.static_members[stored.group_instance_id] = stored.member_id
        # Kafka loads a group with members as Stable, one without as Empty.
        group.state = GroupState.STABLE if group.members else GroupState.EMPTY
        if group.generation_id < 0:
            group.generation_id = NO_GENERATION
        return group
