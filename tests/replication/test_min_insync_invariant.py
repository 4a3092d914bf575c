"""The min.insync.replicas invariants of the simulator: Kafka's acks=all promise.

Each test that breaks the core puts the rule back through pytest's monkeypatch, so the
rest of the suite sees the real `Partition`.
"""

import random

import pytest
from kio.schema.errors import ErrorCode

from strandline.replication.partition import Partition
from strandline.replication.truncation import TruncationMode
from strandline.sim import events as ev
from strandline.sim.events import Event
from strandline.sim.explore import explore, random_schedule, schedule_config, violates
from strandline.sim.runner import run_schedule
from strandline.sim.simulator import SimConfig, Simulator

MIN_ISR_2 = SimConfig(replicas=3, truncation=TruncationMode.KIP279, min_insync_replicas=2)


def produce(value: str, acks_all: bool = True) -> Event:
    return Event(ev.PRODUCE, -1, acks_all, value)


def fetch(replica: int) -> Event:
    return Event(ev.FETCH, replica)


TICK = Event(ev.TICK)


def completion_without_isr_check(
    self: Partition, last_offset: int, min_insync_replicas: int
) -> ErrorCode | None:
    # The broken rule: acks=all answers success once the HW passes the record, however
    # small the ISR has become (no NOT_ENOUGH_REPLICAS_AFTER_APPEND).
    if self.high_watermark <= last_offset:
        return None
    return ErrorCode.none


def produce_check_without_isr_check(
    self: Partition, acks: int, min_insync_replicas: int
) -> ErrorCode:
    # The broken rule: acks=all is appended whatever the ISR (no NOT_ENOUGH_REPLICAS).
    return ErrorCode.none


def test_the_isr_shrinking_under_a_waiting_write_fails_it_after_append() -> None:
    # Both followers stop fetching: the ISR shrinks to the leader, the HW passes v0 and
    # the waiting acks=all write must fail, not succeed with one copy.
    schedule = [produce("v0"), TICK, TICK, produce("v1"), produce("v2", acks_all=False)]
    result = run_schedule(MIN_ISR_2, schedule)
    assert result.violations == []
    assert result.failed_produces == [
        ("v0", "not_enough_replicas_after_append"),
        ("v1", "not_enough_replicas"),
    ]
    assert result.acked == ["v2"]


def test_an_ack_records_which_isr_members_held_the_record() -> None:
    sim = Simulator(MIN_ISR_2)
    # Followers start by asking OffsetForLeaderEpoch, then fetch v0, then report it.
    for event in [produce("v0"), *[fetch(follower) for _ in range(3) for follower in (1, 2)]]:
        sim.step(event)
    assert sim.acked == ["v0"]
    (ack,) = sim.acks_all_acks
    assert (ack.offset, ack.value) == (0, "v0")
    assert ack.isr == ack.holders == frozenset({0, 1, 2})


def test_acking_without_the_after_append_check_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    schedule = [produce("v0"), TICK, TICK]
    assert violates(MIN_ISR_2, schedule) == []
    monkeypatch.setattr(Partition, "produce_completion", completion_without_isr_check)
    assert violates(MIN_ISR_2, schedule) == [
        "step 3: acks-all-acked-below-min-isr: v0 (offset 0) acked with ISR {A}, "
        "held by {A} < min.insync.replicas 2"
    ]


def test_appending_without_the_up_front_check_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    schedule = [TICK, TICK, produce("v0")]
    assert violates(MIN_ISR_2, schedule) == []
    monkeypatch.setattr(Partition, "check_produce", produce_check_without_isr_check)
    assert violates(MIN_ISR_2, schedule) == [
        "step 3: acks-all-appended-below-min-isr: v0 appended with ISR {A} < min.insync.replicas 2"
    ]


def test_explore_passes_the_real_core_and_exercises_both_refusals() -> None:
    report = explore(seed=0, schedules=2000, mode=TruncationMode.KIP279)
    assert report.violating_schedules == 0 and report.first is None
    # The invariants had something to judge: the same schedules contain successful
    # acks=all writes under min.insync.replicas=2 and both refusals.
    answers: dict[str, int] = {}
    for schedule_seed in range(0, 2000, 4):
        rng = random.Random(schedule_seed)
        config = schedule_config(rng, 3, TruncationMode.KIP279)
        schedule = random_schedule(rng, 3, 50)
        if config.min_insync_replicas != 2:
            continue
        result = run_schedule(config, schedule, settle=True)
        acks_all = {e.value for e in schedule if e.kind == ev.PRODUCE and e.flag}
        answers["acked"] = answers.get("acked", 0) + len(acks_all & set(result.acked))
        for _value, error in result.failed_produces:
            answers[error] = answers.get(error, 0) + 1
    assert answers["acked"] > 100
    assert answers["not_enough_replicas"] > 10
    assert answers["not_enough_replicas_after_append"] > 10


@pytest.mark.parametrize(
    ("method", "broken", "violation"),
    [
        ("produce_completion", completion_without_isr_check, "acks-all-acked-below-min-isr"),
        ("check_produce", produce_check_without_isr_check, "acks-all-appended-below-min-isr"),
    ],
)
def test_explore_finds_a_broken_min_isr_rule_and_shrinks_it(
    monkeypatch: pytest.MonkeyPatch, method: str, broken: object, violation: str
) -> None:
    monkeypatch.setattr(Partition, method, broken)
    report = explore(seed=0, schedules=2000, mode=TruncationMode.KIP279)
    assert report.violating_schedules > 0
    first = report.first
    assert first is not None and first.config.min_insync_replicas == 2
    assert any(violation in v for v in first.violations)
    assert 0 < len(first.shrunk) <= 8 < len(first.schedule)
    assert first.shrunk_violations and all(violation in v for v in first.shrunk_violations)
    # The reproducer is deterministic, and the real rule passes it.
    assert violates(first.config, first.shrunk) == first.shrunk_violations
    monkeypatch.undo()
    assert violates(first.config, first.shrunk) == []
