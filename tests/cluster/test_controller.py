"""Controller failover and epoch fencing; topic deletion;
a restarted broker truncates by leader epoch and converges."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient

from strandline.types import TopicPartition
from tests.waiting import wait_until

from .support import (
    consume_all,
    create_topic,
    delivery_recorder,
    partition_status,
    producer,
    replica_batches,
    state_change_events,
)


def test_controller_failover_raises_the_epoch_and_fences_the_old_one(cluster_factory) -> None:
    from strandline.client.connection import send_request
    from strandline.protocol.controller_messages import leader_and_isr_request_to_wire
    from strandline.protocol.controller_requests import LeaderAndIsrRequest, PartitionState

    cluster = cluster_factory(brokers=3)
    before = cluster.status()
    old_controller, old_epoch = before.controller, before.controller_epoch
    assert old_controller is not None and old_epoch is not None
    cluster.kill(old_controller, "KILL")
    after = wait_until(
        "a new controller",
        lambda: (s := cluster.status()).controller not in (None, old_controller) and s,
    )
    assert after.controller_epoch > old_epoch

    # A LeaderAndIsr in the old controller's name is refused by a live broker, once
    # that broker has heard from the new controller (brokers learn epochs from requests).
    from strandline.launcher.local_cluster import answers_metadata

    target = after.controller
    host, port = cluster.broker_address(target)
    wait_until(
        "the new controller's UpdateMetadata",
        lambda: answers_metadata(host, port).controller_id == target,  # type: ignore[attr-defined]
    )
    stale = LeaderAndIsrRequest(
        controller_id=old_controller,
        controller_epoch=old_epoch,
        broker_epoch=after.broker_epochs[target],
        partitions=(
            PartitionState(
                TopicPartition("ghost", 0), old_epoch, target, 99, (target,), 0, (target,)
            ),
        ),
        live_leaders=(),
    )
    response = send_request(host, port, leader_and_isr_request_to_wire(stale), timeout=5)
    assert response.error_code == 11  # STALE_CONTROLLER_EPOCH

    # The cluster keeps working under the new controller.
    create_topic(cluster, "after-failover", 2, 2)
    acked: dict[tuple[int, int], bytes] = {}
    errors: list[str] = []
    p = producer(cluster)
    for i in range(50):
        p.produce("after-failover", value=b"v%d" % i, on_delivery=delivery_recorder(acked, errors))
    p.flush(15)
    assert len(acked) == 50, errors[:3]


def test_topic_deletion_removes_data_and_znodes_everywhere(cluster_factory) -> None:
    cluster = cluster_factory(brokers=3)
    create_topic(cluster, "doomed", 3, 3)
    p = producer(cluster)
    for _ in range(30):
        p.produce("doomed", value=b"x")
    p.flush(10)
    # A live producer keeps asking for the topic, and with auto-create on its Metadata
    # request creates it again once the deletion completed (as with Kafka). librdkafka
    # asks again sooner since topics have ids, so that raced the checks below.
    p.close()
    dirs = [cluster.broker_dir(b) / "data" / f"doomed-{i}" for b in (1, 2, 3) for i in range(3)]
    assert all(d.exists() for d in dirs)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.delete_topics(["doomed"], operation_timeout=20)["doomed"].result(30)
    wait_until("data dirs gone", lambda: not any(d.exists() for d in dirs))
    wait_until(
        "znodes gone", lambda: all(pp.tp.topic != "doomed" for pp in cluster.status().partitions)
    )
    assert "doomed" not in admin.list_topics(timeout=5).topics


def test_restarted_broker_truncates_by_leader_epoch_and_converges(cluster_factory) -> None:
    cluster = cluster_factory(brokers=3, replica_lag_time_max_ms=1000)
    create_topic(cluster, "epochs", 1, 3)
    tp = TopicPartition("epochs", 0)
    p = producer(cluster)
    for i in range(200):
        p.produce("epochs", value=b"before-%d" % i)
    p.flush(10)
    old_leader = partition_status(cluster, tp).leader
    cluster.kill(old_leader, "KILL")
    wait_until(
        "a new leader", lambda: partition_status(cluster, tp).leader not in (None, -1, old_leader)
    )
    for i in range(200):
        p.produce("epochs", value=b"after-%d" % i)
    p.flush(15)
    cluster.start(old_leader)
    wait_until(
        "the old leader back in the ISR", lambda: old_leader in partition_status(cluster, tp).isr
    )
    events = state_change_events(cluster, old_leader)
    # It became a follower and settled its log end with OffsetForLeaderEpoch, not its HW.
    assert any(e["event"] == "become-follower" for e in events)
    # Everything was acknowledged by acks=all: nothing to cut, so an `epoch-check`.
    assert any(e["event"] in ("epoch-check", "epoch-truncation") for e in events)
    consumed = consume_all(cluster, "epochs", 1)
    values = set(consumed.values())
    assert {b"before-%d" % i for i in range(200)} | {b"after-%d" % i for i in range(200)} <= values
    committed = max(o for _, o in consumed) + 1
    wait_until("the ISR to be complete", lambda: len(partition_status(cluster, tp).isr) == 3)
    copies = {b: replica_batches(cluster, b, tp, committed) for b in (1, 2, 3)}
    assert len(set(copies.values())) == 1
