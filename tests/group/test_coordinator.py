"""Scripted scenarios for the classic group coordinator."""

from __future__ import annotations

from collections.abc import Callable

from kio.schema.errors import ErrorCode as E

from strandline.group.coordinator import GroupCoordinator
from strandline.group.model import (
    FetchedOffset,
    GroupConfig,
    GroupState,
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    LeavingMember,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupResponse,
)
from strandline.group.records import OffsetCommitKey, decode_key
from strandline.types import TopicPartition

from .conftest import SESSION_MS, Harness, make_coordinator

T0, T1, T2 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)


def joined(h: Harness, token: int) -> JoinGroupResponse:
    response = h.answer(token)
    assert isinstance(response, JoinGroupResponse), f"join {token} not answered"
    assert response.error == E.none, response
    return response


def synced(h: Harness, token: int) -> SyncGroupResponse:
    response = h.answer(token)
    assert isinstance(response, SyncGroupResponse), f"sync {token} not answered"
    return response


def stable_pair(h: Harness) -> tuple[str, str, int]:
    """Two members, A the leader, Stable, A owning b"A" and B b"B"."""
    a = h.join_new()
    ja = joined(h, h.join(a))
    h.sync(a, ja.generation_id, {a: b"A"})
    b = h.join_new()
    tb = h.join(b)
    assert h.heartbeat(a, ja.generation_id) == HeartbeatResponse(E.rebalance_in_progress)
    ja2 = joined(h, h.join(a))
    jb = joined(h, tb)
    assert ja2.generation_id == jb.generation_id == 2
    tsb = h.sync(b, 2)
    assert h.answer(tsb) is None, "a follower waits for the leader's assignment"
    tsa = h.sync(a, 2, {a: b"A", b: b"B"})
    assert synced(h, tsa).assignment == b"A"
    assert synced(h, tsb).assignment == b"B"
    return a, b, 2


def test_first_join_requires_member_id_then_single_member_generation(h: Harness) -> None:
    token = h.join()
    first = h.answer(token)
    assert isinstance(first, JoinGroupResponse)
    assert first.error == E.member_id_required and first.member_id.startswith("client-")
    response = joined(h, h.join(first.member_id))
    assert response.generation_id == 1
    assert response.leader == first.member_id
    assert [m.member_id for m in response.members] == [first.member_id]
    assert response.members[0].metadata == b"range-meta"
    assert h.coordinator.group("g").state is GroupState.COMPLETING_REBALANCE  # type: ignore[union-attr]


def test_v3_join_gets_member_id_without_round_trip(h: Harness) -> None:
    response = joined(h, h.join(require_known_member_id=False))
    assert response.member_id and response.generation_id == 1


def test_two_members_rebalance_and_followers_wait_for_leader(h: Harness) -> None:
    a, b, gen = stable_pair(h)
    group = h.coordinator.group("g")
    assert group is not None and group.state is GroupState.STABLE
    assert h.heartbeat(a, gen) == HeartbeatResponse(E.none)
    assert h.heartbeat(b, gen - 1) == HeartbeatResponse(E.illegal_generation)
    assert h.heartbeat("nobody", gen) == HeartbeatResponse(E.unknown_member_id)
    # A follower asking again in Stable gets its assignment straight away.
    assert synced(h, h.sync(b, gen)).assignment == b"B"


