"""The controller's pure leader-election decisions (Kafka's failover rules)."""

from __future__ import annotations

from strandline.controller import decisions
from strandline.controller.context import NO_LEADER, ControllerContext
from strandline.coordination.znodes import BrokerRegistration, LeaderAndIsr
from strandline.types import TopicPartition

TP = TopicPartition("t", 0)


def make_ctx(
    live: list[int], replicas: tuple[int, ...] = (1, 2, 3), state: LeaderAndIsr | None = None
) -> ControllerContext:
    ctx = ControllerContext(broker_id=1, epoch=5)
    ctx.live_brokers = {
        b: BrokerRegistration(b, "127.0.0.1", 9000 + b, None, epoch=100 + b) for b in live
    }
    ctx.assignments[TP] = replicas
    if state is not None:
        ctx.partition_states[TP] = state
    return ctx


def never(_topic: str) -> bool:
    return False


def always(_topic: str) -> bool:
    return True


def test_new_partition_first_live_replica_leads_with_all_live_in_isr() -> None:
    ctx = make_ctx(live=[2, 3])
    [e] = decisions.elect_new_partitions(ctx, [TP])
    assert e.create
    assert (e.state.leader, e.state.leader_epoch, e.state.isr) == (2, 0, (2, 3))
    assert e.state.controller_epoch == 5


def test_new_partition_without_live_replica_stays_new() -> None:
    ctx = make_ctx(live=[4], replicas=(1, 2))
    assert decisions.elect_new_partitions(ctx, [TP]) == []


def test_leader_failure_elects_next_isr_member_in_assignment_order_and_bumps_epoch() -> None:
    ctx = make_ctx(live=[2, 3], state=LeaderAndIsr(1, 7, (1, 3, 2), 4, zk_version=9))
    [e] = decisions.on_brokers_failed(ctx, {1}, never)
    assert e.state.leader == 2  # assignment order (1, 2, 3), not ISR order
    assert e.state.isr == (3, 2)
    assert e.state.leader_epoch == 8
    assert e.state.zk_version == 9  # the conditional write expects the version we read
    assert not e.unclean


def test_follower_failure_shrinks_isr_and_keeps_leader() -> None:
    ctx = make_ctx(live=[1, 2], state=LeaderAndIsr(1, 3, (1, 2, 3), 4))
    [e] = decisions.on_brokers_failed(ctx, {3}, never)
    assert (e.state.leader, e.state.isr, e.state.leader_epoch) == (1, (1, 2), 4)


def test_no_live_isr_member_goes_offline_keeping_isr_when_unclean_disabled() -> None:
    ctx = make_ctx(live=[3], state=LeaderAndIsr(1, 3, (1, 2), 4))
    [e] = decisions.on_brokers_failed(ctx, {1, 2}, never)
    assert e.state.leader == NO_LEADER
    assert e.state.isr == (1, 2)
    # It stays offline while only the out-of-sync replica lives...
    ctx.partition_states[TP] = e.state
    assert decisions.elect_offline_partitions(ctx, never) == []
    # ...and comes back when an ISR member returns.
    ctx.live_brokers[2] = BrokerRegistration(2, "127.0.0.1", 9002, None, epoch=200)
    [back] = decisions.elect_offline_partitions(ctx, never)
    assert back.state.leader == 2 and not back.unclean


def test_unclean_election_picks_live_out_of_sync_replica_when_enabled() -> None:
    ctx = make_ctx(live=[3], state=LeaderAndIsr(1, 3, (1, 2), 4))
    [e] = decisions.on_brokers_failed(ctx, {1, 2}, always)
    assert e.unclean
    assert (e.state.leader, e.state.isr) == (3, (3,))


def test_preferred_election_only_when_preferred_is_live_and_in_sync() -> None:
    ctx = make_ctx(live=[1, 2, 3], state=LeaderAndIsr(2, 3, (2, 3), 4))
    assert decisions.elect_preferred_leaders(ctx, [TP]) == []  # 1 is not in the ISR
    ctx.partition_states[TP] = LeaderAndIsr(2, 3, (2, 3, 1), 4)
    [e] = decisions.elect_preferred_leaders(ctx, [TP])
    assert e.state.leader == 1 and e.state.leader_epoch == 4


def test_leader_and_isr_goes_to_every_live_replica_only() -> None:
    ctx = make_ctx(live=[1, 3], state=LeaderAndIsr(1, 3, (1, 3), 4))
    targets = decisions.leader_and_isr_targets(ctx, [TP])
    assert sorted(targets) == [1, 3]
    [ps] = targets[3]
    assert ps.offline_replicas == (2,)
    assert ps.replicas == (1, 2, 3)
