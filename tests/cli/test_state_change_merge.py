"""`strandline state-change-log merge` over hand-written logs of three "brokers".

The lines follow strandline/state_change_log.py's format (one JSON object per line:
ts, broker, event, topic/partition, details). No cluster is involved.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from strandline.cli.main import app

runner = CliRunner()

# (broker, ts, event, topic, partition, details), deliberately not in time order across
# brokers, with equal timestamps across brokers (12:00:01.000) and within one broker.
LINES: list[tuple[int, str, str, str | None, int | None, dict[str, Any]]] = [
    (1, "2026-03-01T12:00:00.100Z", "controller-elected", None, None, {"controller_epoch": 1}),
    (
        1,
        "2026-03-01T12:00:01.000Z",
        "leader-election",
        "orders",
        0,
        {"leader": 1, "leader_epoch": 0, "isr": [1, 2, 3]},
    ),
    (
        1,
        "2026-03-01T12:00:01.000Z",
        "leader-election",
        "orders",
        1,
        {"leader": 2, "leader_epoch": 0, "isr": [2, 3, 1]},
    ),
    (
        1,
        "2026-03-01T12:00:05.000Z",
        "unclean-leader-election",
        "clicks",
        0,
        {"leader": 3, "leader_epoch": 4, "isr": [3]},
    ),
    (2, "2026-03-01T12:00:00.500Z", "broker-change", None, None, {"new_brokers": [2]}),
    (
        2,
        "2026-03-01T12:00:01.000Z",
        "become-follower",
        "orders",
        0,
        {"leader": 1, "leader_epoch": 0},
    ),
    (2, "2026-03-01T12:00:03.000Z", "truncate", "orders", 0, {"to": 40, "log_end_offset": 42}),
    (
        3,
        "2026-03-01T12:00:01.000Z",
        "become-follower",
        "orders",
        0,
        {"leader": 1, "leader_epoch": 0},
    ),
    (
        3,
        "2026-03-01T12:00:02.000Z",
        "isr-shrink",
        "orders",
        1,
        {"old_isr": [2, 3, 1], "new_isr": [2, 3]},
    ),
    (3, "2026-03-01T12:00:04.000Z", "topic-deleted", "clicks", None, {}),
]


def line(
    broker: int,
    ts: str,
    event: str,
    topic: str | None,
    partition: int | None,
    details: dict[str, Any],
) -> str:
    entry: dict[str, Any] = {"ts": ts, "broker": broker, "event": event}
    if topic is not None:
        entry["topic"] = topic
    if partition is not None:
        entry["partition"] = partition
    entry.update(details)
    return json.dumps(entry)


def write_cluster(data_dir: Path, extra: dict[int, list[str]] | None = None) -> dict[int, Path]:
    """`<data_dir>/broker-<id>/logs/state-change.log` for brokers 1..3, as `cluster up` lays
    them out; `extra` appends raw lines to a broker's file."""
    paths = {}
    for broker in (1, 2, 3):
        path = data_dir / f"broker-{broker}" / "logs" / "state-change.log"
        path.parent.mkdir(parents=True)
        rows = [line(*row) for row in LINES if row[0] == broker]
        rows += (extra or {}).get(broker, [])
        path.write_text("\n".join(rows) + "\n")
        paths[broker] = path
    (data_dir / "broker-2" / "logs" / "server.log").write_text("not a state-change log\n")
    return paths


def merged(*args: str | Path) -> list[dict[str, Any]]:
    result = runner.invoke(app, ["state-change-log", "merge", *map(str, args), "--json"])
    assert result.exit_code == 0, result.output
    return [json.loads(row) for row in result.stdout.splitlines()]


def keys(entries: list[dict[str, Any]]) -> list[tuple[str, int, str, Any]]:
    return [(e["ts"][11:23], e["broker"], e["event"], e.get("partition")) for e in entries]


def test_merge_orders_across_brokers_with_broker_id_tiebreak(tmp_path: Path) -> None:
    write_cluster(tmp_path)
    assert keys(merged("--data-dir", tmp_path)) == [
        ("12:00:00.100", 1, "controller-elected", None),
        ("12:00:00.500", 2, "broker-change", None),
        # Four entries at 12:00:01.000: broker 1 first (its own two in file order), then 2, 3.
        ("12:00:01.000", 1, "leader-election", 0),
        ("12:00:01.000", 1, "leader-election", 1),
        ("12:00:01.000", 2, "become-follower", 0),
        ("12:00:01.000", 3, "become-follower", 0),
        ("12:00:02.000", 3, "isr-shrink", 1),
        ("12:00:03.000", 2, "truncate", 0),
        ("12:00:04.000", 3, "topic-deleted", None),
        ("12:00:05.000", 1, "unclean-leader-election", 0),
    ]


def test_files_given_in_any_order_merge_the_same(tmp_path: Path) -> None:
    paths = write_cluster(tmp_path)
    from_dir = merged("--data-dir", tmp_path)
    assert merged(paths[3], paths[1], paths[2]) == from_dir
    # JSON output is each entry exactly as its broker wrote it.
    written = {line(*row) for row in LINES}
    assert {json.dumps(e) for e in from_dir} == written


