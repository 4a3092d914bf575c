"""Figures of the replicated cluster, measured on 3 local brokers with confluent-kafka.

    .venv/bin/python bench/cluster_bench.py [--quick]

1. produce 1 KiB acks=all: rf=3 throughput / rf=1 throughput, same cluster, same run;
2. unavailability after SIGKILL of a partition leader: kill -> next acks=all write acked;
3. election of new leaders for the ~1/3 of 1,000 partitions a SIGKILLed broker led, from
   the disappearance of its /brokers/ids znode (and from the kill) until ZooKeeper state
   and every live broker's Metadata show a new leader.

Prints a rich table and one `BENCH_JSON {...}` line; see bench/README.md. Figures are
printed, never asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

# Run as a script (`python bench/cluster_bench.py`): make the repo root importable.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import KafkaError, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from bench.workloads import (  # noqa: E402
    PARTITIONS,
    finish_report,
    local_cluster,
    produce_throughput,
)
from strandline.coordination import znodes  # noqa: E402
from strandline.coordination.zk_client import ZkClient  # noqa: E402
from strandline.launcher.local_cluster import LocalCluster, answers_metadata  # noqa: E402
from strandline.types import TopicPartition  # noqa: E402

BROKERS = 3
SESSION_TIMEOUT_MS = 2000
# zookeeper.session.timeout.ms is the figure's yardstick; the rest are Kafka's defaults
# except auto leader rebalance, which would move leaders back between repetitions.
CLUSTER_OVERRIDES: dict[str, str] = {
    "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "auto.leader.rebalance.enable": "false",
    "num.partitions": str(PARTITIONS),
}
# Two probe producers write after each kill. librdkafka re-reads the metadata of a topic whose
# leader is down only on its 1 s "refresh unavailable topics" scan, so with its defaults the
# client adds up to 1 s after the cluster already names the new leader; the "fast" probe
# refreshes metadata every 200 ms (and retries with short backoffs) to show the cluster's part.
PROBE_PRODUCERS: dict[str, dict[str, str | int]] = {
    "default": {"acks": "all", "linger.ms": 0, "message.timeout.ms": 30_000},
    "fast": {
        "acks": "all",
        "linger.ms": 0,
        "message.timeout.ms": 30_000,
        "topic.metadata.refresh.interval.ms": 200,
        "retry.backoff.ms": 50,
        "retry.backoff.max.ms": 100,
        "reconnect.backoff.ms": 50,
        "reconnect.backoff.max.ms": 100,
    },
}


@dataclass(frozen=True)
class Plan:
    throughput_rounds: int
    records_1k: int
    max_seconds: float
    kill_repetitions: int
    election_partitions: int
    election_topics: int
    election_rf: int
    commit_seconds: float = 5.0
    # librdkafka debug contexts for the probe producer (diagnosis of the unavailability).
    rdkafka_debug: str = ""


FULL = Plan(
    throughput_rounds=3,
    records_1k=200_000,
    max_seconds=15.0,
    kill_repetitions=5,
    election_partitions=1000,
    election_topics=10,
    election_rf=2,
)
QUICK = Plan(
    throughput_rounds=1,
    records_1k=100_000,
    max_seconds=5.0,
    kill_repetitions=2,
    election_partitions=1000,
    election_topics=10,
    election_rf=2,
    commit_seconds=2.0,
)


# --- cluster helpers ----------------------------------------------------------------------


def create_topics(
    bootstrap: str,
    names: list[str],
    partitions: int,
    rf: int,
    config: dict[str, str] | None = None,
    timeout_s: float = 60.0,
) -> None:
    """Create topics and wait until a broker's Metadata shows a leader for every partition.

    bench.workloads.create_topic makes one topic without configs; this one makes several,
    with topic configs."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = [
        NewTopic(n, num_partitions=partitions, replication_factor=rf, config=config or {})
        for n in names
    ]
    for future in admin.create_topics(new, operation_timeout=timeout_s).values():
        future.result(timeout=timeout_s)
    wanted = set(names)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        md = admin.list_topics(timeout=10)
        ready = {
            n
            for n in wanted
            if (t := md.topics.get(n)) is not None
            and t.error is None
            and len(t.partitions) == partitions
            and all(p.leader >= 0 for p in t.partitions.values())
        }
        if ready == wanted:
            return
        time.sleep(0.1)
    raise TimeoutError(f"topics {sorted(wanted)} have no leaders {timeout_s}s after creation")


