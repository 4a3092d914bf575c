"""Fetch (API 1) by hand: the broker's request decoder (v4-12) and chunked response
encoder (v4-12), and the follower's v12 request encoder and response decoder.

Fetch is the hot path of replication: a follower's fetch names every partition it
follows (or, in a KIP-227 session, every one that changed), and its answer carries a
batch or just offsets for each. kio writes those through a generic per-field machinery;
these write one precompiled `struct` call per partition, and read a topic's partitions
(fixed-size records on the wire) with one `struct.iter_unpack`. `tests/protocol/
test_fetch_codec.py` proves them byte-identical to kio (hypothesis, every version) and
the response encoder chunk-for-chunk identical to `fetch_response.encode_chunked_response`
(records given as FileRegions stay chunks of their own, to be sent with sendfile).

Decoded objects are NamedTuples with kio's attribute names (see `produce_codec` for why
not `__slots__` classes); arrays are lists. Fields a version lacks hold kio's defaults
(session_id 0, session_epoch -1, current_leader_epoch -1, last_fetched_epoch -1,
log_start_offset -1, no forgotten topics, rack_id ""), the values the fetch handler
assumes when a kio object lacks them; a partition of v4-11 is one class per wire layout
whose missing fields are class attributes (`FetchPartitionFields` types them all).

The follower's response decoder returns each partition's records as a memoryview of
the response payload: a fetch answer is up to `max_bytes` of batches, which the
follower appends and drops, so a copy per partition would be pure cost.
"""

from __future__ import annotations

import datetime
import itertools
import struct
from collections.abc import Mapping, Sequence
from typing import NamedTuple, NoReturn, Protocol

from kio.schema.errors import ErrorCode

from strandline.protocol.codec import skip_header_tags
from strandline.protocol.fetch_response import Chunk
from strandline.protocol.file_region import FileRegion
from strandline.protocol.framing import ProtocolError
from strandline.protocol.primitives import (
    I32,
    MALFORMED,
    negative_length,
    null_where_required,
    past_end,
    read_uvarint,
    skip_tags,
    uvarint,
)

API_KEY = 1
MIN_VERSION = 4
MAX_VERSION = 12
FIRST_FLEXIBLE = 12


# --- decoded request (broker side) ---------------------------------------------------


class FetchPartitionFields(Protocol):
    """A partition of a fetch request, of any version (the fields it lacks: -1)."""

    @property
    def partition(self) -> int: ...
    @property
    def current_leader_epoch(self) -> int: ...
    @property
    def fetch_offset(self) -> int: ...
    @property
    def last_fetched_epoch(self) -> int: ...
    @property
    def log_start_offset(self) -> int: ...
    @property
    def partition_max_bytes(self) -> int: ...


# One class per wire layout, its fields in wire order, so that a topic's partitions
# (an array of fixed-size records) are read by `struct.iter_unpack` in C; the fields
# a version lacks are class attributes holding kio's defaults.


class FetchPartition(NamedTuple):
    """v12."""

    partition: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    log_start_offset: int
    partition_max_bytes: int


class _FetchPartitionV9(NamedTuple):
    partition: int
    current_leader_epoch: int
    fetch_offset: int
    log_start_offset: int
    partition_max_bytes: int


class FetchPartitionV9(_FetchPartitionV9):
    """v9-11."""

    __slots__ = ()
    last_fetched_epoch = -1


class _FetchPartitionV5(NamedTuple):
    partition: int
    fetch_offset: int
    log_start_offset: int
    partition_max_bytes: int


class FetchPartitionV5(_FetchPartitionV5):
    """v5-8."""

    __slots__ = ()
    current_leader_epoch = -1
    last_fetched_epoch = -1


class _FetchPartitionV4(NamedTuple):
    partition: int
    fetch_offset: int
    partition_max_bytes: int


class FetchPartitionV4(_FetchPartitionV4):
    """v4."""

    __slots__ = ()
    current_leader_epoch = -1
    last_fetched_epoch = -1
    log_start_offset = -1


class FetchTopic(NamedTuple):
    topic: str
    partitions: Sequence[FetchPartitionFields]


class ForgottenTopic(NamedTuple):
    topic: str
    partitions: tuple[int, ...]


