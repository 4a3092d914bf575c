"""Group APIs on the wire against real brokers: exact errors for bad input,
the admin APIs, and committed offsets surviving a coordinator SIGKILL
(restart with rf=1; failover to another replica with rf=3)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from tests.waiting import wait_until

from .support import GROUP_BROKER_SETTINGS
from .wire_groups import (
    Address,
    call,
    commit,
    coordinator_address,
    fetch_offsets,
    find_coordinator,
    heartbeat,
    join,
    request,
    sync,
)

ClusterFactory = Callable[..., Any]


def _create_topic(cluster: Any, name: str, partitions: int) -> None:
    """Offsets are committed only for partitions the cluster has (Kafka's
    UNKNOWN_TOPIC_OR_PARTITION otherwise): every broker must know the topic."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.integration.cluster_support import wait_until_serving

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)
    for broker_id in cluster.brokers:
        host, port = cluster.broker_address(broker_id)
        wait_until_serving(f"{host}:{port}", name, partitions)


def _address(bootstrap: str) -> Address:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    return host, int(port)


def _join_stable(address: Address, group: str) -> tuple[str, int]:
    """A one-member group through the v5 handshake: MEMBER_ID_REQUIRED, join, sync."""
    first = join(address, group)
    assert first.error_code == ErrorCode.member_id_required
    member_id = first.member_id
    joined = join(address, group, member_id)
    assert joined.error_code == ErrorCode.none
    assert joined.leader == member_id and joined.generation_id >= 1
    assert [m.member_id for m in joined.members] == [member_id]
    synced = sync(address, group, joined.generation_id, member_id, b"assignment-1")
    assert synced.error_code == ErrorCode.none and synced.assignment == b"assignment-1"
    return member_id, joined.generation_id


@pytest.mark.timeout(120)
def test_bad_generation_and_unknown_member_are_refused_without_harm(
    cluster_factory: ClusterFactory,
) -> None:
    cluster = cluster_factory(
        brokers=1, offsets_topic_replication_factor=1, **GROUP_BROKER_SETTINGS
    )
    bootstrap = _address(cluster.bootstrap)
    group, topic = "bad-input-group", "t"
    _create_topic(cluster, topic, 2)
    _, address = coordinator_address(bootstrap, group)

    member_id, generation = _join_stable(address, group)
    assert heartbeat(address, group, generation, member_id) == ErrorCode.none
    assert commit(address, group, topic, {0: 42, 1: 7}, generation, member_id) == {
        0: ErrorCode.none,
        1: ErrorCode.none,
    }

    # The leader rejoins: a new generation; the old one is over.
    rejoined = join(address, group, member_id)
    assert rejoined.error_code == ErrorCode.none
    new_generation = rejoined.generation_id
    assert new_generation == generation + 1
    assert sync(address, group, new_generation, member_id, b"a2").error_code == ErrorCode.none

    assert commit(address, group, topic, {0: 1000}, generation, member_id) == {
        0: ErrorCode.illegal_generation
    }
    assert commit(address, group, topic, {0: 1000}, new_generation, "no-such-member") == {
        0: ErrorCode.unknown_member_id
    }
    assert heartbeat(address, group, generation, member_id) == ErrorCode.illegal_generation
    assert heartbeat(address, group, new_generation, "no-such-member") == (
        ErrorCode.unknown_member_id
    )
    unknown_sync = sync(address, group, new_generation, "no-such-member", b"x")
    assert unknown_sync.error_code == ErrorCode.unknown_member_id
    # Nothing was corrupted: the offsets are the ones committed in the valid generation,
    # the member is still in a Stable group and can go on heartbeating and committing.
    assert fetch_offsets(address, group) == (
        ErrorCode.none,
        {(topic, 0): (42, "m42"), (topic, 1): (7, "m7")},
    )
    assert fetch_offsets(address, group, version=5) == fetch_offsets(address, group)
    assert heartbeat(address, group, new_generation, member_id) == ErrorCode.none
    assert commit(address, group, topic, {0: 43}, new_generation, member_id) == {0: ErrorCode.none}

    described = call(
        address,
        request(
            15, 5, "DescribeGroupsRequest", groups=(group,), include_authorized_operations=False
        ),
    )
    (g,) = described.groups
    assert (g.error_code, g.group_state, g.protocol_type, g.protocol_data) == (
        ErrorCode.none,
        "Stable",
        "consumer",
        "range",
    )
    assert [(m.member_id, m.member_assignment) for m in g.members] == [(member_id, b"a2")]
    listed = call(address, request(16, 4, "ListGroupsRequest", states_filter=()))
    assert (group, "consumer", "Stable") in {
        (x.group_id, x.protocol_type, x.group_state) for x in listed.groups
    }

    # A live group cannot be deleted; once its member left, it can, offsets and all.
    deleted = call(address, request(42, 2, "DeleteGroupsRequest", groups_names=(group,)))
    assert [r.error_code for r in deleted.results] == [ErrorCode.non_empty_group]
    leave_mod_members = (
        request(13, 4, "MemberIdentity", member_id=member_id, group_instance_id=None),
    )
    left = call(
        address, request(13, 4, "LeaveGroupRequest", group_id=group, members=leave_mod_members)
    )
    assert left.error_code == ErrorCode.none
    assert [m.error_code for m in left.members] == [ErrorCode.none]
    deleted = call(address, request(42, 2, "DeleteGroupsRequest", groups_names=(group,)))
    assert [r.error_code for r in deleted.results] == [ErrorCode.none]
    assert fetch_offsets(address, group) == (ErrorCode.none, {})


