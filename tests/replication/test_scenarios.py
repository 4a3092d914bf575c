import pytest

from strandline.replication.truncation import TruncationMode
from strandline.sim.runner import RunResult, run_schedule
from strandline.sim.scenarios import SCENARIOS

HW, KIP101, KIP279 = TruncationMode.HW, TruncationMode.KIP101, TruncationMode.KIP279


def replay(name: str, mode: TruncationMode) -> RunResult:
    scenario = SCENARIOS[name]
    return run_schedule(scenario.config_for(mode), list(scenario.events), record=True)


def test_hw_mode_loses_the_committed_record_in_kip101_scenario_1() -> None:
    result = replay("kip101-data-loss", HW)
    assert result.committed_lost == [1]
    assert "m2" in result.acked  # it was acknowledged to an acks=all producer
    assert any("committed-lost" in v for v in result.violations)


def test_hw_mode_diverges_in_kip101_scenario_2() -> None:
    result = replay("kip101-divergence", HW)
    assert result.diverged
    assert any("diverged-below-hw" in v for v in result.violations)


@pytest.mark.parametrize("mode", [KIP101, KIP279])
def test_leader_epoch_fixes_both_kip101_scenarios(mode: TruncationMode) -> None:
    loss = replay("kip101-data-loss", mode)
    assert loss.committed_lost == [] and not loss.diverged and loss.violations == []
    divergence = replay("kip101-divergence", mode)
    assert not divergence.diverged and divergence.violations == []
    # m2 was only ever safe on A and in B's page cache: a power failure drops it, as
    # Kafka documents; the logs still agree.
    assert divergence.dropped_outside_guarantee == [1]


def test_kip101_mode_diverges_after_unclean_elections() -> None:
    result = replay("unclean-epoch-divergence", KIP101)
    assert result.diverged
    final = result.steps[-1]["replicas"]
    assert [r[2] for r in final[0]["log"]] == ["a0", "b1"]
    assert [r[2] for r in final[1]["log"]] == ["b0", "b1"]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_kip279_neither_loses_nor_diverges(name: str) -> None:
    result = replay(name, KIP279)
    assert result.committed_lost == []
    assert not result.diverged
    assert result.violations == []


def test_kip279_converges_to_the_unclean_leaders_log_in_two_epoch_rounds() -> None:
    result = replay("unclean-epoch-divergence", KIP279)
    notes = [note for step in result.steps for note in step["notes"]]
    assert any(
        "OffsetForLeaderEpoch(epoch 2) -> (epoch 1, end offset 1)" in n and "ask again" in n
        for n in notes
    )
    assert any(
        "OffsetForLeaderEpoch(epoch 0) -> (epoch 0, end offset 0); truncate to 0" in n
        for n in notes
    )
    logs = [[r[2] for r in replica["log"]] for replica in result.steps[-1]["replicas"]]
    assert logs == [["b0", "b1"], ["b0", "b1"]]


def test_walkthrough_follower_learns_the_hw_one_round_after_the_leader() -> None:
    result = replay("hw-leo-walkthrough", KIP279)
    hws = [(step["replicas"][0]["hw"], step["replicas"][1]["hw"]) for step in result.steps]
    # steps: initial, empty fetch, produce, fetch m1, fetch (leader HW 1), fetch (B HW 1)
    assert hws == [(0, 0), (0, 0), (0, 0), (0, 0), (1, 0), (1, 1)]
