"""librdkafka's cooperative-sticky assignor against our coordinator. A member
joining or leaving moves only the partitions that must move (incremental rebalance);
no member gives up what it keeps."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer

from tests.waiting import wait_until

from .support import GROUP_BROKER_SETTINGS, create_topic

ClusterFactory = Callable[..., Any]
PARTITIONS = 6


class Member:
    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.owned: set[int] = set()
        self.revoked: list[set[int]] = []
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "partition.assignment.strategy": "cooperative-sticky",
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 200,
                "enable.auto.commit": False,
            }
        )
        self.consumer.subscribe([topic], on_assign=self._assigned, on_revoke=self._revoked)

    def _assigned(self, _consumer: Any, partitions: list[Any]) -> None:
        self.owned |= {p.partition for p in partitions}

    def _revoked(self, _consumer: Any, partitions: list[Any]) -> None:
        gone = {p.partition for p in partitions}
        if gone:
            self.revoked.append(gone)
        self.owned -= gone

    def poll(self) -> None:
        self.consumer.poll(0.05)


def poll_until(members: list[Member], condition: Callable[[], bool], what: str) -> None:
    def step() -> bool:
        for member in members:
            member.poll()
        return condition()

    wait_until(what, step, 30)


def test_cooperative_sticky_members_move_only_what_must_move(
    cluster_factory: ClusterFactory,
) -> None:
    cluster = cluster_factory(
        brokers=1, offsets_topic_replication_factor=1, **GROUP_BROKER_SETTINGS
    )
    topic = create_topic(cluster.bootstrap, PARTITIONS, prefix="coop")
    group = f"coop-{uuid.uuid4().hex[:6]}"
    everything = set(range(PARTITIONS))

    first = Member(cluster.bootstrap, group, topic)
    second: Member | None = None
    try:
        poll_until([first], lambda: first.owned == everything, "the first member to own all")

        second = Member(cluster.bootstrap, group, topic)
        joined = second
        poll_until(
            [first, joined],
            lambda: len(first.owned) == 3 and len(joined.owned) == 3,
            "an even split",
        )
        assert first.owned | joined.owned == everything
        # Incremental: the first member gave up exactly what moved, never all it had.
        assert first.revoked == [everything - first.owned]

        second = None
        joined.consumer.close()  # LeaveGroup: its partitions go back to the first member
        poll_until([first], lambda: first.owned == everything, "the survivor to own all")
        assert len(first.revoked) == 1, "the survivor was made to give partitions up again"
    finally:
        first.consumer.close()
        if second is not None:
            second.consumer.close()
