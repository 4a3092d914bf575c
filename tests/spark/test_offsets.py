"""Pure planning rules: offset specs, ranges, data loss, splitting, admission control."""

from __future__ import annotations

import pytest

from strandline.spark.offsets import (
    OffsetRange,
    from_json,
    plan_ranges,
    rate_limit,
    resolve_spec,
    split_ranges,
    to_json,
)
from strandline.spark.options import EARLIEST, LATEST, OptionError, SourceOptions
from strandline.types import TopicPartition

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def test_checkpoint_json_round_trips_with_string_partition_keys() -> None:
    offsets = {A1: 7, A0: 3, B0: 0}
    as_json = to_json(offsets)
    assert as_json == {"a": {"0": 3, "1": 7}, "b": {"0": 0}}
    assert from_json(as_json) == offsets


def test_spec_resolves_sentinels_and_defaults_missing_partitions() -> None:
    earliest, latest = {A0: 2, A1: 0, B0: 1}, {A0: 9, A1: 5, B0: 4}
    spec = {A0: EARLIEST, A1: 3}
    assert resolve_spec(spec, [A0, A1, B0], earliest, latest, LATEST) == {A0: 2, A1: 3, B0: 4}
    assert resolve_spec("earliest", [A0], earliest, latest, LATEST) == {A0: 2}
    assert resolve_spec("latest", [A0], earliest, latest, EARLIEST) == {A0: 9}


def test_plan_reads_new_partitions_from_the_beginning() -> None:
    plan = plan_ranges(start={A0: 4}, end={A0: 6, A1: 3}, earliest={A0: 0, A1: 0})
    assert plan.ranges == [OffsetRange("a", 0, 4, 6), OffsetRange("a", 1, 0, 3)]
    assert plan.data_loss == []


def test_plan_reports_offsets_removed_by_retention_and_skips_them() -> None:
    plan = plan_ranges(start={A0: 4}, end={A0: 20}, earliest={A0: 10})
    assert plan.ranges == [OffsetRange("a", 0, 10, 20)]
    assert len(plan.data_loss) == 1
    assert "[4, 10)" in plan.data_loss[0] and "DeleteRecords" in plan.data_loss[0]


def test_plan_reports_deleted_partitions_and_offsets_going_back() -> None:
    plan = plan_ranges(start={A0: 4, B0: 9}, end={A0: 2}, earliest={A0: 0})
    assert plan.ranges == []
    assert any("b-0 was deleted" in loss for loss in plan.data_loss)
    assert any("went back from 4 to 2" in loss for loss in plan.data_loss)


def test_split_honours_min_partitions_proportionally_and_covers_every_offset() -> None:
    ranges = [OffsetRange("a", 0, 0, 90), OffsetRange("a", 1, 100, 110)]
    pieces = split_ranges(ranges, min_partitions=10)
    assert len([p for p in pieces if p.partition == 0]) == 9
    assert len([p for p in pieces if p.partition == 1]) == 1
    covered = [o for p in pieces if p.partition == 0 for o in range(p.start, p.end)]
    assert covered == list(range(90))


def test_split_caps_records_per_partition() -> None:
    pieces = split_ranges([OffsetRange("a", 0, 0, 25)], max_records_per_partition=10)
    assert [(p.start, p.end) for p in pieces] == [(0, 8), (8, 16), (16, 25)]


def test_rate_limit_shares_the_budget_by_backlog() -> None:
    start, latest, earliest = {A0: 0, A1: 0}, {A0: 90, A1: 10}, {A0: 0, A1: 0}
    assert rate_limit(start, latest, earliest, limit=20) == {A0: 18, A1: 2}
    assert rate_limit(start, latest, earliest, limit=1000) == latest
    # A tiny share still moves a partition by one record, so none starves.
    assert rate_limit({A0: 0, A1: 0}, {A0: 1000, A1: 1}, earliest, limit=10)[A1] == 1


def test_options_follow_spark_kafka_names_and_defaults() -> None:
    opts = SourceOptions.parse(
        {"kafka.bootstrap.servers": "h:1", "subscribe": "a, b", "maxOffsetsPerTrigger": "5"},
        streaming=True,
    )
    # read_committed unless `kafka.isolation.level` says otherwise (docs/spark.md).
    assert opts.kafka_config == {"bootstrap.servers": "h:1", "isolation.level": "read_committed"}
    assert opts.subscribe == ("a", "b")
    assert opts.starting_offsets == "latest"
    assert opts.max_offsets_per_trigger == 5
    assert opts.fail_on_data_loss is True
    batch = SourceOptions.parse(
        {"bootstrap.servers": "h:1", "subscribepattern": "c.*", "failondataloss": "false"},
        streaming=False,
    )
    assert batch.starting_offsets == "earliest"
    assert batch.fail_on_data_loss is False
    assert batch.subscribes_to("clicks") and not batch.subscribes_to("__consumer_offsets")


@pytest.mark.parametrize(
    "options",
    [
        {"subscribe": "a"},
        {"bootstrap.servers": "h:1"},
        {"bootstrap.servers": "h:1", "subscribe": "a", "subscribepattern": "a"},
        {"bootstrap.servers": "h:1", "subscribe": "a", "startingoffsets": "{nope"},
        {"bootstrap.servers": "h:1", "subscribe": "a", "endingoffsets": "earliest"},
        {"bootstrap.servers": "h:1", "subscribe": "a", "minpartitions": "0"},
    ],
)
def test_bad_options_fail_at_planning(options: dict[str, str]) -> None:
    with pytest.raises(OptionError):
        SourceOptions.parse(options, streaming=False)
