"""kafka-replica-verification.sh over the network: every replica of a partition is
fetched from its own broker (Fetch with replica id -2, Kafka's debugging consumer, which
reads any replica up to that replica's HW) and the batches every replica has committed
are compared byte by byte. Works against any running cluster, not only a local data dir.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient

from strandline.protocol.record_batch import iter_batches
from strandline.spark.fetch_client import (
    BlockingConnection,
    FetchError,
    fetch_partition,
)
from strandline.storage.replica_verify import ReplicaComparison, compare_contents
from strandline.types import DEBUGGING_REPLICA_ID, TopicPartition

FETCH_BYTES = 4 * 1024 * 1024
TIMEOUT_S = 15.0


class VerificationError(RuntimeError):
    """The cluster could not be read (reported as one line)."""


@dataclass(frozen=True)
class ReplicaRead:
    high_watermark: int
    log_start_offset: int
    batches: bytes  # whole batches from the start, as far as this replica's HW


def read_replica(conn: BlockingConnection, tp: TopicPartition, start: int) -> ReplicaRead:
    """Every batch of one replica from `start` to its own HW."""
    out = bytearray()
    offset, hw, log_start = start, -1, -1
    while True:
        fetched = fetch_partition(
            conn,
            tp.topic,
            tp.partition,
            offset,
            partition_max_bytes=FETCH_BYTES,
            fetch_max_bytes=FETCH_BYTES,
            replica_id=DEBUGGING_REPLICA_ID,
        )
        hw, log_start = fetched.high_watermark, fetched.log_start_offset
        data = fetched.records
        progressed = False
        for header in iter_batches(data, verify_crc=False):
            if header.next_offset <= offset:
                continue  # the batch holding `offset` came back whole: seen already
            out += data[header.position : header.position + header.size]
            offset = header.next_offset
            progressed = True
        if not progressed or offset >= hw:
            return ReplicaRead(hw, log_start, bytes(out))


def _below(batches: bytes, start: int, below: int) -> bytes:
    out = bytearray()
    for header in iter_batches(batches, verify_crc=False):
        if header.base_offset >= start and header.next_offset <= below:
            out += batches[header.position : header.position + header.size]
    return bytes(out)


def verify(
    bootstrap: str, topics: Iterable[str] | None = None, client_config: dict[str, str] | None = None
) -> list[ReplicaComparison]:
    """Compare, per partition, the batches below the smallest HW of its replicas, from
    the largest log start offset (retention runs on each replica by itself)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **(client_config or {})})
    try:
        metadata = admin.list_topics(timeout=TIMEOUT_S)
    except Exception as e:  # noqa: BLE001 - librdkafka's KafkaException, any transport error
        raise VerificationError(f"cannot read metadata from {bootstrap}: {e}") from e
    wanted = set(topics) if topics is not None else None
    unknown = (wanted or set()) - set(metadata.topics)
    if unknown:
        raise VerificationError(f"unknown topic(s): {', '.join(sorted(unknown))}")
    brokers = {b.id: (str(b.host), int(b.port)) for b in metadata.brokers.values()}
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "strandline-replica-verification"}
        | (client_config or {})
    )
    connections: dict[int, BlockingConnection] = {}
    results = []
    try:
        for name, topic in sorted(metadata.topics.items()):
            if (wanted is not None and name not in wanted) or name.startswith("__"):
                continue
            for partition in sorted(topic.partitions.values(), key=lambda p: p.id):
                tp = TopicPartition(name, partition.id)
                # The leader's log start: a replica whose own start is later (its
                # retention ran first) answers out of range, reported as such.
                low, _high = consumer.get_watermark_offsets(
                    CkTopicPartition(name, partition.id), timeout=TIMEOUT_S
                )
                reads: dict[int, ReplicaRead] = {}
                for replica in partition.replicas:
                    if replica not in brokers:
                        raise VerificationError(f"{tp}: replica broker {replica} is not alive")
                    try:
                        if replica not in connections:
                            host, port = brokers[replica]
                            connections[replica] = BlockingConnection(
                                host, port, "strandline-replica-verification", TIMEOUT_S
                            )
                        reads[replica] = read_replica(connections[replica], tp, low)
                    except FetchError as e:
                        raise VerificationError(f"{tp} on broker {replica}: {e}") from e
                start = max(r.log_start_offset for r in reads.values())
                below = min(r.high_watermark for r in reads.values())
                results.append(
                    compare_contents(
                        tp, {b: _below(r.batches, start, below) for b, r in reads.items()}, below
                    )
                )
    finally:
        consumer.close()
        for conn in connections.values():
            conn.close()
    return results
