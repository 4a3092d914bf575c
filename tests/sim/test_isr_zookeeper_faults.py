"""The leader's ISR writes under lost ZooKeeper replies, and the controller's
preferred-replica decisions on ZooKeeper's ISR, in the whole-cluster simulator. Each
test runs a schedule with the fix in place (no violation) and with the fix reverted
(the explorer's checks catch it): the schedules are the explorer's shrunk finds."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from strandline.controller import procedures
from strandline.coordination.znodes import LeaderAndIsr
from strandline.replication import isr_update as iu
from strandline.sim.cluster import ClusterSim
from strandline.sim.cluster_events import (
    ClusterEvent,
    Crash,
    ExpireSession,
    Fetch,
    PauseFetcher,
    PreferredElection,
    Produce,
    Restart,
    Run,
    Tick,
    ZkBlip,
)
from strandline.sim.cluster_explore import explore, violations_of
from strandline.sim.cluster_invariants import run_checked
from strandline.sim.cluster_state import ClusterConfig
from strandline.types import TopicPartition

T0 = TopicPartition("t", 0)


def old_isr_update(
    tp: TopicPartition,
    leader: int,
    leader_epoch: int,
    controller_epoch: int,
    zk_version: int,
    old_isr: frozenset[int],
    proposed_isr: frozenset[int],
) -> Generator[iu.IsrEffect, Any, iu.IsrUpdateResult]:
    """Fix 1 reverted: any failure of the write or of the notification reverts the
    leader to its old ISR and keeps its zkVersion."""
    state = LeaderAndIsr(leader, leader_epoch, tuple(sorted(proposed_isr)), controller_epoch)
    written = yield iu.WriteIsr(tp, state, zk_version)
    if isinstance(written, iu.ZkFailure):
        return iu.IsrUpdateResult(iu.Outcome.FENCED, old_isr, zk_version)
    notified = yield iu.NotifyIsrChange(tp)
    if isinstance(notified, iu.ZkFailure):
        return iu.IsrUpdateResult(iu.Outcome.FENCED, old_isr, zk_version)
    return iu.IsrUpdateResult(iu.Outcome.WRITTEN, proposed_isr, written)


def no_refresh(self: procedures.ControllerCore, tps: Any) -> procedures.Procedure:
    """Fix 2 reverted: preferred-replica decisions on the ISR last notified."""
    return
    yield


# `sim explore --cluster` with fix 1 reverted, seed 908, shrunk from 60 events: the
# blip loses the reply to the leader's ISR expansion (or its notification), the old
# code goes back to ISR [1] while ZooKeeper holds [0, 1].
FIX1_CONFIG = ClusterConfig(topics=(("t", 2, 3), ("u", 1, 2)), min_insync_replicas=1)
FIX1_SCHEDULE: list[ClusterEvent] = [
    Produce("t", 1, "v28", True, 0),
    Tick(),
    ExpireSession(1),
    ZkBlip(1, 300, 725968962),
    Tick(),
    Fetch(0),
    Run(1),
    Produce("t", 1, "v59", True, 1),
]


def test_lost_isr_replies_leave_zookeepers_isr_within_the_leaders() -> None:
    assert violations_of(FIX1_CONFIG, FIX1_SCHEDULE) == []


def test_reverting_fix_1_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(iu, "isr_update", old_isr_update)
    found = violations_of(FIX1_CONFIG, FIX1_SCHEDULE)
    assert found and "while ZooKeeper's ISR is [0, 1]" in found[0], found


def test_explorer_finds_and_shrinks_fix_1_reverted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(iu, "isr_update", old_isr_update)
    # Seeds 1, 153, 185, 253 and 396 of the first 420 find it; seed 1's shrinks to 14
    # events since the outage-and-return pattern (docs/replication.md), 153's to 4.
    report = explore(1, seed=153, shrink_violations=1)
    assert report.violating_schedules == 1
    first = report.violations[0]
    assert len(first.shrunk) <= 12
    assert any("ZooKeeper's ISR" in v for v in violations_of(first.config, first.shrunk))


# Kafka's preferred replica election, with the preferred replica 0 rejoining the ISR while
# the election request is already queued at the controller: the controller handles the
# request before the ISR change notification.
PREFERRED_CONFIG = ClusterConfig(topics=(("t", 1, 3),), min_insync_replicas=1)
PREFERRED_SCHEDULE: list[ClusterEvent] = [
    Produce("t", 0, "m1", True, 1),
    Run(2),
    Crash(0),
    Tick(),
    Tick(),
    Tick(),
    *[Run(1)] * 40,
    Restart(0),
    *[Run(1)] * 40,
    PauseFetcher(0, 1000),
    Produce("t", 0, "m2", False, 1),
    Tick(),
    Run(1),
    Tick(),
    *[Run(1)] * 25,
    PreferredElection("t", 0),
    Tick(),
    Fetch(0),
    Fetch(0),
    *[Run(1)] * 30,
]


def preferred_run() -> tuple[list[str], ClusterSim]:
    sim = ClusterSim(PREFERRED_CONFIG)
    result = run_checked(sim, PREFERRED_SCHEDULE, stop_at_first=True, settle=False)
    return result.violations, sim


def test_preferred_election_decided_on_zookeepers_isr() -> None:
    violations, sim = preferred_run()
    assert violations == []
    state = sim.partition_state(T0)
    assert state is not None and state.leader == 0
    assert sim.admin.get_preferred_replica_election() == []


def test_reverting_fix_2_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(procedures.ControllerCore, "_refresh_states", no_refresh)
    violations, sim = preferred_run()
    assert violations and "preferred replica election dropped" in violations[0], violations


# `sim explore --cluster` with fix 2 reverted, seed 12, shrunk from 60 events: broker 2,
# t-2's preferred replica, is down past its session timeout (t-2 moves to 0 and drops 2
# from its ISR), comes back, and the election is requested while it catches up; its
# fetch makes leader 0 write ISR [0, 1, 2] to ZooKeeper and then the notification,
# which the controller handles after the election: the old code decided on ISR [0, 1]
# and deleted the admin znode without electing 2.
FIX2_CONFIG = ClusterConfig(topics=(("t", 3, 3),), min_insync_replicas=1)
FIX2_SCHEDULE: list[ClusterEvent] = [
    Crash(2),
    Tick(),
    Tick(),
    Tick(),
    Run(18),
    Restart(2),
    Run(7),
    PreferredElection("t", 2),
    Fetch(2),
]
# Seeds of `explore` (default settings) that find fix 2 reverted.
FIX2_SEEDS = (12, 82)


def test_preferred_election_during_catch_up_elects_the_preferred_replica() -> None:
    sim = ClusterSim(FIX2_CONFIG)
    result = run_checked(sim, FIX2_SCHEDULE, stop_at_first=True, settle=True)
    assert result.violations == []
    state = sim.partition_state(TopicPartition("t", 2))
    assert state is not None and state.leader == 2


def test_reverting_fix_2_is_caught_by_the_explorers_find(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(procedures.ControllerCore, "_refresh_states", no_refresh)
    found = violations_of(FIX2_CONFIG, FIX2_SCHEDULE)
    assert found and "t-2: preferred replica election dropped" in found[0], found


def test_explorer_finds_and_shrinks_fix_2_reverted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(procedures.ControllerCore, "_refresh_states", no_refresh)
    reports = [explore(1, seed=seed, shrink_violations=1) for seed in FIX2_SEEDS]
    assert all(report.violating_schedules == 1 for report in reports)
    first = reports[0].violations[0]
    assert len(first.shrunk) <= 12, first.shrunk
    assert any(
        "preferred replica election dropped" in v for v in violations_of(first.config, first.shrunk)
    )
    monkeypatch.undo()
    assert violations_of(first.config, first.shrunk) == []


# kip279 seed 7682 (found by the explorer with both fixes in): leader 1 writes ISR
# [0, 1, 2] and its notification; the controller, in a ZooKeeper blip, deletes the
# notification but its read of the state loses its reply, so its view keeps [1, 2]; leader
# 1 restarts within its session and, handed [1, 2], acknowledges acks=all writes without
# broker 0, which ZooKeeper still counts. The controller now reads ZooKeeper's states
# before telling started brokers their partitions.
STALE_VIEW_SEED = 7682


def test_a_restarted_leader_is_told_zookeepers_isr(monkeypatch: pytest.MonkeyPatch) -> None:
    assert explore(1, seed=STALE_VIEW_SEED).violating_schedules == 0
    monkeypatch.setattr(procedures.ControllerCore, "_refresh_for_started_brokers", no_refresh)
    report = explore(1, seed=STALE_VIEW_SEED, shrink_violations=1)
    assert report.violating_schedules == 1
    [found] = report.violations
    assert len(found.shrunk) <= 20, found.shrunk
    assert any(
        "acknowledged offset" in v and "while ZooKeeper's ISR is" in v
        for v in violations_of(found.config, found.shrunk)
    )
    monkeypatch.undo()
    assert violations_of(found.config, found.shrunk) == []
