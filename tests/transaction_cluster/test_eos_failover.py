"""Exactly once through failover: a consume-transform-produce loop with confluent-kafka
transactions keeps running while the input partition's leader, the output partition's
leader and its transaction coordinator are SIGKILLed in turn (each restarted before the
next kill); read_committed, the output holds every input record exactly once, and each
output partition in input order.

The loop is written as a correct Kafka exactly-once application: the input offsets are
sent to the transaction, an abortable error aborts and rewinds the consumer to the
group's committed offsets, a fatal one (fenced) replaces the producer, and a retriable
commit error retries the commit.

The group coordinator is never killed, by arrangement (`_arrange`): librdkafka (as in
confluent-kafka 2.16.1) can hang `send_offsets_to_transaction` past its timeout, until
some other broker changes state, once the group coordinator's broker has dropped out of
a metadata answer (librdkafka issues #5511 and #5456, open). Both stalls this test had
(full-suite runs under load) were that: the killed broker was the group coordinator, and
the producer sent its TxnOffsetCommit only when the teardown stopped another broker, a
minute later. So one broker, X, leads the group's
`__consumer_offsets` partition and is the last replica of every partition the test
kills a leader of (the input, the output, the transactional id's `__transaction_state`
partition): with one broker down at a time, X never becomes their leader. The group
coordinator's failover has its own tests (`tests/group_cluster/test_client_groups.py`,
`test_group_wire.py`, and `test_txn_offsets_wire.py` for pending transactional offsets
across a restart)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as CkTopicPartition

from strandline.group.partitioning import OFFSETS_TOPIC, partition_for
from strandline.launcher.local_cluster import LocalCluster
from strandline.transaction.partitioning import TRANSACTION_STATE_TOPIC
from strandline.types import TopicPartition
from tests.cluster.support import create_topic, partition_status
from tests.waiting import wait_until

from .support import (
    READ_COMMITTED,
    TXN_CLUSTER,
    find_group_coordinator,
    find_txn_coordinator,
    group_offsets,
    read_confluent,
    txn_cluster,
)

PARTITIONS = 3
FEED_BATCH = 30
FEED_INTERVAL_S = 0.1
IDLE_NOTE_S = 5.0


class Feeder(threading.Thread):
    """Writes input records (idempotent, acks=all) at a steady pace until stopped."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(name="feeder", daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.stop = threading.Event()
        self.sent = 0
        self.errors: list[str] = []

    def run(self) -> None:
        p = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 60_000,
                "topic.metadata.refresh.interval.ms": 500,
            }
        )

        def on_delivery(err: object, _msg: object) -> None:
            if err is not None:
                self.errors.append(str(err))

        while not self.stop.is_set():
            for _ in range(FEED_BATCH):
                i = self.sent
                p.produce(
                    self.topic, value=b"%07d" % i, partition=i % PARTITIONS, on_delivery=on_delivery
                )
                self.sent += 1
            p.poll(0)
            time.sleep(FEED_INTERVAL_S)
        if p.flush(60) != 0:
            self.errors.append("input records left undelivered")


