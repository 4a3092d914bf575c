"""Zero-copy (docs/scaling.md): a chunked response reaches a real TCP peer byte for byte, through
os.sendfile where the connection allows it and through a copy where it does not."""

from __future__ import annotations

import asyncio
import contextvars
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from strandline.protocol.controller_requests import PartitionState
from strandline.protocol.fetch_response import Chunk, close_regions
from strandline.protocol.file_region import FileRegion, TruncatedRegionError
from strandline.server.apis import fetch
from strandline.server.fetch_session import PartitionPosition
from strandline.server.replica_manager import READ_COMMITTED, ReplicaManager
from strandline.server.zero_copy import SEND_REGIONS, SENDFILE_MIN_BYTES, send_chunks
from strandline.state_change_log import StateChangeLog
from strandline.storage.config import LogConfig
from strandline.storage.log_manager import LogManager
from strandline.types import TopicPartition
from tests.storage.batches import build_batch

BIG = SENDFILE_MIN_BYTES * 3 + 17


def segment(tmp_path: Path, data: bytes) -> int:
    fd = os.open(tmp_path / "00000000000000000000.log", os.O_RDWR | os.O_CREAT, 0o644)
    os.pwrite(fd, data, 0)
    return fd


async def over_loopback(
    send: Callable[[asyncio.StreamWriter], Awaitable[Any]],
) -> tuple[bytes, BaseException | None]:
    """Run `send` on the server side of a loopback connection; what the client read."""
    outcome: list[BaseException | None] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await send(writer)
            await writer.drain()
            outcome.append(None)
        except Exception as e:  # noqa: BLE001 - reported to the test
            outcome.append(e)
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    received = await reader.read()  # to EOF
    writer.close()
    server.close()
    await server.wait_closed()
    return received, outcome[0]


def chunks_of(fd: int, data: bytes) -> tuple[list[Chunk], bytes]:
    """A response-like sequence: bytes, a big region, bytes, a small region, bytes."""
    small_at = BIG + 100
    chunks: list[Chunk] = [
        b"head",
        FileRegion.of(fd, 10, BIG),
        bytearray(b"mid"),
        FileRegion.of(fd, small_at, 500),
        b"tail",
    ]
    expected = b"head" + data[10 : 10 + BIG] + b"mid" + data[small_at : small_at + 500] + b"tail"
    return chunks, expected


@pytest.fixture
def sendfile_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts asyncio's calls of os.sendfile (the zero-copy syscall)."""
    calls: list[int] = []
    real = os.sendfile

    def spy(out_fd: int, in_fd: int, offset: int | None, count: int) -> int:
        calls.append(count)
        return real(out_fd, in_fd, offset, count)

    monkeypatch.setattr(os, "sendfile", spy)
    return calls


@pytest.mark.parametrize("sendfile", [True, False])
def test_chunks_arrive_in_order_with_and_without_sendfile(
    tmp_path: Path, sendfile: bool, sendfile_calls: list[int]
) -> None:
    data = os.urandom(BIG * 2)
    fd = segment(tmp_path, data)
    chunks, expected = chunks_of(fd, data)
    still: list[bool] = []

    async def send(writer: asyncio.StreamWriter) -> None:
        still.append(await send_chunks(writer, chunks, sendfile))

    received, error = asyncio.run(over_loopback(send))
    assert error is None
    assert received == expected
    assert still == [sendfile]
    # The big region went by sendfile when allowed; the small one is always copied.
    assert bool(sendfile_calls) == sendfile
    assert all(isinstance(c, bytes | bytearray) or c.closed for c in chunks)
    os.close(fd)


def test_unavailable_sendfile_falls_back_to_a_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = os.urandom(BIG * 2)
    fd = segment(tmp_path, data)
    chunks, expected = chunks_of(fd, data)
    still: list[bool] = []

    async def no_sendfile(*_args: Any, **_kwargs: Any) -> int:
        raise asyncio.SendfileNotAvailableError("not here")

    async def send(writer: asyncio.StreamWriter) -> None:
        monkeypatch.setattr(asyncio.get_running_loop(), "sendfile", no_sendfile)
        still.append(await send_chunks(writer, chunks, True))

    received, error = asyncio.run(over_loopback(send))
    assert error is None
    assert received == expected
    assert still == [False]  # the connection stops trying
    os.close(fd)


