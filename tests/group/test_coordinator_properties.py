"""Random join/sync/heartbeat/leave/restart/clock schedules against the coordinator.

Simulated clients behave like real consumers (they only send what a client in their
state may send); the coordinator must keep the classic protocol's guarantees whatever
the interleaving and timing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode as E

from strandline.group.model import (
    GroupConfig,
    GroupState,
    JoinGroupResponse,
    LeavingMember,
    OffsetCommitResponse,
    SyncGroupResponse,
)
from strandline.types import TopicPartition

from .conftest import Harness, make_coordinator

PARTITIONS = 12
SESSION = 10_000
REBALANCE = 20_000
PROTOCOLS = (("cooperative-sticky", b"coop"), ("range", b"range"))


@dataclass
class Client:
    name: str
    instance: str | None
    member_id: str = ""
    join_token: int | None = None
    sync_token: int | None = None
    sync_generation: int = -1
    generation: int = -1
    leader: bool = False
    members: tuple[str, ...] = ()


def assign(members: tuple[str, ...]) -> dict[str, list[int]]:
    ordered = sorted(members)
    return {
        m: [p for p in range(PARTITIONS) if p % len(ordered) == i] for i, m in enumerate(ordered)
    }


class World:
    def __init__(self, n_clients: int, n_static: int) -> None:
        config = GroupConfig(group_initial_rebalance_delay_ms=0)
        self.h = Harness(make_coordinator(config, partitions=1))
        self.clients = [
            Client(f"c{i}", f"inst{i}" if i < n_static else None) for i in range(n_clients)
        ]
        self.owner_of_id: dict[str, str] = {}
        # generation -> member id -> partitions, as the effective leader assigned them
        self.expected: dict[int, dict[str, list[int]]] = {}
        self.instance_of: dict[str, str] = {}  # member id -> group.instance.id
        self.owned: dict[int, dict[str, list[int]]] = {}
        self.issued: set[int] = set()
        self.max_generation = 0
        self.pending_syncs: dict[int, tuple[Client, int]] = {}
        self.pending_joins: dict[int, Client] = {}
        self.join_owner: dict[int, str] = {}

    # -- actions ------------------------------------------------------------------------------

    def join(self, c: Client) -> None:
        if c.join_token is not None:
            return
        token = self.h.join(
            c.member_id,
            instance=c.instance,
            protocols=PROTOCOLS,
            session_ms=SESSION,
            rebalance_ms=REBALANCE,
        )
        c.join_token = token
        self.pending_joins[token] = c
        self.join_owner[token] = c.name
        self.issued.add(token)

    def sync(self, c: Client) -> None:
        if c.sync_token is not None or c.generation < 0 or not c.member_id:
            return
        assignments: dict[str, bytes] = {}
        group = self.h.coordinator.group("g")
        if c.leader:
            plan = assign(c.members)
            assignments = {m: json.dumps(p).encode() for m, p in plan.items()}
            effective = (
                group is not None
                and group.state is GroupState.COMPLETING_REBALANCE
                and group.generation_id == c.generation
                and group.leader_id == c.member_id
                and not group.assignment_store_pending
            )
            if effective:
                assert c.generation not in self.expected
                self.expected[c.generation] = plan
        token = self.h.sync(c.member_id, c.generation, assignments, instance=c.instance)
        c.sync_token = token
        self.pending_syncs[token] = (c, c.generation)
        self.issued.add(token)

    def heartbeat(self, c: Client) -> None:
        if c.member_id:
            response = self.h.heartbeat(c.member_id, c.generation, instance=c.instance)
            assert response.error in {  # type: ignore[attr-defined]
                E.none,
                E.rebalance_in_progress,
                E.illegal_generation,
                E.unknown_member_id,
                E.fenced_instance_id,
            }

    def leave(self, c: Client) -> None:
        if c.member_id:
            self.h.leave(LeavingMember(c.member_id, c.instance))
            self.restart(c)

    def commit(self, c: Client) -> None:
        response = self.h.commit(
            {TopicPartition("t", 0): 1},
            member_id=c.member_id,
            generation=c.generation,
            instance=c.instance,
        )
        if response is None:  # in flight until the held appends are flushed
            self.issued.add(self.h.last_token)
            return
        assert isinstance(response, OffsetCommitResponse)
        ((_, error),) = response.errors
        assert error in {
            E.none,
            E.rebalance_in_progress,
            E.illegal_generation,
            E.unknown_member_id,
            E.fenced_instance_id,
            E.coordinator_not_available,  # the append failed
        }
        if error is E.none and c.generation >= 0:
            group = self.h.coordinator.group("g")
            assert group is not None and c.member_id in group.members
            assert group.generation_id == c.generation

    def hold(self, c: Client) -> None:
        """From now on the shell's appends are slow: they stay in flight until a flush."""
        del c
        self.h.hold_appends = True

    def flush(self, c: Client) -> None:
        """Complete the in-flight appends in order; odd clients make them fail."""
        error = E.none if int(c.name[1:]) % 2 == 0 else E.not_enough_replicas
        self.h.hold_appends = False
        held, self.h.held = self.h.held, []
        for effect in held:
            self.h.complete(effect, error)

    def restart(self, c: Client) -> None:
        """The process dies and a new one starts: outstanding requests are abandoned."""
        for token in (c.join_token, c.sync_token):
            if token is not None:
                self.pending_joins.pop(token, None)
                self.pending_syncs.pop(token, None)
        c.member_id, c.generation, c.leader, c.members = "", -1, False, ()
        c.join_token = c.sync_token = None

    # -- responses ------------------------------------------------------------------------------

    def deliver(self) -> None:
        # Learn every new member id first: a leader's member list may name a member whose
        # own JoinGroup answer comes later in the same batch of effects.
        # Abandoned requests count too: a dead process's member lingers until it expires.
        for token, name in self.join_owner.items():
            answered = self.h.answer(token)
            if isinstance(answered, JoinGroupResponse) and answered.member_id:
                self.owner_of_id.setdefault(answered.member_id, name)
                instance = self.clients[int(name[1:])].instance
                if instance is not None:
                    self.instance_of[answered.member_id] = instance
        for token, c in list(self.pending_joins.items()):
            response = self.h.answer(token)
            if response is None:
                continue
            del self.pending_joins[token]
            c.join_token = None
            assert isinstance(response, JoinGroupResponse)
            if response.error is E.member_id_required:
                c.member_id = response.member_id
                self.owner_of_id[c.member_id] = c.name
            elif response.error is E.none:
                assert response.generation_id >= self.max_generation
                self.max_generation = response.generation_id
                c.member_id = response.member_id
                self.owner_of_id[c.member_id] = c.name
                c.generation = response.generation_id
                c.leader = response.leader == c.member_id
                c.members = tuple(m.member_id for m in response.members)
                assert c.leader == bool(c.members) or response.skip_assignment
                if c.leader:
                    assert c.member_id in c.members
                    for m in c.members:
                        assert m in self.owner_of_id
            elif response.error in (E.unknown_member_id, E.fenced_instance_id):
                c.member_id, c.generation = "", -1
            else:
                # coordinator_not_available: a static rejoin whose metadata write failed
                assert response.error in (E.rebalance_in_progress, E.coordinator_not_available)
        for token, (c, generation) in list(self.pending_syncs.items()):
            response = self.h.answer(token)
            if response is None:
                continue
            del self.pending_syncs[token]
            c.sync_token = None
            assert isinstance(response, SyncGroupResponse)
            if response.error is not E.none:
                assert response.error in {
                    E.rebalance_in_progress,
                    E.unknown_member_id,
                    E.illegal_generation,
                    E.fenced_instance_id,
                    E.coordinator_not_available,  # the assignment could not be stored
                }, response
                continue
            parts = json.loads(response.assignment) if response.assignment else []
            # Exactly what the leader assigned to this consumer in this generation.
            assert parts == self.expected_for(generation, c.member_id)
            owner = c.instance or c.member_id  # a restarted static member is the same owner
            owners = self.owned.setdefault(generation, {})
            for other, other_parts in owners.items():
                if other != owner:
                    assert not set(parts) & set(other_parts), "two owners of a partition"
            owners[owner] = parts

    def expected_for(
        self, generation: int, member_id: str, instance: str | None = None
    ) -> list[int]:
        plan = self.expected[generation]
        if member_id in plan:
            return plan[member_id]
        instance = instance or self.instance_of.get(member_id)
        # KIP-345: a static member that restarted inherits its predecessor's assignment.
        for old_id, parts in plan.items():
            if instance is not None and self.instance_of.get(old_id) == instance:
                return parts
        return []

    def check(self) -> None:
        group = self.h.coordinator.group("g")
        if group is None:
            return
        assert group.generation_id >= self.max_generation
        self.max_generation = group.generation_id
        assert (group.leader_id is None) == (not group.members)
        for instance, member_id in group.static_members.items():
            assert group.members[member_id].group_instance_id == instance
        if group.state is GroupState.STABLE:
            for member in group.members.values():
                expected = self.expected_for(
                    group.generation_id, member.member_id, member.group_instance_id
                )
                actual = json.loads(member.assignment) if member.assignment else []
                assert actual == expected