class FetchRequest(NamedTuple):
    replica_id: int
    max_wait: datetime.timedelta
    min_bytes: int
    max_bytes: int
    isolation_level: int
    session_id: int
    session_epoch: int
    topics: list[FetchTopic]
    forgotten_topics_data: list[ForgottenTopic]
    rack_id: str
    cluster_id: str | None  # v12's tagged field 0


# --- decoded response (follower side) -------------------------------------------------


class AbortedTransaction(NamedTuple):
    producer_id: int
    first_offset: int


class PartitionData(NamedTuple):
    partition_index: int
    error_code: ErrorCode
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted_transactions: list[AbortedTransaction] | None
    preferred_read_replica: int
    records: memoryview | None


class FetchableTopicResponse(NamedTuple):
    topic: str
    partitions: list[PartitionData]


class FetchResponse(NamedTuple):
    throttle_time: datetime.timedelta
    error_code: ErrorCode
    session_id: int
    responses: list[FetchableTopicResponse]


# --- plain data the encoders take -----------------------------------------------------

Records = bytes | bytearray | memoryview | FileRegion
# (partition_index, error_code, high_watermark, last_stable_offset, log_start_offset,
#  aborted transactions as (producer_id, first_offset) or None, records or None).
# preferred_read_replica is always -1 (no KIP-392 follower fetching).
FetchPartitionResult = tuple[
    int, int, int, int, int, Sequence[tuple[int, int]] | None, Records | None
]
FetchTopicResult = tuple[str, Sequence[FetchPartitionResult]]
# (partition, current_leader_epoch, fetch_offset, last_fetched_epoch, log_start_offset,
#  partition_max_bytes): the wire order of v12, so a FetchPartition is one too.
FetchPartitionRequest = tuple[int, int, int, int, int, int]
FetchTopicRequest = tuple[str, Sequence[FetchPartitionRequest]]
ForgottenTopicRequest = tuple[str, Sequence[int]]

_new = tuple.__new__
_timedelta = datetime.timedelta
_ERRORS: dict[int, ErrorCode] = {e.value: e for e in ErrorCode}

_I16 = struct.Struct(">h").unpack_from
_I32 = struct.Struct(">i").unpack_from
_TOP4 = struct.Struct(">iiiib")  # replica, max_wait, min_bytes, max_bytes, isolation
_TOP7 = struct.Struct(">iiiibii")  # ... isolation, session_id, session_epoch
_FP4 = struct.Struct(">iqi")  # partition, fetch_offset, partition_max_bytes
_FP5 = struct.Struct(">iqqi")  # partition, fetch_offset, log_start_offset, max_bytes
_FP9 = struct.Struct(">iiqqi")  # partition, leader epoch, fetch_offset, log_start, max
_FP12 = struct.Struct(">iiqiqi")  # ... fetch_offset, last_fetched_epoch, log_start, max
_FP12_PADDED = struct.Struct(">iiqiqix")  # ... and an empty tagged-field section
_repeat = itertools.repeat
_view = memoryview