def wait_full_isr(cluster: LocalCluster, topics: set[str], timeout_s: float) -> float:
    """Wait until every partition of `topics` has all its replicas in the ISR; returns seconds."""
    start = time.monotonic()
    while True:
        status = cluster.status()
        pending = [
            p
            for p in status.partitions
            if p.tp.topic in topics and (p.under_replicated or p.offline)
        ]
        if not pending:
            return time.monotonic() - start
        if time.monotonic() - start > timeout_s:
            raise TimeoutError(
                f"{len(pending)} partitions not fully in sync after {timeout_s}s, e.g. {pending[0]}"
            )
        time.sleep(0.2)


def metadata_leaders(cluster: LocalCluster, broker_id: int) -> dict[TopicPartition, int]:
    """Leader per partition as broker `broker_id` answers Metadata (all topics)."""
    response = answers_metadata(*cluster.broker_address(broker_id), timeout=5.0)
    return {
        TopicPartition(str(t.name), int(p.partition_index)): int(p.leader_id)
        for t in response.topics  # type: ignore[attr-defined]
        for p in t.partitions
    }


def cpu_seconds(pid: int | None) -> float:
    """utime + stime of a process (the brokers are single processes), 0 if it is gone."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def brokers_cpu(cluster: LocalCluster) -> float:
    return sum(cpu_seconds(b.pid) for b in cluster.brokers.values())


class ZnodeGoneWatch:
    """Records when /brokers/ids/<id> disappears, using a children watch (kazoo's thread)."""

    def __init__(self, zk: ZkClient, broker_id: int) -> None:
        self.broker_id = str(broker_id)
        self.gone_at: float | None = None
        self.gone_wall: float | None = None
        self.seen = threading.Event()
        self._armed = False
        zk.watch_children(znodes.BROKER_IDS_PATH, self._on_children)

    def _on_children(self, children: list[str]) -> None:
        if self.broker_id in children:
            self._armed = True
        elif self._armed and self.gone_at is None:
            self.gone_at = time.monotonic()
            self.gone_wall = time.time()
            self.seen.set()


def first_time(check: Callable[[], bool], stop_at: float, interval_s: float = 0.01) -> float | None:
    """Poll `check` until it holds; the monotonic time it first did, or None at `stop_at`."""
    while time.monotonic() < stop_at:
        try:
            if check():
                return time.monotonic()
        except Exception:  # a broker mid-election may refuse or time out: keep polling
            pass
        time.sleep(interval_s)
    return None


@contextlib.contextmanager
def concurrent_probes(
    probes: dict[str, Callable[[], bool]], stop_at: float
) -> Iterator[dict[str, float | None]]:
    """Run each probe in its own thread; the dict fills with first-true times on exit."""
    results: dict[str, float | None] = {}

    def run(name: str, check: Callable[[], bool]) -> None:
        results[name] = first_time(check, stop_at)

    threads = [threading.Thread(target=run, args=item, daemon=True) for item in probes.items()]
    for thread in threads:
        thread.start()
    try:
        yield results
    finally:
        for thread in threads:
            thread.join(max(0.0, stop_at - time.monotonic()) + 5)


# --- 1. throughput ratio ------------------------------------------------------------------


def throughput_ratio(cluster: LocalCluster, plan: Plan, console: Console) -> dict[str, object]:
    stamp = int(time.time() * 1000)
    mb_s: dict[int, list[float]] = {1: [], 3: []}
    cpu_per_mb: dict[int, list[float]] = {1: [], 3: []}
    for round_no in range(plan.throughput_rounds):
        for rf in (1, 3):
            topic = f"cb-tput-rf{rf}-{round_no}-{stamp}"
            config = {"min.insync.replicas": "2"} if rf == 3 else {}
            create_topics(cluster.bootstrap, [topic], PARTITIONS, rf, config)
            if rf == 3:
                wait_full_isr(cluster, {topic}, 30)
            cpu_before = brokers_cpu(cluster)
            result = produce_throughput(
                cluster.bootstrap, topic, 1024, plan.records_1k, "all", plan.max_seconds
            )
            cpu = brokers_cpu(cluster) - cpu_before
            mb_s[rf].append(result.mb_per_s)
            cpu_per_mb[rf].append(cpu / (result.payload_bytes / 1e6))
            console.log(
                f"round {round_no} rf={rf}: {result.mb_per_s:.1f} MB/s "
                f"({result.records} records in {result.seconds:.2f} s), "
                f"brokers' CPU {cpu:.2f} s"
            )
    rf1, rf3 = statistics.mean(mb_s[1]), statistics.mean(mb_s[3])
    return {
        "rf1_mb_s": round(rf1, 2),
        "rf3_mb_s": round(rf3, 2),
        "ratio": round(rf3 / rf1, 3),
        "rf1_rounds": [round(v, 2) for v in mb_s[1]],
        "rf3_rounds": [round(v, 2) for v in mb_s[3]],
        "rf1_broker_cpu_s_per_mb": round(statistics.mean(cpu_per_mb[1]), 4),
        "rf3_broker_cpu_s_per_mb": round(statistics.mean(cpu_per_mb[3]), 4),
    }


# --- 2. unavailability after SIGKILL of a leader ------------------------------------------


@dataclass
class KillSample:
    victim: int
    znode_gone_s: float | None
    zk_leader_s: float | None
    metadata_leader_s: float | None
    acked_s: dict[str, float | None]  # per probe producer
    errors: dict[str, str]


@dataclass
class _Delivery:
    done: threading.Event = field(default_factory=threading.Event)
    at: float | None = None
    error: KafkaError | None = None

    def __call__(self, err: KafkaError | None, _msg: object) -> None:
        self.at = time.monotonic()
        self.error = err
        self.done.set()


def _pick_partition(cluster: LocalCluster, topic: str) -> tuple[TopicPartition, int]:
    """A partition of `topic` whose leader is not the controller: the figure is about leader
    failover, and killing the controller would add controller failover to it."""
    status = cluster.status()
    for part in status.partitions:
        if (
            part.tp.topic == topic
            and part.leader is not None
            and part.leader >= 0
            and part.leader != status.controller
        ):
            return part.tp, part.leader
    raise RuntimeError(f"every partition of {topic} is led by the controller")


def one_kill(
    cluster: LocalCluster, zk: ZkClient, topic: str, producers: dict[str, Producer]
) -> KillSample:
    tp, victim = _pick_partition(cluster, topic)
    others = [b for b in cluster.brokers if b != victim]
    watch = ZnodeGoneWatch(zk, victim)

    def zk_moved() -> bool:
        state = zk.get_partition_state(tp)
        return state is not None and state[0].leader not in (victim, -1)

    def metadata_moved() -> bool:
        return all(metadata_leaders(cluster, b).get(tp, victim) not in (victim, -1) for b in others)

    # Warm: every producer knows the leader and holds a connection to it.
    for name, producer in producers.items():
        warm = _Delivery()
        producer.produce(topic, b"warm", partition=tp.partition, on_delivery=warm)
        producer.flush(10)
        if warm.error is not None or not warm.done.is_set():
            raise RuntimeError(f"{name} producer's warm-up write failed: {warm.error}")

    killed_at = time.monotonic()
    cluster.kill(victim, "KILL")
    probes = {name: _Delivery() for name in producers}
    for name, producer in producers.items():
        producer.produce(topic, b"x" * 1024, partition=tp.partition, on_delivery=probes[name])
    stop_at = killed_at + 30
    with concurrent_probes({"zk": zk_moved, "md": metadata_moved}, stop_at) as seen:
        while not all(p.done.is_set() for p in probes.values()) and time.monotonic() < stop_at:
            for producer in producers.values():
                producer.poll(0.002)

    def since(t: float | None) -> float | None:
        return None if t is None else round(t - killed_at, 3)

    acked = {
        n: since(p.at) if p.done.is_set() and p.error is None else None for n, p in probes.items()
    }
    errors = {
        n: str(p.error or "no delivery report") for n, p in probes.items() if acked[n] is None
    }
    return KillSample(
        victim, since(watch.gone_at), since(seen.get("zk")), since(seen.get("md")), acked, errors
    )


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(statistics.median(present), 3) if present else None


def unavailability(cluster: LocalCluster, plan: Plan, console: Console) -> dict[str, object]:
    topic = f"cb-avail-{int(time.time() * 1000)}"
    create_topics(cluster.bootstrap, [topic], PARTITIONS, 3, {"min.insync.replicas": "2"})
    wait_full_isr(cluster, {topic}, 30)
    debug = {"debug": plan.rdkafka_debug} if plan.rdkafka_debug else {}
    producers = {
        name: Producer({"bootstrap.servers": cluster.bootstrap, **config, **debug})
        for name, config in PROBE_PRODUCERS.items()
    }
    samples: list[KillSample] = []
    rejoin_s: list[float] = []
    with ZkClient(cluster.zk_connect or "").connect() as zk:
        for rep in range(plan.kill_repetitions):
            sample = one_kill(cluster, zk, topic, producers)
            samples.append(sample)
            console.log(f"kill {rep}: {sample}")
            cluster.start(sample.victim)
            rejoin_s.append(wait_full_isr(cluster, {topic}, 60))
    for producer in producers.values():
        producer.flush(5)
    result: dict[str, object] = {
        "zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS,
        "target_s": SESSION_TIMEOUT_MS / 1000 + 0.5,
        "repetitions": len(samples),
        "median_znode_gone_s": _median([s.znode_gone_s for s in samples]),
        "median_zk_leader_s": _median([s.zk_leader_s for s in samples]),
        "median_metadata_leader_s": _median([s.metadata_leader_s for s in samples]),
        "median_restart_to_full_isr_s": _median(list(rejoin_s)),
        "probe_producers": PROBE_PRODUCERS,
        "samples": [s.__dict__ for s in samples],
    }
    for name in producers:
        acked = [s.acked_s[name] for s in samples]
        result[f"median_acked_s_{name}"] = _median(acked)
        result[f"max_acked_s_{name}"] = max((a for a in acked if a is not None), default=None)
        result[f"failed_{name}"] = sum(1 for a in acked if a is None)
    return result


# --- consumer-group rebalance time and commit throughput ----------------------------------

GROUP_PARTITIONS = 6
# Kafka's group.min.session.timeout.ms is 6 s; librdkafka's default (45 s) would make the
# "member died" figure a measure of patience. The heartbeat interval bounds how soon the
# survivors hear of a rebalance after a clean leave.
GROUP_CONSUMER: dict[str, int] = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000}