actions = st.lists(
    st.tuples(
        st.sampled_from(
            ["join"] * 3
            + ["sync"] * 3
            + ["heartbeat"] * 2
            + ["leave", "commit", "restart", "advance", "advance", "hold", "flush"]
        ),
        st.integers(0, 3),
        st.integers(1, 8_000),
    ),
    max_size=100,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(actions, st.integers(0, 2))
def test_random_schedules_keep_the_protocol_guarantees(
    steps: list[tuple[str, int, int]], n_static: int
) -> None:
    world = World(4, n_static)
    for action, who, ms in steps:
        client = world.clients[who]
        if action == "advance":
            world.h.advance(ms)
        else:
            getattr(world, action)(client)
        world.deliver()
        world.check()
    # Liveness: once clients stop and the log catches up, every parked JoinGroup,
    # SyncGroup and OffsetCommit gets its answer.
    world.flush(world.clients[0])
    world.h.advance(10 * REBALANCE)
    unanswered = world.issued - set(world.h.responses)
    assert not unanswered


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=1, max_size=12), st.integers(0, 4))
def test_cooperative_clients_that_follow_the_protocol_converge(
    order: list[int], n_static: int
) -> None:
    """Well-behaved consumers (join, sync, heartbeat) always reach Stable with everyone in."""
    world = World(4, min(n_static, 4))
    for who in order:
        world.join(world.clients[who])
        world.deliver()
    for _ in range(6):
        for c in world.clients:
            if c.member_id and c.join_token is None and c.generation < 0:
                world.join(c)
        world.deliver()
        for c in world.clients:
            world.sync(c)
        world.deliver()
        for c in world.clients:
            world.heartbeat(c)
            if c.member_id and c.join_token is None:
                group = world.h.coordinator.group("g")
                if group is not None and group.state is GroupState.PREPARING_REBALANCE:
                    world.join(c)
        world.deliver()
        world.check()
    group = world.h.coordinator.group("g")
    joined = {world.clients[i].name for i in order}
    assert group is not None and group.state is GroupState.STABLE
    assert {world.owner_of_id[m] for m in group.members} == joined
    owned = world.owned[group.generation_id]
    assert {
        world.owner_of_id.get(o) or next(c.name for c in world.clients if c.instance == o)
        for o in owned
    } == joined
    assert sorted(p for parts in owned.values() for p in parts) == list(range(PARTITIONS))
