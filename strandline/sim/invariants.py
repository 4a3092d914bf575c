"""The replication invariants, checked against a simulator after every step.

- HW <= LEO on every live replica; consumers read only below the leader's HW.
- The leader's HW never decreases while it stays leader (within one leader epoch).
- No committed record is lost, except where Kafka does not promise it (every ISR replica
  down at once, an unclean election, an unclean shutdown losing unflushed data).
- Replica logs are identical below the HW: every follower that is fetching (done with
  truncation) holds the leader's records below its own HW.
- After `settle()`: every replica holds exactly the leader's log (the logs converge).
- min.insync.replicas (Kafka's acks=all promise): an acks=all write is acknowledged only
  if, at the moment of the ack, at least min.insync.replicas members of the ISR hold the
  record in their logs; and an acks=all write is appended only while the ISR has at
  least min.insync.replicas members (else NOT_ENOUGH_REPLICAS, nothing written).
"""

from __future__ import annotations

from strandline.replication.follower import FetchState
from strandline.sim.simulator import NAMES, NO_LEADER, Simulator


def check_step(sim: Simulator) -> list[str]:
    problems: list[str] = []
    if (
        len(sim.acks_all_acks) > sim.acks_all_acks_checked
        or len(sim.acks_all_appends) > sim.acks_all_appends_checked
    ):
        problems.extend(_min_insync_replicas(sim))
    for replica in sim.replicas:
        if replica.alive and replica.high_watermark > replica.log_end_offset:
            problems.append(
                f"hw-above-leo: {NAMES[replica.broker_id]} HW "
                f"{replica.high_watermark} > LEO {replica.log_end_offset}"
            )
    if sim.leader == NO_LEADER:
        return problems
    leader = sim.replicas[sim.leader]
    partition = leader.partition
    assert partition is not None
    hw = partition.high_watermark
    if partition.consumer_fetch_upper_bound() > hw or hw != leader.high_watermark:
        problems.append("consumer-visible-above-hw")
    if hw < sim.term_high_watermark:
        problems.append(f"leader-hw-decreased: {sim.term_high_watermark} -> {hw}")
    sim.term_high_watermark = hw
    problems.extend(_committed_lost(sim))
    epochs = leader.epochs
    values = leader.values
    for replica in sim.replicas:
        if (
            replica is leader
            or not replica.alive
            or replica.follower.fetch_state is not FetchState.FETCHING
        ):
            continue
        limit = replica.high_watermark
        if limit > leader.log_end_offset:
            problems.append(f"follower-hw-beyond-leader: {NAMES[replica.broker_id]} HW {limit}")
            continue
        if replica.values[:limit] != values[:limit] or replica.epochs[:limit] != epochs[:limit]:
            offset = _first_difference(replica.values, values, replica.epochs, epochs, limit)
            problems.append(
                f"diverged-below-hw: {NAMES[replica.broker_id]} and leader "
                f"{NAMES[sim.leader]} differ at offset {offset} < HW {limit}"
            )
    return problems


def _min_insync_replicas(sim: Simulator) -> list[str]:
    min_isr = sim.config.min_insync_replicas
    problems = []
    for value, isr in sim.acks_all_appends[sim.acks_all_appends_checked :]:
        if len(isr) < min_isr:
            problems.append(
                f"acks-all-appended-below-min-isr: {value} appended with ISR "
                f"{_names(isr)} < min.insync.replicas {min_isr}"
            )
    sim.acks_all_appends_checked = len(sim.acks_all_appends)
    for ack in sim.acks_all_acks[sim.acks_all_acks_checked :]:
        if len(ack.holders) < min_isr:
            problems.append(
                f"acks-all-acked-below-min-isr: {ack.value} (offset {ack.offset}) acked "
                f"with ISR {_names(ack.isr)}, held by {_names(ack.holders)} < "
                f"min.insync.replicas {min_isr}"
            )
    sim.acks_all_acks_checked = len(sim.acks_all_acks)
    return problems


def _names(brokers: frozenset[int]) -> str:
    return "{" + ",".join(NAMES[b] for b in sorted(brokers)) + "}"


def _committed_lost(sim: Simulator) -> list[str]:
    leader = sim.replicas[sim.leader]
    problems = []
    leo = leader.log_end_offset
    for offset, (epoch, value) in sim.committed.items():
        if offset in sim.excused:
            continue
        if offset >= leo or leader.values[offset] != value or leader.epochs[offset] != epoch:
            if offset not in sim.lost:
                sim.lost.add(offset)
                problems.append(
                    f"committed-lost: offset {offset} ({value}, epoch {epoch}) is "
                    f"gone from leader {NAMES[sim.leader]}"
                )
    return problems


def _first_difference(
    a_values: list[str], b_values: list[str], a_epochs: list[int], b_epochs: list[int], limit: int
) -> int:
    for offset in range(limit):
        if a_values[offset] != b_values[offset] or a_epochs[offset] != b_epochs[offset]:
            return offset
    return limit


def check_converged(sim: Simulator) -> list[str]:
    """After settle(): every live replica must hold the leader's log exactly."""
    if sim.leader == NO_LEADER:
        return ["offline-after-settle: no leader with every broker up"]
    leader = sim.replicas[sim.leader]
    problems = []
    for replica in sim.replicas:
        if replica is leader:
            continue
        if replica.values != leader.values or replica.epochs != leader.epochs:
            problems.append(
                f"not-converged: {NAMES[replica.broker_id]} log differs from "
                f"leader {NAMES[sim.leader]} after settling"
            )
    return problems


def diverged(sim: Simulator) -> bool:
    """Two replicas hold different records at the same offset below both their LEOs."""
    replicas = sim.replicas
    for i, first in enumerate(replicas):
        for second in replicas[i + 1 :]:
            common = min(first.log_end_offset, second.log_end_offset)
            if (
                first.values[:common] != second.values[:common]
                or first.epochs[:common] != second.epochs[:common]
            ):
                return True
    return False


def committed_lost_offsets(sim: Simulator) -> list[int]:
    return sorted(sim.lost)


def dropped_outside_guarantee(sim: Simulator) -> list[int]:
    """Committed offsets Kafka does not promise to keep here that are indeed gone."""
    out = set(sim.dropped)
    if sim.leader != NO_LEADER:
        leader = sim.replicas[sim.leader]
        for offset in sim.excused:
            epoch, value = sim.committed[offset]
            if (
                offset >= leader.log_end_offset
                or leader.values[offset] != value
                or leader.epochs[offset] != epoch
            ):
                out.add(offset)
    return sorted(out)
