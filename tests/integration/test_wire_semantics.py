"""Kafka semantics no client library shows, checked with raw requests (kio) against
real brokers: more than one batch per partition in a Produce request, Fetch v12's
`last_fetched_epoch` (diverging_epoch) and DeleteRecords' `timeout_ms`."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.produce.v9 import request as produce_v9
from kio.schema.types import TopicName
from kio.static.primitive import Records, i16, i32, i32Timedelta

from . import wire
from .cluster_support import new_cluster
from .roundtrip_support import create_topic_confluent

ClusterFactory = Callable[..., Any]


def _topic() -> str:
    return f"wire-{uuid.uuid4().hex[:8]}"


# --- Produce: exactly one batch per partition (v3+) ----------------------------------


def test_two_batches_for_one_partition_are_invalid_record(
    cluster_factory: ClusterFactory,
) -> None:
    bootstrap = new_cluster(cluster_factory).bootstrap
    topic = _topic()
    create_topic_confluent(bootstrap, topic, partitions=2)
    request = produce_v9.ProduceRequest(
        transactional_id=None,
        acks=i16(1),
        timeout=i32Timedelta.parse(timedelta(seconds=5)),
        topic_data=(
            produce_v9.TopicProduceData(
                name=TopicName(topic),
                partition_data=(
                    produce_v9.PartitionProduceData(
                        index=i32(0),
                        records=Records(wire.batch([b"a1", b"a2"]) + wire.batch([b"b1"])),
                    ),
                    produce_v9.PartitionProduceData(
                        index=i32(1), records=Records(wire.batch([b"c1", b"c2"]))
                    ),
                ),
            ),
        ),
    )
    with wire.WireClient(bootstrap) as client:
        response = client.request(request)
        by_index = {p.index: p for p in response.responses[0].partition_responses}
        assert by_index[0].error_code == ErrorCode.invalid_record
        assert "exactly one record batch" in (by_index[0].error_message or "")
        assert by_index[1].error_code == ErrorCode.none
        assert by_index[1].base_offset == 0
        # Nothing of partition 0 was appended; partition 1 has its two records.
        fetched = client.request(wire.fetch_many(topic, {0: 0, 1: 0}))
        hws = {p.partition_index: p.high_watermark for p in fetched.responses[0].partitions}
        assert hws == {0: 0, 1: 2}
        # One batch is still welcome on partition 0.
        one = client.request(wire.produce(topic, 0, wire.batch([b"d1"])))
        assert wire.produce_error(one) == ErrorCode.none
