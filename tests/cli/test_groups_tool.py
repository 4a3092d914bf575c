"""`strandline groups` with kafka-consumer-groups.sh's flags, and the broker side they need
(DeleteGroups, OffsetDelete).

The coordinator's OffsetDelete rules are checked on the pure core first (fast, exact);
then one real 2-broker cluster, `__consumer_offsets` replicated on both, serves every
tool step: a live confluent-kafka consumer makes a group non-empty and subscribed, and
killing the group's coordinator shows that deleted offsets stay deleted on the broker
that takes over, and after the killed one restarts.
"""

from __future__ import annotations

import json
import re
import struct
import tempfile
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from kafka import TopicPartition as KpTopicPartition
from kafka import errors as kafka_errors
from kafka.admin import KafkaAdminClient
from kio.schema.errors import ErrorCode as E

from strandline.cli.main import app
from strandline.group.model import OffsetDeleteRequest, OffsetDeleteResponse
from strandline.group.records import GroupMetadataKey, OffsetCommitKey, decode_key
from strandline.launcher.local_cluster import LocalCluster
from strandline.types import TopicPartition
from tests.cli.support import runner, tool
from tests.conftest import ClusterFactory
from tests.group.conftest import Harness, make_coordinator
from tests.group_cluster.support import create_topic, produce
from tests.group_cluster.wire_groups import Address, commit, coordinator_address, fetch_offsets
from tests.waiting import wait_until

groups, ok, fails = tool("groups")


def kafka_rows(output: str, first: str) -> list[list[str]]:
    """The whitespace-split cells of Kafka's lines in `output` that start with `first`."""
    return [line.split() for line in output.splitlines() if line.split()[:1] == [first]]


def aligned(header: str, row: str) -> bool:
    """Each cell starts where its column's name does: Kafka's left-aligned layout."""
    return [m.start() for m in re.finditer(r"\S+", header)] == [
        m.start() for m in re.finditer(r"\S+", row)
    ]


A0, A1, B0, B1 = (TopicPartition(t, p) for t in ("a", "b") for p in (0, 1))


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0: what a consumer's JoinGroup metadata carries."""
    out = struct.pack(">hi", 0, len(topics))
    for topic in topics:
        raw = topic.encode()
        out += struct.pack(">h", len(raw)) + raw
    return out + struct.pack(">i", -1)  # no user data


# == the coordinator's OffsetDelete ============================================================


def delete_offsets(h: Harness, group: str, *tps: TopicPartition) -> object:
    token = h.last_token = next(h.tokens)
    h.apply(h.coordinator.offset_delete(OffsetDeleteRequest(token, group, tps), h.now))
    return h.responses.get(token)


def stable_consumer(h: Harness, group: str, metadata: bytes) -> str:
    member = h.join_new(group=group, protocols=(("range", metadata),))
    joined = h.answer(h.join(member, group=group, protocols=(("range", metadata),)))
    generation = joined.generation_id  # type: ignore[attr-defined]
    h.sync(member, generation, {member: b""}, group=group)
    group_state = h.coordinator.group(group)
    assert group_state is not None and group_state.state.value == "Stable"
    return member


def committed(h: Harness, group: str) -> set[TopicPartition]:
    found = h.coordinator.group(group)
    return set(found.offsets) if found is not None else set()


def test_offset_delete_refuses_subscribed_topics_and_tombstones_the_rest() -> None:
    h = Harness(make_coordinator())
    h.commit({A0: 1, A1: 2, B0: 3, B1: 4})
    stable_consumer(h, "g", subscription("a"))
    before = len(h.log)

    answer = delete_offsets(h, "g", A0, B0)
    assert answer == OffsetDeleteResponse(E.none, ((A0, E.group_subscribed_to_topic), (B0, E.none)))
    assert committed(h, "g") == {A0, A1, B1}
    written = [(decode_key(k), v) for _, (k, v) in h.log[before:]]
    assert written == [(OffsetCommitKey("g", "b", 0), None)], "one offset tombstone"

    # A new coordinator replays the log: the tombstone keeps B0 deleted.
    reloaded = make_coordinator(owned=False)
    partition = reloaded.partition_for("g")
    reloaded.load(partition, [r for p, r in h.log if p == partition], h.now)
    group = reloaded.group("g")
    assert group is not None and set(group.offsets) == {A0, A1, B1}


