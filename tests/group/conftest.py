"""A tiny driver around the pure GroupCoordinator: tokens, responses, appended records."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from kio.schema.errors import ErrorCode as E

from strandline.group.coordinator import Effect, GroupCoordinator
from strandline.group.model import (
    AppendToOffsetsTopic,
    GroupConfig,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeavingMember,
    OffsetAndMetadata,
    OffsetCommitRequest,
    Respond,
    SyncGroupRequest,
)
from strandline.group.records import RawRecord
from strandline.types import TopicPartition

SESSION_MS = 10_000
REBALANCE_MS = 30_000
CONSUMER = "consumer"
RANGE = (("range", b"range-meta"),)


@dataclass
class Harness:
    coordinator: GroupCoordinator
    now: int = 0
    responses: dict[int, object] = field(default_factory=dict)
    log: list[tuple[int, RawRecord]] = field(default_factory=list)
    tokens: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    append_error: E = E.none
    hold_appends: bool = False
    held: list[AppendToOffsetsTopic] = field(default_factory=list)
    last_token: int = 0

    def apply(self, effects: list[Effect]) -> None:
        for effect in effects:
            if isinstance(effect, Respond):
                assert isinstance(effect.token, int)
                assert effect.token not in self.responses, "a request was answered twice"
                self.responses[effect.token] = effect.response
            else:
                assert isinstance(effect, AppendToOffsetsTopic)
                if self.hold_appends:
                    self.held.append(effect)
                    continue
                self.complete(effect, self.append_error)

    def complete(self, effect: AppendToOffsetsTopic, error: E) -> None:
        """Play the shell: the append committed (or failed with `error`)."""
        if error == E.none:
            self.log.extend((effect.partition, r) for r in effect.records)
        self.apply(self.coordinator.append_done(effect.append_id, error, self.now))

    def answer(self, token: int) -> object | None:
        return self.responses.get(token)

    def join(
        self,
        member_id: str = "",
        *,
        group: str = "g",
        instance: str | None = None,
        protocols: tuple[tuple[str, bytes], ...] = RANGE,
        protocol_type: str = CONSUMER,
        session_ms: int = SESSION_MS,
        rebalance_ms: int = REBALANCE_MS,
        require_known_member_id: bool = True,
    ) -> int:
        token = next(self.tokens)
        self.apply(
            self.coordinator.join_group(
                JoinGroupRequest(
                    token,
                    group,
                    member_id,
                    session_ms,
                    rebalance_ms,
                    protocol_type,
                    protocols,
                    instance,
                    "client",
                    "/127.0.0.1",
                    require_known_member_id,
                ),
                self.now,
            )
        )
        return token

    def join_new(self, **kwargs: object) -> str:
        """First join (MEMBER_ID_REQUIRED) and return the id to come back with."""
        response = self.answer(self.join(**kwargs))  # type: ignore[arg-type]
        assert isinstance(response, JoinGroupResponse)
        assert response.error.name == "member_id_required"
        return response.member_id

    def sync(
        self,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        *,
        group: str = "g",
        instance: str | None = None,
    ) -> int:
        token = next(self.tokens)
        request = SyncGroupRequest(
            token, group, generation, member_id, tuple((assignments or {}).items()), instance
        )
        self.apply(self.coordinator.sync_group(request, self.now))
        return token

    def heartbeat(
        self, member_id: str, generation: int, *, group: str = "g", instance: str | None = None
    ) -> object:
        token = next(self.tokens)
        request = HeartbeatRequest(token, group, generation, member_id, instance)
        self.apply(self.coordinator.heartbeat(request, self.now))
        return self.responses[token]

    def leave(self, *members: LeavingMember, group: str = "g") -> object:
        token = next(self.tokens)
        self.apply(self.coordinator.leave_group(LeaveGroupRequest(token, group, members), self.now))
        return self.responses[token]

    def commit(
        self,
        offsets: dict[TopicPartition, int],
        *,
        group: str = "g",
        member_id: str = "",
        generation: int = -1,
        retention_ms: int = -1,
        instance: str | None = None,
    ) -> object:
        token = next(self.tokens)
        request = OffsetCommitRequest(
            token,
            group,
            tuple((tp, OffsetAndMetadata(o, 3, f"m{o}")) for tp, o in offsets.items()),
            generation,
            member_id,
            instance,
            retention_time_ms=retention_ms,
        )
        self.last_token = token
        self.apply(self.coordinator.offset_commit(request, self.now))
        return self.responses.get(token)  # None while its append is held in flight

    def advance(self, ms: int) -> None:
        """Move the clock, firing every deadline on the way in order."""
        target = self.now + ms
        while True:
            deadline = self.coordinator.next_deadline_ms()
            if deadline is None or deadline > target:
                break
            self.now = max(self.now, deadline)
            self.apply(self.coordinator.tick(self.now))
        self.now = target
        self.apply(self.coordinator.tick(self.now))


def make_coordinator(
    config: GroupConfig | None = None, partitions: int = 4, owned: bool = True
) -> GroupCoordinator:
    ids = itertools.count(1)
    coordinator = GroupCoordinator(
        config or GroupConfig(group_initial_rebalance_delay_ms=0),
        partitions,
        new_member_id=lambda prefix: f"{prefix}-{next(ids)}",
    )
    if owned:
        for p in range(partitions):
            coordinator.load(p, [], 0)
    return coordinator


@pytest.fixture
def make_harness() -> Callable[..., Harness]:
    def factory(config: GroupConfig | None = None, partitions: int = 4) -> Harness:
        return Harness(make_coordinator(config, partitions))

    return factory


@pytest.fixture
def h(make_harness: Callable[..., Harness]) -> Harness:
    return make_harness()