# One group member as its own process (so it can be SIGKILLed): prints its assignment on
# every rebalance; SIGTERM makes it close() cleanly, i.e. send LeaveGroup.
_MEMBER_SCRIPT = """
import json, signal, sys
from confluent_kafka import Consumer
bootstrap, group, topic, overrides = sys.argv[1:5]
consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                     "enable.auto.commit": False, **json.loads(overrides)})
stopping = []
signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
def assigned(_c, parts):
    print("ASSIGNED " + ",".join(str(p.partition) for p in parts), flush=True)
def revoked(_c, _parts):
    print("REVOKED", flush=True)
consumer.subscribe([topic], on_assign=assigned, on_revoke=revoked)
while not stopping:
    consumer.poll(0.05)
consumer.close()
print("CLOSED", flush=True)
"""


class GroupMember:
    """A member process and its latest assignment, read from its stdout on a thread."""

    def __init__(self, bootstrap: str, group: str, topic: str, on_change: threading.Event) -> None:
        self.assignment: frozenset[int] = frozenset()
        self._on_change = on_change
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                _MEMBER_SCRIPT,
                bootstrap,
                group,
                topic,
                json.dumps(GROUP_CONSUMER),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            word, _, rest = line.strip().partition(" ")
            if word == "ASSIGNED":
                self.assignment = frozenset(int(p) for p in rest.split(",") if p)
            elif word in ("REVOKED", "CLOSED"):
                self.assignment = frozenset()
            self._on_change.set()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


