"""The hand-written Fetch codec is kio's, byte for byte (kio is the oracle).

Broker side: random requests of v4-12 written by kio are read to the same values; random
responses of v4-12 are written to kio's bytes, and with records left in a file to the
chunks `fetch_response.encode_chunked_response` makes. Follower side: the v12 request is
kio's bytes, and a v12 response kio writes (tagged fields included) is read to the
values `connection.decode_response` reads. Malformed input: a ProtocolError only.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from strandline.client.connection import decode_response
from strandline.protocol.codec import (
    RequestHeader,
    decode_request,
    encode_request,
    encode_response,
    parse_header,
    response_type,
)
from strandline.protocol.fetch_codec import (
    FetchPartitionResult,
    FetchTopicRequest,
    FetchTopicResult,
    ForgottenTopicRequest,
    decode_fetch_request,
    decode_fetch_response_v12,
    encode_fetch_request_v12,
    encode_fetch_response,
)
from strandline.protocol.fetch_response import Chunk, encode_chunked_response
from strandline.protocol.file_region import FileRegion
from strandline.protocol.framing import ProtocolError
from strandline.protocol.messages import build, request_module, response_class

FETCH = 1
VERSIONS = range(4, 13)
EXAMPLES = settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

i8 = st.integers(-(2**7), 2**7 - 1)
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
names = st.text(max_size=12)
records = st.none() | st.binary(max_size=200)
error_codes = st.sampled_from(list(ErrorCode))


def assert_same(oracle: Any, ours: Any, ignore: frozenset[str] = frozenset()) -> None:
    """Every field of kio's object, recursively, has the same value in ours."""
    for field in dataclasses.fields(oracle):
        if field.name in ignore:
            continue
        expected, got = getattr(oracle, field.name), getattr(ours, field.name)
        if isinstance(expected, tuple) and expected and dataclasses.is_dataclass(expected[0]):
            assert len(got) == len(expected), field.name
            for a, b in zip(expected, got, strict=True):
                assert_same(a, b, ignore)
        elif isinstance(expected, tuple):
            assert tuple(got) == expected, field.name
        else:
            assert got == expected, (field.name, expected, got)


# --- broker: request decoder ------------------------------------------------------


@st.composite
def fetch_requests(draw: st.DrawFn, version: int) -> Any:
    m = request_module(FETCH, version)
    partitions = st.builds(
        lambda *v: build(
            m.FetchPartition,
            partition=v[0],
            current_leader_epoch=v[1],
            fetch_offset=v[2],
            last_fetched_epoch=v[3],
            log_start_offset=v[4],
            partition_max_bytes=v[5],
        ),
        i32,
        i32,
        i64,
        i32,
        i64,
        i32,
    )
    topics = st.builds(
        lambda t, ps: m.FetchTopic(topic=t, partitions=tuple(ps)),
        names,
        st.lists(partitions, max_size=6),
    )
    values: dict[str, Any] = {
        "replica_id": draw(i32),
        "max_wait": datetime.timedelta(milliseconds=draw(i32)),
        "min_bytes": draw(i32),
        "max_bytes": draw(i32),
        "isolation_level": draw(i8),
        "session_id": draw(i32),
        "session_epoch": draw(i32),
        "topics": tuple(draw(st.lists(topics, max_size=5))),
        "rack_id": draw(names),
        "cluster_id": draw(st.none() | names),
    }
    if version >= 7:
        values["forgotten_topics_data"] = tuple(
            m.ForgottenTopic(topic=t, partitions=tuple(ps))
            for t, ps in draw(st.lists(st.tuples(names, st.lists(i32, max_size=5)), max_size=3))
        )
    return build(m.FetchRequest, **values)


def frame_of(request: Any, client_id: str | None = "fetcher") -> tuple[RequestHeader, bytes, int]:
    frame = encode_request(5, client_id, request)[4:]
    header, pos = parse_header(frame)
    return header, frame, pos


