"""`strandline transactions list | describe | abort` against a real one-broker cluster,
with confluent-kafka transactional producers making the transactions to look at."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from strandline.cli.transactions import OpenTxn, TxnClient, open_transactions
from tests.cli.support import tool
from tests.conftest import ClusterFactory

transactions, ok, fails = tool("transactions")


def table_rows(table: str) -> dict[str, list[str]]:
    """Body rows of a rich table, keyed by their first cell."""
    out = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip("│ ").split("│")]
        if len(cells) > 1 and cells[0] and not set(cells[0]) <= set("━─┃"):
            out[cells[0]] = cells[1:]
    return out


def kafka_lines(output: str) -> list[list[str]]:
    """kafka-transactions.sh's layout: every cell padded to its column's width and
    followed by a tab; the cells of each line, the header's first."""
    lines = output.splitlines()
    cells = [line.split("\t") for line in lines]
    assert all(c[-1] == "" for c in cells), f"every cell ends in a tab: {lines}"
    widths = [len(cell) for cell in cells[0][:-1]]
    assert all([len(cell) for cell in c[:-1]] == widths for c in cells), "padded to one width"
    assert all(max(len(c[i].rstrip()) for c in cells) == w for i, w in enumerate(widths))
    return [[cell.strip() for cell in c[:-1]] for c in cells]


def rows(output: str) -> dict[str, list[str]]:
    """Kafka's body lines, keyed by their first cell."""
    return {cells[0]: cells[1:] for cells in kafka_lines(output)[1:]}


def read_committed(bootstrap: str, topic: str, wait_s: float = 6.0) -> list[str]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "txn-tool-reader",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    got: list[str] = []
    deadline = time.monotonic() + wait_s
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                got.append(message.value().decode())
    finally:
        consumer.close()
    return got


@pytest.mark.timeout(120)
def test_list_describe_and_abort(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(
        1,
        config={
            "transaction.state.log.num.partitions": "2",
            "offsets.topic.num.partitions": "2",
        },
    )
    bootstrap = cluster.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("t", 1, 1)])["t"].result(30)

    committed = Producer({"bootstrap.servers": bootstrap, "transactional.id": "tool-b"})
    committed.init_transactions(30)
    committed.begin_transaction()
    committed.produce("t", value=b"b")
    committed.commit_transaction(30)

    hanging = Producer({"bootstrap.servers": bootstrap, "transactional.id": "tool-a"})
    hanging.init_transactions(30)
    hanging.begin_transaction()
    hanging.produce("t", value=b"a")
    hanging.flush(30)

    # find-hanging: DescribeProducers shows tool-a's transaction open in t-0; its
    # coordinator has it open there, so it is not hanging even past a 0-minute timeout.
    async def open_in_logs() -> list[OpenTxn]:
        async with TxnClient(bootstrap, None) as client:
            return await open_transactions(client, 1, None, None)

    [open_txn] = asyncio.run(open_in_logs())
    assert (open_txn.topic, open_txn.partition, open_txn.start_offset) == ("t", 0, 2)
    found = ok("--bootstrap-server", bootstrap, "find-hanging", "--broker-id", "1",
               "--max-transaction-timeout", "0")  # fmt: skip
    assert kafka_lines(found) == [[
        "Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
        "StartOffset", "LastTimestamp", "Duration(min)",
    ]]  # fmt: skip

    # describe-producers: tool-b's committed producer and tool-a's open transaction.
    producers = kafka_lines(
        ok(
            "--bootstrap-server",
            bootstrap,
            "describe-producers",
            "--topic",
            "t",
            "--partition",
            "0",
        )
    )
    assert producers[0] == [
        "ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
        "LastTimestamp", "CurrentTransactionStartOffset",
    ]  # fmt: skip
    assert sorted(r[-1] for r in producers[1:]) == ["2", "None"]
    assert all(r[3] == "0" for r in producers[1:]), "one record each: sequence 0"
    assert "has no partition 5" in fails(
        "--bootstrap-server", bootstrap, "describe-producers", "--topic", "t", "--partition", "5"
    )
    assert "--broker-id or --topic" in fails("--bootstrap-server", bootstrap, "find-hanging")

    listed_text = ok("--bootstrap-server", bootstrap, "list")
    assert kafka_lines(listed_text)[0] == [
        "TransactionalId", "Coordinator", "ProducerId", "TransactionState",
    ]  # fmt: skip
    listed = rows(listed_text)
    assert listed["tool-a"][-1] == "Ongoing"
    assert listed["tool-b"][-1] == "CompleteCommit"
    assert listed["tool-a"][0] == "1"  # the coordinator: the only broker
    assert set(rows(ok("--bootstrap-server", bootstrap, "list", "--state", "Ongoing"))) == {
        "tool-a"
    }
    assert table_rows(ok("--bootstrap-server", bootstrap, "list", "--output", "table")) == listed
    as_json = json.loads(ok("--bootstrap-server", bootstrap, "list", "--output", "json"))
    assert {t["transactional_id"]: t["state"] for t in as_json} == {
        "tool-a": "Ongoing",
        "tool-b": "CompleteCommit",
    }
    assert "--output must be kafka, table or json" in fails(
        "--bootstrap-server", bootstrap, "list", "--output", "csv"
    )
    assert "unknown state Bogus" in fails(
        "--bootstrap-server", bootstrap, "list", "--state", "Bogus"
    )

    described_text = ok("--bootstrap-server", bootstrap, "describe", "--transactional-id", "tool-a")
    assert kafka_lines(described_text)[0][:2] == ["CoordinatorId", "TransactionalId"]
    described = rows(described_text)
    # CoordinatorId, TransactionalId, ProducerId, ProducerEpoch, TransactionState, ...
    (coordinator,) = described
    cells = described[coordinator]
    assert cells[0] == "tool-a" and cells[2] == "0" and cells[3] == "Ongoing"
    assert cells[-1] == "t-0"
    as_json = json.loads(
        ok(
            "--bootstrap-server",
            bootstrap,
            "describe",
            "--transactional-id",
            "tool-a",
            "--output",
            "json",
        )
    )
    assert as_json["state"] == "Ongoing" and as_json["topic_partitions"] == ["t-0"]
    assert "does not exist" in fails(
        "--bootstrap-server", bootstrap, "describe", "--transactional-id", "nobody"
    )

    out = ok("--bootstrap-server", bootstrap, "abort", "--transactional-id", "tool-a")
    assert "aborted its Ongoing transaction on 1 partitions" in out
    after = rows(ok("--bootstrap-server", bootstrap, "describe", "--transactional-id", "tool-a"))
    assert after[coordinator][3] == "Empty"  # the fencing epoch bump, after the abort
    assert int(after[coordinator][2]) >= 1

    # The fenced producer cannot commit, and read_committed never sees its record.
    with pytest.raises(KafkaException):
        hanging.commit_transaction(10)
    assert read_committed(bootstrap, "t") == ["b"]
