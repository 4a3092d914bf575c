"""Figures of the group coordinator, on one local broker with confluent-kafka.

    .venv/bin/python bench/group_bench.py [--quick] [--session-timeout-ms 6000]

1. rebalance time of a 3-member group on a 12-partition topic after one member leaves
   cleanly (SIGTERM: close() sends LeaveGroup), from the signal until the two others
   own all 12 partitions again;
2. the same after a member dies (SIGKILL): dominated by session.timeout.ms;
3. commit throughput of one consumer: synchronous OffsetCommits per second.

Members are separate processes (`--member`), reporting each assignment with a
CLOCK_MONOTONIC timestamp (system-wide on Linux, so comparable across processes).
Prints a rich table and one `BENCH_JSON {...}` line; figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import IO, Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka import TopicPartition as KafkaTopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from strandline.launcher.local_cluster import LocalCluster  # noqa: E402

PARTITIONS = 12
HEARTBEAT_MS = 500


def run_member(bootstrap: str, group: str, topic: str, session_ms: int) -> None:
    """A group member: prints {"t": monotonic, "a": [partitions]} on every (re)assignment."""
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)

    def report(partitions: list[int]) -> None:
        print(json.dumps({"t": time.monotonic(), "a": sorted(partitions)}), flush=True)

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "session.timeout.ms": session_ms,
            "heartbeat.interval.ms": HEARTBEAT_MS,
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe(
        [topic],
        on_assign=lambda c, ps: report([p.partition for p in ps]),
        on_revoke=lambda c, ps: report([]),
    )
    while not stopping:
        consumer.poll(0.05)
    consumer.close()


class MemberProcess:
    def __init__(self, bootstrap: str, group: str, topic: str, session_ms: int) -> None:
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--member", bootstrap, group, topic, str(session_ms)],
            stdout=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        assert self.process.stdout is not None
        self.stdout: IO[str] = self.stdout_of(self.process)
        os.set_blocking(self.stdout.fileno(), False)
        self.buffer = ""
        self.assignment: list[int] = []
        self.assigned_at = 0.0

    @staticmethod
    def stdout_of(process: subprocess.Popen[str]) -> IO[str]:
        assert process.stdout is not None
        return process.stdout

    def pump(self) -> None:
        try:
            chunk = os.read(self.stdout.fileno(), 1 << 16)
        except BlockingIOError:
            return
        if not chunk:
            return
        self.buffer += chunk.decode()
        *lines, self.buffer = self.buffer.split("\n")
        for line in lines:
            event = json.loads(line)
            self.assignment, self.assigned_at = event["a"], event["t"]

    def signal(self, sig: signal.Signals) -> None:
        self.process.send_signal(sig)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def wait_for_cover(members: list[MemberProcess], timeout_s: float) -> float:
    """Monotonic time at which the members' assignments last changed to cover every
    partition exactly once (all of them non-empty)."""
    selector = selectors.DefaultSelector()
    for m in members:
        selector.register(m.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            for m in members:
                m.pump()
            owned = sorted(p for m in members for p in m.assignment)
            if owned == list(range(PARTITIONS)) and all(m.assignment for m in members):
                return max(m.assigned_at for m in members)
            selector.select(0.05)
    finally:
        selector.close()
    raise TimeoutError(f"members did not cover {PARTITIONS} partitions in {timeout_s}s")


def rebalance_time(bootstrap: str, topic: str, session_ms: int, sig: signal.Signals) -> float:
    group = f"bench-{uuid.uuid4().hex[:8]}"
    members = [MemberProcess(bootstrap, group, topic, session_ms) for _ in range(3)]
    try:
        wait_for_cover(members, 60)
        time.sleep(1.0)  # let the group settle (heartbeats flowing)
        victim, survivors = members[0], members[1:]
        start = time.monotonic()
        victim.signal(sig)
        for m in survivors:  # forget the old assignment: wait for the new one
            m.pump()
        done = wait_for_cover_after(survivors, start, session_ms / 1000 + 30)
        return done - start
    finally:
        for m in members:
            m.close()


def wait_for_cover_after(members: list[MemberProcess], after: float, timeout_s: float) -> float:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done = wait_for_cover(members, deadline - time.monotonic())
        if done > after:
            return done
        time.sleep(0.02)
    raise TimeoutError("survivors did not take over")


def commit_throughput(bootstrap: str, topic: str, seconds: float) -> tuple[float, float]:
    """(commits/s, mean ms per commit) of synchronous commits by one consumer."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"commit-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([KafkaTopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    try:
        consumer.commit(offsets=[KafkaTopicPartition(topic, 0, 0)], asynchronous=False)  # warm
        n, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            n += 1
            consumer.commit(
                offsets=[KafkaTopicPartition(topic, n % PARTITIONS, n)], asynchronous=False
            )
        elapsed = time.perf_counter() - start
        return n / elapsed, elapsed / n * 1000
    finally:
        consumer.close()


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--member":
        run_member(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="one repetition, short runs")
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    args = parser.parse_args()
    reps = 1 if args.quick else 3
    commit_seconds = 2.0 if args.quick else 5.0
    console = Console()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="group-bench-") as tmp:
        cluster = LocalCluster(Path(tmp)).up(
            1,
            {
                "offsets.topic.replication.factor": "1",
                "offsets.topic.num.partitions": "10",
                "group.initial.rebalance.delay.ms": "0",
                "group.min.session.timeout.ms": str(min(args.session_timeout_ms, 6000)),
            },
        )
        try:
            bootstrap = cluster.bootstrap
            topic = f"bench-groups-{uuid.uuid4().hex[:6]}"
            admin = AdminClient({"bootstrap.servers": bootstrap})
            admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
            producer = Producer({"bootstrap.servers": bootstrap})
            for p in range(PARTITIONS):
                producer.produce(topic, b"x", partition=p)
            producer.flush(30)
            leave = [
                rebalance_time(bootstrap, topic, args.session_timeout_ms, signal.SIGTERM)
                for _ in range(reps)
            ]
            death = [
                rebalance_time(bootstrap, topic, args.session_timeout_ms, signal.SIGKILL)
                for _ in range(reps)
            ]
            rate, per_commit_ms = commit_throughput(bootstrap, topic, commit_seconds)
        finally:
            cluster.stop()
    results = {
        "rebalance_after_leave_s": statistics.median(leave),
        "rebalance_after_death_s": statistics.median(death),
        "session_timeout_ms": args.session_timeout_ms,
        "commits_per_s": rate,
        "commit_latency_ms": per_commit_ms,
        "samples": {"leave": leave, "death": death},
    }
    table = Table("figure", "value", title="group coordinator (1 broker, confluent-kafka)")
    table.add_row(
        "rebalance after clean leave (median)", f"{results['rebalance_after_leave_s']:.2f} s"
    )
    table.add_row(
        f"rebalance after SIGKILL (median, session.timeout.ms={args.session_timeout_ms})",
        f"{results['rebalance_after_death_s']:.2f} s",
    )
    table.add_row("sync commits of one consumer", f"{rate:,.0f} /s ({per_commit_ms:.2f} ms each)")
    console.print(table)
    print("BENCH_JSON " + json.dumps(results))


if __name__ == "__main__":
    main()
