"""read_committed on synthetic fetches: records of aborted transactions and control
batches are dropped as Kafka's consumers drop them (AbortedTransactions), committed
transactions and plain batches pass. Plus the options of the isolation level and of
the exactly-once sink."""

from __future__ import annotations

import struct

import crc32c
import pytest

from strandline.spark.options import OptionError, SinkOptions, SourceOptions
from strandline.spark.record_decoder import (
    CONTROL_ABORT,
    CONTROL_BIT,
    CONTROL_COMMIT,
    CRC_COVERS_FROM,
    AbortedTransactions,
    decode_records,
)
from strandline.spark.sink import MarkerAheadError, already_written, transactional_id

from .record_batches import GZIP, NONE, T0, build_batch

TOPIC, PARTITION = "t", 0
ATTRIBUTES_AT = 21


def txn_batch(producer_id: int, base_offset: int, values: list[bytes], codec: int = NONE) -> bytes:
    """A transactional batch of `producer_id` (kafka-python's builder, then patched)."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(2, codec, True, producer_id, 0, 0, 1 << 20)
    for i, value in enumerate(values):
        builder.append(i, T0, None, value, [])
    data = bytearray(builder.build())
    struct.pack_into(">q", data, 0, base_offset)
    return bytes(data)


def marker(producer_id: int, offset: int, kind: int) -> bytes:
    """A control batch: key int16 version + int16 type, value version + coordinator epoch."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(2, NONE, True, producer_id, 0, -1, 1 << 20)
    builder.append(0, T0, struct.pack(">hh", 0, kind), struct.pack(">hi", 0, 3), [])
    data = bytearray(builder.build())
    struct.pack_into(">q", data, 0, offset)
    (attributes,) = struct.unpack_from(">h", data, ATTRIBUTES_AT)
    struct.pack_into(">h", data, ATTRIBUTES_AT, attributes | CONTROL_BIT)
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[CRC_COVERS_FROM:])))
    return bytes(data)


def plain(base_offset: int, values: list[bytes]) -> bytes:
    return build_batch([(T0, None, v, []) for v in values], base_offset=base_offset)


def values(data: bytes, aborted: list[tuple[int, int]] | None, start: int = 0) -> list[bytes]:
    filt = AbortedTransactions(aborted) if aborted is not None else None
    decoded = decode_records(data, TOPIC, PARTITION, start, 1 << 40, aborted=filt)
    return [v for b in decoded.batches for v in b.column("value").to_pylist()]


def test_interleaved_transactions_drop_only_the_aborted_one() -> None:
    # Producer 7 aborts [0..1] + [4], producer 9 commits [2..3]; a plain batch follows.
    data = b"".join(
        [
            txn_batch(7, 0, [b"a0", b"a1"]),
            txn_batch(9, 2, [b"c2", b"c3"]),
            txn_batch(7, 4, [b"a4"]),
            marker(9, 5, CONTROL_COMMIT),
            marker(7, 6, CONTROL_ABORT),
            plain(7, [b"p7"]),
        ]
    )
    assert values(data, [(7, 0)]) == [b"c2", b"c3", b"p7"]
    # read_uncommitted keeps every data record; control batches never show.
    assert values(data, None) == [b"a0", b"a1", b"c2", b"c3", b"a4", b"p7"]


def test_a_producer_aborted_then_committing_keeps_its_next_transaction() -> None:
    # Same producer: aborted txn at 0, its marker at 2, then a committed txn at 3.
    data = b"".join(
        [
            txn_batch(5, 0, [b"x0", b"x1"]),
            marker(5, 2, CONTROL_ABORT),
            txn_batch(5, 3, [b"y3"]),
            marker(5, 4, CONTROL_COMMIT),
        ]
    )
    assert values(data, [(5, 0)]) == [b"y3"]


