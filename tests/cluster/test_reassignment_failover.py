"""A controller failover in the middle of a partition reassignment (as in Kafka).

The reassignment is throttled so it is still running — AR = OAR + RAR in ZooKeeper,
the new replica catching up — when the controller is SIGKILLed. The next controller
finds /admin/reassign_partitions, resumes the move and finishes it: replicas = RAR,
the admin znode gone, the removed replica's files deleted, no acknowledged record lost.
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from strandline.cli.main import app
from strandline.coordination.zk_client import ZkClient
from strandline.types import TopicPartition
from tests.waiting import wait_until

from .support import consume_all, delivery_recorder, partition_status, producer, state_change_events
from .test_reassignment import create_with_assignment

runner = CliRunner()
RECORDS = 1500
VALUE = b"x" * 1024


def test_controller_failover_in_the_middle_of_a_reassignment(
    cluster_factory, tmp_path: Path
) -> None:
    cluster = cluster_factory(brokers=3, replica_lag_time_max_ms=2000)
    tp = TopicPartition("moving", 0)
    create_with_assignment(cluster, "moving", [[1, 2]])
    acked: dict[tuple[int, int], bytes] = {}
    errors: list[str] = []
    p = producer(cluster)
    for i in range(RECORDS):
        p.produce("moving", value=b"%06d" % i + VALUE, on_delivery=delivery_recorder(acked, errors))
        if i % 100 == 0:
            p.poll(0)
    assert p.flush(30) == 0 and not errors, errors
    assert len(acked) == RECORDS

    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {"version": 1, "partitions": [{"topic": "moving", "partition": 0, "replicas": [2, 3]}]}
        )
    )
    args = ["--bootstrap-server", cluster.bootstrap, "--reassignment-json-file", str(plan)]
    # ~1.5 MiB at 150 KiB/s: about ten seconds of catching up for broker 3.
    started = runner.invoke(app, ["reassign", *args, "--execute", "--throttle", "150000"])
    assert started.exit_code == 0, started.output
    assert cluster.zk_connect is not None
    with ZkClient(cluster.zk_connect).connect() as zk:
        wait_until(
            "AR = OAR + RAR in ZooKeeper",
            lambda: zk.get_topic_assignment("moving") == {0: [1, 2, 3]},
        )
        assert zk.get_partition_reassignment() == {tp: [2, 3]}
    before = cluster.status()
    assert 3 not in partition_status(cluster, tp).isr, "the move finished before the failover"
    old_controller = before.controller
    assert old_controller is not None and before.controller_epoch is not None

    cluster.kill(old_controller, "KILL")
    new = wait_until(
        "another controller with a higher epoch",
        lambda: (
            (s := cluster.status()).controller not in (None, old_controller)
            and s.controller_epoch is not None
            and s.controller_epoch > before.controller_epoch  # type: ignore[operator]
            and s
        ),
        timeout_s=30,
    )
    cluster.start(old_controller)

    final = wait_until(
        "the reassignment to finish under the new controller",
        lambda: (s := partition_status(cluster, tp)).replicas == [2, 3] and s,
        timeout_s=60,
    )
    assert final.leader in (2, 3) and set(final.isr) <= {2, 3}
    with ZkClient(cluster.zk_connect).connect() as zk:
        wait_until("/admin/reassign_partitions gone", lambda: zk.get_partition_reassignment() == {})
    events = state_change_events(cluster, new.controller)
    assert any(e["event"] == "reassignment-completed" for e in events), "new controller finished it"
    wait_until(
        "broker 1's replica deleted",
        lambda: not (cluster.broker_dir(1) / "data" / "moving-0").exists(),
        timeout_s=30,
    )
    consumed = consume_all(cluster, "moving", 1)
    missing = {k: v for k, v in acked.items() if consumed.get(k) != v}
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {list(missing)[:3]}"
