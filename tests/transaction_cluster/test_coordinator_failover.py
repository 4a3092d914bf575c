"""Coordinator failover (docs/transactions.md): a transaction whose commit (and one whose abort) the
coordinator has logged as prepared, but whose markers it could not write yet (the data
partition's only replica is SIGSTOPped), is finished by the next coordinator after the
first one is SIGKILLed: it loads PrepareCommit / PrepareAbort from `__transaction_state`
and writes the markers once the partition is back. read_committed then sees the
committed records and not the aborted ones."""

from __future__ import annotations

import threading
import uuid
from typing import Any

from confluent_kafka import Producer
from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.types import TransactionalId

from strandline.launcher.local_cluster import LocalCluster
from tests.cluster.support import create_topic
from tests.waiting import wait_until

from .support import (
    READ_COMMITTED,
    find_txn_coordinator,
    leader_address,
    list_offset,
    read_confluent,
    txn_cluster,
    values,
    wire_many,
)


def _state(cluster: LocalCluster, broker: int, txn_id: str) -> str | None:
    """The transaction's state as `broker` describes it (None: it is not its coordinator)."""
    try:
        [response] = wire_many(
            *cluster.broker_address(broker),
            [DescribeTransactionsRequest(transactional_ids=(TransactionalId(txn_id),))],
        )
    except Exception:  # a broker mid-start; ask again
        return None
    [state] = response.transaction_states
    return str(state.transaction_state) if state.error_code == 0 else None


def _ids_on_one_coordinator(cluster: LocalCluster, avoid: int) -> tuple[int, str, str]:
    """Two fresh transactional ids whose coordinator is the same broker, not `avoid`."""
    by_coordinator: dict[int, list[str]] = {}
    for i in range(60):
        txn_id = f"fo-{uuid.uuid4().hex[:6]}-{i}"
        coordinator = find_txn_coordinator(cluster, txn_id)
        if coordinator == avoid:
            continue
        found = by_coordinator.setdefault(coordinator, [])
        found.append(txn_id)
        if len(found) == 2:
            return coordinator, found[0], found[1]
    raise AssertionError(f"no two transactional ids share a coordinator: {by_coordinator}")


def _producer(cluster: LocalCluster, txn_id: str) -> Producer:
    p = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "transactional.id": txn_id,
            "transaction.timeout.ms": 60_000,
            "linger.ms": 5,
        }
    )
    p.init_transactions(30)
    return p


def test_next_coordinator_finishes_prepared_commit_and_abort(cluster_factory) -> None:
    cluster = txn_cluster(cluster_factory)
    topic = f"fo-{uuid.uuid4().hex[:6]}"
    # One replica only: while its broker is stopped no marker can be written anywhere.
    create_topic(cluster, topic, 1, 1, min_insync_replicas="1")
    host_port = leader_address(cluster, topic, 0)
    [data_broker] = [b for b in cluster.brokers if cluster.broker_address(b) == host_port]
    coordinator, commit_id, abort_id = _ids_on_one_coordinator(cluster, avoid=data_broker)

    committing, aborting = _producer(cluster, commit_id), _producer(cluster, abort_id)
    written: dict[str, list[bytes]] = {}
    for name, p in (("commit", committing), ("abort", aborting)):
        p.begin_transaction()
        written[name] = [f"{name}-{i}".encode() for i in range(5)]
        for value in written[name]:
            p.produce(topic, value=value, partition=0)
        assert p.flush(30) == 0

    cluster.kill(data_broker, "STOP")
    outcomes: dict[str, Any] = {}

    def end(name: str, call: Any) -> None:
        try:
            call(60)
            outcomes[name] = "ok"
        except Exception as exc:  # reported below
            outcomes[name] = exc

    threads = [
        threading.Thread(target=end, args=("commit", committing.commit_transaction)),
        threading.Thread(target=end, args=("abort", aborting.abort_transaction)),
    ]
    try:
        for t in threads:
            t.start()
        wait_until(
            "the coordinator to log both transactions as prepared",
            lambda: (
                (
                    _state(cluster, coordinator, commit_id),
                    _state(cluster, coordinator, abort_id),
                )
                == ("PrepareCommit", "PrepareAbort")
            ),
            timeout_s=30,
        )
        cluster.kill(coordinator, "KILL")
        successor = wait_until(
            "another broker to become the transactions' coordinator",
            lambda: (c := find_txn_coordinator(cluster, commit_id)) != coordinator and c,
            timeout_s=30,
        )
        loaded = wait_until(
            f"broker {successor} to load the prepared transactions",
            lambda: (
                (s := (_state(cluster, successor, commit_id), _state(cluster, successor, abort_id)))
                != (None, None)
                and s
            ),
            timeout_s=30,
        )
        assert loaded == ("PrepareCommit", "PrepareAbort"), (
            f"the new coordinator lost the prepared state: {loaded}"
        )
    finally:
        cluster.kill(data_broker, "CONT")
    for t in threads:
        t.join(60)
    assert outcomes == {"commit": "ok", "abort": "ok"}, outcomes

    wait_until(
        "the new coordinator to write both markers",
        lambda: (
            (
                _state(cluster, successor, commit_id),
                _state(cluster, successor, abort_id),
            )
            == ("CompleteCommit", "CompleteAbort")
        ),
        timeout_s=45,
    )
    cluster.start(coordinator)
    assert list_offset(cluster, topic, 0, read_committed=True) == list_offset(
        cluster, topic, 0, read_committed=False
    ), "a transaction is still open on the data partition"
    seen = read_confluent(cluster.bootstrap, topic, 1, READ_COMMITTED, set(written["commit"]))
    assert values(seen) == sorted(written["commit"])
