"""One consumer-group member as its own process, so a test can SIGKILL it.

    python consumer_proc.py CLIENT BOOTSTRAP GROUP TOPIC OUT [DELAY_S]

CLIENT is confluent, kafka-python or aiokafka. Each line of OUT is a JSON event:
  {"a": [partitions]}   the member's assignment after a rebalance ([] on revoke)
  {"r": [p, offset]}    a record consumed
  {"c": [p, offset]}    a synchronous commit succeeded (offset = next to consume)
SIGTERM closes the consumer cleanly (it leaves the group). Commits are synchronous
after each polled batch, so "consumed twice past committed offsets" can be checked.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import sys
import time
from typing import Any, TextIO

SESSION_TIMEOUT_MS = 6000
HEARTBEAT_MS = 500

stopping = False


def _stop(*_: object) -> None:
    global stopping
    stopping = True


def emit(out: TextIO, kind: str, value: Any) -> None:
    out.write(json.dumps({kind: value}) + "\n")
    out.flush()


def run_confluent(bootstrap: str, group: str, topic: str, out: TextIO, delay: float) -> None:
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as TP

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": SESSION_TIMEOUT_MS,
            "heartbeat.interval.ms": HEARTBEAT_MS,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    consumer.subscribe(
        [topic],
        on_assign=lambda c, ps: emit(out, "a", sorted(p.partition for p in ps)),
        on_revoke=lambda c, ps: emit(out, "a", []),
    )
    while not stopping:
        messages = consumer.consume(num_messages=20, timeout=0.2)
        nexts: dict[int, int] = {}
        for m in messages:
            if m.error():
                continue
            partition, offset = m.partition(), m.offset()
            assert partition is not None and offset is not None
            emit(out, "r", [partition, offset])
            nexts[partition] = offset + 1
            time.sleep(delay)
        if nexts:
            try:
                consumer.commit(
                    offsets=[TP(topic, p, o) for p, o in nexts.items()], asynchronous=False
                )
            except Exception as e:  # noqa: BLE001 - a failed commit is reported, not fatal
                emit(out, "e", str(e))
                continue
            for p, o in nexts.items():
                emit(out, "c", [p, o])
    consumer.close()


def run_kafka_python(bootstrap: str, group: str, topic: str, out: TextIO, delay: float) -> None:
    from kafka import KafkaConsumer, OffsetAndMetadata
    from kafka import TopicPartition as TP
    from kafka.consumer.subscription_state import ConsumerRebalanceListener

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Any) -> None:
            emit(out, "a", [])

        def on_partitions_assigned(self, assigned: Any) -> None:
            emit(out, "a", sorted(p.partition for p in assigned))

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=HEARTBEAT_MS,
        max_poll_records=20,
    )
    # kafka-python 3.0.12 can strand a group leader: when the leader rejoins because the
    # topic's metadata arrived after its first (empty) assignment, and its JoinGroup +
    # SyncGroup outlast one poll(), its own new assignment clears the only reason it had
    # to rejoin, so later polls never collect the finished join. Heartbeats stay off, the
    # member is evicted and never returns. The leader's "metadata snapshot" of its
    # subscribed topics is rebuilt only when a Metadata response arrives *after*
    # subscribe(): knowing the topic beforehand is not enough (a leader assigned from an
    # empty snapshot and was stranded so in a parallel run). So: know the topic, subscribe,
    # then wait for one more Metadata response (`topics()` always asks) before joining.
    deadline = time.monotonic() + 30
    while not consumer.partitions_for_topic(topic):
        if time.monotonic() > deadline:
            raise SystemExit(f"no metadata for {topic}")
        time.sleep(0.05)
    consumer.subscribe([topic], listener=Listener())
    consumer.topics()
    while not stopping:
        polled = consumer.poll(timeout_ms=200)
        nexts: dict[int, int] = {}
        for tp, records in polled.items():
            for r in records:
                emit(out, "r", [tp.partition, r.offset])
                nexts[tp.partition] = r.offset + 1
                time.sleep(delay)
        if nexts:
            try:
                consumer.commit(
                    {TP(topic, p): OffsetAndMetadata(o, "", -1) for p, o in nexts.items()}
                )
            except Exception as e:  # noqa: BLE001
                emit(out, "e", str(e))
                continue
            for p, o in nexts.items():
                emit(out, "c", [p, o])
    consumer.close()


async def run_aiokafka(bootstrap: str, group: str, topic: str, out: TextIO, delay: float) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
    from aiokafka import TopicPartition as TP

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        async def on_partitions_revoked(self, revoked: Any) -> None:
            emit(out, "a", [])

        async def on_partitions_assigned(self, assigned: Any) -> None:
            emit(out, "a", sorted(p.partition for p in assigned))

    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=HEARTBEAT_MS,
    )
    consumer.subscribe([topic], listener=Listener())
    await consumer.start()
    try:
        while not stopping:
            polled = await consumer.getmany(timeout_ms=200, max_records=20)
            nexts: dict[int, int] = {}
            for tp, records in polled.items():
                for r in records:
                    emit(out, "r", [tp.partition, r.offset])
                    nexts[tp.partition] = r.offset + 1
                    await asyncio.sleep(delay)
            if nexts:
                try:
                    await consumer.commit({TP(topic, p): o for p, o in nexts.items()})
                except Exception as e:  # noqa: BLE001
                    emit(out, "e", str(e))
                    continue
                for p, o in nexts.items():
                    emit(out, "c", [p, o])
    finally:
        await consumer.stop()


def main() -> None:
    client, bootstrap, group, topic, out_path = sys.argv[1:6]
    delay = float(sys.argv[6]) if len(sys.argv) > 6 else 0.0
    signal.signal(signal.SIGTERM, _stop)
    # The member's stderr is kept next to its event file: the client's own account of
    # each rebalance is what explains a slow takeover.
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    with open(out_path, "a", buffering=1) as out:
        if client == "confluent":
            run_confluent(bootstrap, group, topic, out, delay)
        elif client == "kafka-python":
            run_kafka_python(bootstrap, group, topic, out, delay)
        elif client == "aiokafka":
            asyncio.run(run_aiokafka(bootstrap, group, topic, out, delay))
        else:
            raise SystemExit(f"unknown client {client!r}")
        emit(out, "closed", True)


if __name__ == "__main__":
    main()
