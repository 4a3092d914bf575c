"""The clients a chaos run drives while the nemesis works: real Kafka clients, each in
its own thread, writing every operation they see to the history.

- `ProducerWorker`: confluent-kafka, acks=all (or acks=1 in the unsafe test), idempotent
  or not; every value is unique (`p<n>-<seq>`) so the checker can find it in the log.
- `ConsumerWorker`: a member of one consumer group, committing what it polled.
- `CommittedObserver`: reads the group's committed offsets once a second.
- `AdminWorker`: creates topics and reassigns a partition while faults happen.

Timeouts are written as `info` (indeterminate: the write may or may not be in the log),
never as `fail`, because a timed-out produce may still have been appended.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import queue
import threading
import time
from collections.abc import Callable
from multiprocessing.context import SpawnProcess
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

Record = Callable[[dict[str, Any]], None]

# librdkafka errors after which the message may still be in the log.
INDETERMINATE = {
    KafkaError._MSG_TIMED_OUT,
    KafkaError._TIMED_OUT,
    KafkaError.REQUEST_TIMED_OUT,
    KafkaError._TRANSPORT,
    KafkaError.NETWORK_EXCEPTION,
}
# librdkafka's connection errors are the point of a chaos run, not news: they go to a
# logger the console never shows. A run sends it to `clients.log` in its folder, with the
# idempotent producers' `eos` debug lines (epoch bumps, sequence errors) that explain a
# duplicate or a reorder after the fact.
CLIENT_LOG = logging.getLogger("strandline.chaos.clients")
CLIENT_LOG.addHandler(logging.NullHandler())
CLIENT_LOG.propagate = False
CLIENT_LOG.setLevel(logging.DEBUG)
QUIET_LOGS: dict[str, Any] = {"logger": CLIENT_LOG}


class Worker(threading.Thread):
    def __init__(self, name: str, record: Record) -> None:
        super().__init__(name=name, daemon=True)
        self.record = record
        self.stopping = threading.Event()
        self.error: BaseException | None = None

    def stop(self) -> None:
        self.stopping.set()

    def run(self) -> None:
        try:
            self.work()
        except BaseException as exc:  # noqa: BLE001 - reported by the runner
            self.error = exc
            self.record({"process": self.name, "f": "crash", "type": "info", "error": repr(exc)})

    def work(self) -> None:
        raise NotImplementedError


class ProducerWorker(Worker):
    def __init__(
        self,
        index: int,
        record: Record,
        bootstrap: str,
        topic: str,
        partitions: int,
        *,
        idempotent: bool,
        acks: str = "all",
        rate_per_s: float = 100.0,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(f"producer-{index}", record)
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.idempotent, self.acks, self.rate_per_s = idempotent, acks, rate_per_s
        self.extra = extra or {}
        self.sent = 0

    def _producer(self) -> Producer:
        config: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap,
            "acks": self.acks,
            "enable.idempotence": self.idempotent,
            "linger.ms": 5,
            "message.timeout.ms": 15000,
            "request.timeout.ms": 5000,
            "retry.backoff.ms": 100,
            "topic.metadata.refresh.interval.ms": 1000,
            "socket.connection.setup.timeout.ms": 3000,
            **QUIET_LOGS,
        }
        if self.idempotent:
            config["debug"] = "eos"
        else:
            config["max.in.flight.requests.per.connection"] = 5
        config.update(self.extra)
        return Producer(config)

    def work(self) -> None:
        producer = self._producer()
        interval = 1.0 / self.rate_per_s
        next_at = time.monotonic()
        seq = 0
        session = 0  # a new producer id after a fatal error: order is only promised within one
        while not self.stopping.is_set():
            value = f"{self.name.replace('producer-', 'p')}-{seq:07d}"
            key, partition = f"k{seq % 97}", seq % self.partitions
            op: dict[str, Any] = {
                "process": self.name,
                "f": "send",
                "topic": self.topic,
                "partition": partition,
                "key": key,
                "value": value,
                "producer": self.name,
                "seq": seq,
                "idempotent": self.idempotent,
                "acks": self.acks,
                "session": f"{self.name}/{session}",
            }
            try:
                producer.produce(
                    self.topic,
                    value=value.encode(),
                    key=key.encode(),
                    partition=partition,
                    on_delivery=self._on_delivery(op),
                )
            except BufferError:
                producer.poll(0.1)
                continue
            except KafkaException as exc:
                if exc.args[0].fatal():
                    # A fatal idempotence error: the producer id is gone; start a new one
                    # (what an application would do) and say so in the history.
                    self.record(
                        {"process": self.name, "f": "restart", "type": "info", "error": str(exc)}
                    )
                    producer.flush(5)
                    producer = self._producer()
                    session += 1
                    continue
                raise
            self.sent += 1
            seq += 1
            producer.poll(0)
            next_at += interval
            pause = next_at - time.monotonic()
            if pause > 0:
                producer.poll(pause)
            elif pause < -1.0:
                next_at = time.monotonic()  # fell behind (a fault): don't burst to catch up
        remaining = producer.flush(20)
        if remaining:
            self.record(
                {"process": self.name, "f": "unflushed", "type": "info", "count": remaining}
            )

    def _on_delivery(self, op: dict[str, Any]) -> Callable[[KafkaError | None, Any], None]:
        def done(err: KafkaError | None, message: Any) -> None:
            if err is None:
                self.record({**op, "type": "ok", "offset": message.offset()})
            elif err.code() in INDETERMINATE or err.fatal():
                self.record({**op, "type": "info", "error": err.str()})
            else:
                self.record({**op, "type": "fail", "error": err.str()})

        return done


class ConsumerWorker(Worker):
    """A group member that commits, synchronously, only offsets it has polled, and only
    for partitions it owns: any offset going backwards is then the broker's doing."""

    def __init__(
        self,
        index: int,
        record: Record,
        bootstrap: str,
        topic: str,
        group: str,
        commit_interval_s: float = 0.5,
    ) -> None:
        super().__init__(f"consumer-{index}", record)
        self.bootstrap, self.topic, self.group = bootstrap, topic, group
        self.commit_interval_s = commit_interval_s
        self.positions: dict[int, int] = {}
        self.polled = 0

    def _commit(self, consumer: Consumer) -> None:
        if not self.positions:
            return
        offsets = [[self.topic, p, o] for p, o in sorted(self.positions.items())]
        try:
            consumer.commit(
                offsets=[CkTopicPartition(self.topic, p, o) for p, o in self.positions.items()],
                asynchronous=False,
            )
            self.record(
                {
                    "process": self.name,
                    "f": "commit",
                    "type": "ok",
                    "consumer": self.name,
                    "group": self.group,
                    "offsets": offsets,
                }
            )
        except KafkaException as exc:
            self.record(
                {
                    "process": self.name,
                    "f": "commit",
                    "type": "fail",
                    "consumer": self.name,
                    "group": self.group,
                    "offsets": offsets,
                    "error": str(exc),
                }
            )

    def work(self) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 1000,
                "topic.metadata.refresh.interval.ms": 1000,
                "fetch.queue.backoff.ms": 10,
                "client.id": self.name,
                **QUIET_LOGS,
            }
        )

        def on_assign(c: Consumer, parts: list[CkTopicPartition]) -> None:
            self.record(
                {
                    "process": self.name,
                    "f": "assign",
                    "type": "ok",
                    "consumer": self.name,
                    "group": self.group,
                    "partitions": [[p.topic, p.partition] for p in parts],
                }
            )

        def on_revoke(c: Consumer, parts: list[CkTopicPartition]) -> None:
            self._commit(c)
            for p in parts:
                self.positions.pop(p.partition, None)
            self.record(
                {
                    "process": self.name,
                    "f": "revoke",
                    "type": "ok",
                    "consumer": self.name,
                    "group": self.group,
                    "partitions": [[p.topic, p.partition] for p in parts],
                }
            )

        consumer.subscribe([self.topic], on_assign=on_assign, on_revoke=on_revoke)
        last_commit = time.monotonic()
        try:
            while not self.stopping.is_set():
                for message in consumer.consume(500, 0.2):
                    partition, offset = message.partition(), message.offset()
                    if message.error() or partition is None or offset is None:
                        continue
                    self.polled += 1
                    self.positions[partition] = offset + 1
                    self.record(
                        {
                            "process": self.name,
                            "f": "poll",
                            "type": "ok",
                            "consumer": self.name,
                            "group": self.group,
                            "topic": message.topic(),
                            "partition": partition,
                            "offset": offset,
                            "value": (message.value() or b"").decode(),
                        }
                    )
                if time.monotonic() - last_commit >= self.commit_interval_s:
                    self._commit(consumer)
                    last_commit = time.monotonic()
            self._commit(consumer)
        finally:
            consumer.close()


