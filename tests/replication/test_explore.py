import json
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from strandline.cli.sim import app
from strandline.replication.truncation import TruncationMode
from strandline.sim import events as ev
from strandline.sim.events import Event
from strandline.sim.explore import EVENT_WEIGHTS, explore, random_schedule, shrink, violates
from strandline.sim.runner import run_schedule
from strandline.sim.simulator import SimConfig

REPLICAS = 3

# Kinds drawn with the explorer's weights: mostly traffic and fetches, a trickle of faults.
weighted_kinds = [kind for kind, weight in EVENT_WEIGHTS for _ in range(weight)]
event_strategy = st.builds(
    Event, st.sampled_from(weighted_kinds), st.integers(0, REPLICAS - 1), st.booleans()
)


def with_unique_values(schedule: list[Event]) -> list[Event]:
    # Distinct values, so that two different records can never look alike.
    return [
        e._replace(value=f"v{i}") if e.kind == ev.PRODUCE else e for i, e in enumerate(schedule)
    ]


schedules = st.lists(event_strategy, min_size=30, max_size=60).map(with_unique_values)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schedule=schedules, min_isr=st.integers(1, 2), unclean=st.booleans())
def test_kip279_random_schedules_never_violate_an_invariant(
    schedule: list[Event], min_isr: int, unclean: bool
) -> None:
    config = SimConfig(
        replicas=REPLICAS,
        truncation=TruncationMode.KIP279,
        min_insync_replicas=min_isr,
        unclean_leader_election_enable=unclean,
    )
    result = run_schedule(config, schedule, settle=True)
    assert result.violations == []
    assert not result.diverged


def test_explore_kip279_finds_no_violation() -> None:
    report = explore(seed=7, schedules=300, mode=TruncationMode.KIP279)
    assert report.violating_schedules == 0 and report.first is None


def test_explore_hw_finds_a_violation_and_shrinks_it() -> None:
    report = explore(seed=7, schedules=300, mode=TruncationMode.HW)
    assert report.violating_schedules > 0
    first = report.first
    assert first is not None
    assert 0 < len(first.shrunk) < len(first.schedule)
    assert first.shrunk_violations
    # The reproducer is deterministic: replaying it gives the same violations.
    assert violates(first.config, first.shrunk) == first.shrunk_violations


def test_shrink_keeps_a_violation() -> None:
    config = SimConfig(replicas=REPLICAS, truncation=TruncationMode.HW)
    for seed in range(200):
        schedule = random_schedule(random.Random(seed), REPLICAS, 50)
        if violates(config, schedule):
            shrunk = shrink(config, schedule)
            assert violates(config, shrunk)
            assert len(shrunk) <= len(schedule)
            return
    raise AssertionError("hw mode produced no violation in 200 schedules")


def test_cli_scenario_json_is_one_object() -> None:
    result = CliRunner().invoke(
        app, ["scenario", "kip101-data-loss", "--truncation", "hw", "--json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["scenario"] == "kip101-data-loss" and data["truncation"] == "hw"
    assert data["committed_lost"] == [1]
    assert data["diverged"] is False
    assert data["violations"] and data["steps"]


def test_cli_explore_json_reports_reproducer_in_hw_mode() -> None:
    result = CliRunner().invoke(
        app, ["explore", "--seed", "7", "--schedules", "100", "--truncation", "hw", "--json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["schedules"] == 100 and data["violating_schedules"] > 0
    assert data["reproducer"]["schedule"] and data["violations"]
    replayed = [Event.from_json(e) for e in data["reproducer"]["schedule"]]
    config = SimConfig(
        replicas=3,
        truncation=TruncationMode.HW,
        min_insync_replicas=data["reproducer"]["config"]["min_insync_replicas"],
        unclean_leader_election_enable=data["reproducer"]["config"][
            "unclean_leader_election_enable"
        ],
    )
    assert violates(config, replayed)


def test_cli_scenario_prints_step_tables() -> None:
    result = CliRunner().invoke(app, ["scenario", "unclean-epoch-divergence"])
    assert result.exit_code == 0, result.output
    assert "step 16: fetch A" in result.stdout
    assert "epoch cache" in result.stdout