def test_time_zones_are_compared_as_instants(tmp_path: Path) -> None:
    """A broker whose log carried an offset still sorts by the instant it names."""
    path = tmp_path / "broker-4" / "state-change.log"
    path.parent.mkdir()
    path.write_text(
        json.dumps({"ts": "2026-03-01T13:00:00.700+01:00", "broker": 4, "event": "x"}) + "\n"
    )
    paths = write_cluster(tmp_path / "cluster")
    events = keys(merged(path, *paths.values()))
    assert events.index(("12:00:00.100", 1, "controller-elected", None)) == 0
    assert [e[2] for e in events[1:3]] == ["broker-change", "x"]


def test_filters_by_topic_partition_and_time(tmp_path: Path) -> None:
    write_cluster(tmp_path)
    d = ("--data-dir", tmp_path)
    assert [(e["broker"], e["event"]) for e in merged(*d, "--topic", "clicks")] == [
        (3, "topic-deleted"),
        (1, "unclean-leader-election"),
    ]
    orders_0 = merged(*d, "--topic", "orders", "--partition", "0")
    assert [(e["broker"], e["event"]) for e in orders_0] == [
        (1, "leader-election"),
        (2, "become-follower"),
        (3, "become-follower"),
        (2, "truncate"),
    ]
    # A partition number alone matches it in every topic, and nothing partition-less.
    assert {(e["topic"], e["partition"]) for e in merged(*d, "--partition", "0")} == {
        ("orders", 0),
        ("clicks", 0),
    }
    # Both bounds are inclusive; a time without a zone is UTC.
    window = merged(*d, "--since", "2026-03-01T12:00:02", "--until", "2026-03-01T12:00:04Z")
    assert [e["event"] for e in window] == ["isr-shrink", "truncate", "topic-deleted"]
    shifted = merged(*d, "--since", "2026-03-01T14:00:04.5+02:00")
    assert [e["event"] for e in shifted] == ["unclean-leader-election"]
    assert merged(*d, "--topic", "orders", "--until", "2026-03-01T12:00:00.999Z") == []


def test_malformed_lines_are_counted_once_per_file_and_skipped(tmp_path: Path) -> None:
    write_cluster(
        tmp_path,
        extra={
            2: ["not json at all", '["a", "list"]', '{"broker": 2, "event": "no-ts"}'],
            3: ['{"ts": "2026-03-01T12:00:09.000Z", "broker": 3, "event": "torn', ""],
        },
    )
    result = runner.invoke(
        app, ["state-change-log", "merge", "--data-dir", str(tmp_path), "--json"]
    )
    assert result.exit_code == 0, result.output
    warnings = result.stderr.splitlines()
    assert len(warnings) == 2
    [two] = [w for w in warnings if "broker-2" in w]
    [three] = [w for w in warnings if "broker-3" in w]
    assert "skipped 3 malformed lines (first: line 4, not JSON" in two
    assert "skipped 1 malformed line (first: line 4, not JSON" in three
    assert len(result.stdout.splitlines()) == len(LINES)


def test_table_shows_time_broker_event_partition_and_details(tmp_path: Path) -> None:
    write_cluster(tmp_path)
    result = runner.invoke(
        app,
        [
            "state-change-log",
            "merge",
            "--data-dir",
            str(tmp_path),
            "--topic",
            "orders",
            "--partition",
            "1",
        ],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    rows = [r for r in result.stdout.splitlines() if "2026-03-01" in r]
    assert len(rows) == 2
    first, second = ([c.strip() for c in r.strip("│ ").split("│")] for r in rows)
    assert first == [
        "2026-03-01T12:00:01.000Z",
        "1",
        "leader-election",
        "orders-1",
        "leader=2 leader_epoch=0 isr=[2,3,1]",
    ]
    # Brackets survive: cells are plain text, not rich markup.
    assert second[2:] == ["isr-shrink", "orders-1", "old_isr=[2,3,1] new_isr=[2,3]"]
    assert "2 entries" in result.stdout
    assert "TIME" in result.stdout and "DETAILS" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "give --data-dir or one or more state-change log FILEs"),
        (["--data-dir", "{d}", "{d}/broker-1/logs/state-change.log"], "not both"),
        (["--data-dir", "{d}/broker-1"], "no broker-*/logs/state-change.log under"),
        (["{d}/nope.log"], "no such file"),
        (["--data-dir", "{d}", "--since", "yesterday"], "'yesterday' is not an ISO 8601 time"),
        (
            ["--data-dir", "{d}", "--since", "2026-03-02", "--until", "2026-03-01"],
            "is after --until",
        ),
    ],
)
def test_bad_arguments_get_one_clear_line(tmp_path: Path, args: list[str], message: str) -> None:
    write_cluster(tmp_path)
    argv = ["state-change-log", "merge", *[a.replace("{d}", str(tmp_path)) for a in args]]
    result = runner.invoke(app, argv)
    assert result.exit_code == 1
    assert result.stdout == ""
    [error] = result.stderr.splitlines()
    assert error.startswith("error: ") and message in error
