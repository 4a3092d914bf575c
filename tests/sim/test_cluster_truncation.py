"""The whole-cluster explorer finds the KIP-101 and KIP-279 losses under the old truncation
rules (KIP-101's loss in `hw` mode, KIP-279's divergence in `kip101` mode) and nothing
under `kip279`. The schedules are the explorer's own finds, shrunk."""

from __future__ import annotations

import pytest

from strandline.replication.truncation import TruncationMode
from strandline.sim.cluster_events import Bounce, ClusterEvent, Crash, LoseZkReply, Produce, Run
from strandline.sim.cluster_explore import explore, violations_of
from strandline.sim.cluster_state import ClusterConfig

HW, KIP101, KIP279 = TruncationMode.HW, TruncationMode.KIP101, TruncationMode.KIP279

# Seed 11 in `hw` mode (the mix before the outage-and-return pattern), shrunk from 60
# events (KIP-101's first case): v2 is
# acknowledged by all three replicas; the leader 1 dies; broker 2 restarts within its
# session and reads HW 0 from its checkpoint, so it truncates v2 on the LeaderAndIsr
# while still in the ISR; the controller elects it.
KIP101_LOSS: list[ClusterEvent] = [
    Produce("t", 1, "v2", True, 2),
    Run(6),
    Crash(1),
    Bounce(2, 0),
    Run(7),
]
KIP101_CONFIG = (("t", 3, 3),)

# Seed 665 in `kip101` mode (the mix before the outage-and-return pattern), shrunk
# (KIP-279's case): u-0's leader 2 dies with
# v2 appended; 1 leads epoch 1 and appends v23b, then dies; broker 0, back first, is
# elected uncleanly, and 1 asks for epoch 1's end: 0 never had epoch 1, answers with
# the start of its next epoch, and 1 keeps v23b where 0 has v2.
KIP279_DIVERGENCE: list[ClusterEvent] = [
    Produce("u", 0, "v2", True, 2),
    Bounce(0, 0),
    LoseZkReply(0, 3, True, True),
    Crash(2),
    Run(1),
    Run(8),
    Run(24),
    Produce("u", 0, "v23b", True, 0),
    Crash(1),
]
KIP279_CONFIG = (("t", 1, 3), ("u", 1, 3))


def config(
    topics: tuple[tuple[str, int, int], ...], mode: TruncationMode, unclean: bool
) -> ClusterConfig:
    return ClusterConfig(
        topics=topics, min_insync_replicas=2, unclean_leader_election=unclean, truncation=mode
    )


@pytest.mark.parametrize("mode", [HW, KIP101, KIP279])
def test_kip101_loss(mode: TruncationMode) -> None:
    found = violations_of(config(KIP101_CONFIG, mode, False), KIP101_LOSS)
    if mode is HW:
        assert found == [
            "settle: t-1: acknowledged write v2 (offset 0) is not in the final leader 2's log"
        ]
    else:
        assert found == []


@pytest.mark.parametrize("mode", [HW, KIP101, KIP279])
def test_kip279_divergence(mode: TruncationMode) -> None:
    found = violations_of(config(KIP279_CONFIG, mode, True), KIP279_DIVERGENCE)
    if mode is KIP101:
        assert found == [
            "settle: u-0: broker 1 caught up with leader 0 but their logs differ at offset 0"
        ]
    else:
        assert found == []


def test_explorer_finds_and_shrinks_the_kip101_loss_in_hw_mode() -> None:
    # Seed 98 (seed 11 before the outage-and-return pattern changed its schedule).
    report = explore(1, seed=98, truncation=HW, shrink_violations=1)
    assert report.violating_schedules > 0
    first = report.violations[0]
    assert "acknowledged write" in first.violations[0]
    assert len(first.shrunk) <= 8
    assert violations_of(first.config, first.shrunk)


def test_explorer_finds_the_kip279_divergence_in_kip101_mode() -> None:
    # Seed 479 (665 before the outage-and-return pattern changed its schedule).
    report = explore(1, seed=479, truncation=KIP101, shrink_violations=0)
    assert report.violating_schedules == 1
    assert "their logs differ" in report.violations[0].violations[0]


def test_kip279_mode_over_the_same_budget_finds_nothing() -> None:
    for seed, count in ((98, 1), (479, 1)):
        report = explore(count, seed=seed, truncation=KIP279)
        assert report.violating_schedules == 0, report.violations[0].violations