def test_offset_delete_group_errors_and_failed_write() -> None:
    h = Harness(make_coordinator())
    assert delete_offsets(h, "missing", A0) == OffsetDeleteResponse(E.group_id_not_found)
    assert delete_offsets(h, "", A0) == OffsetDeleteResponse(E.invalid_group_id)

    # Members whose subscription cannot be read count as subscribed to everything.
    h.commit({B0: 1}, group="opaque")
    stable_consumer(h, "opaque", b"not a subscription")
    assert delete_offsets(h, "opaque", B0) == OffsetDeleteResponse(
        E.none, ((B0, E.group_subscribed_to_topic),)
    )
    # A group with members that is not a consumer group: Kafka cannot tell, refuses all.
    member = h.join_new(group="connect2", protocol_type="connect")
    h.join(member, group="connect2", protocol_type="connect")
    assert delete_offsets(h, "connect2", B0) == OffsetDeleteResponse(E.non_empty_group)

    # The answer waits for the write and reports its failure as Kafka's commit errors.
    h.commit({A0: 1, B0: 2}, group="simple")
    h.append_error = E.not_enough_replicas
    assert delete_offsets(h, "simple", B0) == OffsetDeleteResponse(
        E.none, ((B0, E.coordinator_not_available),)
    )
    h.append_error = E.none
    h.hold_appends = True
    assert delete_offsets(h, "simple", A0) is None, "no answer before the write completes"
    (held,) = h.held
    h.hold_appends = False
    h.complete(held, E.none)
    assert h.responses[h.last_token] == OffsetDeleteResponse(E.none, ((A0, E.none),))


def test_offset_delete_of_an_empty_groups_last_offsets_deletes_the_group() -> None:
    h = Harness(make_coordinator())
    h.commit({A0: 1, B0: 2}, group="simple")
    before = len(h.log)
    assert delete_offsets(h, "simple", A0, B0, B1) == OffsetDeleteResponse(
        E.none, ((A0, E.none), (B0, E.none), (B1, E.none))
    )
    assert h.coordinator.group("simple") is None
    keys = [decode_key(k) for _, (k, v) in h.log[before:] if v is None]
    assert GroupMetadataKey("simple") in keys and OffsetCommitKey("simple", "a", 0) in keys
    assert delete_offsets(h, "simple", A0) == OffsetDeleteResponse(E.group_id_not_found)


# == the tool against a real cluster ===========================================================


def table(output: str) -> list[list[str]]:
    """The cells of every table row in `output` (borders stripped)."""
    rows = []
    for line in output.splitlines():
        if "│" in line or "┃" in line:
            rows.append([c.strip() for c in re.split("[│┃]", line.strip().strip("│┃"))])
    return rows


def offsets_of(address: Address, group: str) -> dict[tuple[str, int], int]:
    """Committed offsets, asked of whichever broker coordinates the group now."""
    _, coordinator = coordinator_address(address, group)
    error, found = fetch_offsets(coordinator, group)
    assert error == E.none
    return {tp: offset for tp, (offset, _meta) in found.items()}


def assigned(consumer: Consumer, count: int) -> bool:
    consumer.poll(0.2)  # records or None: either way the consumer takes part in the group
    return len(consumer.assignment()) == count