READY = "ready"  # a consumer process's first message: imports done, waiting to begin
MONOTONIC = "monotonic"  # a consumer process's op: when it happened, by time.monotonic()


def _consumer_process(
    index: int,
    topic: str,
    group: str,
    ops: Any,
    control: Any,
    stop: Any,
    join_s: float,
    client_log: str | None,
) -> None:
    """A child process's main: one ConsumerWorker, its ops sent to the parent, each
    stamped here with `time.monotonic()` (one clock for every process on the machine) at
    the moment it happened: the parent's pump can fall a second and more behind on a
    loaded machine, and a commit stamped when it reached the history could then seem to
    follow another member's later commit (a false "offset-backwards"). It says READY
    once imported, then waits for the bootstrap servers (None: end). A consumer that does
    not stop within `join_s` (librdkafka hanging in close()) is left behind: the process
    exits without it."""

    def send(op: dict[str, Any]) -> None:
        ops.put({**op, MONOTONIC: time.monotonic()})

    if client_log is not None:
        handler = logging.FileHandler(client_log)
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        CLIENT_LOG.addHandler(handler)
    ops.put(READY)
    bootstrap = control.get()
    if bootstrap is not None:
        worker = ConsumerWorker(index, send, bootstrap, topic, group)
        worker.start()
        stop.wait()
        worker.stop()
        worker.join(join_s)
        if worker.is_alive():
            send({"process": worker.name, "f": "hung", "type": "info", "where": "close"})
    ops.put(None)
    ops.close()
    ops.join_thread()
    os._exit(0)


