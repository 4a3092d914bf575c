"""One chaos schedule end to end, and many of them.

A schedule starts a fresh cluster (every node in its own network namespace when a
network fault is drawn; a 3-server ZooKeeper ensemble; brokers' log dirs on small
tmpfs mounts when disk-full is drawn), runs the workload while the nemesis applies its
faults, heals everything, reads the whole log back, compares the replicas byte by byte,
and hands the history to the checker. Its folder keeps the history, every broker's
state-change.log, the check result and a PNG timeline.
"""

from __future__ import annotations

import faulthandler
import json
import logging
import multiprocessing
import shutil
import threading
import time
import traceback
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from confluent_kafka import Consumer, KafkaException
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from strandline.chaos.checker import CheckResult
from strandline.chaos.history import HistoryWriter, read_history
from strandline.chaos.nemesis import (
    FAULT_KINDS,
    NETWORK_KINDS,
    FaultStep,
    Nemesis,
    plan_schedule,
)
from strandline.chaos.report import SCHEDULE_FILE, ScheduleResult, check_schedule
from strandline.chaos.timeline import draw_timeline
from strandline.chaos.workload import (
    CLIENT_LOG,
    QUIET_LOGS,
    AdminWorker,
    CommittedObserver,
    ConsumerProcess,
    ProducerWorker,
    Worker,
)
from strandline.launcher.local_cluster import LocalCluster
from strandline.storage import replica_verify
from strandline.types import TopicPartition

TOPIC = "chaos"
GROUP = "chaos-group"
# state-change.log events copied into the history: the ones that explain a loss.
# Past its length plus this, a schedule is taken to hang and dumps its threads' stacks.
WATCHDOG_SLACK_S = 240.0
NOTABLE_EVENTS = ("unclean-leader-election", "epoch-truncation", "log-dir-full")


@dataclass
class ChaosConfig:
    seed: int
    out_dir: Path
    seconds: float = 30.0
    faults: tuple[str, ...] = FAULT_KINDS
    brokers: int = 3
    zk_nodes: int = 3
    partitions: int = 3
    acks: str = "all"
    min_insync_replicas: int = 2
    unclean_leader_election: bool = False
    idempotent_producers: int = 2
    plain_producers: int = 1
    consumers: int = 2
    rate_per_s: float = 100.0
    session_timeout_ms: int = 2000
    disk_mb: int = 48
    # An explicit schedule (tests use one); otherwise drawn from the seed.
    plan: list[FaultStep] | None = None
    first_kind: str | None = None
    keep_cluster: bool = False
    broker_overrides: dict[str, str] = field(default_factory=dict)

    def schedule(self) -> list[FaultStep]:
        if self.plan is not None:
            return self.plan
        return plan_schedule(
            self.seed,
            self.seconds,
            self.faults,
            brokers=self.brokers,
            zk_nodes=self.zk_nodes,
            first_kind=self.first_kind,
            session_timeout_s=self.session_timeout_ms / 1000,
        )


def broker_settings(config: ChaosConfig) -> dict[str, str]:
    settings = {
        "zookeeper.session.timeout.ms": str(config.session_timeout_ms),
        "replica.lag.time.max.ms": "2000",
        "min.insync.replicas": str(config.min_insync_replicas),
        "unclean.leader.election.enable": str(config.unclean_leader_election).lower(),
        "default.replication.factor": str(min(3, config.brokers)),
        "offsets.topic.replication.factor": str(min(3, config.brokers)),
        "offsets.topic.num.partitions": "3",
        "leader.imbalance.check.interval.seconds": "5",
    }
    settings.update(config.broker_overrides)
    return settings


