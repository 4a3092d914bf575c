"""Zero-copy (docs/scaling.md): a Fetch response framed with its records left in a file is,
byte for byte, what kio's encoder writes with the records inlined (kio is the oracle)."""

from __future__ import annotations

import datetime
import os
import random
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from strandline.protocol.codec import encode_response
from strandline.protocol.fetch_response import encode_chunked_response
from strandline.protocol.file_region import FileRegion
from strandline.protocol.messages import build, response_class

FETCH = 1


def response(version: int, topics: list[tuple[str, list[dict[str, Any]]]]) -> Any:
    cls = lambda name: response_class(FETCH, version, name)  # noqa: E731
    return build(
        cls("FetchResponse"),
        throttle_time=datetime.timedelta(milliseconds=25),
        error_code=ErrorCode.none,
        session_id=12345,
        responses=tuple(
            build(
                cls("FetchableTopicResponse"),
                topic=topic,
                partitions=tuple(build(cls("PartitionData"), **p) for p in partitions),
            )
            for topic, partitions in topics
        ),
    )


def partition(
    version: int, index: int, records: bytes | FileRegion | None, **extra: Any
) -> dict[str, Any]:
    aborted = extra.pop("aborted", None)
    return {
        "partition_index": index,
        "error_code": extra.pop("error_code", ErrorCode.none),
        "high_watermark": extra.pop("hw", 1000 + index),
        "last_stable_offset": 990 + index,
        "log_start_offset": 7,
        "aborted_transactions": None
        if aborted is None
        else tuple(
            response_class(FETCH, version, "AbortedTransaction")(
                producer_id=pid, first_offset=first
            )
            for pid, first in aborted
        ),
        "preferred_read_replica": -1,
        "records": records,
    }


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


def joined(chunks: list[bytes | bytearray | FileRegion]) -> bytes:
    return b"".join(c.read() if isinstance(c, FileRegion) else bytes(c) for c in chunks)


def both(
    version: int,
    shape: list[tuple[str, list[tuple[int, bytes | None, dict[str, Any]]]]],
    segment: Segment,
) -> tuple[bytes, list[bytes | bytearray | FileRegion]]:
    """(kio's frame with bytes, our chunks with each non-empty records as a region)."""
    inline = [(t, [partition(version, i, r, **dict(x)) for i, r, x in ps]) for t, ps in shape]
    regions = [
        (t, [partition(version, i, r if not r else segment.region(r), **dict(x)) for i, r, x in ps])
        for t, ps in shape
    ]
    oracle = b"".join(encode_response(77, response(version, inline)))
    return oracle, encode_chunked_response(77, response(version, regions))


@pytest.mark.parametrize("version", range(4, 13))
def test_matches_kio_with_aborted_errors_and_empty_records(version: int, tmp_path: Path) -> None:
    segment = Segment(tmp_path / "00000000000000000000.log")
    shape = [
        (
            "orders",
            [
                (0, b"\x01" * 300, {"aborted": [(9, 100), (11, 120)]}),
                (1, b"", {}),
                (2, b"\x02" * 70_000, {"aborted": []}),
            ],
        ),
        ("errors", [(5, b"", {"error_code": ErrorCode.not_leader_or_follower, "hw": -1})]),
        ("nulls", [(0, None, {}), (1, b"\x03" * 5, {})]),
        ("\u00e9t\u00e9", [(3, b"\x04" * 1024, {"aborted": [(1, 2)]})]),
    ]
    oracle, chunks = both(version, shape, segment)
    regions = [c for c in chunks if isinstance(c, FileRegion)]
    # Four non-empty records, each left in the file, the rest bytes between them.
    assert [len(r) for r in regions] == [300, 70_000, 5, 1024]
    # Bytes and regions alternate; v12 ends with tagged-field bytes after the last region.
    assert [isinstance(c, FileRegion) for c in chunks[:8]] == [False, True] * 4
    assert len(chunks) == (9 if version >= 12 else 8)
    assert joined(chunks) == oracle
    assert int.from_bytes(oracle[:4], "big") == len(oracle) - 4


@pytest.mark.parametrize("version", range(4, 13))
def test_matches_kio_on_random_responses(version: int, tmp_path: Path) -> None:
    segment = Segment(tmp_path / "00000000000000000000.log")
    rng = random.Random(version)
    for _ in range(30):
        shape = []
        for t in range(rng.randint(0, 4)):
            partitions = []
            for p in range(rng.randint(0, 4)):
                records = rng.choice([None, b"", os.urandom(rng.randint(1, 3000))])
                extra: dict[str, Any] = {}
                if rng.random() < 0.3:
                    extra["aborted"] = [(rng.randint(0, 99), rng.randint(0, 999))] * rng.randint(
                        0, 3
                    )
                if rng.random() < 0.2:
                    extra["error_code"] = ErrorCode.offset_out_of_range
                partitions.append((p, records, extra))
            shape.append((f"topic-{t}", partitions))
        oracle, chunks = both(version, shape, segment)
        assert joined(chunks) == oracle


def test_without_regions_is_one_chunk(tmp_path: Path) -> None:
    inline = [("t", [partition(12, 0, b"abc")])]
    chunks = encode_chunked_response(5, response(12, inline))
    assert len(chunks) == 1
    assert bytes(chunks[0]) == b"".join(encode_response(5, response(12, inline)))


def test_empty_region_is_closed_and_not_a_chunk(tmp_path: Path) -> None:
    segment = Segment(tmp_path / "00000000000000000000.log")
    empty = segment.region(b"")
    chunks = encode_chunked_response(5, response(12, [("t", [partition(12, 0, empty)])]))
    assert empty.closed
    assert len(chunks) == 1
    oracle = b"".join(encode_response(5, response(12, [("t", [partition(12, 0, b"")])])))
    assert bytes(chunks[0]) == oracle
