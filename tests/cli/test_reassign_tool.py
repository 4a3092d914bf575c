"""`strandline reassign --list` and `--cancel` (kafka-reassign-partitions.sh) on a real
2-broker cluster.

A move is kept in progress without throttles: the partition's only replica is on a broker
paused with SIGSTOP, so the new replica has nobody to copy from. Cancelling then has to
go back to replicas on a broker that is down, which Kafka allows (only replicas being
added must be alive); the revert completes once that broker is back.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from strandline.cli.admin import _metadata
from strandline.cli.main import app
from tests.cli.support import runner, tool
from tests.conftest import ClusterFactory
from tests.waiting import wait_until

reassign, ok, fails = tool("reassign")
TOPIC = "stuck"
RECORDS = 50


def listed(bootstrap: str) -> list[list[str]]:
    """--list's rows: topic, partition, replicas, adding, removing, from Kafka's lines
    ("t-0: replicas: 1,2. adding: 2. removing: 1.")."""
    out = ok("--list", "--bootstrap-server", bootstrap)
    if out == "No partition reassignments found.\n":
        rows = []
    else:
        heading, *lines = out.splitlines()
        assert heading == "Current partition reassignments:", out
        rows = []
        for line in lines:
            match = KAFKA_LINE.fullmatch(line)
            assert match is not None, line
            rows.append(
                [match["topic"], match["partition"], match["replicas"]]
                + [match["adding"] or "-", match["removing"] or "-"]
            )
    return rows


def listed_table(bootstrap: str) -> list[list[str]]:
    table = ok("--list", "--output", "table", "--bootstrap-server", bootstrap)
    return [
        [c.strip() for c in re.split("[│┃]", line.strip().strip("│┃"))]
        for line in table.splitlines()
        if "│" in line
    ]


KAFKA_LINE = re.compile(
    r"(?P<topic>.+)-(?P<partition>\d+): replicas: (?P<replicas>[\d,]+)\."
    r"(?: adding: (?P<adding>[\d,]+)\.)?(?: removing: (?P<removing>[\d,]+)\.)?"
)


def replicas(bootstrap: str) -> list[int]:
    metadata = _metadata(bootstrap)
    [topic] = [t for t in metadata.topics if t.name == TOPIC]
    [partition] = topic.partitions
    return [int(r) for r in partition.replica_nodes]


def live_brokers(bootstrap: str) -> set[int]:
    return {int(b.node_id) for b in _metadata(bootstrap).brokers}


def test_list_and_cancel_a_reassignment_stuck_on_a_paused_broker(
    cluster_factory: ClusterFactory, tmp_path: Path
) -> None:
    cluster = cluster_factory(brokers=2)
    controller = int(_metadata(cluster.bootstrap).controller_id)
    assert controller in (1, 2)
    paused = 2 if controller == 1 else 1
    # The tool only ever talks to the controller's broker: the other one will be frozen.
    host, port = cluster.broker_address(controller)
    bootstrap = f"{host}:{port}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=1, replica_assignment=[[paused]])])[
        TOPIC
    ].result(30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(RECORDS):
        producer.produce(TOPIC, value=b"r%03d" % i, partition=0)
    assert producer.flush(30) == 0
    del producer, admin  # librdkafka clients must not outlive the cluster

    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [{"topic": TOPIC, "partition": 0, "replicas": [controller]}],
            }
        )
    )
    b = ("--bootstrap-server", bootstrap)
    f = ("--reassignment-json-file", str(plan))
    assert listed(bootstrap) == []
    # kafka-leader-election.sh's line for a partition led by its preferred replica.
    elected = runner.invoke(
        app, ["elect", *b, "--election-type", "PREFERRED", "--topic", TOPIC, "--partition", "0"]
    )
    assert (elected.exit_code, elected.stdout) == (
        0,
        f"Valid replica already elected for partitions {TOPIC}-0\n",
    )
    line = fails("--cancel", *f, *b)
    assert "no reassignment in progress" in line and "NO_REASSIGNMENT_IN_PROGRESS" in line
    # Bad flags: one line each.
    assert "exactly one of" in fails("--list", "--execute", *f, *b)
    assert "needs --reassignment-json-file" in fails("--cancel", *b)
    assert "--list takes no" in fails("--list", *f, *b)

    cluster.kill(paused, "STOP")
    try:
        assert "Successfully started" in ok("--execute", *f, *b)
        # AR = original + target while the move runs; the new replica cannot catch up.
        moving = [TOPIC, "0", f"{paused},{controller}", str(controller), str(paused)]
        assert listed(bootstrap) == [moving]
        assert listed_table(bootstrap) == [moving]
        assert json.loads(ok("--list", "--output", "json", *b)) == [
            {
                "topic": TOPIC,
                "partition": 0,
                "replicas": [paused, controller],
                "adding": [controller],
                "removing": [paused],
            }
        ]
        assert ok("--verify", *f, *b) == (
            "Status of partition reassignment:\n"
            f"Reassignment of partition {TOPIC}-0 is still in progress.\n"
        )
        # Still moving once the frozen broker's session is gone and it counts as dead.
        wait_until(
            f"broker {paused} to leave the cluster", lambda: paused not in live_brokers(bootstrap)
        )
        assert listed(bootstrap) == [moving]

        out = ok("--cancel", *f, *b)
        assert out == f"Successfully cancelled partition reassignment for: {TOPIC}-0\n"
        # Reverting: the target's replica goes, the original waits for its broker.
        assert listed(bootstrap) == [[TOPIC, "0", f"{paused},{controller}", "-", str(controller)]]
    finally:
        cluster.kill(paused, "CONT")

    wait_until(
        "the revert to complete",
        lambda: listed(bootstrap) == [] and replicas(bootstrap) == [paused],
    )
    assert reassign("--verify", *f, *b).stdout == (
        "Status of partition reassignment:\n"
        f"There is no active reassignment of partition {TOPIC}-0, but replica set is "
        f"{paused} rather than {controller}.\n"
    ), "the move did not happen"
    assert consumed(cluster.bootstrap) == [b"r%03d" % i for i in range(RECORDS)]


def consumed(bootstrap: str) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reassign-check"})
    consumer.assign([CkTopicPartition(TOPIC, 0, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(values) < RECORDS and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value() or b"")
    finally:
        consumer.close()
    return values
