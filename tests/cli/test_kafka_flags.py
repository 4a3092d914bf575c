"""Kafka's spellings of flags the tools accept (docs/tools.md), without a cluster."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from strandline.cli.groups_parse import parse_duration, parse_offsets_csv
from strandline.cli.main import _spread_multi_values
from strandline.cli.rdkafka import cause
from strandline.cli.topics import TopicToolError, parse_replica_assignment
from strandline.client.groups import GroupToolError
from strandline.types import TopicPartition


def test_producer_props_take_several_values_after_one_flag() -> None:
    assert _spread_multi_values(
        ["perf", "produce", "--producer-props", "acks=1", "linger.ms=5", "--topic", "t"]
    ) == ["perf", "produce", "--producer-props", "acks=1", "--producer-props", "linger.ms=5",
          "--topic", "t"]  # fmt: skip
    # A value without "=" is not taken: it stays where it was, for typer to refuse.
    assert _spread_multi_values(["--consumer-props", "a=1", "stray"]) == [
        "--consumer-props", "a=1", "stray",
    ]  # fmt: skip


def test_by_duration_is_iso_8601() -> None:
    assert parse_duration("PT30M") == datetime.timedelta(minutes=30)
    assert parse_duration("P1DT2H3M4.5S") == datetime.timedelta(
        days=1, hours=2, minutes=3, seconds=4.5
    )
    for bad in ("30m", "P", "PT", "1h"):
        with pytest.raises(GroupToolError, match="PnDTnHnMnS"):
            parse_duration(bad)


def test_from_file_reads_what_export_writes(tmp_path: Path) -> None:
    path = tmp_path / "o.csv"
    assert parse_offsets_csv(path, "t,0,5\nt,1,7\n") == {
        "": {TopicPartition("t", 0): 5, TopicPartition("t", 1): 7}
    }
    assert parse_offsets_csv(path, "g,t,0,5\nh,t,0,1\n") == {
        "g": {TopicPartition("t", 0): 5},
        "h": {TopicPartition("t", 0): 1},
    }
    with pytest.raises(GroupToolError, match=f"--from-file {path}: line 2"):
        parse_offsets_csv(path, "t,0,5\nt,x,7\n")


def test_replica_assignment() -> None:
    assert parse_replica_assignment("1:2,2:3,3:1") == [[1, 2], [2, 3], [3, 1]]
    for bad in ("1:a", "1:1", "1:2,3"):
        with pytest.raises(TopicToolError, match="--replica-assignment"):
            parse_replica_assignment(bad)


@pytest.mark.parametrize(
    ("detail", "said"),
    [
        ("127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused "
         "(after 0ms in state CONNECT)", "connection refused"),
        ("Failed to resolve 'nohost:9092': Name or service not known", "unknown host"),
        ("SASL authentication error: Authentication failed during authentication due to "
         "invalid credentials with SASL mechanism SCRAM-SHA-256",
         "authentication failed: invalid credentials"),
        ("something new", "something new"),
    ],
)  # fmt: skip
def test_librdkafka_s_reasons_said_plainly(detail: str, said: str) -> None:
    assert cause(detail) == said


def test_find_hanging_reports_what_no_coordinator_has_open() -> None:
    from strandline.cli.transactions import Described, OpenTxn, hanging

    now, minute = 10_000_000, 60_000

    def txn(pid: int, partition: int = 0, age_min: int = 20) -> OpenTxn:
        return OpenTxn("t", partition, pid, 0, 0, 5, now - age_min * minute)

    def known(pid: int, state: str = "Ongoing", parts: tuple[str, ...] = ("t-0",)) -> Described:
        return Described(1, f"id-{pid}", pid, 0, state, 60_000, now - minute, parts)

    txns = [txn(1), txn(2), txn(3), txn(4, partition=1), txn(5, age_min=3)]
    coordinators = {
        1: known(1),  # open at its coordinator on t-0: alive
        3: known(3, state="CompleteCommit"),  # the coordinator finished it: hanging
        4: known(4),  # open, but not on t-1: hanging
    }
    # 2: no coordinator knows the producer; 5: younger than the timeout.
    assert [t.producer_id for t in hanging(txns, coordinators, now, 15 * minute)] == [2, 3, 4]
