"""The reset planning of kafka-consumer-groups.sh --reset-offsets, without a cluster: each
scenario's target, clamped to the log's range (the tool tests run it against a cluster)."""

from __future__ import annotations

import datetime

from strandline.client.offset_reset import ResetSpec, new_offsets, resettable
from strandline.types import TopicPartition

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
PARTITIONS = [A0, A1, B0]
COMMITTED = {A0: 4, A1: 9}  # b-0: nothing committed
EARLIEST = {A0: 2, A1: 0, B0: 5}
LATEST = {A0: 10, A1: 10, B0: 8}


def plan(
    spec: ResetSpec, by_time: dict[TopicPartition, int] | None = None
) -> dict[TopicPartition, int]:
    return new_offsets(spec, PARTITIONS, COMMITTED, EARLIEST, LATEST, by_time)


def test_earliest_latest_and_current() -> None:
    assert plan(ResetSpec(to_earliest=True)) == EARLIEST
    assert plan(ResetSpec(to_latest=True)) == LATEST
    # A partition without a committed offset stays at the log end.
    assert plan(ResetSpec(to_current=True)) == {A0: 4, A1: 9, B0: 8}


def test_offsets_outside_the_log_are_clamped_to_it() -> None:
    assert plan(ResetSpec(to_offset=3)) == {A0: 3, A1: 3, B0: 5}
    assert plan(ResetSpec(to_offset=99)) == LATEST
    assert plan(ResetSpec(shift_by=-3)) == {A0: 2, A1: 6, B0: 5}
    assert plan(ResetSpec(shift_by=3)) == {A0: 7, A1: 10, B0: 8}


def test_file_offsets_are_clamped_too() -> None:
    spec = ResetSpec(from_file={A0: 1, B0: 6})
    assert spec.mode == "file"
    assert plan(spec) == {A0: 2, B0: 6}


def test_by_time_past_the_last_record_is_the_log_end() -> None:
    spec = ResetSpec(to_datetime=datetime.datetime(2026, 1, 31, tzinfo=datetime.UTC))
    assert plan(spec, {A0: 3, A1: -1, B0: 1}) == {A0: 3, A1: 10, B0: 5}


def test_the_time_looked_up() -> None:
    now = datetime.datetime(2026, 1, 31, 12, tzinfo=datetime.UTC)
    then = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    assert ResetSpec(to_datetime=then).timestamp(now) == int(then.timestamp() * 1000)
    hour = ResetSpec(by_duration=datetime.timedelta(hours=1)).timestamp(now)
    assert hour == int(now.timestamp() * 1000) - 3_600_000
    assert ResetSpec(to_earliest=True).timestamp(now) is None
    assert ResetSpec(shift_by=1).timestamp(now) is None


def test_the_first_scenario_given_wins() -> None:
    assert ResetSpec(to_earliest=True, to_latest=True, shift_by=1).mode == "earliest"
    assert ResetSpec(to_latest=True, to_offset=1).mode == "latest"
    assert ResetSpec(by_duration=datetime.timedelta(1), from_file={}).mode == "time"
    assert ResetSpec(from_file={}, to_current=True).mode == "file"
    assert ResetSpec(to_current=True, to_offset=1).mode == "current"
    assert ResetSpec(to_offset=1, shift_by=1).mode == "offset"
    assert ResetSpec(shift_by=0).mode == "shift"


def test_only_an_inactive_group_is_reset() -> None:
    assert resettable("Empty") and resettable("Dead")
    assert not resettable("Stable") and not resettable("PreparingRebalance")