def decode_fetch_request(version: int, frame: bytes, pos: int) -> FetchRequest:
    """The body of a Fetch request of `version` (4-12) from `frame`, `pos` being just
    after the header's client_id (the header's tagged fields of v12 are skipped here)."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(f"Fetch v{version} is not a version this codec reads")
    try:
        if version >= FIRST_FLEXIBLE:
            return _decode_request_flexible(frame, skip_header_tags(frame, pos))
        return _decode_request_legacy(version, frame, pos)
    except MALFORMED as e:
        raise ProtocolError(f"malformed FetchRequest v{version}: {type(e).__name__}: {e}") from e


def _decode_request_legacy(version: int, frame: bytes, pos: int) -> FetchRequest:
    size = len(frame)
    if version >= 7:
        replica_id, max_wait, min_bytes, max_bytes, isolation, session_id, epoch = (
            _TOP7.unpack_from(frame, pos)
        )
        pos += _TOP7.size
    else:
        replica_id, max_wait, min_bytes, max_bytes, isolation = _TOP4.unpack_from(frame, pos)
        session_id, epoch = 0, -1
        pos += _TOP4.size
    (n_topics,) = _I32(frame, pos)
    pos += 4
    if n_topics < 0:
        _bad_length("topics", n_topics)
    cls: type[FetchPartitionFields]
    if version >= 9:
        layout, cls = _FP9, FetchPartitionV9
    elif version >= 5:
        layout, cls = _FP5, FetchPartitionV5
    else:
        layout, cls = _FP4, FetchPartitionV4
    stride = layout.size
    iter_unpack = layout.iter_unpack
    topics: list[FetchTopic] = []
    for _ in range(n_topics):
        name, pos = _legacy_string(frame, pos, size, "topic name")
        (n,) = _I32(frame, pos)
        pos += 4
        if n < 0:
            _bad_length("partitions", n)
        end = pos + stride * n
        if end > size:
            past_end(f"{n} partitions of {name}", end, size)
        partitions = list(map(_new, _repeat(cls), iter_unpack(_view(frame)[pos:end])))
        pos = end
        topics.append(_new(FetchTopic, (name, partitions)))
    forgotten: list[ForgottenTopic] = []
    if version >= 7:
        (n_topics,) = _I32(frame, pos)
        pos += 4
        if n_topics < 0:
            _bad_length("forgotten_topics_data", n_topics)
        for _ in range(n_topics):
            name, pos = _legacy_string(frame, pos, size, "forgotten topic name")
            (n,) = _I32(frame, pos)
            pos += 4
            if n < 0:
                _bad_length("forgotten partitions", n)
            forgotten.append(_new(ForgottenTopic, (name, _int32s(frame, pos, n, size))))
            pos += 4 * n
    rack_id = ""
    if version >= 11:
        rack_id, pos = _legacy_string(frame, pos, size, "rack_id")
    return _new(
        FetchRequest,
        (
            replica_id,
            _timedelta(milliseconds=max_wait),
            min_bytes,
            max_bytes,
            isolation,
            session_id,
            epoch,
            topics,
            forgotten,
            rack_id,
            None,
        ),
    )


def _decode_request_flexible(frame: bytes, pos: int) -> FetchRequest:
    size = len(frame)
    replica_id, max_wait, min_bytes, max_bytes, isolation, session_id, epoch = _TOP7.unpack_from(
        frame, pos
    )
    pos += _TOP7.size
    n_topics = frame[pos]
    if n_topics < 0x80:
        pos += 1
    else:
        n_topics, pos = read_uvarint(frame, pos)
    if not n_topics:
        null_where_required("topics")
    unpack12 = _FP12.unpack_from
    topics: list[FetchTopic] = []
    for _ in range(n_topics - 1):
        name, pos = _compact_string(frame, pos, size, "topic name")
        n = frame[pos]
        if n < 0x80:
            pos += 1
        else:
            n, pos = read_uvarint(frame, pos)
        if not n:
            null_where_required("partitions")
        count = n - 1
        end = pos + 33 * count
        if end <= size and frame[pos + 32 : end : 33].count(0) == count:
            # No partition has tagged fields (as every follower and client writes
            # them): the partitions are an array of 33-byte records, read in C.
            partitions = list(
                map(_new, _repeat(FetchPartition), _FP12_PADDED.iter_unpack(_view(frame)[pos:end]))
            )
            pos = end
        else:
            partitions = []
            add = partitions.append
            for _ in range(count):
                add(_new(FetchPartition, unpack12(frame, pos)))
                pos += 32
                if frame[pos]:
                    pos = skip_tags(frame, pos)
                else:
                    pos += 1
        if frame[pos]:
            pos = skip_tags(frame, pos)
        else:
            pos += 1
        topics.append(_new(FetchTopic, (name, partitions)))
    n_topics = frame[pos]
    if n_topics < 0x80:
        pos += 1
    else:
        n_topics, pos = read_uvarint(frame, pos)
    if not n_topics:
        null_where_required("forgotten_topics_data")
    forgotten: list[ForgottenTopic] = []
    for _ in range(n_topics - 1):
        name, pos = _compact_string(frame, pos, size, "forgotten topic name")
        n, pos = read_uvarint(frame, pos)
        if not n:
            null_where_required("forgotten partitions")
        forgotten.append(_new(ForgottenTopic, (name, _int32s(frame, pos, n - 1, size))))
        pos += 4 * (n - 1)
        pos = skip_tags(frame, pos)
    rack_id, pos = _compact_string(frame, pos, size, "rack_id")
    cluster_id: str | None = None
    if frame[pos]:
        cluster_id = _request_tags(frame, pos, size)
    return _new(
        FetchRequest,
        (
            replica_id,
            _timedelta(milliseconds=max_wait),
            min_bytes,
            max_bytes,
            isolation,
            session_id,
            epoch,
            topics,
            forgotten,
            rack_id,
            cluster_id,
        ),
    )


def _request_tags(frame: bytes, pos: int, size: int) -> str | None:
    """The request's tagged fields: cluster_id (tag 0) is read, others skipped."""
    cluster_id: str | None = None
    count, pos = read_uvarint(frame, pos)
    for _ in range(count):
        tag, pos = read_uvarint(frame, pos)
        length, pos = read_uvarint(frame, pos)
        end = pos + length
        if end > size:
            past_end(f"tagged field {tag}", end, size)
        if tag == 0:
            n, start = read_uvarint(frame, pos)
            if n:
                if start + n - 1 > end:
                    past_end("cluster_id", start + n - 1, end)
                cluster_id = frame[start : start + n - 1].decode()
        pos = end
    return cluster_id