def _wait_balanced(members: list[GroupMember], changed: threading.Event, timeout_s: float) -> float:
    """Monotonic time at which `members` own every partition once, each at least one."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        changed.clear()
        owned = [m.assignment for m in members]
        if (
            all(owned)
            and sum(len(a) for a in owned) == GROUP_PARTITIONS
            and frozenset().union(*owned) == frozenset(range(GROUP_PARTITIONS))
        ):
            return time.monotonic()
        changed.wait(0.01)
    raise TimeoutError(
        f"group not balanced after {timeout_s}s: {[sorted(m.assignment) for m in members]}"
    )


def commit_throughput(bootstrap: str, group: str, topic: str, seconds: float) -> float:
    """Synchronous OffsetCommits of one partition's offset, one after the other."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as KafkaTopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    try:
        # The first commit finds the coordinator (and may wait for __consumer_offsets).
        deadline = time.monotonic() + 60
        while True:
            try:
                consumer.commit(offsets=[KafkaTopicPartition(topic, 0, 1)], asynchronous=False)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        commits = 0
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            consumer.commit(
                offsets=[KafkaTopicPartition(topic, commits % GROUP_PARTITIONS, commits + 2)],
                asynchronous=False,
            )
            commits += 1
        return commits / (time.perf_counter() - start)
    finally:
        consumer.close()


