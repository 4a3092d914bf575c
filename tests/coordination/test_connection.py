"""KafkaConnection / send_request against a real Kafka-protocol broker (the vendored
Tansu binary) and against scripted misbehaving servers."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.metadata.v12.response import MetadataResponse

from strandline.client.connection import (
    KafkaConnection,
    KafkaConnectionError,
    decode_response,
    encode_request,
    send_request,
)
from strandline.testing.tansu import TansuUnavailableError, tansu_broker

METADATA_ALL = MetadataRequest(
    topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
)
API_VERSIONS = ApiVersionsRequest(client_software_name="t", client_software_version="1")


@pytest.fixture(scope="module")
def tansu_port() -> Iterator[int]:
    try:
        with tansu_broker(storage="memory://x/") as broker:
            yield broker.port
    except TansuUnavailableError as exc:
        pytest.fail(str(exc), pytrace=False)


def test_frame_layout_uses_header_v2_for_flexible_requests() -> None:
    frame = encode_request(7, "me", METADATA_ALL)
    size = int.from_bytes(frame[:4], "big")
    assert size == len(frame) - 4
    assert frame[4:6] == (3).to_bytes(2, "big")  # api key
    assert frame[6:8] == (12).to_bytes(2, "big")  # api version
    assert frame[8:12] == (7).to_bytes(4, "big")  # correlation id
    assert frame[12:16] == b"\x00\x02me"  # client id: legacy int16 string even in v2
    assert frame[16] == 0  # v2 header: empty tagged fields


def test_decode_api_versions_response_header_v0() -> None:
    # ApiVersions v3 is flexible, yet its response header has no tagged fields (v0).
    body = bytes.fromhex("00000100000000")  # error, empty compact array, throttle
    payload = (9).to_bytes(4, "big") + body + b"\x00"
    correlation_id, response = decode_response(bytearray(payload), ApiVersionsResponse)
    assert correlation_id == 9
    assert response.error_code == ErrorCode.none and response.api_keys == ()


def test_send_request_blocking(tansu_port: int) -> None:
    versions = send_request("127.0.0.1", tansu_port, API_VERSIONS)
    assert versions.error_code == ErrorCode.none
    assert any(key.api_key == 3 for key in versions.api_keys)
    metadata = send_request("127.0.0.1", tansu_port, METADATA_ALL)
    assert isinstance(metadata, MetadataResponse)
    assert [(b.host, b.port) for b in metadata.brokers] == [("127.0.0.1", tansu_port)]


def test_pipelined_requests_are_matched_by_correlation_id(tansu_port: int) -> None:
    async def scenario() -> list[object]:
        async with await KafkaConnection.open("127.0.0.1", tansu_port) as conn:
            requests = [METADATA_ALL, API_VERSIONS] * 10
            return await asyncio.gather(*(conn.send(r, timeout=5) for r in requests))

    responses = asyncio.run(scenario())
    assert [type(r) for r in responses] == [MetadataResponse, ApiVersionsResponse] * 10


def test_peer_closing_fails_waiting_senders() -> None:
    async def scenario() -> None:
        async def swallow_and_close(
            reader: asyncio.StreamReader, writer: asyncio.StreamWriter
        ) -> None:
            await reader.read(4)
            writer.close()

        server = await asyncio.start_server(swallow_and_close, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server:
            conn = await KafkaConnection.open("127.0.0.1", port)
            with pytest.raises(KafkaConnectionError):
                await conn.send(METADATA_ALL, timeout=5)
            assert conn.closed
            with pytest.raises(KafkaConnectionError):
                await conn.send(METADATA_ALL)
            await conn.close()

    asyncio.run(scenario())


def test_timeout_leaves_connection_usable_for_later_responses() -> None:
    async def scenario() -> None:
        async def slow_echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            # Answer each ApiVersions request with an empty v3 response after 0.3 s.
            while True:
                try:
                    size = int.from_bytes(await reader.readexactly(4), "big")
                    frame = await reader.readexactly(size)
                except asyncio.IncompleteReadError:
                    return
                await asyncio.sleep(0.3)
                body = frame[4:8] + bytes.fromhex("00000100000000") + b"\x00"
                writer.write(len(body).to_bytes(4, "big") + body)

        server = await asyncio.start_server(slow_echo, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server:
            async with await KafkaConnection.open("127.0.0.1", port) as conn:
                with pytest.raises(asyncio.TimeoutError):
                    await conn.send(API_VERSIONS, timeout=0.05)
                response = await conn.send(API_VERSIONS, timeout=5)
                assert response.error_code == ErrorCode.none

    asyncio.run(scenario())
