"""Plain values the group coordinator takes and returns.

The broker shell maps kio request objects onto these requests, and these responses
back onto kio responses; the coordinator itself never sees wire types. Every request
carries a `token`: an opaque handle the shell uses to find the connection and
correlation id once a `Respond` effect names it (JoinGroup and SyncGroup answers may
come much later than the request, from another member's request or from a timer).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from enum import Enum

from kio.schema.errors import ErrorCode

from strandline.types import TopicPartition

Token = Hashable

UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1


@dataclass(frozen=True)
class GroupConfig:
    """Broker settings with Kafka's names and defaults."""

    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3_000
    group_max_size: int = 2**31 - 1
    offsets_retention_minutes: int = 10_080
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4_096

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


# -- requests ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class JoinGroupRequest:
    token: Token
    group_id: str
    member_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    # JoinGroup v4+: a new dynamic member first gets MEMBER_ID_REQUIRED and its id.
    require_known_member_id: bool = True


@dataclass(frozen=True)
class SyncGroupRequest:
    token: Token
    group_id: str
    generation_id: int
    member_id: str
    assignments: tuple[tuple[str, bytes], ...] = ()
    group_instance_id: str | None = None
    protocol_type: str | None = None  # v5+
    protocol_name: str | None = None  # v5+


@dataclass(frozen=True)
class HeartbeatRequest:
    token: Token
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True)
class LeavingMember:
    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True)
class LeaveGroupRequest:
    token: Token
    group_id: str
    members: tuple[LeavingMember, ...]


@dataclass(frozen=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""


@dataclass(frozen=True)
class OffsetCommitRequest:
    token: Token
    group_id: str
    offsets: tuple[tuple[TopicPartition, OffsetAndMetadata], ...]
    generation_id: int = NO_GENERATION
    member_id: str = UNKNOWN_MEMBER_ID
    group_instance_id: str | None = None
    retention_time_ms: int = -1  # v2-v4 only; -1 = broker's offsets.retention.minutes


@dataclass(frozen=True)
class TxnOffsetCommitRequest:
    """TxnOffsetCommit (28): offsets a transactional producer commits as part of its
    transaction; visible to OffsetFetch only once the transaction commits."""

    token: Token
    group_id: str
    producer_id: int
    producer_epoch: int
    offsets: tuple[tuple[TopicPartition, OffsetAndMetadata], ...]
    # v3+: the consumer's group generation, so a zombie member's commit is refused.
    generation_id: int = NO_GENERATION
    member_id: str = UNKNOWN_MEMBER_ID
    group_instance_id: str | None = None


@dataclass(frozen=True)
class OffsetFetchRequest:
    token: Token
    group_id: str
    partitions: tuple[TopicPartition, ...] | None = None  # None = every committed offset
    # v7+: partitions with offsets of an open transaction answer UNSTABLE_OFFSET_COMMIT.
    require_stable: bool = False


@dataclass(frozen=True)
class OffsetDeleteRequest:
    token: Token
    group_id: str
    partitions: tuple[TopicPartition, ...]


# -- responses --------------------------------------------------------------------------------


@dataclass(frozen=True)
class JoinGroupMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True)
class JoinGroupResponse:
    error: ErrorCode
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = UNKNOWN_MEMBER_ID
    members: tuple[JoinGroupMember, ...] = ()  # only the leader gets them
    skip_assignment: bool = False  # v9+: static leader rejoining a Stable group


@dataclass(frozen=True)
class SyncGroupResponse:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True)
class HeartbeatResponse:
    error: ErrorCode


@dataclass(frozen=True)
class LeaveGroupResponse:
    error: ErrorCode
    members: tuple[tuple[LeavingMember, ErrorCode], ...] = ()


@dataclass(frozen=True)
class OffsetCommitResponse:
    errors: tuple[tuple[TopicPartition, ErrorCode], ...]


@dataclass(frozen=True)
class TxnOffsetCommitResponse:
    errors: tuple[tuple[TopicPartition, ErrorCode], ...]


@dataclass(frozen=True)
class FetchedOffset:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    error: ErrorCode = ErrorCode.none


@dataclass(frozen=True)
class OffsetFetchResponse:
    error: ErrorCode
    offsets: tuple[tuple[TopicPartition, FetchedOffset], ...] = ()


@dataclass(frozen=True)
class OffsetDeleteResponse:
    """A group-level error, or one error per requested partition (none when the group
    failed, as on Kafka's wire)."""

    error: ErrorCode
    errors: tuple[tuple[TopicPartition, ErrorCode], ...] = ()


@dataclass(frozen=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True)
class DescribedGroup:
    error: ErrorCode
    group_id: str
    state: str
    protocol_type: str = ""
    protocol: str = ""
    members: tuple[DescribedMember, ...] = ()


@dataclass(frozen=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str


# -- effects ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Respond:
    """Send `response` to the request identified by `token`."""

    token: Token
    response: object


@dataclass(frozen=True)
class AppendToOffsetsTopic:
    """Append these (key, value) records to `__consumer_offsets`-`partition` with acks=all,
    then report the outcome with `GroupCoordinator.append_done(append_id, error, now_ms,
    base_offset)`.

    Answers that depend on the write (OffsetCommit, the SyncGroup round, a static
    member's rejoin) are only emitted by `append_done`, as in Kafka, so nothing is
    acknowledged before it is replicated.
    """

    partition: int
    records: tuple[tuple[bytes, bytes | None], ...]
    append_id: int
    # A TxnOffsetCommit's records: a transactional batch of this producer, which opens
    # (or continues) its transaction on the partition until the marker closes it.
    producer_id: int = -1
    producer_epoch: int = -1

    @property
    def transactional(self) -> bool:
        return self.producer_id >= 0
