"""The hand-written Produce codec is kio's, byte for byte (kio is the oracle).

Requests: kio writes a random request of each version; kio and `decode_produce_request`
read it back to the same values. Responses: `encode_produce_response` writes the bytes
`codec.encode_response` writes for the kio response the produce handler builds from the
same outcome. Malformed requests: a ProtocolError, never another exception, and never
an accept where kio refuses.
"""

from __future__ import annotations

import datetime
import importlib
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from strandline.protocol.codec import RequestHeader, decode_request, encode_request, parse_header
from strandline.protocol.codec import encode_response as kio_encode_response
from strandline.protocol.framing import ProtocolError
from strandline.protocol.messages import build, response_class
from strandline.protocol.produce_codec import (
    ProducePartitionResult,
    ProduceTopicResult,
    decode_produce_request,
    encode_produce_response,
)

VERSIONS = range(3, 10)
EXAMPLES = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])

i16 = st.integers(-(2**15), 2**15 - 1)
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
names = st.text(max_size=12)  # unicode, empty included
nullable_names = st.none() | names
records = st.none() | st.binary(max_size=200)
client_ids = st.none() | st.text(max_size=8)


def _as_datetime(ms: int) -> datetime.datetime | None:
    """kio's log_append_time for what the handler answers in ms (-1: none)."""
    if ms < 0:
        return None
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)


def request_module(version: int) -> Any:
    return importlib.import_module(f"kio.schema.produce.v{version}.request")


@st.composite
def produce_requests(draw: st.DrawFn, version: int) -> Any:
    m = request_module(version)
    topics = draw(
        st.lists(
            st.tuples(names, st.lists(st.tuples(i32, records), max_size=6)),
            max_size=5,
        )
    )
    return m.ProduceRequest(
        transactional_id=draw(nullable_names),
        acks=draw(i16),
        timeout=datetime.timedelta(milliseconds=draw(i32)),
        topic_data=tuple(
            m.TopicProduceData(
                name=name,
                partition_data=tuple(
                    m.PartitionProduceData(index=i, records=r) for i, r in partitions
                ),
            )
            for name, partitions in topics
        ),
    )


def frame_of(request: Any, client_id: str | None = "producer") -> tuple[RequestHeader, bytes, int]:
    frame = encode_request(11, client_id, request)[4:]
    header, pos = parse_header(frame)
    return header, frame, pos


def values(request: Any) -> tuple[Any, ...]:
    """What the produce handler reads, from kio's object or ours."""
    return (
        request.transactional_id,
        request.acks,
        request.timeout,
        [(t.name, [(p.index, p.records) for p in t.partition_data]) for t in request.topic_data],
    )


@pytest.mark.parametrize("version", VERSIONS)
@EXAMPLES
@given(data=st.data())
def test_request_decodes_as_kio_reads_it(version: int, data: st.DataObject) -> None:
    request = data.draw(produce_requests(version))
    header, frame, pos = frame_of(request, data.draw(client_ids))
    ours = decode_produce_request(version, frame, pos)
    assert values(ours) == values(decode_request(header, frame, pos)) == values(request)
    for topic in ours.topic_data:
        for p in topic.partition_data:
            assert p.records is None or type(p.records) is bytes


@pytest.mark.parametrize("version", VERSIONS)
def test_request_with_many_partitions(version: int) -> None:
    m = request_module(version)
    request = m.ProduceRequest(
        transactional_id="tx-\u00e9",
        acks=-1,
        timeout=datetime.timedelta(seconds=30),
        topic_data=tuple(
            m.TopicProduceData(
                name=f"topic-{t}",
                partition_data=tuple(
                    m.PartitionProduceData(index=p, records=bytes([p % 256]) * (p % 300))
                    for p in range(500)
                ),
            )
            for t in range(3)
        ),
    )
    header, frame, pos = frame_of(request)
    ours = decode_produce_request(version, frame, pos)
    assert values(ours) == values(decode_request(header, frame, pos))
    assert sum(len(t.partition_data) for t in ours.topic_data) == 1500