@pytest.mark.timeout(420)
def test_groups_tool_against_a_cluster(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(
        brokers=2,
        offsets_topic_replication_factor=2,
        offsets_topic_num_partitions=3,
        group_initial_rebalance_delay_ms=0,
    )
    bootstrap = cluster.bootstrap
    first = cluster.broker_address(1)
    subscribed = create_topic(bootstrap, partitions=2, prefix="sub", replication_factor=2)
    old = create_topic(bootstrap, partitions=2, prefix="old", replication_factor=2)
    produce(bootstrap, subscribed, 5, partitions=2)
    produce(bootstrap, old, 5, partitions=2)

    group, empty = "tool-active", "tool-empty"
    _, coordinator = coordinator_address(first, group)
    assert commit(coordinator, group, subscribed, {0: 1, 1: 2}) == {0: E.none, 1: E.none}
    assert commit(coordinator, group, old, {0: 3, 1: 4}) == {0: E.none, 1: E.none}
    _, empty_coordinator = coordinator_address(first, empty)
    assert commit(empty_coordinator, empty, subscribed, {0: 5}) == {0: E.none}

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": "tool-test-consumer",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            # The steps below do not poll; the member must stay in the group meanwhile.
            "max.poll.interval.ms": 900_000,
        }
    )
    try:
        consumer.subscribe([subscribed])
        wait_until("the consumer's assignment", lambda: assigned(consumer, 2))
        run_tool_steps(cluster, first, group, empty, subscribed, old, consumer)
    finally:
        consumer.close()

    # The consumer left: every group is Empty now and --all-groups deletes them all.
    wait_until(
        f"{group} to be Empty",
        lambda: "Empty" in ok("--describe", "--group", group, "--state", *bs(cluster)),
    )
    assert "was successful" in ok("--delete", "--all-groups", *bs(cluster))
    assert ok("--list", *bs(cluster)).split() == []


def bs(cluster: LocalCluster) -> tuple[str, str]:
    return ("--bootstrap-server", cluster.bootstrap)