class ConsumerProcess:
    """A ConsumerWorker in its own (spawned) process, so a client that hangs in close()
    can not stall the schedule: its ops come back over a queue to `record`, and a process
    that has not ended `kill_after_s` after `stop()` is killed (by its pid).

    A spawned interpreter imports librdkafka and the rest anew: on a loaded machine that
    took longer than a 30 s schedule (the first runs' consumers polled nothing). So the
    process is started early (`start()`, before the cluster is up), says when it is
    ready, and is given the bootstrap servers when the workload begins (`begin()`)."""

    def __init__(
        self,
        index: int,
        topic: str,
        group: str,
        *,
        kill_after_s: float = 20.0,
        client_log: str | None = None,
    ) -> None:
        self.name = f"consumer-{index}"
        self.record: Record | None = None
        self._t_at: Callable[[float], float] = lambda monotonic: monotonic
        self.kill_after_s = kill_after_s
        context = multiprocessing.get_context("spawn")
        self._ops = context.Queue()
        self._control = context.Queue()
        self._stop = context.Event()
        self.process: SpawnProcess = context.Process(
            target=_consumer_process,
            args=(index, topic, group, self._ops, self._control, self._stop, 10.0, client_log),
            name=self.name,
            daemon=True,
        )
        self._pump = threading.Thread(target=self._forward, name=f"{self.name}-ops", daemon=True)
        self.ready = threading.Event()
        self._begun = False

    def start(self) -> None:
        self.process.start()
        self._pump.start()

    def begin(
        self,
        record: Record,
        bootstrap: str,
        t_at: Callable[[float], float],
        ready_timeout_s: float = 120.0,
    ) -> bool:
        """Start consuming; waits first (up to `ready_timeout_s`) for the process to be
        ready. Returns whether it was. `t_at` turns an op's `time.monotonic()` into the
        history's `t`."""
        self.record = record
        self._t_at = t_at
        was_ready = self.ready.wait(ready_timeout_s)
        self._begun = True
        self._control.put(bootstrap)
        return was_ready

    def _forward(self) -> None:
        while True:
            try:
                op = self._ops.get(timeout=0.5)
            except queue.Empty:
                if not self.process.is_alive() and self._ops.empty():
                    break
                continue
            if op is None:
                break
            if op == READY:
                self.ready.set()
            elif self.record is not None:
                t = self._t_at(op.pop(MONOTONIC))
                self.record({**op, "t": t})

    def stop(self) -> None:
        self._stop.set()
        if not self._begun:
            self._begun = True
            self._control.put(None)

    def join(self, timeout: float | None = None) -> None:
        wait = self.kill_after_s if timeout is None else min(timeout, self.kill_after_s)
        self.process.join(wait)
        if self.process.is_alive():
            if self.record is not None:
                self.record(
                    {"process": self.name, "f": "killed", "type": "info", "pid": self.process.pid}
                )
            self.process.kill()
            self.process.join(5)
        self._pump.join(5)