@pytest.mark.timeout(120)
def test_find_coordinator_batches_keys_and_answers_transaction_keys(
    cluster_factory: ClusterFactory,
) -> None:
    cluster = cluster_factory(
        brokers=1, offsets_topic_replication_factor=1, offsets_topic_num_partitions=3
    )
    bootstrap = _address(cluster.bootstrap)
    groups = [f"group-{i}" for i in range(5)]
    found = find_coordinator(bootstrap, groups)
    assert [c.key for c in found] == groups
    assert {(c.node_id, c.port) for c in found} == {(1, bootstrap[1])}
    (txn,) = find_coordinator(bootstrap, ["my-transactional-id"], key_type=1)
    assert (txn.node_id, txn.port) == (1, bootstrap[1])
    # v0: one key, no key type.
    old = call(bootstrap, request(10, 0, "FindCoordinatorRequest", key="group-0"))
    assert (old.error_code, old.node_id, old.port) == (ErrorCode.none, 1, bootstrap[1])
    # The offsets topic was created compacted with offsets.topic.num.partitions.
    metadata = call(
        bootstrap,
        request(
            3,
            12,
            "MetadataRequest",
            topics=(
                request(
                    3, 12, "MetadataRequestTopic", name="__consumer_offsets", topic_id=_zero_uuid()
                ),
            ),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        ),
    )
    (topic,) = metadata.topics
    assert topic.is_internal and len(topic.partitions) == 3


def _zero_uuid() -> Any:
    from kio.static.constants import uuid_zero

    return uuid_zero