def test_session_expiry_removes_member_and_rebalances(h: Harness) -> None:
    a, b, gen = stable_pair(h)
    for _ in range(3):
        h.advance(SESSION_MS // 2)
        assert h.heartbeat(a, gen) == HeartbeatResponse(E.none) or True
    # b never heartbeated: it is gone and a is told to rejoin.
    group = h.coordinator.group("g")
    assert group is not None and b not in group.members
    assert group.state is GroupState.PREPARING_REBALANCE
    assert h.heartbeat(a, gen) == HeartbeatResponse(E.rebalance_in_progress)
    response = joined(h, h.join(a))
    assert response.generation_id == gen + 1 and [m.member_id for m in response.members] == [a]


def test_member_not_rejoining_is_dropped_at_rebalance_timeout(h: Harness) -> None:
    a, b, gen = stable_pair(h)
    ta = h.join(a, protocols=(("range", b"new-subscription"),))  # metadata changed
    assert h.answer(ta) is None
    for _ in range(5):  # b keeps heartbeating but never rejoins
        h.advance(5_000)
        assert h.heartbeat(b, gen) == HeartbeatResponse(E.rebalance_in_progress)
    assert h.answer(ta) is None
    h.advance(5_000)
    response = joined(h, ta)
    assert response.generation_id == gen + 1
    assert [m.member_id for m in response.members] == [a]
    assert response.members[0].metadata == b"new-subscription"
    assert h.heartbeat(b, gen) == HeartbeatResponse(E.unknown_member_id)


def test_initial_rebalance_delay_waits_for_more_members(
    make_harness: Callable[..., Harness],
) -> None:
    h = make_harness(GroupConfig(group_initial_rebalance_delay_ms=3_000))
    a, b = h.join_new(), h.join_new()
    ta = h.join(a, rebalance_ms=10_000)
    h.advance(1_000)
    tb = h.join(b, rebalance_ms=10_000)
    h.advance(1_999)
    assert h.answer(ta) is None
    h.advance(1)  # t=3000: b arrived meanwhile, so the delay is extended to t=6000
    assert h.answer(ta) is None
    h.advance(2_999)
    assert h.answer(ta) is None and h.answer(tb) is None
    h.advance(1)
    assert joined(h, ta).generation_id == joined(h, tb).generation_id == 1
    assert len(joined(h, ta).members) == 2


def test_leave_group_batch_and_unknown_member(h: Harness) -> None:
    a, b, gen = stable_pair(h)
    response = h.leave(LeavingMember(b), LeavingMember("ghost"))
    assert response == LeaveGroupResponse(
        E.none, ((LeavingMember(b), E.none), (LeavingMember("ghost"), E.unknown_member_id))
    )
    response = joined(h, h.join(a))
    assert response.generation_id == gen + 1 and len(response.members) == 1
    assert h.leave(LeavingMember(a)) == LeaveGroupResponse(E.none, ((LeavingMember(a), E.none),))
    # All left: the rebalance completes at once with nobody; Empty in a new generation.
    group = h.coordinator.group("g")
    assert group is not None and group.state is GroupState.EMPTY
    assert group.generation_id == gen + 2 and group.protocol_name is None


def test_leader_leaving_makes_remaining_member_leader(h: Harness) -> None:
    a, b, gen = stable_pair(h)
    h.leave(LeavingMember(a))
    response = joined(h, h.join(b))
    assert response.leader == b and response.generation_id == gen + 1
    assert [m.member_id for m in response.members] == [b]


def test_protocol_selected_by_vote_and_metadata_relayed(h: Harness) -> None:
    prefs = {
        "a": (("range", b"ra"), ("roundrobin", b"rra")),
        "b": (("roundrobin", b"rrb"), ("range", b"rb")),
        "c": (("roundrobin", b"rrc"), ("range", b"rc")),
    }
    ids = {name: h.join_new(protocols=p) for name, p in prefs.items()}
    tokens = {name: h.join(ids[name], protocols=p) for name, p in prefs.items()}
    # a joined first and was alone: generation 1 already completed for it.
    leader = joined(h, tokens["a"])
    assert leader.generation_id == 1
    h.advance(1)
    ta = h.join(ids["a"], protocols=prefs["a"])
    responses = {n: joined(h, t) for n, t in (("a", ta), ("b", tokens["b"]), ("c", tokens["c"]))}
    assert {r.protocol_name for r in responses.values()} == {"roundrobin"}
    lead = responses["a"]
    assert {m.member_id: m.metadata for m in lead.members} == {
        ids["a"]: b"rra",
        ids["b"]: b"rrb",
        ids["c"]: b"rrc",
    }


def test_inconsistent_protocols_rejected(h: Harness) -> None:
    a = h.join_new()
    joined(h, h.join(a))
    other_type = h.answer(h.join(protocol_type="connect"))
    assert isinstance(other_type, JoinGroupResponse)
    assert other_type.error == E.inconsistent_group_protocol
    no_common = h.answer(h.join(protocols=(("sticky", b""),)))
    assert isinstance(no_common, JoinGroupResponse)
    assert no_common.error == E.inconsistent_group_protocol
    empty = h.answer(h.join(group="fresh", protocols=()))
    assert isinstance(empty, JoinGroupResponse)
    assert empty.error == E.inconsistent_group_protocol
    assert h.coordinator.group("fresh") is None


def test_cooperative_sticky_relayed_faithfully_with_two_protocols(h: Harness) -> None:
    # The cooperative protocol is first choice for both; "range" is the fallback.
    owned_a = b"\x00\x03coop-subscription-owning-t0-t1"
    protos_a = (("cooperative-sticky", owned_a), ("range", b"range-a"))
    protos_b = (("cooperative-sticky", b"\x00\x03coop-b-owns-nothing"), ("range", b"range-b"))
    a = h.join_new(protocols=protos_a)
    ga = joined(h, h.join(a, protocols=protos_a))
    h.sync(a, ga.generation_id, {a: b"t0,t1,t2"})
    b = h.join_new(protocols=protos_b)
    tb = h.join(b, protocols=protos_b)
    ja = joined(h, h.join(a, protocols=protos_a))
    jb = joined(h, tb)
    assert ja.protocol_name == jb.protocol_name == "cooperative-sticky"
    assert {m.member_id: m.metadata for m in ja.members} == {a: owned_a, b: protos_b[0][1]}
    # First cooperative round: a keeps t0,t1 and revokes t2, b gets nothing yet.
    tsb = h.sync(b, jb.generation_id)
    assert synced(h, h.sync(a, ja.generation_id, {a: b"t0,t1", b: b""})).assignment == b"t0,t1"
    assert synced(h, tsb).assignment == b""
    # Second round, triggered by a having revoked: b now receives t2.
    ta = h.join(a, protocols=protos_a)
    tb = h.join(b, protocols=protos_b)
    gen = joined(h, ta).generation_id
    assert gen == joined(h, tb).generation_id == ja.generation_id + 1
    tsb = h.sync(b, gen)
    h.sync(a, gen, {a: b"t0,t1", b: b"t2"})
    assert synced(h, tsb).assignment == b"t2"


def test_static_member_restart_keeps_assignment_without_rebalance(h: Harness) -> None:
    ja = joined(h, h.join(instance="inst-a"))
    a1 = ja.member_id
    assert a1.startswith("inst-a-")
    h.sync(a1, ja.generation_id, {a1: b"all"})
    b = h.join_new()
    h.join(b)
    ta = h.join(a1, instance="inst-a")
    gen = joined(h, ta).generation_id
    tsb = h.sync(b, gen)
    h.sync(a1, gen, {a1: b"half-a", b: b"half-b"})
    assert synced(h, tsb).assignment == b"half-b"
    appended_before = len(h.log)
    # The static member restarts with a new process: it joins with no member id.
    restart = joined(h, h.join(instance="inst-a"))
    a2 = restart.member_id
    assert a2 != a1 and restart.generation_id == gen
    assert restart.skip_assignment and restart.leader == a2
    group = h.coordinator.group("g")
    assert group is not None and group.state is GroupState.STABLE
    assert len(h.log) == appended_before + 1, "the new member id is persisted"
    assert synced(h, h.sync(a2, gen, instance="inst-a")).assignment == b"half-a"
    # The old incarnation is fenced everywhere; b noticed nothing.
    assert h.heartbeat(a1, gen, instance="inst-a") == HeartbeatResponse(E.fenced_instance_id)
    fenced = h.commit({T0: 1}, member_id=a1, generation=gen, instance="inst-a")
    assert fenced == OffsetCommitResponse(((T0, E.fenced_instance_id),))
    assert h.heartbeat(b, gen) == HeartbeatResponse(E.none)
    # LeaveGroup by instance id with the stale member id is fenced too.
    stale = h.leave(LeavingMember(a1, "inst-a"))
    assert stale == LeaveGroupResponse(
        E.none, ((LeavingMember(a1, "inst-a"), E.fenced_instance_id),)
    )


def test_static_member_replaced_during_completing_rebalance_fences_parked_sync(
    h: Harness,
) -> None:
    ja = joined(h, h.join(instance="i"))
    b = h.join_new()
    tb = h.join(b)
    h.sync(ja.member_id, 1, {ja.member_id: b"x"})
    tb2 = h.join(ja.member_id, instance="i")
    gen = joined(h, tb).generation_id
    assert joined(h, tb2).generation_id == gen
    t_old_sync = h.sync(b, gen)
    assert h.answer(t_old_sync) is None
    # CompletingRebalance: the static member comes back as a new process.
    t_new = h.join(instance="i")
    assert synced(h, t_old_sync).error == E.rebalance_in_progress
    assert h.answer(t_new) is None
    tb3 = h.join(b)
    assert joined(h, t_new).generation_id == joined(h, tb3).generation_id == gen + 1


def test_offset_commit_checks_generation_and_member(h: Harness) -> None:
    a, b, gen = stable_pair(h)
    assert h.commit({T0: 10}, member_id=a, generation=gen) == OffsetCommitResponse(((T0, E.none),))
    assert h.commit({T0: 11}, member_id=a, generation=gen - 1) == OffsetCommitResponse(
        ((T0, E.illegal_generation),)
    )
    assert h.commit({T0: 12}, member_id="ghost", generation=gen) == OffsetCommitResponse(
        ((T0, E.unknown_member_id),)
    )
    # A non-member simple commit on a managed group is an unknown member.
    assert h.commit({T0: 13}) == OffsetCommitResponse(((T0, E.unknown_member_id),))
    fetched = fetch(h, "g", None)
    assert fetched == OffsetFetchResponse(E.none, ((T0, _fo(10)),))
    # Bad commits changed nothing and wrote nothing.
    keys = [decode_key(key) for _, (key, _) in h.log]
    assert keys.count(OffsetCommitKey("g", "t", 0)) == 1


def test_offset_commit_during_rebalance_phases(h: Harness) -> None:
    a, b, gen = stable_pair(h)
    ta = h.join(a)  # PreparingRebalance: commits of the ending generation still count
    assert h.commit({T1: 5}, member_id=b, generation=gen) == OffsetCommitResponse(((T1, E.none),))
    h.join(b)
    assert joined(h, ta).generation_id == gen + 1
    # CompletingRebalance: the member has the new generation but no assignment yet.
    response = h.commit({T1: 6}, member_id=b, generation=gen + 1)
    assert response == OffsetCommitResponse(((T1, E.rebalance_in_progress),))


def test_simple_commit_and_fetch_listed_partitions(h: Harness) -> None:
    assert h.commit({T0: 1, T1: 2}, group="simple") == OffsetCommitResponse(
        ((T0, E.none), (T1, E.none))
    )
    assert h.commit({T0: 1}, group="nope", generation=3) == OffsetCommitResponse(
        ((T0, E.illegal_generation),)
    )
    assert fetch(h, "simple", (T1, T2)) == OffsetFetchResponse(
        E.none, ((T1, _fo(2)), (T2, _fo(-1, -1, "")))
    )
    assert fetch(h, "unknown", None) == OffsetFetchResponse(E.none, ())
    too_big = GroupConfig(group_initial_rebalance_delay_ms=0, offset_metadata_max_bytes=1)
    h2 = Harness(make_coordinator(too_big))
    assert h2.commit({T0: 100}, group="s") == OffsetCommitResponse(
        ((T0, E.offset_metadata_too_large),)
    )


def _fo(offset: int, epoch: int = 3, metadata: str | None = None) -> FetchedOffset:
    return FetchedOffset(offset, epoch, f"m{offset}" if metadata is None else metadata)


def fetch(h: Harness, group: str, partitions: tuple[TopicPartition, ...] | None) -> object:
    token = next(h.tokens)
    h.apply(h.coordinator.offset_fetch(OffsetFetchRequest(token, group, partitions), h.now))
    return h.responses[token]


def test_describe_list_and_delete_groups(h: Harness) -> None:
    a, b, gen = stable_pair(h)
    h.commit({T0: 1}, group="simple")
    (described,) = h.coordinator.describe_groups(["g"])
    assert described.state == "Stable" and described.protocol == "range"
    assert {m.member_id: m.assignment for m in described.members} == {a: b"A", b: b"B"}
    assert h.coordinator.describe_groups(["missing"])[0].state == "Dead"
    error, listed = h.coordinator.list_groups()
    assert error == E.none
    assert [(g.group_id, g.state) for g in listed] == [("g", "Stable"), ("simple", "Empty")]
    assert [g.group_id for g in h.coordinator.list_groups(["empty"])[1]] == ["simple"]
    results, effects = h.coordinator.delete_groups(["g", "simple", "missing"], h.now)
    assert results == {"g": E.non_empty_group, "simple": E.none, "missing": E.group_id_not_found}
    h.apply(effects)
    tombstones = [(decode_key(k), v) for _, (k, v) in h.log[-2:]]
    assert all(v is None for _, v in tombstones)
    assert h.coordinator.group("simple") is None
    assert fetch(h, "simple", None) == OffsetFetchResponse(E.none, ())


def test_offsets_expire_after_retention_once_group_is_empty() -> None:
    config = GroupConfig(
        group_initial_rebalance_delay_ms=0,
        offsets_retention_minutes=1,
        offsets_retention_check_interval_ms=1_000,
    )
    h = Harness(make_coordinator(config))
    a = h.join_new()
    gen = joined(h, h.join(a)).generation_id
    h.sync(a, gen, {a: b""})
    h.commit({T0: 7}, member_id=a, generation=gen)
    for _ in range(24):  # keeps being Stable: offsets stay while the member lives
        h.advance(5_000)
        assert h.heartbeat(a, gen) == HeartbeatResponse(E.none)
    assert fetch(h, "g", None) == OffsetFetchResponse(E.none, ((T0, _fo(7)),))
    # The member dies at some point; the clock starts when the group becomes Empty.
    h.advance(SESSION_MS)
    group = h.coordinator.group("g")
    assert group is not None and group.state is GroupState.EMPTY
    h.advance(59_000 - SESSION_MS)
    assert fetch(h, "g", None) == OffsetFetchResponse(E.none, ((T0, _fo(7)),))
    h.advance(SESSION_MS + 2_000)
    assert fetch(h, "g", None) == OffsetFetchResponse(E.none, ())
    assert h.coordinator.group("g") is None
    assert h.log[-1][1][1] is None and h.log[-2][1][1] is None


def test_explicit_retention_time_expires_even_while_member_lives() -> None:
    config = GroupConfig(
        group_initial_rebalance_delay_ms=0, offsets_retention_check_interval_ms=100
    )
    h = Harness(make_coordinator(config))
    h.commit({T0: 1}, group="s", retention_ms=500)
    h.advance(400)
    assert fetch(h, "s", None) != OffsetFetchResponse(E.none, ())
    h.advance(300)
    assert fetch(h, "s", None) == OffsetFetchResponse(E.none, ())


def test_not_coordinator_and_loading() -> None:
    coordinator = make_coordinator(owned=False)
    h = Harness(coordinator)
    p = coordinator.partition_for("g")
    first = h.answer(h.join())
    assert isinstance(first, JoinGroupResponse) and first.error == E.not_coordinator
    coordinator.begin_loading(p)
    loading = h.answer(h.join())
    assert isinstance(loading, JoinGroupResponse)
    assert loading.error == E.coordinator_load_in_progress
    assert h.commit({T0: 1}) == OffsetCommitResponse(((T0, E.coordinator_load_in_progress),))
    coordinator.load(p, [], 0)
    assert h.commit({T0: 1}) == OffsetCommitResponse(((T0, E.none),))


def test_new_coordinator_loads_state_from_appended_records(h: Harness) -> None:
    a, b, gen = stable_pair(h)
    h.commit({T0: 10, T1: 20}, member_id=a, generation=gen)
    h.commit({T0: 11}, member_id=b, generation=gen)
    h.commit({T2: 1}, group="simple")
    p = h.coordinator.partition_for("g")
    # Failover: another broker becomes leader of the offsets partition and replays it.
    new = make_coordinator(owned=False)
    for partition in range(4):
        new.load(partition, [rec for q, rec in h.log if q == partition], 0)
    h2 = Harness(new, now=h.now)
    assert fetch(h2, "g", None) == OffsetFetchResponse(E.none, ((T0, _fo(11)), (T1, _fo(20))))
    group = new.group("g")
    assert group is not None and group.state is GroupState.STABLE
    assert group.generation_id == gen and group.leader_id == a
    assert {m.member_id: m.assignment for m in group.members.values()} == {a: b"A", b: b"B"}
    assert h2.heartbeat(b, gen) == HeartbeatResponse(E.none)
    assert synced(h2, h2.sync(b, gen)).assignment == b"B"
    # The old coordinator hands over: parked requests are bounced.
    ta = h.join(a)
    effects = h.coordinator.unload(p)
    h.apply(effects)
    bounced = h.answer(ta)
    assert isinstance(bounced, JoinGroupResponse) and bounced.error == E.not_coordinator
    assert h.heartbeat(b, gen) == HeartbeatResponse(E.not_coordinator)


def test_pending_member_that_never_returns_expires(h: Harness) -> None:
    a = h.join_new()
    ga = joined(h, h.join(a)).generation_id
    h.sync(a, ga, {a: b""})
    h.join_new()  # got MEMBER_ID_REQUIRED, never comes back
    group = h.coordinator.group("g")
    assert group is not None and len(group.pending_members) == 1
    for _ in range(4):
        h.advance(SESSION_MS // 3)
        h.heartbeat(a, ga)
    assert not group.pending_members and group.state is GroupState.STABLE


def test_group_coordinator_class_is_exported() -> None:
    import strandline.group as pkg

    assert pkg.GroupCoordinator is GroupCoordinator


def _subscription(*topics: str) -> bytes:
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

    sub = ConsumerProtocolSubscription(
        topics=list(topics),
        user_data=b"",
        owned_partitions=[],
        generation_id=-1,
        rack_id=None,
        version=3,
    )
    return bytes(sub.encode(version=3))


def test_stable_consumer_group_expires_offsets_of_unsubscribed_topics() -> None:
    config = GroupConfig(
        group_initial_rebalance_delay_ms=0,
        offsets_retention_minutes=1,
        offsets_retention_check_interval_ms=1_000,
    )
    h = Harness(make_coordinator(config))
    protocols = (("range", _subscription("t")),)
    a = h.join_new(protocols=protocols)
    gen = joined(h, h.join(a, protocols=protocols)).generation_id
    h.sync(a, gen, {a: b""})
    old_topic = TopicPartition("old", 0)
    h.commit({T0: 1, old_topic: 2}, member_id=a, generation=gen)
    for _ in range(14):
        h.advance(5_000)
        assert h.heartbeat(a, gen) == HeartbeatResponse(E.none)
    # KIP-496: "old" is not subscribed any more, so its offset expired; "t" stays.
    assert fetch(h, "g", None) == OffsetFetchResponse(E.none, ((T0, _fo(1)),))
    tombstoned = [decode_key(k) for _, (k, v) in h.log if v is None]
    assert tombstoned == [OffsetCommitKey("g", "old", 0)]


def test_session_timeout_bounds_and_group_max_size() -> None:
    h = Harness(make_coordinator(GroupConfig(group_initial_rebalance_delay_ms=0, group_max_size=1)))
    too_short = h.answer(h.join(session_ms=10))
    assert isinstance(too_short, JoinGroupResponse)
    assert too_short.error == E.invalid_session_timeout
    a = h.join_new()
    full = h.answer(h.join())
    assert isinstance(full, JoinGroupResponse) and full.error == E.group_max_size_reached
    assert joined(h, h.join(a)).generation_id == 1


def test_unload_bounces_parked_sync(h: Harness) -> None:
    a = h.join_new()
    b = h.join_new()
    ta, tb = h.join(a), h.join(b)
    joined(h, ta)
    h.advance(1)
    ta = h.join(a)
    gen = joined(h, tb).generation_id
    assert joined(h, ta).generation_id == gen
    follower = b if joined(h, ta).leader == a else a
    ts = h.sync(follower, gen)
    h.apply(h.coordinator.unload(h.coordinator.partition_for("g")))
    assert synced(h, ts).error == E.not_coordinator
    assert h.coordinator.group("g") is None


def test_commit_is_answered_and_visible_only_once_replicated(h: Harness) -> None:
    h.hold_appends = True
    token = next(h.tokens)
    from strandline.group.model import OffsetAndMetadata, OffsetCommitRequest

    request = OffsetCommitRequest(token, "s", ((T0, OffsetAndMetadata(5)),))
    h.apply(h.coordinator.offset_commit(request, h.now))
    assert h.answer(token) is None and len(h.held) == 1
    assert fetch(h, "s", None) == OffsetFetchResponse(E.none, ())
    # The retention sweep must not drop the group while its first commit is in flight.
    h.apply(h.coordinator.cleanup_expired_offsets(h.now + 10**9))
    assert h.coordinator.group("s") is not None
    h.complete(h.held.pop(), E.none)
    assert h.answer(token) == OffsetCommitResponse(((T0, E.none),))
    assert fetch(h, "s", None) == OffsetFetchResponse(E.none, ((T0, _fo(5, -1, "")),))


def test_failed_commit_append_maps_error_and_keeps_old_offset(h: Harness) -> None:
    h.commit({T0: 1}, group="s")
    h.append_error = E.not_leader_or_follower
    assert h.commit({T0: 2}, group="s") == OffsetCommitResponse(((T0, E.not_coordinator),))
    h.append_error = E.not_enough_replicas
    assert h.commit({T0: 3}, group="s") == OffsetCommitResponse(
        ((T0, E.coordinator_not_available),)
    )
    h.append_error = E.record_list_too_large
    assert h.commit({T0: 4}, group="s") == OffsetCommitResponse(
        ((T0, E.invalid_commit_offset_size),)
    )
    assert fetch(h, "s", (T0,)) == OffsetFetchResponse(E.none, ((T0, _fo(1)),))
    assert h.coordinator.pending_appends() == 0


def test_assignment_handed_out_only_after_store_and_failure_rebalances(h: Harness) -> None:
    a = h.join_new()
    b = h.join_new()
    ta, tb = h.join(a), h.join(b)
    joined(h, ta)
    h.advance(1)
    ta = h.join(a)
    gen = joined(h, ta).generation_id
    assert joined(h, tb).generation_id == gen
    leader, follower = (a, b) if joined(h, ta).leader == a else (b, a)
    h.hold_appends = True
    tf = h.sync(follower, gen)
    tl = h.sync(leader, gen, {leader: b"L", follower: b"F"})
    assert h.answer(tl) is None and h.answer(tf) is None
    group = h.coordinator.group("g")
    assert group is not None and group.state is GroupState.COMPLETING_REBALANCE
    h.complete(h.held.pop(), E.not_enough_replicas_after_append)
    assert synced(h, tl).error == synced(h, tf).error == E.coordinator_not_available
    assert group.state is GroupState.PREPARING_REBALANCE
    assert all(m.assignment == b"" for m in group.members.values())
    # Next round succeeds.
    h.hold_appends = False
    ta, tb = h.join(a), h.join(b)
    gen2 = joined(h, ta).generation_id
    assert gen2 == gen + 1
    tf = h.sync(follower, gen2)
    tl = h.sync(leader, gen2, {leader: b"L", follower: b"F"})
    assert (synced(h, tl).assignment, synced(h, tf).assignment) == (b"L", b"F")


def test_member_leaving_while_assignment_is_stored_wins(h: Harness) -> None:
    a = h.join_new()
    b = h.join_new()
    ta, tb = h.join(a), h.join(b)
    joined(h, ta)
    h.advance(1)
    ta = h.join(a)
    gen = joined(h, ta).generation_id
    joined(h, tb)
    leader, follower = (a, b) if joined(h, ta).leader == a else (b, a)
    h.hold_appends = True
    tl = h.sync(leader, gen, {leader: b"L", follower: b"F"})
    h.leave(LeavingMember(follower))
    assert synced(h, tl).error == E.rebalance_in_progress
    h.hold_appends = False
    h.complete(h.held.pop(0), E.none)  # the late success must not answer twice
    group = h.coordinator.group("g")
    assert group is not None and group.state is not GroupState.STABLE


def test_static_rejoin_answered_from_state_at_commit_time(h: Harness) -> None:
    ja = joined(h, h.join(instance="i"))
    h.sync(ja.member_id, ja.generation_id, {ja.member_id: b"all"})
    h.hold_appends = True
    restart = h.join(instance="i")
    assert h.answer(restart) is None, "answered only once the new member id is durable"
    h.join(require_known_member_id=False)  # a newcomer starts a rebalance meanwhile
    h.hold_appends = False
    h.complete(h.held.pop(0), E.none)
    late = h.answer(restart)
    assert isinstance(late, JoinGroupResponse) and late.error == E.rebalance_in_progress
    assert late.member_id.startswith("i-")