class CommittedObserver(Worker):
    def __init__(
        self, record: Record, bootstrap: str, topic: str, group: str, partitions: int
    ) -> None:
        super().__init__("observer", record)
        self.bootstrap, self.topic, self.group, self.partitions = (
            bootstrap,
            topic,
            group,
            partitions,
        )

    def work(self) -> None:
        # kafka-python, not confluent-kafka: librdkafka 2.x's admin ListConsumerGroupOffsets
        # dereferences the consumer-group handle an AdminClient does not have when
        # OffsetFetch answers a coordinator error (a segfault, seen in every chaos run
        # with a coordinator move), so the observer must not use it.
        from kafka import KafkaAdminClient

        admin: KafkaAdminClient | None = None
        while not self.stopping.wait(1.0):
            try:
                if admin is None:
                    admin = KafkaAdminClient(
                        bootstrap_servers=self.bootstrap.split(","),
                        request_timeout_ms=5000,
                        client_id="chaos-observer",
                    )
                found = admin.list_consumer_group_offsets(self.group)
            except Exception:  # noqa: BLE001 - faults make reads fail; the next one retries
                if admin is not None:
                    admin.close()
                admin = None
                continue
            offsets = [
                [tp.topic, tp.partition, meta.offset]
                for tp, meta in sorted(found.items())
                if tp.topic == self.topic and meta.offset >= 0
            ]
            if offsets:
                self.record(
                    {
                        "process": self.name,
                        "f": "committed",
                        "type": "ok",
                        "group": self.group,
                        "offsets": offsets,
                    }
                )
        if admin is not None:
            admin.close()


class AdminWorker(Worker):
    """Creates a topic every `create_every_s` and reassigns partition 0 of the main topic
    (rotating its replica list, which moves the preferred leader) once mid-run."""

    def __init__(
        self,
        record: Record,
        bootstrap: str,
        topic: str,
        brokers: list[int],
        prefix: str,
        create_every_s: float = 8.0,
        reassign_at_s: float = 10.0,
    ) -> None:
        super().__init__("admin", record)
        self.bootstrap, self.topic, self.brokers, self.prefix = bootstrap, topic, brokers, prefix
        self.create_every_s, self.reassign_at_s = create_every_s, reassign_at_s
        self.created: list[str] = []

    def _admin(self, action: str, detail: dict[str, Any], call: Callable[[], None]) -> None:
        try:
            call()
            self.record(
                {
                    "process": self.name,
                    "f": "admin",
                    "type": "ok",
                    "action": action,
                    "detail": detail,
                }
            )
        except Exception as exc:  # noqa: BLE001 - a fault may fail it; that is recorded
            self.record(
                {
                    "process": self.name,
                    "f": "admin",
                    "type": "fail",
                    "action": action,
                    "detail": detail,
                    "error": str(exc),
                }
            )

    def work(self) -> None:
        from strandline.client.admin import AdminSettings, BlockingAdmin
        from strandline.types import TopicPartition

        admin = AdminClient({"bootstrap.servers": self.bootstrap, **QUIET_LOGS})
        started = time.monotonic()
        reassigned = False
        n = 0
        while not self.stopping.wait(self.create_every_s / 4):
            elapsed = time.monotonic() - started
            if elapsed >= self.create_every_s * (n + 1):
                n += 1
                name = f"{self.prefix}-extra-{n}"
                replication = min(3, len(self.brokers))

                def create(name: str = name, replication: int = replication) -> None:
                    futures = admin.create_topics(
                        [NewTopic(name, 2, replication)], operation_timeout=10
                    )
                    futures[name].result(15)

                self._admin("create-topic", {"topic": name}, create)
                self.created.append(name)
            if not reassigned and elapsed >= self.reassign_at_s:
                reassigned = True
                rotated = self.brokers[1:] + self.brokers[:1]
                wanted = {TopicPartition(self.topic, 0): rotated[: min(3, len(rotated))]}

                def reassign(wanted: dict[TopicPartition, list[int]] = wanted) -> None:
                    settings = AdminSettings("strandline-chaos", 30.0)
                    with BlockingAdmin(self.bootstrap, settings) as client:
                        error, message, results = client.do(
                            lambda a: a.alter_partition_reassignments(wanted)
                        )
                    if error.value != 0:
                        raise RuntimeError(f"reassignment refused: {error.name}: {message}")
                    errors = {
                        str(tp): str(code)
                        for tp, (code, _msg) in results.items()
                        if code.value != 0
                    }
                    if errors:
                        raise RuntimeError(f"reassignment refused: {errors}")

                self._admin(
                    "reassign",
                    {"partition": 0, "replicas": wanted[TopicPartition(self.topic, 0)]},
                    reassign,
                )