def run_tool_steps(
    cluster: LocalCluster,
    first: Address,
    group: str,
    empty: str,
    subscribed: str,
    old: str,
    consumer: Consumer,
) -> None:
    b = bs(cluster)
    assert set(ok("--list", *b).split()) == {group, empty}
    listed = json.loads(ok("--list", "--output", "json", *b))
    assert {(g["group"], g["state"]) for g in listed} == {(group, "Stable"), (empty, "Empty")}

    # --members [--verbose]: Kafka's lines, a blank line first; no GROUP-INSTANCE-ID
    # column, as no member has one.
    members = ok("--describe", "--group", group, "--members", "--verbose", *b)
    blank, header, line = members.splitlines()
    assert blank == "" and header.split() == [
        "GROUP",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
        "#PARTITIONS",
        "ASSIGNMENT",
    ]
    row = line.split()
    assert row[0] == group and row[1].startswith("tool-test-consumer")
    assert row[3:] == ["tool-test-consumer", "2", f"{subscribed}(0,1)"]
    assert aligned(header, line)
    [short] = kafka_rows(ok("--describe", "--group", group, "--members", *b), group)
    assert short[3:] == ["tool-test-consumer", "2"]
    quiet = groups("--describe", "--group", empty, "--members", *b)
    assert quiet.exit_code == 0 and quiet.stdout == ""
    assert quiet.stderr == f"\nConsumer group '{empty}' has no active members.\n"
    [table_row] = table(ok("--describe", "--group", group, "--members", "--output", "table", *b))[
        1:
    ]
    assert table_row[0] == group and table_row[-2:] == ["tool-test-consumer", "2"]

    # --state, for one group and for all of them: Kafka sizes the first column by the
    # coordinator's text, 25 at least.
    node, (host, port) = coordinator_address(first, group)
    coordinator = f"{host}:{port}  ({node})"
    width = max(25, len(coordinator))
    assert ok("--describe", "--group", group, "--state", *b) == (
        f"\n{'GROUP':<{width}} {'COORDINATOR (ID)':<25} {'ASSIGNMENT-STRATEGY':<20} "
        f"{'STATE':<15} #MEMBERS\n"
        f"{group:<{width}} {coordinator:<25} {'range':<20} {'Stable':<15} 1\n"
    )
    every = ok("--describe", "--all-groups", "--state", *b)
    assert every.startswith("\nGROUP ") and every.count("\n\nGROUP ") == 1, "a blank line between"
    states = {r[0]: r[-2:] for r in kafka_rows(every, group) + kafka_rows(every, empty)}
    assert states == {group: ["Stable", "1"], empty: ["Empty", "0"]}

    # --offsets is the default view: committed offset, log end, lag and owner
    described = ok("--describe", "--group", group, *b)
    header = described.splitlines()[1]
    assert header.split() == [
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    ]
    rows = {(r[1], int(r[2])): r[3:7] for r in kafka_rows(described, group)}
    member_id = row[1]
    assert rows == {
        (subscribed, 0): ["1", "5", "4", member_id],
        (subscribed, 1): ["2", "5", "3", member_id],
        (old, 0): ["3", "5", "2", "-"],
        (old, 1): ["4", "5", "1", "-"],
    }
    first_row = next(line for line in described.splitlines() if line.startswith(group))
    assert aligned(header, first_row)
    as_table = {
        (r[1], int(r[2])): r[3:7]
        for r in table(ok("--describe", "--group", group, "--output", "table", *b))
        if r[0] == group
    }
    assert as_table == rows
    [as_json] = json.loads(ok("--describe", "--group", group, "--output", "json", *b))
    assert as_json["group"] == group and as_json["state"] == "Stable"
    assert {
        (p["topic"], p["partition"]): [p["current_offset"], p["log_end_offset"], p["lag"]]
        for p in as_json["partitions"]
    } == {k: [int(v) for v in cells[:3]] for k, cells in rows.items()}
    assert "--output must be kafka, table or json" in fails(
        "--describe", "--group", group, "--output", "yaml", *b
    )

    # A group with an active member cannot be deleted, nor lose a subscribed topic's offsets.
    assert "NON_EMPTY_GROUP" in fails("--delete", "--group", group, *b)
    line = fails("--delete-offsets", "--group", group, "--topic", subscribed, *b)
    assert "GROUP_SUBSCRIBED_TO_TOPIC" in line and subscribed in line
    assert offsets_of(first, group) == {
        (subscribed, 0): 1,
        (subscribed, 1): 2,
        (old, 0): 3,
        (old, 1): 4,
    }
    # ... but offsets of a topic it no longer reads go, one partition or a whole topic.
    out = ok("--delete-offsets", "--group", group, "--topic", f"{old}:0", *b)
    assert out == (
        f"Request succeed for deleting offsets with topic {old}:0 group {group}\n"
        f"\n{'TOPIC':<30} {'PARTITION':<15} {'STATUS':<15}"
        f"\n{old:<30} {'0':<15} {'Successful':<15}\n"
    )
    assert (old, 0) not in offsets_of(first, group)
    ok("--delete-offsets", "--group", group, "--topic", old, *b)
    assert offsets_of(first, group) == {(subscribed, 0): 1, (subscribed, 1): 2}

    # Unknown names: one line each.
    assert "'nope' does not exist" in fails("--describe", "--group", "nope", *b)
    assert "'nope' was not deleted: it does not exist" in fails("--delete", "--group", "nope", *b)
    assert "topic 'nope' does not exist" in fails(
        "--delete-offsets", "--group", group, "--topic", "nope", *b
    )
    assert "GROUP_ID_NOT_FOUND" in fails("--delete-offsets", "--group", "nope", "--topic", old, *b)
    assert "has no partition 7" in fails(
        "--delete-offsets", "--group", group, "--topic", f"{old}:7", *b
    )
    # Bad flags: one line, before any request.
    assert "exactly one of" in fails("--describe", "--delete", "--group", group, *b)
    assert "not both" in fails("--describe", "--group", group, "--all-groups", *b)
    assert "at most one of" in fails("--describe", "--group", group, "--members", "--state", *b)
    assert "only go with --describe" in fails("--delete", "--group", group, "--members", *b)
    assert "exactly one --group" in fails("--delete-offsets", "--all-groups", "--topic", old, *b)
    assert "TOPIC:PARTITION" in fails("--delete-offsets", "--group", group, "--topic", "x:y", *b)
    assert "SASL mechanism GSSAPI is not supported" in fails_with_config(
        cluster, "security.protocol=SASL_SSL\n"
    )

    # Kafka's reset flags: --to-current --export writes the CSV --from-file reads back.
    reset = ("--reset-offsets", "--group", empty)
    current = ok(*reset, "--all-topics", "--to-current", "--export", "--dry-run", *b)
    [line] = current.split()
    topic_name, partition, offset = line.split(",")
    assert (topic_name, partition) == (subscribed, "0") and int(offset) > 0
    # Without --export: Kafka's plan lines.
    assert ok(*reset, "--all-topics", "--to-current", *b) == (
        f"\n{'GROUP':<30} {'TOPIC':<30} {'PARTITION':<10} {'NEW-OFFSET':<15}"
        f"\n{empty:<30} {subscribed:<30} {'0':<10} {offset:<15}\n"
    )
    assert json.loads(ok(*reset, "--all-topics", "--to-current", "--output", "json", *b)) == [
        {"group": empty, "topic": subscribed, "partition": 0, "new_offset": int(offset)}
    ]
    with tempfile.TemporaryDirectory() as scratch:
        plan = Path(scratch) / "offsets.csv"
        plan.write_text(f"{subscribed},0,0\n")
        ok(*reset, "--from-file", str(plan), "--execute", *b)
        assert ok(*reset, "--all-topics", "--to-current", "--export", *b).split() == [
            f"{subscribed},0,0"
        ]
        plan.write_text(f"{subscribed},zero,0\n")
        assert "line 1 is not topic,partition,offset" in fails(
            *reset, "--from-file", str(plan), "--execute", *b
        )
    # A day ago every record was still to come: the earliest offset.
    assert ok(*reset, "--all-topics", "--by-duration", "P1D", "--export", *b).split() == [
        f"{subscribed},0,0"
    ]
    assert "PnDTnHnMnS" in fails(*reset, "--all-topics", "--by-duration", "1d", *b)

    # An Empty group goes; so does one deleted through confluent-kafka's AdminClient.
    assert f"('{empty}') was successful" in ok("--delete", "--group", empty, *b)
    assert empty not in ok("--list", *b).split()
    _, coordinator = coordinator_address(first, "tool-admin")
    assert commit(coordinator, "tool-admin", old, {0: 1, 1: 1}) == {0: E.none, 1: E.none}
    # kafka-python's admin client speaks OffsetDelete too.
    python_admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        deleted = python_admin.delete_group_offsets("tool-admin", [KpTopicPartition(old, 1)])
        assert deleted == {KpTopicPartition(old, 1): kafka_errors.NoError}
        refused_by_kp = python_admin.delete_group_offsets(group, [KpTopicPartition(subscribed, 0)])
        assert refused_by_kp == {
            KpTopicPartition(subscribed, 0): kafka_errors.GroupSubscribedToTopicError
        }
    finally:
        python_admin.close()
    assert offsets_of(first, "tool-admin") == {(old, 0): 1}
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    assert admin.delete_consumer_groups(["tool-admin"])["tool-admin"].result(30) is None
    assert "tool-admin" not in ok("--list", *b).split()
    with pytest.raises(KafkaException) as refused:
        admin.delete_consumer_groups([group])[group].result(30)
    assert refused.value.args[0].code() == KafkaError.NON_EMPTY_GROUP
    del admin  # librdkafka clients must not outlive the cluster

    # The deletion was written to __consumer_offsets: the broker that takes the group
    # over when its coordinator dies, and the coordinator after its restart, agree.
    node, _ = coordinator_address(first, group)
    survivor = cluster.broker_address(2 if node == 1 else 1)
    cluster.kill(node, "KILL")
    wait_until(
        "the other broker to coordinate the group",
        lambda: coordinator_address(survivor, group)[0] != node,
    )
    assert offsets_of(survivor, group) == {(subscribed, 0): 1, (subscribed, 1): 2}
    cluster.start(node)
    # Back as the preferred leader, the restarted broker loads the group from its own log.
    wait_until(
        f"broker {node} to coordinate the group again",
        lambda: elect_preferred(cluster) and coordinator_address(survivor, group)[0] == node,
    )
    assert offsets_of(survivor, group) == {(subscribed, 0): 1, (subscribed, 1): 2}


def elect_preferred(cluster: LocalCluster) -> bool:
    # Fails (exit 1) while the restarted replica is not in the ISR yet: the caller polls.
    runner.invoke(
        app,
        [
            "elect",
            "--bootstrap-server",
            cluster.bootstrap,
            "--election-type",
            "preferred",
            "--all-topic-partitions",
        ],
    )
    return True


def fails_with_config(cluster: LocalCluster, properties: str) -> str:
    with tempfile.NamedTemporaryFile("w", suffix=".properties") as f:
        f.write(properties)
        f.flush()
        return fails("--list", "--command-config", f.name, *bs(cluster))
