"""Consumer-group members as subprocesses, and the issue-5 group scenario over them."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.waiting import wait_until

if TYPE_CHECKING:
    from strandline.launcher.local_cluster import LocalCluster

PARTITIONS = 12
SESSION_TIMEOUT_S = 6.0
CONSUMER_PROC = Path(__file__).with_name("consumer_proc.py")
# Broker settings for fast groups: no initial rebalance delay, quick offsets topic.
GROUP_BROKER_SETTINGS = {
    "group_initial_rebalance_delay_ms": 0,
    "offsets_topic_num_partitions": 6,
}


def create_topic(
    bootstrap: str, partitions: int = PARTITIONS, prefix: str = "grp", replication_factor: int = 1
) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, replication_factor)])[name].result(30)
    return name


def produce(bootstrap: str, topic: str, per_partition: int, partitions: int = PARTITIONS) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(per_partition):
        for p in range(partitions):
            producer.produce(topic, value=f"{p}-{i}".encode(), partition=p)
    assert producer.flush(30) == 0


@dataclass
class Member:
    client: str
    out: Path
    process: subprocess.Popen[bytes]
    events: list[dict[str, Any]] = field(default_factory=list)
    _read: int = 0

    @classmethod
    def spawn(
        cls, client: str, bootstrap: str, group: str, topic: str, out: Path, delay_s: float
    ) -> Member:
        out.touch()
        process = subprocess.Popen(
            [
                sys.executable,
                str(CONSUMER_PROC),
                client,
                bootstrap,
                group,
                topic,
                str(out),
                str(delay_s),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=open(out.with_suffix(".err"), "wb"),  # noqa: SIM115 - lives with the process
        )
        return cls(client, out, process)

    def refresh(self) -> None:
        data = self.out.read_text()
        end = data.rfind("\n") + 1
        for line in data[self._read : end].splitlines():
            self.events.append(json.loads(line))
        self._read = end

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def assignment(self) -> list[int]:
        self.refresh()
        for event in reversed(self.events):
            if "a" in event:
                return list(event["a"])
        return []

    def consumed(self) -> list[tuple[int, int]]:
        self.refresh()
        return [(e["r"][0], e["r"][1]) for e in self.events if "r" in e]

    def committed(self) -> dict[int, int]:
        self.refresh()
        out: dict[int, int] = {}
        for e in self.events:
            if "c" in e:
                p, o = e["c"]
                out[p] = max(out.get(p, 0), o)
        return out

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.alive:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def owns_each_partition_once(members: list[Member], partitions: int = PARTITIONS) -> bool:
    owned = [p for m in members for p in m.assignment()]
    return sorted(owned) == list(range(partitions))


def all_consumed(members: list[Member], ends: dict[int, int], starts: dict[int, int]) -> bool:
    seen = {rec for m in members for rec in m.consumed()}
    return all((p, o) in seen for p, end in ends.items() for o in range(starts.get(p, 0), end))


@dataclass
class ScenarioFigures:
    expiry_s: float  # the kill -> the coordinator drops the member
    takeover_s: float  # the kill -> the survivors own every partition


def run_group_scenario(cluster: LocalCluster, client: str, work_dir: Path) -> ScenarioFigures:
    """3 members, each partition once; SIGKILL one -> the others
    take over within the session timeout, nothing below a committed offset consumed
    again; the whole group restarted resumes from the committed offsets."""
    bootstrap = cluster.bootstrap
    topic = create_topic(bootstrap)
    group = f"g-{client}-{uuid.uuid4().hex[:6]}"
    produce(bootstrap, topic, 40)
    ends = {p: 40 for p in range(PARTITIONS)}

    def spawn(i: int) -> Member:
        return Member.spawn(client, bootstrap, group, topic, work_dir / f"m{i}.jsonl", 0.005)

    members = [spawn(i) for i in range(3)]
    try:
        wait_until(
            "3 members to share the 12 partitions",
            lambda: owns_each_partition_once(members) and all(m.assignment() for m in members),
            60,
        )
        victim, survivors = members[0], members[1:]
        wait_until("the victim to commit", lambda: bool(victim.committed()), 30)
        # What a survivor read before the kill may predate the victim's ownership (the
        # first member to join reads every partition until the group is complete).
        read_before_kill = [len(m.consumed()) for m in survivors]
        victim.kill()
        killed_at = time.monotonic()
        killed_wall = datetime.now()
        victim_committed = victim.committed()
        produce(bootstrap, topic, 20)  # new data on every partition, the victim's too
        ends = {p: 60 for p in range(PARTITIONS)}
        # The coordinator's part is its session timer: it drops the killed member once its
        # session has run out. How soon the survivors then rejoin is their clients' part
        # (a heartbeat answered REBALANCE_IN_PROGRESS, then the next poll), which a loaded
        # machine can stretch by seconds (in one CI run, 12 s from the kill to a new
        # assignment, with a kafka-python survivor told of the rebalance last).
        expired_at = wait_until(
            "the coordinator to drop the killed member",
            lambda: session_expiry_logged(cluster, group, since=killed_wall),
            SESSION_TIMEOUT_S + 20,
        )
        expiry_s = (expired_at - killed_wall).total_seconds()
        assert expiry_s < SESSION_TIMEOUT_S + 2, (
            f"the coordinator dropped {victim.out.stem} {expiry_s:.1f}s after the kill at "
            f"{killed_wall} (session timeout {SESSION_TIMEOUT_S}s)"
        )
        wait_until("the survivors to take over", lambda: owns_each_partition_once(survivors), 30)
        takeover_s = time.monotonic() - killed_at
        wait_until("every record consumed", lambda: all_consumed(members, ends, {}), 60)
        wait_until(
            "the survivors to commit everything",
            lambda: merged_commits(survivors) == ends,
            30,
        )
        # Nothing the victim had committed was consumed again by the others.
        for m, skip in zip(survivors, read_before_kill, strict=True):
            for p, o in m.consumed()[skip:]:
                assert o >= victim_committed.get(p, 0), (
                    f"{m.client} re-consumed {p}@{o} below the victim's commit "
                    f"{victim_committed.get(p)}"
                )
        for m in survivors:
            m.stop()
            assert m.process.returncode == 0, m.out.with_suffix(".err").read_text()

        # The whole group comes back and resumes from the committed offsets.
        committed = merged_commits(survivors)
        produce(bootstrap, topic, 10)
        new_ends = {p: 70 for p in range(PARTITIONS)}
        restarted = [spawn(10 + i) for i in range(3)]
        members.extend(restarted)
        wait_until("the restarted group", lambda: all_consumed(restarted, new_ends, committed), 60)
        for m in restarted:
            for p, o in m.consumed():
                assert o >= committed[p], f"restarted group re-read {p}@{o} < {committed[p]}"
        wait_until(
            "a stable restarted group",
            lambda: owns_each_partition_once(restarted) and all(m.assignment() for m in restarted),
            30,
        )
        return ScenarioFigures(expiry_s, takeover_s)
    except AssertionError as failure:
        raise AssertionError(f"{failure}\n\n{rebalance_story(cluster, members)}") from failure
    finally:
        for m in members:
            m.stop()


def session_expiry_logged(cluster: LocalCluster, group: str, since: datetime) -> datetime | None:
    """When, after `since`, a broker's coordinator logged dropping a member of `group` for a
    missed session timeout (the broker's own `ts=`, local time like `datetime.now()`)."""
    needle = f"of group {group} missed its session timeout"
    for broker_id in sorted(cluster.brokers):
        for line in cluster.broker_out(broker_id).read_text(errors="replace").splitlines():
            if needle in line and line.startswith("ts="):
                at = datetime.fromisoformat(line.split(maxsplit=1)[0].removeprefix("ts="))
                if at >= since:
                    return at
    return None


def rebalance_story(cluster: LocalCluster, members: list[Member]) -> str:
    """The coordinator's and each member's account of the rebalances, for a failure."""
    parts = []
    for broker_id in sorted(cluster.brokers):
        lines = cluster.broker_out(broker_id).read_text(errors="replace").splitlines()
        group_lines = [line for line in lines if "group" in line]
        parts.append(f"broker {broker_id}:\n" + "\n".join(group_lines[-40:]))
    for m in members:
        lines = m.out.with_suffix(".err").read_text(errors="replace").splitlines()
        told = [line for line in lines if "coordinator" in line or "Error" in line]
        parts.append(f"member {m.out.stem}:\n" + "\n".join(told[-25:]))
    return "\n\n".join(parts)


def merged_commits(members: list[Member]) -> dict[int, int]:
    merged: dict[int, int] = {}
    for m in members:
        for p, o in m.committed().items():
            merged[p] = max(merged.get(p, 0), o)
    return merged
