"""The controller's decisions as pure functions over a ControllerContext.

Each returns the new partition states it wants; the shell writes them to ZooKeeper
(conditionally, by zkVersion), folds the written versions back into the context, and
then builds the broker requests with `leader_and_isr_targets`/`partition_states`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from strandline.controller.context import NO_LEADER, ControllerContext
from strandline.coordination.znodes import LeaderAndIsr
from strandline.protocol.controller_requests import PartitionState
from strandline.types import TopicPartition


@dataclass(frozen=True)
class Election:
    tp: TopicPartition
    state: LeaderAndIsr
    create: bool = False  # a brand-new state znode rather than a conditional update
    unclean: bool = False
    reason: str = ""


UncleanPolicy = Callable[[str], bool]  # topic -> unclean.leader.election.enable


def elect_new_partitions(ctx: ControllerContext, tps: Iterable[TopicPartition]) -> list[Election]:
    """NewPartition -> OnlinePartition: the first live assigned replica leads, every
    live assigned replica is in the ISR, leader epoch 0."""
    live = ctx.live_broker_ids
    elections = []
    for tp in tps:
        replicas = [r for r in ctx.assignments[tp] if r in live]
        if not replicas:
            continue  # stays NewPartition until a replica's broker is up
        state = LeaderAndIsr(replicas[0], 0, tuple(replicas), ctx.epoch, zk_version=-1)
        elections.append(Election(tp, state, create=True, reason="new partition"))
    return elections


def elect_leader(
    ctx: ControllerContext,
    tp: TopicPartition,
    unclean_allowed: bool,
    live: set[int] | None = None,
) -> tuple[int, tuple[int, ...], bool] | None:
    """OfflinePartitionLeaderElectionStrategy: the first assigned replica that is alive
    and in the ISR; failing that, with unclean election allowed, the first live
    assigned replica (its log may lack committed records); else None."""
    state = ctx.partition_states[tp]
    live = ctx.live_broker_ids if live is None else live
    replicas = ctx.assignments[tp]
    live_isr = tuple(r for r in state.isr if r in live)
    for r in replicas:
        if r in live_isr:
            return r, live_isr, False
    if unclean_allowed:
        for r in replicas:
            if r in live:
                return r, (r,), True
    return None


def on_brokers_failed(
    ctx: ControllerContext, dead: set[int], unclean: UncleanPolicy
) -> list[Election]:
    """Broker failover (Kafka's onBrokerFailure): partitions led by a dead broker get a new leader
    from the live ISR; partitions that merely had it in their ISR shrink the ISR.
    When no ISR member is alive the partition goes offline (leader -1) keeping its
    ISR, so that only one of those replicas can lead it again (unless unclean)."""
    elections = []
    live = ctx.live_broker_ids  # once, not per partition: there may be 10,000 of them
    for tp, state in sorted(ctx.partition_states.items()):
        if state.leader in dead:
            choice = elect_leader(ctx, tp, unclean(tp.topic), live)
            if choice is None:
                elections.append(
                    Election(
                        tp,
                        state.with_leader(NO_LEADER, state.isr, ctx.epoch),
                        reason="no live ISR replica",
                    )
                )
            else:
                leader, isr, was_unclean = choice
                elections.append(
                    Election(
                        tp,
                        state.with_leader(leader, isr, ctx.epoch),
                        unclean=was_unclean,
                        reason=f"leader {state.leader} failed",
                    )
                )
        elif state.leader != NO_LEADER and dead & set(state.isr):
            isr = tuple(r for r in state.isr if r not in dead)
            elections.append(
                Election(
                    tp,
                    state.with_leader(state.leader, isr, ctx.epoch),
                    reason=f"ISR lost {sorted(dead & set(state.isr))}",
                )
            )
    return elections


def elect_offline_partitions(ctx: ControllerContext, unclean: UncleanPolicy) -> list[Election]:
    """Try again for every partition without a live leader (after a broker starts)."""
    elections = []
    live = ctx.live_broker_ids
    for tp, state in sorted(ctx.partition_states.items()):
        if state.leader in live:
            continue
        choice = elect_leader(ctx, tp, unclean(tp.topic), live)
        if choice is not None:
            leader, isr, was_unclean = choice
            elections.append(
                Election(
                    tp,
                    state.with_leader(leader, isr, ctx.epoch),
                    unclean=was_unclean,
                    reason="offline partition has a live candidate",
                )
            )
    return elections


def elect_preferred_leaders(
    ctx: ControllerContext, tps: Iterable[TopicPartition]
) -> list[Election]:
    """Preferred replica election: the first assigned replica leads if alive and in ISR."""
    elections = []
    live = ctx.live_broker_ids
    for tp in tps:
        state = ctx.partition_states.get(tp)
        if state is None:
            continue
        preferred = ctx.assignments[tp][0]
        if state.leader != preferred and preferred in live and preferred in state.isr:
            elections.append(
                Election(
                    tp,
                    state.with_leader(preferred, state.isr, ctx.epoch),
                    reason="preferred replica",
                )
            )
    return elections


def partition_state(
    ctx: ControllerContext, tp: TopicPartition, is_new: bool = False
) -> PartitionState:
    s = ctx.partition_states[tp]
    replicas = ctx.assignments[tp]
    return PartitionState(
        tp=tp,
        controller_epoch=s.controller_epoch,
        leader=s.leader,
        leader_epoch=s.leader_epoch,
        isr=s.isr,
        zk_version=s.zk_version,
        replicas=replicas,
        is_new=is_new,
        offline_replicas=tuple(r for r in replicas if r not in ctx.live_brokers),
    )


def leader_and_isr_targets(
    ctx: ControllerContext, tps: Iterable[TopicPartition], is_new: bool = False
) -> dict[int, list[PartitionState]]:
    """LeaderAndIsr batched per live broker holding a replica of each partition."""
    targets: dict[int, list[PartitionState]] = {}
    for tp in tps:
        if tp not in ctx.partition_states:
            continue
        ps = partition_state(ctx, tp, is_new)
        for r in ctx.assignments[tp]:
            if r in ctx.live_brokers:
                targets.setdefault(r, []).append(ps)
    return targets


def controlled_shutdown(ctx: ControllerContext, broker_id: int) -> list[Election]:
    """Move leadership off a broker that asked to shut down, and take it out of the ISRs
    it is in (ControlledShutdownLeaderElectionStrategy). Call with the broker already in
    `ctx.shutting_down_brokers`, so it is not a candidate."""
    elections = []
    live = ctx.live_broker_ids
    for tp, state in sorted(ctx.partition_states.items()):
        if broker_id not in state.isr and state.leader != broker_id:
            continue
        isr = tuple(r for r in state.isr if r != broker_id)
        if state.leader == broker_id:
            candidates = [r for r in ctx.assignments[tp] if r in isr and r in live]
            if not candidates:
                continue  # the only in-sync replica: it keeps leading until it stops
            elections.append(
                Election(
                    tp,
                    state.with_leader(candidates[0], isr, ctx.epoch),
                    reason=f"controlled shutdown of {broker_id}",
                )
            )
        elif isr:
            elections.append(
                Election(
                    tp,
                    state.with_leader(state.leader, isr, ctx.epoch),
                    reason=f"controlled shutdown of {broker_id}",
                )
            )
    return elections


# -- ElectLeaders (API 43) and auto leader rebalance ----------------------------------

PREFERRED_ELECTION = 0
UNCLEAN_ELECTION = 1


@dataclass(frozen=True)
class ElectionOutcome:
    """Per-partition answer of an ElectLeaders request plus the elections to apply."""

    elections: list[Election]
    errors: dict[TopicPartition, tuple[ErrorCode, str]]


def elect_leaders_on_request(
    ctx: ControllerContext,
    tps: Iterable[TopicPartition],
    election_type: int,
    excluded: set[TopicPartition] | None = None,
) -> ElectionOutcome:
    """Kafka's ElectLeaders rules: preferred (0) moves leadership to the first assigned
    replica when it is alive and in the ISR; unclean (1) elects for partitions without
    a live leader, from the live ISR first and else any live replica (the request
    overrides `unclean.leader.election.enable`). A partition whose leader is already
    right answers ELECTION_NOT_NEEDED; `excluded` (being reassigned or deleted) answer
    INVALID_REQUEST (Kafka does not move them either)."""
    excluded = excluded or set()
    elections: list[Election] = []
    errors: dict[TopicPartition, tuple[ErrorCode, str]] = {}
    live = ctx.live_broker_ids
    for tp in tps:
        state = ctx.partition_states.get(tp)
        if tp not in ctx.assignments or state is None or tp.topic in ctx.topics_to_delete:
            errors[tp] = (ErrorCode.unknown_topic_or_partition, f"{tp} does not exist")
            continue
        if tp in excluded:
            errors[tp] = (ErrorCode.invalid_request, f"{tp} is being reassigned")
            continue
        if election_type == PREFERRED_ELECTION:
            preferred = ctx.assignments[tp][0]
            if state.leader == preferred and preferred in live:
                errors[tp] = (ErrorCode.election_not_needed, f"{preferred} already leads {tp}")
            elif preferred not in live or preferred not in state.isr:
                errors[tp] = (
                    ErrorCode.preferred_leader_not_available,
                    f"preferred replica {preferred} of {tp} is not alive and in the ISR "
                    f"{list(state.isr)}",
                )
            else:
                elections.append(
                    Election(
                        tp,
                        state.with_leader(preferred, state.isr, ctx.epoch),
                        reason="preferred replica (ElectLeaders)",
                    )
                )
        elif election_type == UNCLEAN_ELECTION:
            if state.leader in live:
                errors[tp] = (ErrorCode.election_not_needed, f"{tp} has live leader {state.leader}")
                continue
            choice = elect_leader(ctx, tp, unclean_allowed=True, live=live)
            if choice is None:
                errors[tp] = (
                    ErrorCode.eligible_leaders_not_available,
                    f"no replica of {tp} ({list(ctx.assignments[tp])}) is alive",
                )
                continue
            leader, isr, was_unclean = choice
            elections.append(
                Election(
                    tp,
                    state.with_leader(leader, isr, ctx.epoch),
                    unclean=was_unclean,
                    reason="unclean election requested (ElectLeaders)",
                )
            )
        else:
            errors[tp] = (ErrorCode.invalid_request, f"unknown election type {election_type}")
    return ElectionOutcome(elections, errors)


def leader_imbalance(ctx: ControllerContext) -> dict[int, float]:
    """Per preferred broker: the share of the partitions it is preferred for that some
    other broker leads (Kafka's imbalance ratio)."""
    by_preferred: dict[int, list[TopicPartition]] = {}
    for tp, replicas in ctx.assignments.items():
        if tp.topic in ctx.topics_to_delete or not replicas:
            continue
        by_preferred.setdefault(replicas[0], []).append(tp)
    ratios = {}
    for broker, tps in sorted(by_preferred.items()):
        not_preferred = [
            tp
            for tp in tps
            if tp in ctx.partition_states and ctx.partition_states[tp].leader != broker
        ]
        ratios[broker] = len(not_preferred) / len(tps)
    return ratios


def auto_rebalance(
    ctx: ControllerContext,
    imbalance_percentage: int,
    excluded: set[TopicPartition] | None = None,
) -> list[Election]:
    """checkAndTriggerAutoLeaderRebalance: for each broker whose imbalance ratio exceeds
    `leader.imbalance.per.broker.percentage`, a preferred election for the partitions it
    should lead and can (alive, in the ISR); reassigning partitions are left alone."""
    excluded = excluded or set()
    candidates: list[TopicPartition] = []
    for broker, ratio in leader_imbalance(ctx).items():
        if ratio <= imbalance_percentage / 100:
            continue
        candidates += [
            tp
            for tp, replicas in sorted(ctx.assignments.items())
            if replicas
            and replicas[0] == broker
            and tp not in excluded
            and tp.topic not in ctx.topics_to_delete
        ]
    return elect_preferred_leaders(ctx, candidates)