# --- response -----------------------------------------------------------------------

# The produce handler's log_append_time is -1 or a time a datetime can hold.
append_times = st.just(-1) | st.integers(0, 253_402_300_799_000)
error_codes = st.sampled_from(list(ErrorCode))
record_errors = st.lists(st.tuples(i32, st.none() | st.text(max_size=20)), max_size=4)
partition_results = st.tuples(
    i32, error_codes, i64, append_times, i64, st.none() | st.text(max_size=40), record_errors
)
topic_results = st.lists(st.tuples(names, st.lists(partition_results, max_size=6)), max_size=5)


def kio_response(version: int, topics: list[ProduceTopicResult], throttle_ms: int) -> Any:
    """The kio ProduceResponse the produce handler (apis/produce.py) builds."""

    def cls(name: str) -> type:
        return response_class(0, version, name)

    return build(
        cls("ProduceResponse"),
        throttle_time=datetime.timedelta(milliseconds=throttle_ms),
        responses=tuple(
            build(
                cls("TopicProduceResponse"),
                name=name,
                partition_responses=tuple(
                    build(
                        cls("PartitionProduceResponse"),
                        index=index,
                        error_code=ErrorCode(error),
                        base_offset=base,
                        log_append_time=_as_datetime(append_time),
                        log_start_offset=start,
                        record_errors=tuple(
                            build(
                                cls("BatchIndexAndErrorMessage"),
                                batch_index=batch_index,
                                batch_index_error_message=batch_message,
                            )
                            for batch_index, batch_message in errors
                        )
                        if version >= 8  # record_errors: KIP-467, v8+
                        else (),
                        error_message=message,
                    )
                    for index, error, base, append_time, start, message, errors in partitions
                ),
            )
            for name, partitions in topics
        ),
    )


@pytest.mark.parametrize("version", VERSIONS)
@EXAMPLES
@given(topics=topic_results, throttle_ms=st.integers(0, 2**31 - 1), correlation_id=i32)
def test_response_is_kio_bytes(
    version: int, topics: list[ProduceTopicResult], throttle_ms: int, correlation_id: int
) -> None:
    ours = encode_produce_response(version, correlation_id, topics, throttle_ms)
    oracle = b"".join(
        kio_encode_response(correlation_id, kio_response(version, topics, throttle_ms))
    )
    assert type(ours) is bytes
    assert ours == oracle


@pytest.mark.parametrize("version", VERSIONS)
def test_response_with_many_partitions(version: int) -> None:
    partitions: list[ProducePartitionResult] = [
        (
            p,
            0,
            p * 10,
            -1 if p % 2 else 1_700_000_000_000 + p,
            0,
            None if p % 3 else "e",
            [] if p % 5 else [(p, None), (p + 1, "no key")],
        )
        for p in range(1000)
    ]
    topics: list[ProduceTopicResult] = [("big", partitions), ("", []), ("\u00fc", partitions[:3])]
    oracle = b"".join(kio_encode_response(3, kio_response(version, topics, 0)))
    assert encode_produce_response(version, 3, topics) == oracle


# --- malformed requests -------------------------------------------------------------


def sample_frame(version: int) -> tuple[RequestHeader, bytes, int]:
    m = request_module(version)
    request = m.ProduceRequest(
        transactional_id="tx",
        acks=1,
        timeout=datetime.timedelta(seconds=1),
        topic_data=(
            m.TopicProduceData(
                name="t",
                partition_data=(
                    m.PartitionProduceData(index=0, records=b"batch"),
                    m.PartitionProduceData(index=1, records=None),
                ),
            ),
        ),
    )
    return frame_of(request)


@pytest.mark.parametrize("version", VERSIONS)
def test_every_truncation_is_a_protocol_error(version: int) -> None:
    header, frame, pos = sample_frame(version)
    for end in range(pos, len(frame)):
        with pytest.raises(
            ProtocolError, match=f"ProduceRequest v{version}|past the end|request header"
        ):
            decode_produce_request(version, frame[:end], pos)
        with pytest.raises(ProtocolError):  # kio refuses it too
            decode_request(header, frame[:end], pos)


