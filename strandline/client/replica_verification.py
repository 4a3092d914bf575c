"""kafka-replica-verification.sh over the network: every replica of a partition is
fetched from its own broker (Fetch with replica id -2, Kafka's debugging consumer, which
reads any replica up to that replica's HW) and the batches every replica has committed
are compared byte by byte. Works against any running cluster, not only a local data dir.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from strandline.client.admin import AdminClient, AdminError, AdminSettings, BlockingAdmin
from strandline.client.fetch_client import (
    BlockingConnection,
    FetchError,
    fetch_partition,
)
from strandline.protocol.record_batch import iter_batches
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
    bootstrap: str, topics: Iterable[str] | None = None, settings: AdminSettings | None = None
) -> list[ReplicaComparison]:
    """Compare, per partition, the batches below the smallest HW of its replicas, from
    the largest log start offset (retention runs on each replica by itself). Metadata and
    log starts come through the shared admin client, the replicas' fetches over
    connections with the same security settings."""
    settings = settings or AdminSettings("strandline-replica-verification", TIMEOUT_S)
    wanted = set(topics) if topics is not None else None
    with BlockingAdmin(bootstrap, settings) as admin:

        async def layout(client: AdminClient) -> tuple[Any, dict[TopicPartition, int]]:
            metadata = await client.metadata()
            # The leaders' log starts: a replica whose own start is later (its retention
            # ran first) answers out of range, reported as such.
            return metadata, await client.list_offsets(list(client.leaders), -2)

        try:
            metadata, log_starts = admin.do(layout)
        except AdminError as e:
            raise VerificationError(f"cannot read metadata from {bootstrap}: {e}") from e
        brokers = dict(admin.client.brokers)
    names = {str(t.name) for t in metadata.topics if t.error_code == 0}
    unknown = (wanted or set()) - names
    if unknown:
        raise VerificationError(f"unknown topic(s): {', '.join(sorted(unknown))}")
    connections: dict[int, BlockingConnection] = {}
    results = []
    try:
        for topic in sorted(metadata.topics, key=lambda t: str(t.name)):
            name = str(topic.name)
            if name not in names or (wanted is not None and name not in wanted):
                continue
            if name.startswith("__"):
                continue
            for partition in sorted(topic.partitions, key=lambda p: int(p.partition_index)):
                tp = TopicPartition(name, int(partition.partition_index))
                if tp not in log_starts:
                    raise VerificationError(f"{tp}: no leader answered its log start offset")
                reads: dict[int, ReplicaRead] = {}
                for replica in (int(r) for r in partition.replica_nodes):
                    if replica not in brokers:
                        raise VerificationError(f"{tp}: replica broker {replica} is not alive")
                    try:
                        if replica not in connections:
                            host, port = brokers[replica]
                            connections[replica] = BlockingConnection(
                                host, port, settings.client_id, TIMEOUT_S, settings.security
                            )
                        reads[replica] = read_replica(connections[replica], tp, log_starts[tp])
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
        for conn in connections.values():
            conn.close()
    return results
