"""The executor's own Fetch client against a real one-broker Strandline cluster."""

from __future__ import annotations

import time

import pytest

from strandline.client.fetch_client import (
    FetchOffsetOutOfRangeError,
    PartitionClient,
    RetriableFetchError,
)
from strandline.spark.record_decoder import decode_records

from .kafka_helpers import consume_all, create_topic, produce, unique_topic


def test_fetched_batches_decode_to_what_a_consumer_reads(bootstrap: str) -> None:
    topic = unique_topic("fetch")
    create_topic(bootstrap, topic, partitions=2)
    produce(bootstrap, topic, partitions=2, count=20, headers=True)
    expected = [r for r in consume_all(bootstrap, topic, 2) if r[0] == 1]

    client = PartitionClient({"bootstrap.servers": bootstrap}, topic, 1)
    try:
        assert client.list_offsets() == (0, 10)
        fetched = client.fetch(3)
        assert fetched.high_watermark == 10 and fetched.log_start_offset == 0
        decoded = decode_records(fetched.records, topic, 1, 3, 10)
    finally:
        client.close()
    assert decoded.next_offset == 10
    rows = [row for batch in decoded.batches for row in batch.to_pylist()]
    assert [
        (
            r["partition"],
            r["offset"],
            r["key"],
            r["value"],
            [(h["key"], h["value"]) for h in r["headers"]],
        )
        for r in rows
    ] == [(p, o, k, v, h) for p, o, k, v, h in expected if o >= 3]


def test_offsets_outside_the_log_are_out_of_range(bootstrap: str) -> None:
    topic = unique_topic("range")
    create_topic(bootstrap, topic, partitions=1)
    produce(bootstrap, topic, partitions=1, count=3)
    client = PartitionClient({"bootstrap.servers": bootstrap, "fetch.wait.max.ms": "50"}, topic, 0)
    try:
        started = time.monotonic()
        at_end = client.fetch(3)  # the log end: nothing yet, after at most max wait
        assert at_end.records == b"" and time.monotonic() - started < 5
        with pytest.raises(FetchOffsetOutOfRangeError):
            client.fetch(4)
        # The client is still usable after a partition error.
        assert decode_records(client.fetch(0).records, topic, 0, 0, 3).next_offset == 3
    finally:
        client.close()


def test_an_unknown_partition_is_retriable(bootstrap: str) -> None:
    client = PartitionClient({"bootstrap.servers": bootstrap}, unique_topic("missing"), 0)
    with pytest.raises(RetriableFetchError, match="unknown_topic_or_partition"):
        client.fetch(0)
    client.close()


def test_an_unreachable_cluster_is_retriable() -> None:
    client = PartitionClient({"bootstrap.servers": "127.0.0.1:1"}, "t", 0, timeout_s=2)
    with pytest.raises(RetriableFetchError, match="no leader"):
        client.fetch(0)
    client.close()