def test_negative_lengths_and_nulls_are_refused() -> None:
    _header, frame, pos = sample_frame(3)
    body = bytearray(frame)
    # transactional_id "tx" -> length -2
    body[pos : pos + 2] = b"\xff\xfe"
    with pytest.raises(ProtocolError, match="transactional_id has negative length -2"):
        decode_produce_request(3, bytes(body), pos)
    # records of partition 0: length "5" -> -3
    at = frame.index(b"\x00\x00\x00\x05batch")
    body = bytearray(frame)
    body[at : at + 4] = b"\xff\xff\xff\xfd"
    with pytest.raises(ProtocolError, match="records of partition 0 has negative length -3"):
        decode_produce_request(3, bytes(body), pos)
    # topic name null (kio refuses it as well)
    at = frame.index(b"\x00\x01t")
    body = bytearray(frame)
    body[at : at + 2] = b"\xff\xff"
    with pytest.raises(ProtocolError, match="topic name is null"):
        decode_produce_request(3, bytes(body), pos)
    # topic_data null: kio reads None, Kafka (and we) refuse it
    at = pos + 2 + 2 + 2 + 4
    body = bytearray(frame[:at]) + b"\xff\xff\xff\xff"
    with pytest.raises(ProtocolError, match="topic_data is null"):
        decode_produce_request(3, bytes(body), pos)
    # a name that is not UTF-8
    at = frame.index(b"\x00\x01t")
    body = bytearray(frame)
    body[at + 2] = 0xFF
    with pytest.raises(ProtocolError, match="UnicodeDecodeError"):
        decode_produce_request(3, bytes(body), pos)


def test_flexible_null_array_and_bad_varint_are_refused() -> None:
    _header, frame, pos = sample_frame(9)
    body_at = pos + 1  # after the header's (empty) tagged fields
    # transactional_id "tx" is 0x03 't' 'x'; acks, timeout follow; then topic_data.
    topics_at = body_at + 3 + 2 + 4
    with pytest.raises(ProtocolError, match="topic_data is null"):
        decode_produce_request(9, frame[:topics_at] + b"\x00" + frame[topics_at + 1 :], pos)
    with pytest.raises(ProtocolError, match="varint longer than 5 bytes"):
        decode_produce_request(9, frame[:body_at] + b"\xff" * 6 + frame[body_at + 1 :], pos)


@pytest.mark.parametrize("version", [3, 8, 9])
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_corrupted_requests_fail_cleanly(version: int, data: st.DataObject) -> None:
    """Differential fuzzing: overwrite a few bytes of a valid request. Ours raises only
    ProtocolError, and what it accepts kio reads to the same values. kio is asked only
    about what ours accepts: kio 0.6.5's native reader aborts the whole process (a Rust
    allocation failure, not an exception) on a compact array count larger than the
    bytes that follow. Where kio refuses an unknown tagged field, ours skips it, as
    KIP-482 (and Kafka) says."""
    header, frame, pos = sample_frame(version)
    body = bytearray(frame)
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(pos, len(body) - 1))
        body[at] = data.draw(st.integers(0, 255))
    corrupted = bytes(body)
    try:
        ours = decode_produce_request(version, corrupted, pos)
    except ProtocolError:
        return
    try:
        oracle = decode_request(header, corrupted, pos)
    except ProtocolError as e:
        # Unknown tagged fields are skipped, as KIP-482 (and Kafka) says; kio refuses them.
        assert "Unknown tagged field" in str(e)
        return
    assert values(ours) == values(oracle)


def test_huge_array_count_is_refused_without_allocating() -> None:
    """The request that makes kio 0.6.5 abort the process (it reserves memory for the
    count it read): a topic_data count of 2**32 - 2 followed by nothing."""
    _header, frame, pos = sample_frame(9)
    topics_at = pos + 1 + 3 + 2 + 4
    with pytest.raises(ProtocolError, match="IndexError"):
        decode_produce_request(9, frame[:topics_at] + b"\xff\xff\xff\xff\x0f", pos)