def groups(cluster: LocalCluster, plan: Plan, console: Console) -> dict[str, object]:
    stamp = int(time.time() * 1000)
    topic = f"cb-group-{stamp}"
    create_topics(cluster.bootstrap, [topic], GROUP_PARTITIONS, 1)
    # Commits first: they also create __consumer_offsets before any timing of rebalances.
    commits_per_s = commit_throughput(
        cluster.bootstrap, f"cb-commit-{stamp}", topic, plan.commit_seconds
    )
    console.log(f"commit throughput: {commits_per_s:.0f} commits/s")
    changed = threading.Event()
    group = f"cb-group-{stamp}"
    members: list[GroupMember] = []
    try:
        started = time.monotonic()
        members = [GroupMember(cluster.bootstrap, group, topic, changed) for _ in range(3)]
        first_balanced_s = _wait_balanced(members, changed, 60) - started

        leaving = members.pop()
        left_at = time.monotonic()
        leaving.process.terminate()  # close(): LeaveGroup
        after_leave_s = _wait_balanced(members, changed, 60) - left_at
        leaving.process.wait(10)

        members.append(GroupMember(cluster.bootstrap, group, topic, changed))
        _wait_balanced(members, changed, 60)
        dying = members.pop()
        died_at = time.monotonic()
        dying.stop()  # SIGKILL: only the session timeout tells the coordinator
        after_death_s = _wait_balanced(members, changed, 60) - died_at
    finally:
        for member in members:
            member.stop()
    return {
        "consumer": GROUP_CONSUMER,
        "partitions": GROUP_PARTITIONS,
        "first_join_3_members_s": round(first_balanced_s, 3),
        "rebalance_after_clean_leave_s": round(after_leave_s, 3),
        "rebalance_after_member_death_s": round(after_death_s, 3),
        "commits_per_s_sync": round(commits_per_s, 1),
    }


# --- 3. election of leaders for 1,000 partitions ------------------------------------------


def _parse_ts(value: str) -> float:
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()


def state_change_timeline(
    cluster: LocalCluster, broker_id: int, since_wall: float, until_wall: float
) -> dict[str, dict[str, float | int]]:
    """Per event of broker `broker_id`'s state-change.log between two wall-clock times:
    count and first/last timestamp relative to `since_wall` (the log has ms resolution)."""
    path = cluster.broker_dir(broker_id) / "logs" / "state-change.log"
    events: dict[str, dict[str, float | int]] = {}
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return events
    for line in lines:
        try:
            entry = json.loads(line)
            at = _parse_ts(entry["ts"])
        except (ValueError, KeyError):
            continue
        # The log's timestamps are truncated to the millisecond: allow 1 ms before.
        if not since_wall - 0.001 <= at <= until_wall:
            continue
        rel = round(at - since_wall, 3)
        slot = events.setdefault(str(entry.get("event")), {"count": 0, "first_s": rel})
        slot["count"] = int(slot["count"]) + 1
        slot["last_s"] = rel
    return events