@pytest.mark.parametrize("sendfile", [True, False])
def test_a_region_cut_by_truncation_fails_instead_of_sending_a_short_frame(
    tmp_path: Path, sendfile: bool
) -> None:
    data = os.urandom(BIG * 2)
    fd = segment(tmp_path, data)
    chunks, _ = chunks_of(fd, data)
    os.ftruncate(fd, BIG // 2)  # after the regions were taken

    async def send(writer: asyncio.StreamWriter) -> None:
        await send_chunks(writer, chunks, sendfile)

    received, error = asyncio.run(over_loopback(send))
    assert isinstance(error, TruncatedRegionError)
    assert len(received) < 4 + BIG  # the peer never sees a whole (wrong) frame
    assert all(isinstance(c, bytes | bytearray) or c.closed for c in chunks)
    os.close(fd)


def test_fetch_reads_regions_only_on_connections_that_send_them(tmp_path: Path) -> None:
    """The handler's wiring: with SEND_REGIONS set (plaintext connection) the records are
    regions, otherwise bytes; the framed responses are the same bytes either way, and
    read_committed still finds its aborted transactions."""
    tp = TopicPartition("zero-copy", 0)
    logs = LogManager([tmp_path / "logs"], LogConfig(), 1)
    rm = ReplicaManager(1, logs, lambda _t: LogConfig(), StateChangeLog(None, 1), 10_000)
    now = int(time.time() * 1000)
    rm.become_leader_or_follower(1, [PartitionState(tp, 1, 1, 1, (1,), 0, (1,))], (), now)
    for i in range(50):
        # Recent timestamps: old ones would roll a segment per batch (segment.ms).
        batch = build_batch([bytes([i]) * 2000] * 10, timestamps=[now] * 10)
        rm.append_as_leader(tp, batch, acks=1, now_ms=now)
    ctx: Any = SimpleNamespace(replica_manager=rm)
    wanted = {tp: PartitionPosition(3, 1 << 20)}

    def collect_and_frame(regions: bool) -> tuple[Any, bytes]:
        def run() -> tuple[Any, bytes]:
            SEND_REGIONS.set(regions)
            results = fetch._collect(ctx, wanted, 50 << 20, -1, set(), READ_COMMITTED)
            records = results[tp][1]
            size = len(records)
            chunks = fetch._response(12, 9, [tp], results, 0, ErrorCode.none).chunks
            framed = b"".join(c.read() if isinstance(c, FileRegion) else bytes(c) for c in chunks)
            close_regions(chunks)
            return (type(records), size, results[tp][5]), framed

        return contextvars.copy_context().run(run)

    (kind, size, aborted), framed = collect_and_frame(True)
    (kind_copy, size_copy, aborted_copy), framed_copy = collect_and_frame(False)
    assert (kind, kind_copy) == (FileRegion, bytes)
    assert size == size_copy > 900_000
    assert aborted == aborted_copy == []
    assert framed == framed_copy


def test_a_sendfile_stuck_on_a_peer_that_never_reads_ends_on_cancel(tmp_path: Path) -> None:
    """What the network layer does when the reaper aborts such a connection: abort alone
    would leave the sendfile waiting on the closed socket; cancelling ends it and
    releases the region."""
    fd = segment(tmp_path, b"\0" * (32 << 20))
    region = FileRegion.of(fd, 0, 32 << 20)

    async def run() -> bool:
        connected: asyncio.Queue[asyncio.StreamWriter] = asyncio.Queue()

        async def serve(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await connected.put(writer)

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        _reader, client = await asyncio.open_connection("127.0.0.1", port)  # never reads
        writer = await connected.get()
        sending = asyncio.create_task(send_chunks(writer, [b"x", region], True))
        await asyncio.sleep(0.3)
        assert not sending.done()  # blocked: the peer's window is full
        writer.transport.abort()
        sending.cancel()
        done, _ = await asyncio.wait([sending], timeout=5)
        client.close()
        server.close()
        return bool(done)

    assert asyncio.run(run())
    assert region.closed
    os.close(fd)