def _legacy_string(frame: bytes, pos: int, size: int, what: str) -> tuple[str, int]:
    (n,) = _I16(frame, pos)
    pos += 2
    if n < 0:
        _bad_length(what, n)
    end = pos + n
    if end > size:
        past_end(what, end, size)
    return frame[pos:end].decode(), end


def _compact_string(frame: bytes, pos: int, size: int, what: str) -> tuple[str, int]:
    n = frame[pos]
    if n < 0x80:
        pos += 1
    else:
        n, pos = read_uvarint(frame, pos)
    if not n:
        null_where_required(what)
    end = pos + n - 1
    if end > size:
        past_end(what, end, size)
    return frame[pos:end].decode(), end


def _int32s(frame: bytes, pos: int, n: int, size: int) -> tuple[int, ...]:
    end = pos + 4 * n
    if end > size:  # before building a format for a count the bytes cannot hold
        past_end(f"array of {n} int32", end, size)
    return struct.unpack_from(f">{n}i", frame, pos)


def _bad_length(what: str, n: int) -> NoReturn:
    if n == -1:
        null_where_required(what)
    negative_length(what, n)


# --- response encoder (broker side) ---------------------------------------------------

_H16 = struct.Struct(">h").pack
_P32 = struct.Struct(">i").pack
_RESP_TOP4 = struct.Struct(">iii")  # correlation id, throttle, topic count
_RESP_TOP7 = struct.Struct(">iihii")  # correlation id, throttle, error, session, count
_RESP_TOP12 = struct.Struct(">iBihi")  # correlation id, header tags, throttle, error, session
# One partition's fixed part followed by a null aborted_transactions (the usual case).
_PD4_NULL = struct.Struct(">ihqqi")
_PD5_NULL = struct.Struct(">ihqqqi")
_PD11_NULL = struct.Struct(">ihqqqii")  # + preferred_read_replica
_PD12_NULL = struct.Struct(">ihqqqBi")  # compact null array, preferred_read_replica
# ... and the length of its records, when they are bytes.
_PD4_BYTES = struct.Struct(">ihqqii")
_PD5_BYTES = struct.Struct(">ihqqqii")
_PD11_BYTES = struct.Struct(">ihqqqiii")
_PD12_BYTES1 = struct.Struct(">ihqqqBiB")  # the records' length as a 1-byte uvarint
_PD12_BYTES2 = struct.Struct(">ihqqqBiBB")  # ... as a 2-byte uvarint
# ... and without it, when there are aborted transactions to list.
_PD4 = struct.Struct(">ihqq")
_PD5 = struct.Struct(">ihqqq")
_ABORTED = struct.Struct(">qq")
_ABORTED12 = struct.Struct(">qqB")  # + no tagged fields
_NULL_BYTES = b"\xff\xff\xff\xff"
_NO_TAGS = b"\0"
# A partition's tagged fields holding only diverging_epoch (tag 0, 13 bytes: epoch,
# end offset, the struct's own empty tagged fields).
_DIVERGING_TAGS = struct.Struct(">BBBiqB")