@pytest.mark.parametrize("version", VERSIONS)
@EXAMPLES
@given(data=st.data())
def test_request_decodes_as_kio_reads_it(version: int, data: st.DataObject) -> None:
    request = data.draw(fetch_requests(version))
    header, frame, pos = frame_of(request, data.draw(st.none() | names))
    oracle = decode_request(header, frame, pos)
    ours = decode_fetch_request(version, frame, pos)
    assert_same(oracle, ours)
    assert_same(request, ours)
    # Fields the version lacks hold the defaults the fetch handler assumes.
    if version < 7:
        assert (ours.session_id, ours.session_epoch, ours.forgotten_topics_data) == (0, -1, [])
    if version < 11:
        assert ours.rack_id == ""
    if version < 12:
        assert ours.cluster_id is None
    for t in ours.topics:
        for p in t.partitions:
            if version < 5:
                assert p.log_start_offset == -1
            if version < 9:
                assert p.current_leader_epoch == -1
            if version < 12:
                assert p.last_fetched_epoch == -1


@pytest.mark.parametrize("version", [4, 7, 12])
def test_request_with_many_partitions(version: int) -> None:
    m = request_module(FETCH, version)
    request = build(
        m.FetchRequest,
        replica_id=2,
        max_wait=datetime.timedelta(milliseconds=500),
        min_bytes=1,
        max_bytes=10 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=tuple(
            m.FetchTopic(
                topic=f"t{t}",
                partitions=tuple(
                    build(
                        m.FetchPartition,
                        partition=p,
                        current_leader_epoch=3,
                        fetch_offset=p * 1000,
                        last_fetched_epoch=2,
                        log_start_offset=0,
                        partition_max_bytes=1 << 20,
                    )
                    for p in range(400)
                ),
            )
            for t in range(5)
        ),
        forgotten_topics_data=(m.ForgottenTopic(topic="gone", partitions=tuple(range(300))),)
        if version >= 7
        else (),
        rack_id="",
    )
    header, frame, pos = frame_of(request)
    ours = decode_fetch_request(version, frame, pos)
    assert_same(decode_request(header, frame, pos), ours)
    assert sum(len(t.partitions) for t in ours.topics) == 2000


def test_v12_partitions_with_unknown_tagged_fields_are_read() -> None:
    """A partition carrying a tagged field leaves the 33-byte array fast path; the tag
    is skipped (KIP-482) and every partition still read."""
    m = request_module(FETCH, 12)
    partitions = tuple(
        m.FetchPartition(
            partition=p,
            current_leader_epoch=1,
            fetch_offset=100 + p,
            last_fetched_epoch=0,
            log_start_offset=0,
            partition_max_bytes=1 << 20,
        )
        for p in range(3)
    )
    request = build(
        m.FetchRequest,
        replica_id=1,
        max_wait=datetime.timedelta(milliseconds=500),
        min_bytes=1,
        max_bytes=1000,
        topics=(m.FetchTopic(topic="t", partitions=partitions),),
        forgotten_topics_data=(),
        rack_id="",
    )
    _header, frame, pos = frame_of(request)
    first_tags = frame.index(b"\x02t\x04") + 3 + 32  # the first partition's tag section
    assert frame[first_tags] == 0
    tagged = frame[:first_tags] + b"\x01\x05\x02xx" + frame[first_tags + 1 :]
    ours = decode_fetch_request(12, tagged, pos)
    assert_same(request, ours)


# --- broker: response encoder -----------------------------------------------------

aborted_lists = st.none() | st.lists(st.tuples(i64, i64), max_size=3)
partition_results = st.tuples(i32, error_codes, i64, i64, i64, aborted_lists, records)
topic_results = st.lists(st.tuples(names, st.lists(partition_results, max_size=6)), max_size=5)