def election(cluster: LocalCluster, plan: Plan, console: Console) -> dict[str, object]:
    stamp = int(time.time() * 1000)
    per_topic = plan.election_partitions // plan.election_topics
    topics = [f"cb-elect-{i}-{stamp}" for i in range(plan.election_topics)]
    started = time.monotonic()
    create_topics(cluster.bootstrap, topics, per_topic, plan.election_rf, timeout_s=120)
    created_s = time.monotonic() - started
    in_sync_s = wait_full_isr(cluster, set(topics), 120)
    console.log(
        f"{plan.election_partitions} partitions (rf={plan.election_rf}) created in "
        f"{created_s:.1f} s, fully in sync {in_sync_s:.1f} s later"
    )
    status = cluster.status()
    controller = status.controller
    led: dict[int, list[TopicPartition]] = {}
    for part in status.partitions:
        if part.tp.topic in topics and part.leader is not None:
            led.setdefault(part.leader, []).append(part.tp)
    # The figure is the controller electing leaders, so the victim is not the controller.
    victim = max((b for b in led if b != controller), key=lambda b: len(led[b]))
    moved = led[victim]
    others = [b for b in cluster.brokers if b != victim]

    with ZkClient(cluster.zk_connect or "").connect() as zk:
        watch = ZnodeGoneWatch(zk, victim)

        def zk_moved() -> bool:
            states = zk.get_partition_states(moved)
            return len(states) == len(moved) and all(
                s.leader not in (victim, -1) for s, _ in states.values()
            )

        def metadata_moved_on(broker_id: int) -> Callable[[], bool]:
            def check() -> bool:
                leaders = metadata_leaders(cluster, broker_id)
                return all(leaders.get(tp, victim) not in (victim, -1) for tp in moved)

            return check

        killed_wall = time.time()
        killed_at = time.monotonic()
        cluster.kill(victim, "KILL")
        stop_at = killed_at + 60
        if not watch.seen.wait(30):
            raise TimeoutError(f"/brokers/ids/{victim} still there 30 s after SIGKILL")
        probes = {"zk": zk_moved, **{f"md{b}": metadata_moved_on(b) for b in others}}
        with concurrent_probes(probes, stop_at) as seen:
            pass
        done_wall = time.time()
    assert watch.gone_at is not None and watch.gone_wall is not None
    md_times = [seen.get(f"md{b}") for b in others]
    zk_at = seen.get("zk")
    all_at = (
        None
        if zk_at is None or None in md_times
        else max([zk_at, *(t for t in md_times if t is not None)])
    )

    def rel(t: float | None, base: float) -> float | None:
        return None if t is None else round(t - base, 3)

    return {
        "partitions": plan.election_partitions,
        "rf": plan.election_rf,
        "victim": victim,
        "controller": controller,
        "partitions_moved": len(moved),
        "create_s": round(created_s, 2),
        "znode_gone_after_kill_s": rel(watch.gone_at, killed_at),
        "from_znode_gone_zk_s": rel(zk_at, watch.gone_at),
        "from_znode_gone_metadata_s": {
            str(b): rel(t, watch.gone_at) for b, t in zip(others, md_times, strict=True)
        },
        "from_znode_gone_s": rel(all_at, watch.gone_at),
        "from_kill_s": rel(all_at, killed_at),
        "target_s": 2.0,
        # Where the controller's time went, from its state-change.log (ms resolution).
        "controller_state_change_log": state_change_timeline(
            cluster, controller, watch.gone_wall, done_wall
        )
        if controller
        else {},
        "zk_gone_wall": watch.gone_wall,
        "kill_wall": killed_wall,
    }


# --- output -------------------------------------------------------------------------------


def _fmt(value: object, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}{unit}"
    return f"{value}{unit}"