def encode_fetch_response(
    version: int,
    correlation_id: int,
    topics: Sequence[FetchTopicResult],
    *,
    error_code: int = 0,
    session_id: int = 0,
    throttle_ms: int = 0,
    diverging: Mapping[tuple[str, int], tuple[int, int]] | None = None,
) -> list[Chunk]:
    """A framed Fetch response of `version` (4-12) as chunks, exactly as
    `fetch_response.encode_chunked_response` frames the equivalent kio response: bytes
    chunks, and each non-empty FileRegion a chunk of its own; an empty region is closed
    and only its length written. error_code and session_id exist from v7; `diverging`
    ((topic, partition) -> (epoch, end offset), the tagged diverging_epoch) from v12."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(f"Fetch v{version} is not a version this codec writes")
    if version >= FIRST_FLEXIBLE:
        return _encode_response_flexible(
            correlation_id, topics, error_code, session_id, throttle_ms, diverging
        )
    out = bytearray(b"\0\0\0\0")
    if version >= 7:
        out += _RESP_TOP7.pack(correlation_id, throttle_ms, error_code, session_id, len(topics))
    else:
        out += _RESP_TOP4.pack(correlation_id, throttle_ms, len(topics))
    first = out
    chunks: list[Chunk] = []
    in_regions = 0
    has_start = version >= 5
    has_preferred = version >= 11
    if has_preferred:
        pack_null, pack_bytes = _PD11_NULL.pack, _PD11_BYTES.pack
    elif has_start:
        pack_null, pack_bytes = _PD5_NULL.pack, _PD5_BYTES.pack
    else:
        pack_null, pack_bytes = _PD4_NULL.pack, _PD4_BYTES.pack
    pack_fixed = _PD5.pack if has_start else _PD4.pack
    pack_aborted = _ABORTED.pack
    for name, partitions in topics:
        data = name.encode()
        out += _H16(len(data))
        out += data
        out += _P32(len(partitions))
        for index, error, hw, lso, start, aborted, records in partitions:
            if aborted is None and records is not None and not isinstance(records, FileRegion):
                # The usual partition, its records' length packed with the rest.
                if has_preferred:
                    out += pack_bytes(index, error, hw, lso, start, -1, -1, len(records))
                elif has_start:
                    out += pack_bytes(index, error, hw, lso, start, -1, len(records))
                else:
                    out += pack_bytes(index, error, hw, lso, -1, len(records))
                out += records
                continue
            if aborted is None:
                if has_preferred:
                    out += pack_null(index, error, hw, lso, start, -1, -1)
                elif has_start:
                    out += pack_null(index, error, hw, lso, start, -1)
                else:
                    out += pack_null(index, error, hw, lso, -1)
            else:
                if has_start:
                    out += pack_fixed(index, error, hw, lso, start)
                else:
                    out += pack_fixed(index, error, hw, lso)
                out += _P32(len(aborted))
                for producer_id, first_offset in aborted:
                    out += pack_aborted(producer_id, first_offset)
                if has_preferred:
                    out += _NULL_BYTES  # preferred_read_replica -1
            if records is None:
                out += _NULL_BYTES
            elif isinstance(records, FileRegion):
                length = records.length
                out += _P32(length)
                if length:
                    chunks.append(out)
                    chunks.append(records)
                    in_regions += length
                    out = bytearray()
                else:
                    records.close()
            else:
                out += _P32(len(records))
                out += records
    return _finish(first, chunks, out, in_regions)


def _encode_response_flexible(
    correlation_id: int,
    topics: Sequence[FetchTopicResult],
    error_code: int,
    session_id: int,
    throttle_ms: int,
    diverging: Mapping[tuple[str, int], tuple[int, int]] | None,
) -> list[Chunk]:
    out = bytearray(b"\0\0\0\0")
    out += _RESP_TOP12.pack(correlation_id, 0, throttle_ms, error_code, session_id)
    out += uvarint(len(topics) + 1)
    first = out
    chunks: list[Chunk] = []
    in_regions = 0
    pack_null = _PD12_NULL.pack
    pack_bytes1 = _PD12_BYTES1.pack
    pack_bytes2 = _PD12_BYTES2.pack
    pack_fixed = _PD5.pack
    pack_aborted = _ABORTED12.pack
    for name, partitions in topics:
        data = name.encode()
        out += uvarint(len(data) + 1)
        out += data
        out += uvarint(len(partitions) + 1)
        for index, error, hw, lso, start, aborted, records in partitions:
            tags = _NO_TAGS
            if diverging is not None and (div := diverging.get((name, index))) is not None:
                tags = _DIVERGING_TAGS.pack(1, 0, 13, div[0], div[1], 0)
            if aborted is None and records is not None and not isinstance(records, FileRegion):
                # The usual partition, its records' length (a 1- or 2-byte varint below
                # 16 KiB) packed with the rest.
                size = len(records) + 1
                if size < 0x80:
                    out += pack_bytes1(index, error, hw, lso, start, 0, -1, size)
                elif size < 0x4000:
                    out += pack_bytes2(
                        index, error, hw, lso, start, 0, -1, size & 0x7F | 0x80, size >> 7
                    )
                else:
                    out += pack_null(index, error, hw, lso, start, 0, -1)
                    out += uvarint(size)
                out += records
                out += tags
                continue
            if aborted is None:
                out += pack_null(index, error, hw, lso, start, 0, -1)
            else:
                out += pack_fixed(index, error, hw, lso, start)
                out += uvarint(len(aborted) + 1)
                for producer_id, first_offset in aborted:
                    out += pack_aborted(producer_id, first_offset, 0)
                out += _NULL_BYTES  # preferred_read_replica -1
            if records is None:
                out += b"\0"  # null records
                out += tags
                continue
            if isinstance(records, FileRegion):
                length = records.length
                out += uvarint(length + 1)
                if length:
                    chunks.append(out)
                    chunks.append(records)
                    in_regions += length
                    out = bytearray()
                else:
                    records.close()
            else:
                out += uvarint(len(records) + 1)
                out += records
            out += tags
        out += b"\0"
    out += b"\0"
    return _finish(first, chunks, out, in_regions)


def _finish(first: bytearray, chunks: list[Chunk], out: bytearray, in_regions: int) -> list[Chunk]:
    if out or not chunks:
        chunks.append(out)
    size = in_regions - 4
    for chunk in chunks:
        if not isinstance(chunk, FileRegion):
            size += len(chunk)
    I32.pack_into(first, 0, size)
    return chunks


# --- request encoder and response decoder (follower side) ----------------------------

_REQ_HEADER = struct.Struct(">ihhih")  # size, api key, version, correlation id, client id
_REQ_TOP12 = struct.Struct(">iiiibii")
_REQ_FP12 = struct.Struct(">iiqiqiB")  # a v12 partition and its (empty) tagged fields


def encode_fetch_request_v12(
    correlation_id: int,
    client_id: str | None,
    *,
    replica_id: int,
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int,
    isolation_level: int,
    session_id: int,
    session_epoch: int,
    topics: Sequence[FetchTopicRequest],
    forgotten: Sequence[ForgottenTopicRequest] = (),
    rack_id: str = "",
) -> bytes:
    """A framed Fetch v12 request: the bytes `codec.encode_request` writes for the
    equivalent kio FetchRequest (no cluster_id)."""
    cid = (client_id or "").encode()
    out = bytearray(_REQ_HEADER.pack(0, API_KEY, 12, correlation_id, len(cid)))
    out += cid
    out += b"\0"  # request header v2: no tagged fields
    out += _REQ_TOP12.pack(
        replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level, session_id, session_epoch
    )
    out += uvarint(len(topics) + 1)
    pack = _REQ_FP12.pack
    for name, partitions in topics:
        data = name.encode()
        out += uvarint(len(data) + 1)
        out += data
        out += uvarint(len(partitions) + 1)
        for partition, leader_epoch, offset, last_epoch, start, max_p in partitions:
            out += pack(partition, leader_epoch, offset, last_epoch, start, max_p, 0)
        out += b"\0"
    out += uvarint(len(forgotten) + 1)
    for name, numbers in forgotten:
        data = name.encode()
        out += uvarint(len(data) + 1)
        out += data
        out += uvarint(len(numbers) + 1)
        out += struct.pack(f">{len(numbers)}i", *numbers)
        out += b"\0"
    data = rack_id.encode()
    out += uvarint(len(data) + 1)
    out += data
    out += b"\0"
    I32.pack_into(out, 0, len(out) - 4)
    return bytes(out)


_RESP_HEAD12 = struct.Struct(">ihi")  # throttle, error, session
# partition, error, hw, lso, log start, aborted_transactions (if null: 0),
# preferred_read_replica, the records' length's first byte
_RESP_PD12 = struct.Struct(">ihqqqBiB")
_Q2 = struct.Struct(">qq").unpack_from


def decode_fetch_response_v12(payload: bytes | bytearray | memoryview) -> tuple[int, FetchResponse]:
    """(correlation id, response) from a Fetch v12 response's payload (size prefix
    stripped), as `connection.decode_response` returns them; records are memoryviews."""
    data = payload if type(payload) is bytes else bytes(payload)
    try:
        return _decode_response_v12(data)
    except MALFORMED as e:
        raise ProtocolError(f"malformed FetchResponse v12: {type(e).__name__}: {e}") from e
    except KeyError as e:
        raise ProtocolError(f"FetchResponse v12 holds unknown error code {e}") from e


def _decode_response_v12(data: bytes) -> tuple[int, FetchResponse]:
    size = len(data)
    view = memoryview(data)
    errors = _ERRORS
    (correlation_id,) = _I32(data, 0)
    pos = skip_tags(data, 4) if data[4] else 5
    throttle_ms, error, session_id = _RESP_HEAD12.unpack_from(data, pos)
    pos += 10
    n_topics = data[pos]
    if n_topics < 0x80:
        pos += 1
    else:
        n_topics, pos = read_uvarint(data, pos)
    if not n_topics:
        null_where_required("responses")
    unpack_pd = _RESP_PD12.unpack_from
    topics: list[FetchableTopicResponse] = []
    for _ in range(n_topics - 1):
        name, pos = _compact_string(data, pos, size, "topic name")
        n = data[pos]
        if n < 0x80:
            pos += 1
        else:
            n, pos = read_uvarint(data, pos)
        if not n:
            null_where_required("partitions")
        partitions: list[PartitionData] = []
        add = partitions.append
        for _ in range(n - 1):
            # Read as if aborted_transactions were null (byte 0), as it is but for
            # read_committed fetches; when it is not, read again from it.
            index, p_error, hw, lso, start, n, preferred, records_size = unpack_pd(data, pos)
            aborted: list[AbortedTransaction] | None = None
            if n == 0:
                pos += 35
            else:
                pos += 30
                n, pos = read_uvarint(data, pos)
                if n:  # a count of 0 in more than one byte is null too, as kio reads it
                    aborted = []
                    for _ in range(n - 1):
                        aborted.append(_new(AbortedTransaction, _Q2(data, pos)))
                        pos += 16
                        pos = skip_tags(data, pos) if data[pos] else pos + 1
                (preferred,) = _I32(data, pos)
                pos += 4
                records_size = data[pos]
            n = records_size
            if n < 0x80:
                pos += 1
            else:
                n, pos = read_uvarint(data, pos)
            records: memoryview | None = None
            if n:
                end = pos + n - 1
                if end > size:
                    past_end(f"records of {name}-{index}", end, size)
                records = view[pos:end]
                pos = end
            # Tagged fields (diverging_epoch, current_leader, snapshot_id) are skipped:
            # the follower does not use them.
            pos = skip_tags(data, pos) if data[pos] else pos + 1
            add(
                _new(
                    PartitionData,
                    (index, errors[p_error], hw, lso, start, aborted, preferred, records),
                )
            )
        pos = skip_tags(data, pos) if data[pos] else pos + 1
        topics.append(_new(FetchableTopicResponse, (name, partitions)))
    if data[pos]:
        skip_tags(data, pos)
    response = _new(
        FetchResponse,
        (_timedelta(milliseconds=throttle_ms), errors[error], session_id, topics),
    )
    return correlation_id, response


__all__ = [
    "AbortedTransaction",
    "FetchPartition",
    "FetchPartitionRequest",
    "FetchPartitionResult",
    "FetchRequest",
    "FetchResponse",
    "FetchTopic",
    "FetchTopicRequest",
    "FetchTopicResult",
    "FetchableTopicResponse",
    "ForgottenTopic",
    "ForgottenTopicRequest",
    "PartitionData",
    "decode_fetch_request",
    "decode_fetch_response_v12",
    "encode_fetch_request_v12",
    "encode_fetch_response",
]