def kio_response(
    version: int,
    topics: Sequence[FetchTopicResult],
    error_code: int,
    session_id: int,
    throttle_ms: int,
    diverging: Mapping[tuple[str, int], tuple[int, int]] | None = None,
) -> Any:
    """The kio FetchResponse the fetch handler (apis/fetch.py) builds."""

    def cls(name: str) -> type:
        return response_class(FETCH, version, name)

    def tagged(name: str, index: int) -> dict[str, Any]:
        div = (diverging or {}).get((name, index))
        if div is None:
            return {}
        return {"diverging_epoch": cls("EpochEndOffset")(epoch=div[0], end_offset=div[1])}

    return build(
        cls("FetchResponse"),
        throttle_time=datetime.timedelta(milliseconds=throttle_ms),
        error_code=ErrorCode(error_code),
        session_id=session_id,
        responses=tuple(
            build(
                cls("FetchableTopicResponse"),
                topic=name,
                partitions=tuple(
                    build(
                        cls("PartitionData"),
                        partition_index=index,
                        error_code=ErrorCode(error),
                        high_watermark=hw,
                        last_stable_offset=lso,
                        log_start_offset=start,
                        aborted_transactions=None
                        if aborted is None
                        else tuple(
                            cls("AbortedTransaction")(producer_id=pid, first_offset=first)
                            for pid, first in aborted
                        ),
                        preferred_read_replica=-1,
                        records=r,
                        **tagged(name, index),
                    )
                    for index, error, hw, lso, start, aborted, r in partitions
                ),
            )
            for name, partitions in topics
        ),
    )


def joined(chunks: list[Chunk]) -> bytes:
    return b"".join(c.read() if isinstance(c, FileRegion) else bytes(c) for c in chunks)


@pytest.mark.parametrize("version", VERSIONS)
@EXAMPLES
@given(
    topics=topic_results,
    error_code=error_codes,
    session_id=i32,
    throttle_ms=st.integers(0, 2**31 - 1),
    correlation_id=i32,
)
def test_response_is_kio_bytes(
    version: int,
    topics: list[FetchTopicResult],
    error_code: int,
    session_id: int,
    throttle_ms: int,
    correlation_id: int,
) -> None:
    ours = encode_fetch_response(
        version,
        correlation_id,
        topics,
        error_code=error_code,
        session_id=session_id,
        throttle_ms=throttle_ms,
    )
    oracle = b"".join(
        encode_response(
            correlation_id, kio_response(version, topics, error_code, session_id, throttle_ms)
        )
    )
    assert len(ours) == 1  # no regions: one chunk, as encode_chunked_response makes
    assert joined(ours) == oracle


@EXAMPLES
@given(
    topics=topic_results, picks=st.lists(st.booleans(), min_size=40, max_size=40), data=st.data()
)
def test_v12_response_with_diverging_epochs_is_kio_bytes(
    topics: list[FetchTopicResult], picks: list[bool], data: st.DataObject
) -> None:
    """diverging_epoch (v12's tagged field 0) is written as kio writes it, on any kind
    of partition (records, none, aborted transactions); the follower reads past it."""
    chosen = iter(picks * 10)
    diverging = {
        (name, p[0]): (data.draw(i32), data.draw(i64))
        for name, partitions in topics
        for p in partitions
        if next(chosen)
    }
    ours = encode_fetch_response(12, 3, topics, session_id=5, diverging=diverging)
    oracle = b"".join(encode_response(3, kio_response(12, topics, 0, 5, 0, diverging)))
    assert joined(ours) == oracle
    _id, decoded = decode_fetch_response_v12(joined(ours)[4:])
    assert [len(t.partitions) for t in decoded.responses] == [len(p) for _n, p in topics]