def test_an_aborted_transaction_begun_before_the_fetch_offset() -> None:
    # The fetch starts mid-transaction (first offset 10 < 12): the rest is still dropped,
    # and the abort list may name transactions that are not in this response at all.
    data = b"".join(
        [
            txn_batch(3, 12, [b"z12", b"z13"]),
            marker(3, 14, CONTROL_ABORT),
            plain(15, [b"p15"]),
        ]
    )
    assert values(data, [(3, 10), (99, 1)], start=12) == [b"p15"]


def test_an_abort_listed_later_does_not_drop_earlier_batches() -> None:
    # Producer 4 committed [0], then began a transaction at 2 that was aborted: only
    # batches from offset 2 on are dropped.
    data = b"".join(
        [
            txn_batch(4, 0, [b"ok0"]),
            marker(4, 1, CONTROL_COMMIT),
            txn_batch(4, 2, [b"no2"]),
            marker(4, 3, CONTROL_ABORT),
        ]
    )
    assert values(data, [(4, 2)]) == [b"ok0"]


def test_next_offset_moves_past_dropped_batches() -> None:
    data = txn_batch(1, 0, [b"a", b"b"]) + marker(1, 2, CONTROL_ABORT)
    decoded = decode_records(data, TOPIC, PARTITION, 0, 100, aborted=AbortedTransactions([(1, 0)]))
    assert decoded.batches == []
    assert decoded.next_offset == 3


def test_filter_state_machine() -> None:
    f = AbortedTransactions([(2, 5), (1, 0)])
    assert not f.drops(-1, 0, False, False)  # no producer id: never dropped
    assert f.drops(1, 1, True, False)
    assert not f.drops(2, 4, True, False)  # before producer 2's aborted first offset
    assert f.drops(2, 6, True, False)
    assert not f.drops(1, 7, False, False)  # idempotent, not transactional
    assert not f.drops(1, 8, True, True)  # the abort marker ends producer 1's
    assert not f.drops(1, 9, True, False)
    assert f.drops(2, 10, True, False)


def test_compressed_aborted_batches_are_dropped_too() -> None:

    data = txn_batch(6, 0, [b"g0", b"g1"], codec=GZIP) + marker(6, 2, CONTROL_ABORT)
    data += plain(3, [b"p3"])
    assert values(data, [(6, 0)]) == [b"p3"]


def test_isolation_level_option_defaults_to_read_committed() -> None:
    base = {"bootstrap.servers": "b:9092", "subscribe": "t"}
    default = SourceOptions.parse(base, streaming=True)
    assert default.read_committed
    assert default.kafka_config["isolation.level"] == "read_committed"
    uncommitted = SourceOptions.parse(
        {**base, "kafka.isolation.level": "READ_UNCOMMITTED"}, streaming=False
    )
    assert not uncommitted.read_committed
    with pytest.raises(OptionError, match="isolation.level"):
        SourceOptions.parse({**base, "kafka.isolation.level": "serializable"}, streaming=True)


def test_exactly_once_sink_options() -> None:
    base = {"bootstrap.servers": "b:9092", "topic": "out"}
    assert not SinkOptions.parse(base).exactly_once
    options = SinkOptions.parse(
        {**base, "exactlyOnce": "true", "transactionalIdPrefix": "job", "batchId": "7"}
    )
    assert (options.exactly_once, options.transactional_id_prefix, options.batch_id) == (
        True,
        "job",
        7,
    )
    with pytest.raises(OptionError, match="topic"):
        SinkOptions.parse({"bootstrap.servers": "b:9092", "exactlyOnce": "true"})
    with pytest.raises(OptionError, match="batchId"):
        SinkOptions.parse({**base, "batchId": "-1"})


def test_a_batch_marker_past_the_batch_means_written() -> None:
    # The marker is the next micro-batch to write; librdkafka's "none" is -1001.
    assert not already_written(-1001, 0)
    assert not already_written(3, 3)
    assert already_written(4, 3)
    with pytest.raises(MarkerAheadError, match="transactionalIdPrefix"):
        already_written(9, 3)  # another query's marker: never skip on it
    assert transactional_id("job", 2) == "job-2"