@pytest.mark.timeout(120)
def test_committed_offsets_survive_a_coordinator_sigkill_and_restart(
    cluster_factory: ClusterFactory,
) -> None:
    cluster = cluster_factory(
        brokers=1, offsets_topic_replication_factor=1, **GROUP_BROKER_SETTINGS
    )
    bootstrap = _address(cluster.bootstrap)
    _create_topic(cluster, "orders", 6)
    groups = [f"durable-{i}" for i in range(4)]
    for n, group in enumerate(groups):
        _, address = coordinator_address(bootstrap, group)
        assert commit(address, group, "orders", {0: 10 + n, 5: 500 + n}) == {
            0: ErrorCode.none,
            5: ErrorCode.none,
        }
    member_id, generation = _join_stable(bootstrap, "durable-live")
    assert commit(bootstrap, "durable-live", "orders", {1: 77}, generation, member_id) == {
        1: ErrorCode.none
    }
    cluster.kill(1, "KILL")
    cluster.start(1)
    bootstrap = _address(cluster.bootstrap)
    for n, group in enumerate(groups):
        _, address = coordinator_address(bootstrap, group)
        wait_until(
            "the offsets partition to load",
            lambda a=address, g=group: fetch_offsets(a, g)[0] == ErrorCode.none,
            30,
        )
        assert fetch_offsets(address, group)[1] == {
            ("orders", 0): (10 + n, f"m{10 + n}"),
            ("orders", 5): (500 + n, f"m{500 + n}"),
        }
    # The group's membership was loaded too: its member may carry on in its generation.
    assert fetch_offsets(bootstrap, "durable-live")[1] == {("orders", 1): (77, "m77")}
    assert heartbeat(bootstrap, "durable-live", generation, member_id) == ErrorCode.none


@pytest.mark.timeout(180)
def test_coordinator_failover_with_replicated_offsets_topic(
    cluster_factory: ClusterFactory,
) -> None:
    cluster = cluster_factory(
        brokers=3, offsets_topic_replication_factor=3, **GROUP_BROKER_SETTINGS
    )
    cluster.wait_for_full_metadata()
    bootstrap = _address(cluster.bootstrap)
    group = "failover-group"
    _create_topic(cluster, "events", 3)
    coordinator_id, address = coordinator_address(bootstrap, group)
    member_id, generation = _join_stable(address, group)
    assert commit(
        address, group, "events", {p: 100 + p for p in range(3)}, generation, member_id
    ) == {p: ErrorCode.none for p in range(3)}

    cluster.kill(coordinator_id, "KILL")
    other = next(b for b in sorted(cluster.brokers) if b != coordinator_id)
    survivor = cluster.broker_address(other)

    def moved() -> bool:
        new_id, _ = coordinator_address(survivor, group)
        return new_id != coordinator_id

    killed_at = time.monotonic()
    wait_until("a new coordinator", moved, 30)
    took = time.monotonic() - killed_at
    new_id, new_address = coordinator_address(survivor, group)
    wait_until(
        "the new coordinator to load",
        lambda: fetch_offsets(new_address, group)[0] == ErrorCode.none,
        30,
    )
    assert fetch_offsets(new_address, group)[1] == {
        ("events", p): (100 + p, f"m{100 + p}") for p in range(3)
    }
    # The old coordinator's member lives on at the new one (its metadata was replicated).
    assert heartbeat(new_address, group, generation, member_id) == ErrorCode.none
    print(f"coordinator {coordinator_id} -> {new_id} found {took:.2f}s after the SIGKILL")


@pytest.mark.timeout(120)
def test_parked_join_completes_when_the_second_member_arrives(
    cluster_factory: ClusterFactory,
) -> None:
    """A rebalance with two members on separate connections: the first member's rejoin
    is parked until the second one joins, then both get the same generation."""
    cluster = cluster_factory(
        brokers=1, offsets_topic_replication_factor=1, **GROUP_BROKER_SETTINGS
    )
    bootstrap = _address(cluster.bootstrap)
    group = "two-members"
    _, address = coordinator_address(bootstrap, group)
    first_id, generation = _join_stable(address, group)
    answers: dict[str, Any] = {}

    def second() -> None:
        required = join(address, group)
        answers["second"] = join(address, group, required.member_id)

    thread = threading.Thread(target=second)
    thread.start()
    wait_until(
        "the rebalance to start",
        lambda: heartbeat(address, group, generation, first_id) == ErrorCode.rebalance_in_progress,
        10,
    )
    answers["first"] = join(address, group, first_id)
    thread.join(15)
    first, second_answer = answers["first"], answers["second"]
    assert first.error_code == second_answer.error_code == ErrorCode.none
    assert first.generation_id == second_answer.generation_id == generation + 1
    assert first.leader == first_id and len(first.members) == 2
    assert second_answer.members == ()
    time.sleep(0)  # nothing left parked