def test_v12_diverging_epoch_is_read_by_kio() -> None:
    topics: list[FetchTopicResult] = [
        ("t", [(0, 0, 10, 10, 0, None, b""), (1, 0, 7, 7, 0, None, b"")])
    ]
    ours = joined(encode_fetch_response(12, 8, topics, diverging={("t", 1): (3, 42)}))
    _id, response = decode_response(ours[4:], response_type(FETCH, 12))
    p0, p1 = response.responses[0].partitions
    assert (p0.diverging_epoch.epoch, p0.diverging_epoch.end_offset) == (-1, -1)
    assert (p1.diverging_epoch.epoch, p1.diverging_epoch.end_offset) == (3, 42)


class Segment:
    """A file holding record bytes; `region(data)` appends data and names it."""

    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        self.size = 0

    def region(self, data: bytes) -> FileRegion:
        os.pwrite(self.fd, data, self.size)
        region = FileRegion.of(self.fd, self.size, len(data))
        self.size += len(data)
        return region


@pytest.fixture(scope="module")
def segment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Segment]:
    seg = Segment(tmp_path_factory.mktemp("fetch-codec") / "00000000000000000000.log")
    yield seg
    os.close(seg.fd)


def shape(chunks: list[Chunk]) -> list[tuple[str, int | bytes]]:
    return [
        ("region", c.length) if isinstance(c, FileRegion) else ("bytes", bytes(c)) for c in chunks
    ]


@pytest.mark.parametrize("version", VERSIONS)
@EXAMPLES
@given(topics=topic_results, as_region=st.lists(st.booleans(), min_size=40, max_size=40))
def test_response_with_regions_is_chunked_as_kio_frames_it(
    version: int, topics: list[FetchTopicResult], as_region: list[bool], segment: Segment
) -> None:
    """Records become FileRegions (empty ones too) for both encoders."""
    picks = iter(as_region * 10)

    def with_regions() -> list[FetchTopicResult]:
        return [
            (
                name,
                [
                    (*p[:6], segment.region(p[6]) if p[6] is not None and next(picks) else p[6])
                    for p in partitions
                ],
            )
            for name, partitions in topics
        ]

    ours_in = with_regions()
    picks = iter(as_region * 10)
    theirs_in = with_regions()
    ours = encode_fetch_response(version, 9, ours_in, error_code=0, session_id=4)
    oracle = encode_chunked_response(9, kio_response(version, theirs_in, 0, 4, 0))
    assert shape(ours) == shape(oracle)
    assert joined(ours) == b"".join(encode_response(9, kio_response(version, topics, 0, 4, 0)))
    for _name, partitions in ours_in:
        for p in partitions:
            region = p[6]
            if isinstance(region, FileRegion):
                assert region.closed == (region.length == 0)
                region.close()
    for chunk in oracle:
        if isinstance(chunk, FileRegion):
            chunk.close()


@pytest.mark.parametrize("version", VERSIONS)
def test_response_with_many_partitions(version: int) -> None:
    partitions: list[FetchPartitionResult] = [
        (p, 0, 1000 + p, 990 + p, 0, [(7, p)] if p % 5 == 0 else None, b"\x01" * (p % 40) or None)
        for p in range(1000)
    ]
    topics: list[FetchTopicResult] = [("orders", partitions), ("\u00e9t\u00e9", partitions[:7])]
    ours = encode_fetch_response(version, 1, topics, session_id=77)
    assert joined(ours) == b"".join(encode_response(1, kio_response(version, topics, 0, 77, 0)))


@pytest.mark.parametrize("version", VERSIONS)
def test_response_records_lengths_at_varint_boundaries(version: int) -> None:
    sizes = [0, 1, 125, 126, 127, 128, 16_382, 16_383, 16_384, 70_000]
    topics: list[FetchTopicResult] = [
        ("t", [(i, 0, 10, 9, 0, None, bytes([i]) * size) for i, size in enumerate(sizes)])
    ]
    ours = encode_fetch_response(version, 1, topics)
    assert joined(ours) == b"".join(encode_response(1, kio_response(version, topics, 0, 0, 0)))
    if version >= 12:
        _id, decoded = decode_fetch_response_v12(joined(ours)[4:])
        assert [len(p.records or b"") for p in decoded.responses[0].partitions] == sizes