class Run:
    """The state of one schedule while it runs; `execute()` returns its result."""

    def __init__(self, config: ChaosConfig) -> None:
        self.config = config
        self.folder = config.out_dir / f"seed-{config.seed}"
        self.cluster_dir = self.folder / "cluster"
        self.steps = config.schedule()
        self.kinds = {s.kind for s in self.steps}
        self.history_path = self.folder / "history.jsonl"
        self.cluster: LocalCluster | None = None
        self.history: HistoryWriter | None = None
        self._stacks: TextIO | None = None
        self.consumers: list[ConsumerProcess] = []
        self._lock = threading.Lock()

    def record(self, op: dict[str, Any]) -> None:
        assert self.history is not None
        self.history.write(op)

    # --- set-up and tear-down --------------------------------------------------------

    def _start_cluster(self) -> LocalCluster:
        config = self.config
        if self.folder.exists():
            shutil.rmtree(self.folder, ignore_errors=True)
        self.folder.mkdir(parents=True)
        self._start_consumers()
        self.cluster = LocalCluster(self.cluster_dir)
        self.cluster.up(
            config.brokers,
            broker_settings(config),
            zookeeper_nodes=config.zk_nodes,
            netns=bool(self.kinds & NETWORK_KINDS),
            disk_limit_mb=config.disk_mb if "disk-full" in self.kinds else None,
        )
        self.cluster.wait_for_full_metadata()
        return self.cluster

    def _start_consumers(self) -> None:
        """The consumers run in their own processes: a librdkafka consumer hanging in
        close() stalled two schedules of the long runs, and a process can be killed.
        They are spawned now, while the cluster starts, because a fresh interpreter's
        imports took longer than a whole schedule on the loaded machine."""
        self.consumers = [
            ConsumerProcess(
                i, TOPIC, GROUP, client_log=str(self.folder / f"clients-consumer-{i}.log")
            )
            for i in range(self.config.consumers)
        ]
        for consumer in self.consumers:
            consumer.start()

    def _end_consumers(self) -> None:
        """After a failure: no consumer process outlives its schedule."""
        for consumer in self.consumers:
            if consumer.process.is_alive():
                consumer.stop()
                consumer.process.join(2)
                if consumer.process.is_alive():
                    consumer.process.kill()
                    consumer.process.join(2)

    def _create_topic(self, cluster: LocalCluster) -> None:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap, **QUIET_LOGS})
        topic = NewTopic(
            TOPIC,
            self.config.partitions,
            min(3, self.config.brokers),
            config={"min.insync.replicas": str(self.config.min_insync_replicas)},
        )
        admin.create_topics([topic], operation_timeout=20)[TOPIC].result(30)
        self._wait(
            "every partition to have a leader",
            lambda: all(not p.offline for p in cluster.status().partitions if p.tp.topic == TOPIC),
            30,
        )

    def _teardown(self) -> None:
        """Stop everything; the cluster's files stay until the check has passed."""
        if self.cluster is not None and not self.config.keep_cluster:
            self.cluster.stop()

    @staticmethod
    def _wait(what: str, probe: Any, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if probe():
                    return True
            except Exception:  # noqa: BLE001 - the cluster may still be recovering
                pass
            time.sleep(0.2)
        return False

    # --- the schedule ----------------------------------------------------------------

    def _nemesis(self, nemesis: Nemesis, started: float) -> None:
        """Apply and revert the steps at their times. Drawn schedules never overlap;
        explicit plans may (the unsafe-settings tests pause followers, then kill the
        leader)."""
        events = sorted(
            [(s.start_s, 1, s) for s in self.steps] + [(s.end_s, 0, s) for s in self.steps],
            key=lambda e: (e[0], e[1]),
        )
        for at, starting, step in events:
            delay = started + at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            if starting:
                self.record(
                    {
                        "process": "nemesis",
                        "f": "fault",
                        "type": "info",
                        "fault": step.kind,
                        "phase": "start",
                        "fault_id": step.fault_id,
                        "detail": step.target,
                    }
                )
                try:
                    detail = nemesis.apply(step)
                except Exception as exc:  # noqa: BLE001 - written down, the run goes on
                    detail = {"error": repr(exc)}
                self.record(
                    {
                        "process": "nemesis",
                        "f": "fault-applied",
                        "type": "info",
                        "fault": step.kind,
                        "fault_id": step.fault_id,
                        "detail": detail,
                    }
                )
                continue
            try:
                nemesis.revert(step)
                error = None
            except Exception as exc:  # noqa: BLE001
                error = repr(exc)
            self.record(
                {
                    "process": "nemesis",
                    "f": "fault",
                    "type": "info",
                    "fault": step.kind,
                    "phase": "end",
                    "fault_id": step.fault_id,
                    "detail": {"error": error} if error else {},
                }
            )

    def _heal(self, cluster: LocalCluster, nemesis: Nemesis) -> None:
        nemesis.revert_all(self.steps)
        for broker in cluster.brokers:
            if not cluster.is_running(broker):
                cluster.start(broker)

    def _final_read(self, cluster: LocalCluster) -> dict[TopicPartition, int]:
        """Every record of the main topic below the HW, as `final-read` ops; returns HWs."""
        consumer = Consumer(
            {
                "bootstrap.servers": cluster.bootstrap,
                "group.id": f"chaos-final-{self.config.seed}",
                "enable.auto.commit": False,
                **QUIET_LOGS,
            }
        )
        hws: dict[TopicPartition, int] = {}
        try:
            for p in range(self.config.partitions):
                hws[TopicPartition(TOPIC, p)] = consumer.get_watermark_offsets(
                    CkTopicPartition(TOPIC, p), timeout=10
                )[1]
            consumer.assign([CkTopicPartition(TOPIC, p, 0) for p in range(self.config.partitions)])
            next_offset = {tp.partition: 0 for tp in hws}
            deadline = time.monotonic() + 60
            while any(next_offset[tp.partition] < hw for tp, hw in hws.items()):
                if time.monotonic() > deadline:
                    self.record(
                        {
                            "process": "checker",
                            "f": "final-read-incomplete",
                            "type": "info",
                            "next": next_offset,
                        }
                    )
                    break
                for m in consumer.consume(2000, 0.5):
                    partition, offset = m.partition(), m.offset()
                    if m.error() or partition is None or offset is None:
                        continue
                    if offset >= hws[TopicPartition(TOPIC, partition)]:
                        continue
                    next_offset[partition] = offset + 1
                    self.record(
                        {
                            "process": "checker",
                            "f": "final-read",
                            "type": "ok",
                            "topic": TOPIC,
                            "partition": partition,
                            "offset": offset,
                            "key": (m.key() or b"").decode(),
                            "value": (m.value() or b"").decode(),
                        }
                    )
        finally:
            consumer.close()
        return hws

    def _record_producer_batches(
        self, cluster: LocalCluster, hws: dict[TopicPartition, int]
    ) -> None:
        """Who wrote each idempotent batch of the final read (producer id, epoch, base
        sequence), from one replica's segments (the replica comparison checks they all
        agree below the HW): the checker tells a client's resend under a bumped epoch
        from a duplicate the broker failed to detect (docs/faults.md bug 9)."""
        status = {p.tp: p for p in cluster.status().partitions}
        for tp, hw in sorted(hws.items()):
            replicas = status[tp].replicas if tp in status else sorted(cluster.brokers)
            dirs = [replica_verify.partition_dir(cluster.log_dir(b), tp) for b in replicas]
            directory = next((d for d in dirs if d.is_dir()), None)
            if directory is None:
                continue  # the checker then keeps every duplicate of it an anomaly
            batches = replica_verify.producer_batches(directory, hw)
            self.record(
                {
                    "process": "checker",
                    "f": "producer-batches",
                    "type": "ok",
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "batches": [list(b) for b in batches],
                }
            )

    def _compare_replicas(self, cluster: LocalCluster, hws: dict[TopicPartition, int]) -> None:
        """Every partition of the cluster, not only the workload's: the admin thread's
        topics and `__consumer_offsets` (compared modulo compaction) too."""
        status = {p.tp: p for p in cluster.status().partitions}
        others = sorted(tp for tp in status if tp not in hws)
        if others:
            consumer = Consumer(
                {
                    "bootstrap.servers": cluster.bootstrap,
                    "group.id": f"chaos-hw-{self.config.seed}",
                    **QUIET_LOGS,
                }
            )
            try:
                for tp in others:
                    hw = self._high_watermark(consumer, tp)
                    if hw is None:
                        self.record(
                            {
                                "process": "checker",
                                "f": "replica-compare-skipped",
                                "type": "info",
                                "topic": tp.topic,
                                "partition": tp.partition,
                            }
                        )
                    else:
                        hws[tp] = hw
            finally:
                consumer.close()
        for tp, hw in sorted(hws.items()):
            replicas = status[tp].replicas if tp in status else sorted(cluster.brokers)
            dirs = {b: replica_verify.partition_dir(cluster.log_dir(b), tp) for b in replicas}
            result = replica_verify.compare_replicas(tp, dirs, hw)
            self.record(
                {
                    "process": "checker",
                    "f": "replica-compare",
                    "type": "ok",
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "high_watermark": hw,
                    "brokers": list(replicas),
                    "identical": result.consistent,
                    "detail": f"bytes {result.sizes}, differ {list(result.mismatched)}",
                }
            )

    @staticmethod
    def _high_watermark(consumer: Consumer, tp: TopicPartition) -> int | None:
        """A topic the admin thread created just before the heal may not be in every
        broker's metadata yet: ask a few times, then give up on that partition."""
        for _ in range(5):
            try:
                return int(
                    consumer.get_watermark_offsets(
                        CkTopicPartition(tp.topic, tp.partition), timeout=5
                    )[1]
                )
            except KafkaException:
                time.sleep(1)
        return None

    def _copy_state_change_logs(self, cluster: LocalCluster) -> None:
        for broker in sorted(cluster.brokers):
            source = cluster.broker_dir(broker) / "logs" / "state-change.log"
            if not source.exists():
                continue
            target = self.folder / f"state-change-broker-{broker}.log"
            shutil.copyfile(source, target)
            for line in target.read_text(errors="replace").splitlines():
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if entry.get("event") in NOTABLE_EVENTS:
                    self.record(
                        {
                            "process": "checker",
                            "f": "state-change",
                            "type": "info",
                            "broker": broker,
                            "event": entry["event"],
                            "detail": entry,
                        }
                    )

    def execute(self) -> ScheduleResult:
        config = self.config
        wall_started = time.monotonic()
        try:
            cluster = self._start_cluster()
            # A schedule normally takes its length plus about a minute. One of 233 once
            # hung for good (seed 3050; its replay ran clean): if it happens again, every
            # thread's stack is in stacks.txt, every few minutes.
            self._stacks = (self.folder / "stacks.txt").open("w")
            faulthandler.dump_traceback_later(
                config.seconds + WATCHDOG_SLACK_S, repeat=True, file=self._stacks
            )
            self._create_topic(cluster)
            self.history = HistoryWriter(self.history_path)
            client_log = logging.FileHandler(self.folder / "clients.log")
            client_log.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
            CLIENT_LOG.addHandler(client_log)
            self.record(
                {
                    "process": "nemesis",
                    "f": "plan",
                    "type": "info",
                    "seed": config.seed,
                    "steps": [s.to_json() for s in self.steps],
                }
            )
            bootstrap = cluster.bootstrap
            producers: list[ProducerWorker] = [
                ProducerWorker(
                    i,
                    self.record,
                    bootstrap,
                    TOPIC,
                    config.partitions,
                    idempotent=i < config.idempotent_producers,
                    acks=config.acks,
                    rate_per_s=config.rate_per_s,
                )
                for i in range(config.idempotent_producers + config.plain_producers)
            ]
            others: list[Worker | ConsumerProcess] = [
                *self.consumers,
                CommittedObserver(self.record, bootstrap, TOPIC, GROUP, config.partitions),
                AdminWorker(
                    self.record, bootstrap, TOPIC, sorted(cluster.brokers), f"chaos{config.seed}"
                ),
            ]
            for consumer in self.consumers:
                if not consumer.begin(self.record, bootstrap, self.history.t_at):
                    self.record({"process": consumer.name, "f": "not-ready", "type": "info"})
            for worker in [*producers, *others]:
                if not isinstance(worker, ConsumerProcess):
                    worker.start()
            nemesis = Nemesis(cluster, TOPIC)
            started = time.monotonic()
            try:
                self._nemesis(nemesis, started)
                remaining = started + config.seconds - time.monotonic()
                if remaining > 0:
                    time.sleep(remaining)
            finally:
                self._heal(cluster, nemesis)
                self.record({"process": "nemesis", "f": "healed", "type": "info"})
            for worker in producers:
                worker.stop()
            for worker in producers:
                worker.join(40)
            self._wait(
                "every replica back in every ISR",
                lambda: all(not p.under_replicated for p in cluster.status().partitions),
                60,
            )
            # Consumers get time to read what the producers wrote before they stop.
            time.sleep(3)
            for worker in others:
                worker.stop()
            for worker in others:
                worker.join(30)
            hws = self._final_read(cluster)
            self._record_producer_batches(cluster, hws)
            self._compare_replicas(cluster, hws)
            self._copy_state_change_logs(cluster)
        finally:
            self._end_consumers()
            if self.history is not None:
                self.history.close()
            for handler in list(CLIENT_LOG.handlers):
                if isinstance(handler, logging.FileHandler):
                    CLIENT_LOG.removeHandler(handler)
                    handler.close()
            self._teardown()
            faulthandler.cancel_dump_traceback_later()
            if self._stacks is not None:
                self._stacks.close()
        # Before the check, so a schedule whose check fails to run can be checked again.
        (self.folder / SCHEDULE_FILE).write_text(
            json.dumps(
                {
                    "seed": config.seed,
                    "seconds": round(time.monotonic() - wall_started, 3),
                    "faults": [s.kind for s in self.steps],
                    "steps": [s.to_json() for s in self.steps],
                },
                indent=2,
            )
            + "\n"
        )
        ops = read_history(self.history_path)
        result: CheckResult = check_schedule(ops, config.seed)
        if result.ok and not config.keep_cluster:
            # A failed schedule keeps its segments, broker.out and configs for study.
            shutil.rmtree(self.cluster_dir, ignore_errors=True)
        (self.folder / "check.json").write_text(json.dumps(result.to_json(), indent=2) + "\n")
        draw_timeline(
            ops,
            self.folder / "timeline.png",
            f"chaos seed {config.seed}: {', '.join(s.kind for s in self.steps)}",
        )
        return ScheduleResult(
            seed=config.seed,
            seconds=time.monotonic() - wall_started,
            faults=[s.kind for s in self.steps],
            check=result,
            folder=self.folder,
        )


def run_schedule(config: ChaosConfig) -> ScheduleResult:
    return Run(config).execute()


def run_schedule_in_worker(config: ChaosConfig) -> ScheduleResult:
    """run_schedule in a pool process. Its exception travels back pickled, and some
    cannot be unpickled by the parent (librdkafka's KafkaException: "import of module
    'cimpl' failed"), which hid why a schedule could not run: send its text instead."""
    try:
        return run_schedule(config)
    except Exception as error:
        raise RuntimeError(f"{error!r}\n{traceback.format_exc()}") from None


class ScheduleFailed(Exception):
    def __init__(self, seed: int, error: BaseException) -> None:
        super().__init__(f"seed {seed}: the schedule could not run: {error!r}")
        self.seed = seed


def run_schedules(
    configs: list[ChaosConfig], *, jobs: int = 1
) -> Iterator[ScheduleResult | ScheduleFailed]:
    """Each schedule's result as it finishes. With jobs > 1 the schedules run side by
    side, each in a fresh process (spawned, one schedule per process) so a stuck client
    thread or a crashed librdkafka cannot reach the next schedule; every cluster has its
    own data dir and so its own namespaces and subnet."""
    if jobs == 1:
        for config in configs:
            yield run_schedule(config)
        return
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(jobs, mp_context=context, max_tasks_per_child=1) as pool:
        pending = {pool.submit(run_schedule_in_worker, config): config for config in configs}
        for future in as_completed(pending):
            try:
                yield future.result()
            except Exception as error:
                # One schedule that could not run (its cluster never came up, its
                # process died) must not throw away the others' results.
                yield ScheduleFailed(pending[future].seed, error)


def explore_configs(base: ChaosConfig, schedules: int) -> list[ChaosConfig]:
    """Seeds base.seed, base.seed+1, ...; schedule i starts with kind i mod |faults| so
    every kind is drawn within the first |faults| schedules."""
    return [
        replace(base, seed=base.seed + i, first_kind=base.faults[i % len(base.faults)])
        for i in range(schedules)
    ]
