"""Partition reassignment decisions (Kafka's 10 steps, AR = OAR + RAR), pure.

A reassignment moves a partition from its original replicas (OAR) to the target
replicas (RAR). It runs in two phases, each one pure decision here that the
controller shell carries out:

- start: the assignment znode becomes AR = OAR + (RAR - OAR) (step 1); the leader epoch
  is bumped with leader and ISR unchanged and LeaderAndIsr goes to every replica of AR
  (step 2), so the new replicas create their logs and start fetching (step 3).
- completion, once every RAR replica is in the ISR (step 4): the leader moves into RAR
  if it is not there, the ISR loses OAR - RAR (steps 5-8, one partition state write),
  OAR - RAR get StopReplica with delete (step 9), the assignment znode becomes RAR
  (step 10) and the partition leaves /admin/reassign_partitions (step 11).

The assignment znode is written last so a controller that dies mid-way leaves enough
behind for the next one to start the reassignment again and finish it.
"""

from __future__ import annotations

from dataclasses import dataclass

from strandline.controller.context import NO_LEADER, ControllerContext, Reassignment
from strandline.controller.decisions import Election
from strandline.errors import (
    InvalidReplicaAssignmentError,
    UnknownTopicOrPartitionError,
)
from strandline.types import TopicPartition


@dataclass(frozen=True)
class ReassignmentStart:
    reassignment: Reassignment
    assignment: tuple[int, ...]  # written to /brokers/topics/<t> (AR)
    election: Election | None  # leader epoch bump; None while the partition is offline


@dataclass(frozen=True)
class ReassignmentCompletion:
    reassignment: Reassignment
    election: Election  # leader in RAR, ISR within RAR
    assignment: tuple[int, ...]  # RAR, written to /brokers/topics/<t> last


def validate_target(ctx: ControllerContext, tp: TopicPartition, target: list[int]) -> None:
    """Kafka's checks on a requested replica list (raises with the wire error).

    Only the replicas being added must be on live brokers, as in Kafka's validateReplicas:
    the current ones already exist, and cancelling a move (back to the original replicas,
    all still in AR) must work while one of them is down, the usual reason to cancel."""
    if tp not in ctx.assignments or tp.topic in ctx.topics_to_delete:
        raise UnknownTopicOrPartitionError(f"{tp} does not exist")
    if not target:
        raise InvalidReplicaAssignmentError(f"{tp}: the replica list is empty")
    if len(set(target)) != len(target):
        raise InvalidReplicaAssignmentError(f"{tp}: duplicate replicas in {target}")
    unknown = sorted(set(target) - set(ctx.assignments[tp]) - set(ctx.live_brokers))
    if unknown:
        raise InvalidReplicaAssignmentError(f"{tp}: brokers {unknown} are not live")


def plan_start(ctx: ControllerContext, reassignment: Reassignment) -> ReassignmentStart:
    """Steps 1-3: AR = OAR + RAR, bump the leader epoch (same leader and ISR) so every
    replica of AR, the new ones included, gets a LeaderAndIsr it will act on."""
    tp = reassignment.tp
    state = ctx.partition_states.get(tp)
    election = None
    if state is not None:
        election = Election(
            tp,
            state.with_leader(state.leader, state.isr, ctx.epoch),
            reason=f"reassignment {list(reassignment.original)} -> {list(reassignment.target)}"
            f" started",
        )
    return ReassignmentStart(reassignment, reassignment.all_replicas, election)


def is_caught_up(ctx: ControllerContext, reassignment: Reassignment) -> bool:
    """Step 4: every RAR replica is in the ISR."""
    state = ctx.partition_states.get(reassignment.tp)
    return state is not None and set(reassignment.target) <= set(state.isr)


def plan_completion(
    ctx: ControllerContext, reassignment: Reassignment
) -> ReassignmentCompletion | None:
    """Steps 5-11 once RAR is in sync; None while it is not, or while no RAR replica
    is alive to lead (the reassignment waits for one)."""
    if not is_caught_up(ctx, reassignment):
        return None
    tp = reassignment.tp
    state = ctx.partition_states[tp]
    live = ctx.live_broker_ids
    isr = tuple(r for r in state.isr if r in reassignment.target)
    if state.leader in reassignment.target and state.leader in live:
        leader = state.leader
    else:
        # ReassignPartitionLeaderElectionStrategy: first of RAR alive and in the ISR.
        candidates = [r for r in reassignment.target if r in live and r in isr]
        if not candidates:
            return None
        leader = candidates[0]
    reason = f"reassignment to {list(reassignment.target)} completed"
    if leader != state.leader:
        reason += f"; leader {state.leader} is not in the target"
    election = Election(tp, state.with_leader(leader, isr, ctx.epoch), reason=reason)
    return ReassignmentCompletion(reassignment, election, reassignment.target)


def is_noop(ctx: ControllerContext, tp: TopicPartition, target: tuple[int, ...]) -> bool:
    """The partition is already assigned exactly to the target (nothing to move)."""
    return ctx.assignments.get(tp) == target


def leader_is_offline(ctx: ControllerContext, tp: TopicPartition) -> bool:
    state = ctx.partition_states.get(tp)
    return state is None or state.leader == NO_LEADER or state.leader not in ctx.live_brokers