# --- follower: v12 request encoder ------------------------------------------------

request_partitions = st.tuples(i32, i32, i64, i32, i64, i32)


@EXAMPLES
@given(
    correlation_id=i32,
    client_id=st.none() | names,
    top=st.tuples(i32, i32, i32, i32, i8, i32, i32),
    topics=st.lists(st.tuples(names, st.lists(request_partitions, max_size=6)), max_size=5),
    forgotten=st.lists(st.tuples(names, st.lists(i32, max_size=5)), max_size=3),
    rack_id=names,
)
def test_v12_request_is_kio_bytes(
    correlation_id: int,
    client_id: str | None,
    top: tuple[int, int, int, int, int, int, int],
    topics: list[FetchTopicRequest],
    forgotten: list[ForgottenTopicRequest],
    rack_id: str,
) -> None:
    replica_id, max_wait_ms, min_bytes, max_bytes, isolation, session_id, epoch = top
    ours = encode_fetch_request_v12(
        correlation_id,
        client_id,
        replica_id=replica_id,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=isolation,
        session_id=session_id,
        session_epoch=epoch,
        topics=topics,
        forgotten=forgotten,
        rack_id=rack_id,
    )
    m = request_module(FETCH, 12)
    request = m.FetchRequest(
        replica_id=replica_id,
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=isolation,
        session_id=session_id,
        session_epoch=epoch,
        topics=tuple(
            m.FetchTopic(
                topic=name,
                partitions=tuple(
                    m.FetchPartition(
                        partition=p,
                        current_leader_epoch=le,
                        fetch_offset=fo,
                        last_fetched_epoch=lfe,
                        log_start_offset=ls,
                        partition_max_bytes=mb,
                    )
                    for p, le, fo, lfe, ls, mb in partitions
                ),
            )
            for name, partitions in topics
        ),
        forgotten_topics_data=tuple(
            m.ForgottenTopic(topic=name, partitions=tuple(ps)) for name, ps in forgotten
        ),
        rack_id=rack_id,
    )
    assert ours == encode_request(correlation_id, client_id, request)
    # ... and the broker's decoder reads back what the follower wrote.
    header, pos = parse_header(ours[4:])
    assert_same(request, decode_fetch_request(12, ours[4:], pos))


# --- follower: v12 response decoder -----------------------------------------------


@st.composite
def v12_responses(draw: st.DrawFn) -> Any:
    m = response_type(FETCH, 12)
    mod = __import__(m.__module__, fromlist=["x"])
    tagged = st.fixed_dictionaries(
        {},
        optional={
            "diverging_epoch": st.builds(
                lambda e, o: mod.EpochEndOffset(epoch=e, end_offset=o), i32, i64
            ),
            "current_leader": st.builds(
                lambda i, e: mod.LeaderIdAndEpoch(leader_id=i, leader_epoch=e), i32, i32
            ),
            "snapshot_id": st.builds(lambda o, e: mod.SnapshotId(end_offset=o, epoch=e), i64, i32),
        },
    )

    def partition(
        v: tuple[int, ErrorCode, int, int, int, Any, int, bytes | None], extra: dict[str, Any]
    ) -> Any:
        index, error, hw, lso, start, aborted, preferred, r = v
        return mod.PartitionData(
            partition_index=index,
            error_code=error,
            high_watermark=hw,
            last_stable_offset=lso,
            log_start_offset=start,
            aborted_transactions=None
            if aborted is None
            else tuple(mod.AbortedTransaction(producer_id=p, first_offset=f) for p, f in aborted),
            preferred_read_replica=preferred,
            records=r,
            **extra,
        )

    partitions = st.builds(
        partition, st.tuples(i32, error_codes, i64, i64, i64, aborted_lists, i32, records), tagged
    )
    return mod.FetchResponse(
        throttle_time=datetime.timedelta(milliseconds=draw(st.integers(0, 2**31 - 1))),
        error_code=draw(error_codes),
        session_id=draw(i32),
        responses=tuple(
            mod.FetchableTopicResponse(topic=t, partitions=tuple(ps))
            for t, ps in draw(
                st.lists(st.tuples(names, st.lists(partitions, max_size=6)), max_size=5)
            )
        ),
    )