def render(results: dict[str, dict[str, object]], errors: dict[str, str], console: Console) -> None:
    table = Table(title=f"Strandline cluster figures ({BROKERS} local brokers, confluent-kafka)")
    table.add_column("figure")
    table.add_column("measured", justify="right")
    table.add_column("target", justify="right")
    table.add_column("notes")
    if (t := results.get("throughput")) is not None:
        table.add_row(
            "produce 1 KiB acks=all rf=3 / rf=1",
            _fmt(t["ratio"]),
            ">= 0.6",
            f"rf=3 {t['rf3_mb_s']} MB/s, rf=1 {t['rf1_mb_s']} MB/s; brokers' CPU/MB "
            f"{t['rf3_broker_cpu_s_per_mb']} vs {t['rf1_broker_cpu_s_per_mb']} s",
        )
    if (u := results.get("unavailability")) is not None:
        for name, what in (("fast", "metadata refresh 200 ms"), ("default", "librdkafka defaults")):
            table.add_row(
                f"unavailability after leader SIGKILL, median ({what})",
                _fmt(u[f"median_acked_s_{name}"], " s"),
                f"<= {u['target_s']} s",
                f"max {_fmt(u[f'max_acked_s_{name}'])} s, failed {u[f'failed_{name}']}"
                f" of {u['repetitions']}",
            )
        table.add_row(
            "  of which: znode gone / ZK leader / Metadata leader",
            f"{_fmt(u['median_znode_gone_s'])} / {_fmt(u['median_zk_leader_s'])} / "
            f"{_fmt(u['median_metadata_leader_s'])} s",
            "",
            f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}",
        )
    if (e := results.get("election")) is not None:
        table.add_row(
            f"new leaders for {e['partitions_moved']} of {e['partitions']} "
            "partitions, from znode gone",
            _fmt(e["from_znode_gone_s"], " s"),
            "<= 2 s",
            f"ZK state {_fmt(e['from_znode_gone_zk_s'])} s, Metadata "
            f"{e['from_znode_gone_metadata_s']}",
        )
        table.add_row(
            "  same, from SIGKILL",
            _fmt(e["from_kill_s"], " s"),
            "",
            f"znode gone {_fmt(e['znode_gone_after_kill_s'])} s after the kill",
        )
    if (g := results.get("groups")) is not None:
        table.add_row(
            "3-member group rebalance after a clean leave",
            _fmt(g["rebalance_after_clean_leave_s"], " s"),
            "",
            f"session.timeout.ms {GROUP_CONSUMER['session.timeout.ms']}, "
            f"heartbeat.interval.ms {GROUP_CONSUMER['heartbeat.interval.ms']}; "
            f"first join of 3: {_fmt(g['first_join_3_members_s'])} s",
        )
        table.add_row(
            "3-member group rebalance after a member SIGKILL",
            _fmt(g["rebalance_after_member_death_s"], " s"),
            "",
            "",
        )
        table.add_row(
            "offset commits/s, one consumer, synchronous",
            _fmt(g["commits_per_s_sync"]),
            "",
            "1 partition per commit",
        )
    console.print(table)
    for name, error in errors.items():
        console.print(f"[red]{name} failed:[/red] {error}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer records and repetitions")
    parser.add_argument(
        "--only",
        default="throughput,unavailability,groups,election",
        help="comma-separated subset of the figures",
    )
    parser.add_argument("--keep", metavar="DIR", help="run in DIR and keep it (logs) afterwards")
    parser.add_argument(
        "--rdkafka-debug",
        default="",
        metavar="CONTEXTS",
        help="librdkafka `debug` for the unavailability probe, e.g. msg,metadata",
    )
    args = parser.parse_args(argv)
    plan = dataclasses.replace(QUICK if args.quick else FULL, rdkafka_debug=args.rdkafka_debug)
    console = Console(stderr=True)
    figures: dict[str, Callable[[LocalCluster, Plan, Console], dict[str, object]]] = {
        "throughput": throughput_ratio,
        "unavailability": unavailability,
        "groups": groups,
        "election": election,
    }
    results: dict[str, dict[str, object]] = {}
    errors: dict[str, str] = {}
    began = time.monotonic()
    keep = Path(args.keep) if args.keep else None
    with local_cluster(BROKERS, CLUSTER_OVERRIDES, keep, "strandline-cluster-bench-") as cluster:
        console.log(f"cluster up at {cluster.bootstrap} in {time.monotonic() - began:.1f} s")
        for name in args.only.split(","):
            console.rule(name)
            try:
                results[name] = figures[name](cluster, plan, console)
            except Exception as exc:  # one broken figure must not hide the others
                errors[name] = f"{type(exc).__name__}: {exc}"
                console.log(traceback.format_exc())
        if deaths := cluster.unexpected_deaths():
            errors["brokers"] = f"brokers died unexpectedly: {sorted(deaths)}"
    return finish_report(
        lambda: render(results, errors, Console()),
        {"plan": "quick" if args.quick else "full", "results": results},
        errors,
        began,
    )


if __name__ == "__main__":
    sys.exit(main())
