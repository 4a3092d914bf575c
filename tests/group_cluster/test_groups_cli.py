"""`strandline groups list | describe | reset-offsets` against a real broker."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment
from kio.schema.errors import ErrorCode
from typer.testing import CliRunner

from strandline.cli.main import app

from .support import GROUP_BROKER_SETTINGS, create_topic, produce
from .wire_groups import commit, coordinator_address, fetch_offsets, join, sync

ClusterFactory = Callable[..., Any]
runner = CliRunner()


def _cli(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["groups", *args], env={"COLUMNS": "250"})
    return result.exit_code, result.output


def _rows(output: str, group: str) -> dict[int, list[str]]:
    """Table rows of `describe`, by partition: the cells after GROUP and TOPIC."""
    rows = {}
    for line in output.splitlines():
        cells = [c.strip() for c in line.strip("│┃ ").split("│")]
        if len(cells) >= 6 and cells[0] == group and cells[2].isdigit():
            rows[int(cells[2])] = cells[3:]
    return rows


@pytest.mark.timeout(120)
def test_list_describe_and_reset_offsets(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(
        brokers=1, offsets_topic_replication_factor=1, **GROUP_BROKER_SETTINGS
    )
    bootstrap = cluster.bootstrap
    host, port = bootstrap.rsplit(":", 1)
    address = (host, int(port))
    topic = create_topic(bootstrap, partitions=3, prefix="cli")
    produce(bootstrap, topic, 10, partitions=3)
    group = "cli-group"
    coordinator_address(address, group)  # creates the offsets topic, waits for it
    assert commit(address, group, topic, {0: 3, 1: 5, 2: 10}) == {
        p: ErrorCode.none for p in range(3)
    }

    code, out = _cli("list", "--bootstrap-server", bootstrap)
    assert code == 0, out
    assert group in out and "Empty" in out

    code, out = _cli("describe", group, "--bootstrap-server", bootstrap)
    assert code == 0, out
    rows = _rows(out, group)
    # CURRENT-OFFSET, LOG-END-OFFSET, LAG
    assert {p: r[:3] for p, r in rows.items()} == {
        0: ["3", "10", "7"],
        1: ["5", "10", "5"],
        2: ["10", "10", "0"],
    }

    def committed() -> dict[int, int]:
        error, offsets = fetch_offsets(address, group)
        assert error == ErrorCode.none
        return {p: o for (_, p), (o, _) in offsets.items()}

    code, out = _cli("reset-offsets", group, "--to-earliest", "--bootstrap-server", bootstrap)
    assert code == 0, out
    assert "dry run" in out
    assert committed() == {0: 3, 1: 5, 2: 10}, "a dry run commits nothing"

    for args, expected in [
        (["--to-earliest"], {0: 0, 1: 0, 2: 0}),
        (["--shift-by", "4"], {0: 4, 1: 4, 2: 4}),
        (["--shift-by", "100"], {0: 10, 1: 10, 2: 10}),  # clamped to the log end
        (["--to-datetime", "2000-01-01T00:00:00"], {0: 0, 1: 0, 2: 0}),
        (["--to-latest"], {0: 10, 1: 10, 2: 10}),
    ]:
        code, out = _cli(
            "reset-offsets", group, *args, "--execute", "--bootstrap-server", bootstrap
        )
        assert code == 0, out
        assert committed() == expected, args

    code, out = _cli("reset-offsets", group, "--bootstrap-server", bootstrap)
    assert code != 0, "one reset mode is required"

    # An active member: describe shows its partitions, reset refuses to touch the group.
    first = join(address, group)
    joined = join(address, group, first.member_id)
    assignment = ConsumerProtocolAssignment(
        version=0,
        assigned_partitions=[
            ConsumerProtocolAssignment.TopicPartition(topic=topic, partitions=[0, 2])
        ],
        user_data=None,
    ).encode()
    synced = sync(address, group, joined.generation_id, first.member_id, bytes(assignment))
    assert synced.error_code == ErrorCode.none
    code, out = _cli("describe", group, "--bootstrap-server", bootstrap)
    assert code == 0, out
    assert "Stable" in out
    rows = _rows(out, group)
    assert rows[0][3] == first.member_id and rows[2][3] == first.member_id
    assert rows[1][3] == "-"
    code, out = _cli(
        "reset-offsets", group, "--to-earliest", "--execute", "--bootstrap-server", bootstrap
    )
    assert code == 1 and "Stable" in out
    assert committed() == {0: 10, 1: 10, 2: 10}