class EosLoop(threading.Thread):
    def __init__(self, bootstrap: str, inp: str, out: str, group: str, txn_id: str) -> None:
        super().__init__(name="eos-loop", daemon=True)
        self.bootstrap, self.inp, self.out, self.group, self.txn_id = (
            bootstrap,
            inp,
            out,
            group,
            txn_id,
        )
        self.stop = threading.Event()
        self.commits = 0
        self.aborts = 0
        self.new_producers = 0
        self.new_consumers = 0
        self.events: list[str] = []
        self.crashed: BaseException | None = None
        self._since = time.monotonic()

    def note(self, event: str) -> None:
        self.events.append(f"+{time.monotonic() - self._since:.1f}s {event}")

    def _consumer(self) -> Consumer:
        self.new_consumers += 1
        self.note(f"consumer {self.new_consumers}")
        c = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
                "session.timeout.ms": 10_000,
                "heartbeat.interval.ms": 500,
                "topic.metadata.refresh.interval.ms": 500,
            }
        )
        c.subscribe([self.inp])
        return c

    def _producer(self) -> Producer:
        self.new_producers += 1
        self.note(f"producer {self.new_producers}")
        p = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "transactional.id": self.txn_id,
                "transaction.timeout.ms": 15_000,
                "linger.ms": 5,
                "topic.metadata.refresh.interval.ms": 500,
                "retry.backoff.ms": 50,
            }
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                p.init_transactions(10)
                return p
            except KafkaException as exc:
                error = exc.args[0]
                self.note(f"init_transactions: {error}")
                if error.fatal() or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # reported by the test
            self.crashed = exc

    def _run(self) -> None:
        consumer: Consumer | None = None
        producer: Producer | None = None
        last_input = time.monotonic()
        while True:
            if consumer is None:
                consumer = self._consumer()
            if producer is None:
                producer = self._producer()
            messages = [m for m in consumer.consume(200, 0.5) if m.error() is None]
            if not messages:
                if self.stop.is_set():
                    break
                if time.monotonic() - last_input > IDLE_NOTE_S:
                    # A stall shows in the events: the consumer is quiet, not failing.
                    positions = consumer.position(consumer.assignment())
                    self.note(f"no input for {IDLE_NOTE_S:.0f}s; positions {positions}")
                    last_input = time.monotonic()
                continue
            last_input = time.monotonic()
            try:
                self._transaction(producer, consumer, messages)
                self.commits += 1
            except KafkaException as exc:
                error = exc.args[0]
                self.note(f"{error.name()}: {error.str()}")
                fatal = error.fatal() or not error.txn_requires_abort()
                if not fatal:
                    try:
                        producer.abort_transaction(30)
                        self.aborts += 1
                    except KafkaException as abort_exc:
                        self.note(f"abort failed: {abort_exc.args[0]}")
                        fatal = True
                if fatal:
                    producer = None  # a new instance fences this one's epoch
                # Rewind: a fresh consumer resumes from the group's committed offsets
                # (read with require_stable, so a pending transactional commit is awaited).
                consumer.close()
                consumer = None
        consumer.close()

    def _transaction(self, producer: Producer, consumer: Consumer, messages: list) -> None:
        producer.begin_transaction()
        next_offsets: dict[int, int] = {}
        for m in messages:
            producer.produce(self.out, key=m.key(), value=m.value(), partition=m.partition())
            next_offsets[m.partition()] = m.offset() + 1
        producer.send_offsets_to_transaction(
            [CkTopicPartition(self.inp, p, o) for p, o in next_offsets.items()],
            consumer.consumer_group_metadata(),
            30,
        )
        # A retriable commit error (e.g. a timeout while the coordinator moves) means the
        # outcome is unknown: the commit is retried, never aborted, until it is known.
        for attempt in range(10):
            try:
                producer.commit_transaction(30)
                return
            except KafkaException as exc:
                if not exc.args[0].retriable() or attempt == 9:
                    raise
                self.note(f"commit retried: {exc.args[0]}")


# Both internal topics' partition counts in the transaction tests' cluster.
INTERNAL_PARTITIONS = int(TXN_CLUSTER["offsets.topic.num.partitions"])
assert INTERNAL_PARTITIONS == int(TXN_CLUSTER["transaction.state.log.num.partitions"])


@dataclass(frozen=True)
class Arrangement:
    group: str
    txn_id: str
    spared: int  # the group coordinator's broker, never killed
    assignment: list[list[int]]  # for the input and output topics: `spared` last


def _arrange(cluster: LocalCluster, suffix: str) -> Arrangement:
    """A group id and a transactional id such that one broker leads the group's offsets
    partition and is the last replica of the transactional id's partition (see the
    module's docstring)."""
    find_group_coordinator(cluster, f"eos-probe-{suffix}")  # creates both internal topics
    find_txn_coordinator(cluster, f"eos-probe-{suffix}")
    internal = (OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC)
    status = wait_until(
        "every internal partition to have its leader",
        lambda: (
            found
            if len(found := [p for p in cluster.status().partitions if p.tp.topic in internal])
            == 2 * INTERNAL_PARTITIONS
            and not any(p.offline for p in found)
            else None
        ),
    )
    offsets = {p.tp.partition: p for p in status if p.tp.topic == OFFSETS_TOPIC}
    states = {p.tp.partition: p for p in status if p.tp.topic == TRANSACTION_STATE_TOPIC}
    for spared in sorted(cluster.brokers):
        led = [n for n, p in offsets.items() if p.replicas[0] == spared and p.leader == spared]
        last = [n for n, p in states.items() if p.replicas[-1] == spared]
        if led and last:
            break
    else:
        raise AssertionError(
            f"no broker leads an offsets partition and trails a state one: {status}"
        )
    group = _key_in(f"eos-{suffix}", led[0], len(offsets))
    txn_id = _key_in(f"eos-tx-{suffix}", last[0], len(states))
    assert find_group_coordinator(cluster, group) == spared
    others = sorted(b for b in cluster.brokers if b != spared)
    assignment = [[*others[p % 2 :], *others[: p % 2], spared] for p in range(PARTITIONS)]
    return Arrangement(group, txn_id, spared, assignment)


def _key_in(prefix: str, partition: int, partitions: int) -> str:
    """`prefix-N` for the first N that Kafka's partitioning puts in `partition` (the same
    hash for group ids and transactional ids)."""
    return next(
        key
        for key in (f"{prefix}-{n}" for n in range(10_000))
        if partition_for(key, partitions) == partition
    )