TAGGED = frozenset({"diverging_epoch", "current_leader", "snapshot_id"})


@settings(max_examples=60, deadline=None)
@given(response=v12_responses(), correlation_id=i32)
def test_v12_response_decodes_as_kio_reads_it(response: Any, correlation_id: int) -> None:
    payload = b"".join(encode_response(correlation_id, response))[4:]
    oracle_id, oracle = decode_response(payload, type(response))
    ours_id, ours = decode_fetch_response_v12(payload)
    assert ours_id == oracle_id == correlation_id
    assert_same(oracle, ours, TAGGED)
    assert_same(response, ours, TAGGED)
    for t in ours.responses:
        for p in t.partitions:
            assert p.records is None or isinstance(p.records, memoryview)
            assert isinstance(p.error_code, ErrorCode)
    # A bytearray payload is read the same.
    assert decode_fetch_response_v12(bytearray(payload))[1] == ours


def test_v12_response_of_our_encoder_round_trips() -> None:
    topics: list[FetchTopicResult] = [
        ("t", [(0, 0, 10, 9, 0, None, b"batch"), (1, 1, -1, -1, -1, [(1, 2)], None)])
    ]
    chunks = encode_fetch_response(12, 8, topics, session_id=5)
    correlation_id, response = decode_fetch_response_v12(joined(chunks)[4:])
    assert correlation_id == 8 and response.session_id == 5
    p0, p1 = response.responses[0].partitions
    assert (p0.partition_index, p0.high_watermark, bytes(p0.records or b"")) == (0, 10, b"batch")
    assert p1.error_code == ErrorCode.offset_out_of_range
    assert p1.aborted_transactions == [(1, 2)] and p1.records is None


# --- malformed input ---------------------------------------------------------------


def sample_request(version: int) -> tuple[RequestHeader, bytes, int]:
    m = request_module(FETCH, version)
    request = build(
        m.FetchRequest,
        replica_id=1,
        max_wait=datetime.timedelta(milliseconds=500),
        min_bytes=1,
        max_bytes=1000,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(
            m.FetchTopic(
                topic="t",
                partitions=(
                    build(m.FetchPartition, partition=0, fetch_offset=5, partition_max_bytes=100),
                ),
            ),
        ),
        forgotten_topics_data=(m.ForgottenTopic(topic="f", partitions=(1, 2)),)
        if version >= 7
        else (),
        rack_id="r",
    )
    return frame_of(request)


@pytest.mark.parametrize("version", VERSIONS)
def test_every_truncated_request_is_a_protocol_error(version: int) -> None:
    header, frame, pos = sample_request(version)
    for end in range(pos, len(frame)):
        with pytest.raises(ProtocolError):
            decode_fetch_request(version, frame[:end], pos)
        with pytest.raises(ProtocolError):  # kio refuses it too
            decode_request(header, frame[:end], pos)


def test_every_truncated_v12_response_is_a_protocol_error() -> None:
    topics: list[FetchTopicResult] = [("t", [(0, 0, 10, 9, 0, [(3, 4)], b"batch")])]
    payload = joined(encode_fetch_response(12, 8, topics))[4:]
    for end in range(len(payload)):
        with pytest.raises(ProtocolError):
            decode_fetch_response_v12(payload[:end])


