"""Kafka's HW and leader-epoch scenarios as scripted schedules (replica A has id 0, B id 1)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from strandline.replication.truncation import TruncationMode
from strandline.sim.events import (
    BOUNCE,
    CRASH,
    FETCH,
    FLUSH,
    POWER_FAILURE,
    PRODUCE,
    RESTART,
    Event,
)
from strandline.sim.simulator import SimConfig

A, B = 0, 1


@dataclass(frozen=True)
class Scenario:
    name: str
    summary: str
    config: SimConfig
    events: tuple[Event, ...]

    def config_for(self, mode: TruncationMode) -> SimConfig:
        return replace(self.config, truncation=mode)


def _fetch(replica: int, times: int = 1) -> list[Event]:
    return [Event(FETCH, replica)] * times


HW_LEO_WALKTHROUGH = Scenario(
    name="hw-leo-walkthrough",
    summary="HW rules: leader A, follower B, one message; HW reaches B one fetch round late.",
    config=SimConfig(replicas=2, initial_leader=A),
    events=(
        Event(FETCH, B),  # nothing to read yet
        Event(PRODUCE, value="m1"),
        *_fetch(B, 3),  # gets m1; confirms it (leader HW 1); learns HW 1
    ),
)

KIP101_DATA_LOSS = Scenario(
    name="kip101-data-loss",
    summary=(
        "KIP-101 scenario 1: follower A restarts and truncates to its stale HW, "
        "then leader B dies and A leads without m2."
    ),
    config=SimConfig(replicas=2, initial_leader=B),
    events=(
        Event(PRODUCE, flag=True, value="m1"),
        *_fetch(A, 3),
        Event(PRODUCE, flag=True, value="m2"),
        *_fetch(A, 2),  # B's HW moves to 2 (m2 committed, acked); A still has HW 1
        Event(BOUNCE, A),
        Event(CRASH, B),
        Event(RESTART, B),
        *_fetch(B, 3),
    ),
)

KIP101_DIVERGENCE = Scenario(
    name="kip101-divergence",
    summary=(
        "KIP-101 scenario 2: power failure; B lost unflushed m2, comes back first, "
        "leads and writes m3 at offset 1 where A still holds m2."
    ),
    config=SimConfig(replicas=2, initial_leader=A),
    events=(
        Event(PRODUCE, value="m1"),
        *_fetch(B, 3),
        Event(FLUSH, B),
        Event(PRODUCE, value="m2"),
        *_fetch(B, 2),  # A's HW 2; B has m2 in its page cache only, HW 1
        Event(FLUSH, A),
        Event(POWER_FAILURE, flag=True),
        Event(RESTART, B),
        Event(PRODUCE, value="m3"),
        Event(RESTART, A),
        *_fetch(A, 3),
    ),
)

UNCLEAN_EPOCH_DIVERGENCE = Scenario(
    name="unclean-epoch-divergence",
    summary=(
        "Data-loss incident: min.insync.replicas=1, unclean election; A and B lead in turns over "
        "four epochs without replicating, then A follows B."
    ),
    config=SimConfig(
        replicas=2, initial_leader=A, min_insync_replicas=1, unclean_leader_election_enable=True
    ),
    events=(
        Event(CRASH, B),
        Event(PRODUCE, value="a0"),  # epoch 0 on A
        Event(CRASH, A),
        Event(RESTART, B),  # unclean: epoch 1
        Event(PRODUCE, value="b0"),
        Event(CRASH, B),
        Event(RESTART, A),  # unclean: epoch 2
        Event(PRODUCE, value="a1"),
        Event(CRASH, A),
        Event(RESTART, B),  # unclean: epoch 3
        Event(PRODUCE, value="b1"),
        Event(RESTART, A),  # A follows B
        *_fetch(A, 4),
    ),
)

SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (HW_LEO_WALKTHROUGH, KIP101_DATA_LOSS, KIP101_DIVERGENCE, UNCLEAN_EPOCH_DIVERGENCE)
}