def _kill_and_restart(
    cluster: LocalCluster, locate: Callable[[], int], what: str, loop: EosLoop, spared: int
) -> None:
    broker = locate()
    assert broker != spared, f"{what} is on broker {spared}, the group coordinator's"
    loop.note(f"kill broker {broker} ({what})")
    cluster.kill(broker, "KILL")
    wait_until(f"{what} to move off broker {broker}", lambda: locate() != broker, timeout_s=30)
    loop.note(f"{what} moved; restart broker {broker}")
    cluster.start(broker)
    wait_until(
        f"broker {broker} back in the ISR of every partition",
        lambda: all(broker in p.isr for p in cluster.status().partitions),
        timeout_s=45,
    )
    loop.note(f"broker {broker} back in every ISR")


def _leader(cluster: LocalCluster, topic: str, partition: int) -> int:
    tp = TopicPartition(topic, partition)
    leader = wait_until(
        f"a leader for {tp}",
        lambda: (found := partition_status(cluster, tp).leader) and found > 0 and found,
    )
    return int(leader)


def test_consume_transform_produce_exactly_once_through_kills(cluster_factory) -> None:
    cluster = txn_cluster(cluster_factory)
    suffix = uuid.uuid4().hex[:6]
    arranged = _arrange(cluster, suffix)
    inp, out, group, txn_id = (
        f"eos-in-{suffix}",
        f"eos-out-{suffix}",
        arranged.group,
        arranged.txn_id,
    )
    create_topic(cluster, inp, PARTITIONS, 3, assignment=arranged.assignment)
    create_topic(cluster, out, PARTITIONS, 3, assignment=arranged.assignment)

    feeder = Feeder(cluster.bootstrap, inp)
    loop = EosLoop(cluster.bootstrap, inp, out, group, txn_id)
    feeder.start()
    loop.start()
    try:

        def progressed(commits: int) -> None:
            try:
                wait_until(
                    f"the loop to commit {commits} transactions",
                    lambda: loop.commits >= commits or loop.crashed,
                    timeout_s=60,
                )
            except AssertionError as e:
                raise AssertionError(
                    f"{e}; the feeder sent {feeder.sent}, errors {feeder.errors[:3]}; "
                    f"the loop's last events: {loop.events[-8:]}"
                ) from e
            assert loop.crashed is None, loop.crashed

        progressed(5)
        # Each role's broker is killed in turn, found where the role is at that moment.
        roles: list[tuple[str, Callable[[], int]]] = [
            (f"{inp}-0's leadership", lambda: _leader(cluster, inp, 0)),
            (f"{out}-0's leadership", lambda: _leader(cluster, out, 0)),
            (
                f"the transaction coordinator of {txn_id}",
                lambda: find_txn_coordinator(cluster, txn_id),
            ),
        ]
        for what, locate in roles:
            _kill_and_restart(cluster, locate, what, loop, arranged.spared)
            progressed(loop.commits + 5)
    finally:
        feeder.stop.set()
        feeder.join(90)
    assert not feeder.errors, feeder.errors[:3]
    sent = feeder.sent
    ends = {p: len(range(p, sent, PARTITIONS)) for p in range(PARTITIONS)}
    try:
        wait_until(
            "the loop to commit offsets through the end of the input",
            lambda: (
                loop.crashed is not None
                or group_offsets(cluster.bootstrap, group, inp, PARTITIONS) == ends
            ),
            timeout_s=90,
        )
    finally:
        loop.stop.set()
        loop.join(90)
    assert loop.crashed is None, f"the loop crashed: {loop.crashed!r}; events {loop.events[-5:]}"

    expected = [b"%07d" % i for i in range(sent)]
    seen = read_confluent(
        cluster.bootstrap, out, PARTITIONS, READ_COMMITTED, set(expected), timeout_s=60
    )
    got = sorted(s.value for s in seen)
    stats = (
        f"{loop.commits} commits, {loop.aborts} aborts, {loop.new_producers} producers, "
        f"{loop.new_consumers} consumers; events: {loop.events[-8:]}"
    )
    print(f"{sent} inputs; {stats}")  # shown with -s: what the loop went through
    missing = sorted(set(expected) - set(got))
    duplicates = len(got) - len(set(got))
    assert got == expected, (
        f"{len(missing)} missing (e.g. {missing[:5]}), {duplicates} duplicated; {stats}"
    )
    for p in range(PARTITIONS):
        in_order = [s.value for s in sorted(seen, key=lambda s: s.offset) if s.partition == p]
        assert in_order == sorted(in_order), f"output partition {p} is out of input order; {stats}"