def test_negative_lengths_nulls_and_unknown_errors_are_refused() -> None:
    _header, frame, pos = sample_request(7)
    # the forgotten topic's partition count (2) -> -5
    at = frame.index(b"\x00\x01f") + 3
    bad = frame[:at] + b"\xff\xff\xff\xfb" + frame[at + 4 :]
    with pytest.raises(ProtocolError, match="forgotten partitions has negative length -5"):
        decode_fetch_request(7, bad, pos)
    # the topics array null: kio reads None, Kafka (and we) refuse it
    at = pos + 25
    with pytest.raises(ProtocolError, match="topics is null"):
        decode_fetch_request(7, frame[:at] + b"\xff\xff\xff\xff" + frame[at + 4 :], pos)
    # a huge array count over a short frame: refused before any allocation
    with pytest.raises(ProtocolError, match="past the end"):
        decode_fetch_request(
            7,
            frame[: at - 0] + frame[at : frame.index(b"\x00\x01f") + 3] + b"\x7f\xff\xff\xff",
            pos,
        )
    _header, frame, pos = sample_request(12)
    at = frame.index(b"\x02t")  # topic "t": compact length 2
    with pytest.raises(ProtocolError, match="topic name is null"):
        decode_fetch_request(12, frame[:at] + b"\x00" + frame[at + 1 :], pos)
    # an error code kio does not know
    payload = bytearray(
        joined(encode_fetch_response(12, 8, [("t", [(0, 0, 1, 1, 0, None, None)])]))[4:]
    )
    payload[5 + 4 : 5 + 6] = b"\x7f\x01"
    with pytest.raises(ProtocolError, match="unknown error code 32513"):
        decode_fetch_response_v12(bytes(payload))


@pytest.mark.parametrize("version", [4, 7, 11, 12])
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_corrupted_requests_fail_cleanly(version: int, data: st.DataObject) -> None:
    """Differential fuzzing: ours raises only ProtocolError, and what it accepts kio
    reads to the same values. kio is asked only about what ours accepts: kio 0.6.5's
    native reader aborts the process on a compact array count larger than the bytes
    that follow (see test_produce_codec)."""
    header, frame, pos = sample_request(version)
    body = bytearray(frame)
    for _ in range(data.draw(st.integers(1, 3))):
        body[data.draw(st.integers(pos, len(body) - 1))] = data.draw(st.integers(0, 255))
    corrupted = bytes(body)
    try:
        ours = decode_fetch_request(version, corrupted, pos)
    except ProtocolError:
        return
    try:
        oracle = decode_request(header, corrupted, pos)
    except ProtocolError as e:
        # Unknown tagged fields are skipped, as KIP-482 (and Kafka) says; kio refuses them.
        assert "Unknown tagged field" in str(e)
        return
    assert_same(oracle, ours)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_corrupted_v12_responses_fail_cleanly(data: st.DataObject) -> None:
    topics: list[FetchTopicResult] = [
        ("t", [(0, 0, 10, 9, 0, [(3, 4)], b"batch"), (1, 0, 10, 9, 0, None, None)])
    ]
    body = bytearray(joined(encode_fetch_response(12, 8, topics))[4:])
    for _ in range(data.draw(st.integers(1, 3))):
        body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
    corrupted = bytes(body)
    try:
        ours = decode_fetch_response_v12(corrupted)[1]
    except ProtocolError:
        return
    try:
        oracle = decode_response(corrupted, response_type(FETCH, 12))[1]
    except KeyError as e:
        assert "Unknown tagged field" in str(e)  # skipped by ours, as KIP-482 says
        return
    assert_same(oracle, ours, TAGGED)


def test_huge_array_counts_are_refused_without_allocating() -> None:
    _header, frame, pos = sample_request(12)
    topics_at = pos + 1 + 25
    with pytest.raises(ProtocolError, match="IndexError"):
        decode_fetch_request(12, frame[:topics_at] + b"\xff\xff\xff\xff\x0f", pos)
    payload = joined(encode_fetch_response(12, 8, []))[4:]
    with pytest.raises(ProtocolError, match="IndexError"):
        decode_fetch_response_v12(payload[:15] + b"\xff\xff\xff\xff\x0f")
