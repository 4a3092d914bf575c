"""Pure decisions of partition reassignment (Kafka's AR/leader/ISR table), ElectLeaders
and auto leader rebalance."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from strandline.controller import decisions, reassignment
from strandline.controller.context import NO_LEADER, ControllerContext
from strandline.controller.reassignment import Reassignment
from strandline.coordination.znodes import BrokerRegistration, LeaderAndIsr
from strandline.errors import InvalidReplicaAssignmentError, UnknownTopicOrPartitionError
from strandline.types import TopicPartition

TP = TopicPartition("t", 0)


def make_ctx(
    live: list[int],
    assignments: dict[TopicPartition, tuple[int, ...]],
    states: dict[TopicPartition, LeaderAndIsr],
) -> ControllerContext:
    ctx = ControllerContext(broker_id=1, epoch=7)
    ctx.live_brokers = {
        b: BrokerRegistration(b, "127.0.0.1", 9000 + b, None, epoch=100 + b) for b in live
    }
    ctx.assignments.update(assignments)
    ctx.partition_states.update(states)
    return ctx


def apply(ctx: ControllerContext, e: decisions.Election) -> None:
    ctx.partition_states[e.tp] = e.state


def test_seed_001_table_oar_123_to_rar_456() -> None:
    """AR {1,2,3} -> {1..6} -> leader 4, ISR {4,5,6} -> AR {4,5,6}, row by row."""
    ctx = make_ctx(
        live=[1, 2, 3, 4, 5, 6],
        assignments={TP: (1, 2, 3)},
        states={TP: LeaderAndIsr(1, 3, (1, 2, 3), 7, zk_version=4)},
    )
    r = Reassignment(TP, ctx.assignments[TP], (4, 5, 6))
    assert (r.adding, r.removing) == ((4, 5, 6), (1, 2, 3))

    # Step 2: AR = OAR + RAR, leader and ISR unchanged, leader epoch bumped.
    start = reassignment.plan_start(ctx, r)
    assert start.assignment == (1, 2, 3, 4, 5, 6)
    assert start.election is not None
    assert (start.election.state.leader, start.election.state.isr) == (1, (1, 2, 3))
    assert start.election.state.leader_epoch == 4
    assert start.election.state.zk_version == 4  # conditional on the version we read
    apply(ctx, start.election)
    ctx.assignments[TP] = start.assignment

    # Not before every RAR replica is in the ISR (step 4).
    assert reassignment.plan_completion(ctx, r) is None
    ctx.partition_states[TP] = LeaderAndIsr(1, 4, (1, 2, 3, 4, 5), 7, zk_version=5)
    assert reassignment.plan_completion(ctx, r) is None
    ctx.partition_states[TP] = LeaderAndIsr(1, 4, (1, 2, 3, 4, 5, 6), 7, zk_version=6)

    # Steps 7-10: leader from RAR, ISR without OAR - RAR, AR = RAR.
    done = reassignment.plan_completion(ctx, r)
    assert done is not None
    assert done.election.state.leader == 4
    assert done.election.state.isr == (4, 5, 6)
    assert done.election.state.leader_epoch == 5
    assert done.assignment == (4, 5, 6)


def test_leader_in_target_keeps_leading_and_isr_drops_removed() -> None:
    ctx = make_ctx(
        live=[1, 2, 3],
        assignments={TP: (1, 2)},
        states={TP: LeaderAndIsr(2, 0, (1, 2, 3), 7)},
    )
    r = Reassignment(TP, (1, 2, 3), (2, 3))
    done = reassignment.plan_completion(ctx, r)
    assert done is not None
    assert (done.election.state.leader, done.election.state.isr) == (2, (2, 3))
    assert r.removing == (1,)


def test_new_leader_must_be_alive_and_in_sync() -> None:
    # Leader 1 is leaving; 2 is dead, so 3 leads.
    ctx = make_ctx(
        live=[1, 3],
        assignments={TP: (1, 2, 3)},
        states={TP: LeaderAndIsr(1, 0, (1, 2, 3), 7)},
    )
    done = reassignment.plan_completion(ctx, Reassignment(TP, (1, 2, 3), (2, 3)))
    assert done is not None and done.election.state.leader == 3
    # Nobody of the target alive: wait.
    ctx.live_brokers.pop(3)
    assert reassignment.plan_completion(ctx, Reassignment(TP, (1, 2, 3), (2, 3))) is None


def test_offline_partition_starts_without_election() -> None:
    ctx = make_ctx(live=[1, 2], assignments={TP: (1,)}, states={})
    start = reassignment.plan_start(ctx, Reassignment(TP, (1,), (2,)))
    assert start.election is None and start.assignment == (1, 2)


def test_validate_target() -> None:
    ctx = make_ctx(live=[1, 2], assignments={TP: (1,)}, states={TP: LeaderAndIsr(1, 0, (1,), 7)})
    reassignment.validate_target(ctx, TP, [2, 1])
    with pytest.raises(UnknownTopicOrPartitionError):
        reassignment.validate_target(ctx, TopicPartition("t", 9), [1])
    with pytest.raises(InvalidReplicaAssignmentError):
        reassignment.validate_target(ctx, TP, [])
    with pytest.raises(InvalidReplicaAssignmentError):
        reassignment.validate_target(ctx, TP, [1, 1])
    with pytest.raises(InvalidReplicaAssignmentError) as err:
        reassignment.validate_target(ctx, TP, [1, 3])
    assert err.value.code == ErrorCode.invalid_replica_assignment
    assert reassignment.is_noop(ctx, TP, (1,)) and not reassignment.is_noop(ctx, TP, (2,))


def test_elect_leaders_preferred() -> None:
    a, b, c, d = (TopicPartition("t", i) for i in range(4))
    ctx = make_ctx(
        live=[1, 2, 3],
        assignments={a: (1, 2), b: (2, 1), c: (3, 1), d: (1, 3)},
        states={
            a: LeaderAndIsr(2, 1, (1, 2), 7),  # preferred 1 in sync: moves
            b: LeaderAndIsr(2, 0, (1, 2), 7),  # already preferred
            c: LeaderAndIsr(1, 1, (1,), 7),  # preferred 3 out of sync
            d: LeaderAndIsr(3, 1, (1, 3), 7),
        },
    )
    out = decisions.elect_leaders_on_request(
        ctx, [a, b, c, d, TopicPartition("x", 0)], decisions.PREFERRED_ELECTION, excluded={d}
    )
    assert [(e.tp, e.state.leader, e.state.leader_epoch) for e in out.elections] == [(a, 1, 2)]
    assert out.errors[b][0] == ErrorCode.election_not_needed
    assert out.errors[c][0] == ErrorCode.preferred_leader_not_available
    assert out.errors[d][0] == ErrorCode.invalid_request
    assert out.errors[TopicPartition("x", 0)][0] == ErrorCode.unknown_topic_or_partition


def test_elect_leaders_unclean() -> None:
    a, b, c = (TopicPartition("t", i) for i in range(3))
    ctx = make_ctx(
        live=[2, 3],
        assignments={a: (1, 2), b: (2, 3), c: (1,)},
        states={
            a: LeaderAndIsr(NO_LEADER, 3, (1,), 7),  # ISR dead, 2 out of sync but alive
            b: LeaderAndIsr(2, 0, (2, 3), 7),
            c: LeaderAndIsr(NO_LEADER, 1, (1,), 7),
        },
    )
    out = decisions.elect_leaders_on_request(ctx, [a, b, c], decisions.UNCLEAN_ELECTION)
    [e] = out.elections
    assert (e.tp, e.state.leader, e.state.isr, e.unclean) == (a, 2, (2,), True)
    assert out.errors[b][0] == ErrorCode.election_not_needed
    assert out.errors[c][0] == ErrorCode.eligible_leaders_not_available


def _spread(leaders: list[int]) -> ControllerContext:
    """Ten partitions preferring broker 1 (replicas (1, 2)), led as `leaders` says."""
    tps = [TopicPartition("t", i) for i in range(len(leaders))]
    return make_ctx(
        live=[1, 2],
        assignments={tp: (1, 2) for tp in tps},
        states={tp: LeaderAndIsr(ld, 1, (1, 2), 7) for tp, ld in zip(tps, leaders, strict=True)},
    )


def test_imbalance_ratio_and_threshold() -> None:
    ctx = _spread([1] * 9 + [2])
    assert decisions.leader_imbalance(ctx) == {1: 0.1}
    # Kafka triggers only when the ratio is above the percentage.
    assert decisions.auto_rebalance(ctx, 10) == []
    moves = decisions.auto_rebalance(ctx, 5)
    assert [(e.tp.partition, e.state.leader) for e in moves] == [(9, 1)]


def test_auto_rebalance_skips_excluded_and_out_of_sync() -> None:
    ctx = _spread([2, 2, 2, 1])
    ctx.partition_states[TopicPartition("t", 1)] = LeaderAndIsr(2, 1, (2,), 7)
    moves = decisions.auto_rebalance(ctx, 10, excluded={TopicPartition("t", 2)})
    assert [e.tp.partition for e in moves] == [0]
    ctx.live_brokers.pop(1)
    assert decisions.auto_rebalance(ctx, 10) == []
