"""TxnOffsetCommit (28) and OffsetFetch require_stable on the wire, against a real broker:
offsets pending until WriteTxnMarkers closes the transaction, and the same state after a
SIGKILL and restart (the offsets partition replayed with its transactional batches and
markers). One broker, one test: the full consume-transform-produce flow with real
clients lives in tests/transaction_cluster."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from strandline.group.partitioning import OFFSETS_TOPIC, partition_for
from strandline.protocol.messages import request_module
from tests.group_cluster.support import GROUP_BROKER_SETTINGS, create_topic
from tests.group_cluster.wire_groups import Address, call, coordinator_address, request
from tests.waiting import wait_until

ClusterFactory = Callable[..., Any]
E = ErrorCode
PID_A, PID_B = 424_242, 434_343
GROUP = "txn-offsets-wire"


def _address(bootstrap: str) -> Address:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    return host, int(port)


def txn_commit(
    address: Address, topic: str, producer_id: int, offsets: dict[int, int], version: int
) -> dict[int, ErrorCode]:
    mod = request_module(28, version)
    response = call(
        address,
        request(
            28,
            version,
            "TxnOffsetCommitRequest",
            transactional_id=f"tx-{producer_id}",
            group_id=GROUP,
            producer_id=producer_id,
            producer_epoch=0,
            topics=(
                mod.TxnOffsetCommitRequestTopic(
                    name=topic,
                    partitions=tuple(
                        mod.TxnOffsetCommitRequestPartition(
                            partition_index=p, committed_offset=o, committed_metadata=f"m{o}"
                        )
                        for p, o in offsets.items()
                    ),
                ),
            ),
        ),
    )
    return {p.partition_index: p.error_code for t in response.topics for p in t.partitions}


def fetch(
    address: Address, topic: str, stable: bool, version: int = 7
) -> tuple[ErrorCode, dict[int, int | ErrorCode]]:
    """(group error, partition -> committed offset or its error) for partitions 0 and 1."""
    mod = request_module(9, version)
    topic_cls = mod.OffsetFetchRequestTopics if version >= 8 else mod.OffsetFetchRequestTopic
    wanted = (topic_cls(name=topic, partition_indexes=(0, 1)),)
    if version >= 8:
        group = mod.OffsetFetchRequestGroup(group_id=GROUP, topics=wanted)
        response = call(
            address,
            request(9, version, "OffsetFetchRequest", groups=(group,), require_stable=stable),
        )
        (g,) = response.groups
        error, topics = g.error_code, g.topics
    else:
        response = call(
            address,
            request(
                9,
                version,
                "OffsetFetchRequest",
                group_id=GROUP,
                topics=wanted,
                require_stable=stable,
            ),
        )
        error, topics = response.error_code, response.topics
    return error, {
        p.partition_index: p.committed_offset if p.error_code == E.none else p.error_code
        for t in topics
        for p in t.partitions
    }


def write_marker(address: Address, producer_id: int, commit: bool) -> ErrorCode:
    """What the transaction coordinator sends the offsets partition's leader."""
    mod = request_module(27, 1)
    marker = mod.WritableTxnMarker(
        producer_id=producer_id,
        producer_epoch=0,
        transaction_result=commit,
        topics=(
            mod.WritableTxnMarkerTopic(
                name=OFFSETS_TOPIC,
                partition_indexes=(
                    partition_for(GROUP, GROUP_BROKER_SETTINGS["offsets_topic_num_partitions"]),
                ),
            ),
        ),
        coordinator_epoch=0,
    )
    response = call(address, request(27, 1, "WriteTxnMarkersRequest", markers=(marker,)))
    ((error,),) = [[p.error_code for t in m.topics for p in t.partitions] for m in response.markers]
    return ErrorCode(error)


@pytest.mark.timeout(150)
def test_txn_offsets_pending_until_the_marker_and_after_a_restart(
    cluster_factory: ClusterFactory,
) -> None:
    cluster = cluster_factory(
        brokers=1, offsets_topic_replication_factor=1, **GROUP_BROKER_SETTINGS
    )
    topic = create_topic(cluster.bootstrap, partitions=2, prefix="txo")
    bootstrap = _address(cluster.bootstrap)
    _, address = coordinator_address(bootstrap, GROUP)

    assert txn_commit(address, topic, PID_A, {0: 10, 1: 9}, version=3) == {0: E.none, 1: E.none}
    # A second commit of the same transaction: its batch starts at sequence 0 again, which
    # the leader must take from the coordinator (not a duplicate of the first).
    assert txn_commit(address, topic, PID_A, {1: 11}, version=3) == {1: E.none}
    assert txn_commit(address, topic, PID_B, {1: 21}, version=0) == {1: E.none}
    assert txn_commit(address, "no-such-topic", PID_B, {0: 1}, version=2) == {
        0: E.unknown_topic_or_partition
    }
    # Nothing committed yet; a read_committed consumer is told to wait.
    assert fetch(address, topic, stable=False) == (E.none, {0: -1, 1: -1})
    assert fetch(address, topic, stable=True) == (
        E.none,
        {0: E.unstable_offset_commit, 1: E.unstable_offset_commit},
    )
    assert fetch(address, topic, stable=True, version=8) == fetch(address, topic, stable=True)

    assert write_marker(address, PID_A, commit=True) == E.none
    assert fetch(address, topic, stable=False) == (E.none, {0: 10, 1: 11})
    assert fetch(address, topic, stable=True) == (E.none, {0: 10, 1: E.unstable_offset_commit})
    # A's next transaction: again a one-record batch from sequence 0, to be written too.
    assert txn_commit(address, topic, PID_A, {0: 12}, version=3) == {0: E.none}
    assert fetch(address, topic, stable=True)[1][0] == E.unstable_offset_commit
    assert write_marker(address, PID_A, commit=True) == E.none
    assert fetch(address, topic, stable=True) == (E.none, {0: 12, 1: E.unstable_offset_commit})

    # The coordinator restarts: it replays the batches and the marker; B is still open.
    cluster.kill(1, "KILL")
    cluster.start(1)
    bootstrap = _address(cluster.bootstrap)
    _, address = coordinator_address(bootstrap, GROUP)
    wait_until("the offsets to load", lambda: fetch(address, topic, False)[0] == E.none, 30)
    assert fetch(address, topic, stable=True) == (E.none, {0: 12, 1: E.unstable_offset_commit})

    assert write_marker(address, PID_B, commit=False) == E.none
    assert fetch(address, topic, stable=True) == (E.none, {0: 12, 1: 11})
