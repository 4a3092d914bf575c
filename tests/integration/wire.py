"""A raw-socket Kafka client for feeding a broker exact bytes, built only on kio.

Independent of strandline's own codec on purpose: these tests check the broker from outside.
"""

from __future__ import annotations

import io
import socket
import struct
import time
from datetime import timedelta
from typing import Any

from kafka.record.default_records import DefaultRecordBatchBuilder
from kio.index import load_response_schema
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12 import request as fetch_v12
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v9 import request as produce_v9
from kio.schema.types import BrokerId, TopicName
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import Records, i8, i16, i32, i32Timedelta, i64

_SIZE = struct.Struct(">i")
_HEADER = struct.Struct(">hhih")
API_VERSIONS_KEY = 18


def split_bootstrap(bootstrap: str) -> tuple[str, int]:
    host, port = bootstrap.rsplit(":", 1)
    return host, int(port)


def encode_request(
    request: Any, correlation_id: int, client_id: str = "it-wire", version: int | None = None
) -> bytes:
    """Size prefix + request header (v1, or v2 when flexible) + kio-written body."""
    cid = client_id.encode()
    body = io.BytesIO()
    entity_writer(type(request))(body, request)
    header = (
        _HEADER.pack(
            request.__api_key__,
            request.__version__ if version is None else version,
            correlation_id,
            len(cid),
        )
        + cid
    )
    if request.__flexible__:
        header += b"\0"  # no tagged fields in the header
    payload = header + body.getvalue()
    return _SIZE.pack(len(payload)) + payload


class WireClient:
    """One connection; blocking, short timeouts."""

    def __init__(self, bootstrap: str, timeout_s: float = 5.0) -> None:
        self.sock = socket.create_connection(split_bootstrap(bootstrap), timeout=timeout_s)
        self._correlation = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes | None:
        """One response frame, or None if the broker closed the connection."""
        prefix = self._read_exactly(4)
        if prefix is None:
            return None
        (size,) = _SIZE.unpack(prefix)
        return self._read_exactly(size)

    def _read_exactly(self, n: int) -> bytes | None:
        chunks = bytearray()
        while len(chunks) < n:
            try:
                chunk = self.sock.recv(n - len(chunks))
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            chunks += chunk
        return bytes(chunks)

    def request(
        self, request: Any, version: int | None = None, response_version: int | None = None
    ) -> Any:
        """Send `request` and parse the answer; AssertionError if the broker hung up."""
        self._correlation += 1
        self.send_raw(encode_request(request, self._correlation, version=version))
        frame = self.read_frame()
        assert frame is not None, f"broker closed the connection on {type(request).__name__}"
        (correlation,) = _SIZE.unpack_from(frame)
        assert correlation == self._correlation
        api_key = int(request.__api_key__)
        rv = int(request.__version__) if response_version is None else response_version
        response_cls = load_response_schema(api_key, rv)
        pos = 4
        # ApiVersions always answers with header v0 so old clients can read it.
        if response_cls.__flexible__ and api_key != API_VERSIONS_KEY:
            pos += 1
        body, _ = entity_reader(response_cls)(frame, pos)
        return body

    def closed_by_peer(self, timeout_s: float = 5.0) -> bool:
        """True once the broker closes this connection (EOF or reset) within the timeout."""
        self.sock.settimeout(timeout_s)
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline:
                if not self.sock.recv(65536):
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False
        return False


def api_versions() -> ApiVersionsRequest:
    return ApiVersionsRequest(client_software_name="it-wire", client_software_version="1")


def metadata(*topics: str, auto_create: bool = False) -> MetadataRequest:
    return MetadataRequest(
        topics=tuple(MetadataRequestTopic(topic_id=None, name=TopicName(t)) for t in topics),
        allow_auto_topic_creation=auto_create,
        include_topic_authorized_operations=False,
    )


def produce(topic: str, partition: int, records: bytes, acks: int = 1) -> Any:
    return produce_v9.ProduceRequest(
        transactional_id=None,
        acks=i16(acks),
        timeout=i32Timedelta.parse(timedelta(seconds=5)),
        topic_data=(
            produce_v9.TopicProduceData(
                name=TopicName(topic),
                partition_data=(
                    produce_v9.PartitionProduceData(index=i32(partition), records=Records(records)),
                ),
            ),
        ),
    )


def produce_error(response: Any) -> ErrorCode:
    return response.responses[0].partition_responses[0].error_code


def fetch(topic: str, partition: int, offset: int, max_wait_ms: int = 0) -> Any:
    return fetch_many(topic, {partition: offset}, max_wait_ms=max_wait_ms)


def fetch_many(
    topic: str,
    offsets: dict[int, int],
    *,
    max_wait_ms: int = 0,
    max_bytes: int = 1 << 20,
    session_id: int = 0,
    session_epoch: int = -1,
    forgotten: tuple[int, ...] = (),
) -> Any:
    """A v12 Fetch of `offsets` (partition -> fetch offset), 1 MiB per partition; with
    KIP-227 session fields and forgotten partitions when given."""
    return fetch_v12.FetchRequest(
        cluster_id=None,
        replica_id=BrokerId(-1),
        max_wait=i32Timedelta.parse(timedelta(milliseconds=max_wait_ms)),
        min_bytes=i32(1),
        max_bytes=i32(max_bytes),
        isolation_level=i8(0),
        session_id=i32(session_id),
        session_epoch=i32(session_epoch),
        topics=(
            (
                fetch_v12.FetchTopic(
                    topic=TopicName(topic),
                    partitions=tuple(
                        fetch_v12.FetchPartition(
                            partition=i32(p),
                            current_leader_epoch=i32(-1),
                            fetch_offset=i64(offset),
                            last_fetched_epoch=i32(-1),
                            log_start_offset=i64(-1),
                            partition_max_bytes=i32(1 << 20),
                        )
                        for p, offset in offsets.items()
                    ),
                ),
            )
            if offsets
            else ()
        ),
        forgotten_topics_data=(
            (
                fetch_v12.ForgottenTopic(
                    topic=TopicName(topic), partitions=tuple(map(i32, forgotten))
                ),
            )
            if forgotten
            else ()
        ),
        rack_id="",
    )


def fetch_partition(response: Any) -> Any:
    return response.responses[0].partitions[0]


def batch(values: list[bytes], timestamp_ms: int = 1_700_000_000_000) -> bytes:
    """A valid uncompressed v2 batch (kafka-python's builder)."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 30,
    )
    for i, value in enumerate(values):
        builder.append(i, timestamp=timestamp_ms + i, key=None, value=value, headers=[])
    return bytes(builder.build())


def assert_serves_normal_client(bootstrap: str, topic: str | None = None) -> None:
    """A fresh connection still gets ApiVersions and Metadata answered without error."""
    with WireClient(bootstrap) as client:
        versions = client.request(api_versions())
        assert versions.error_code == ErrorCode.none
        assert versions.api_keys
        meta = client.request(metadata(*([topic] if topic else [])))
        assert meta.brokers
        if topic:
            assert meta.topics[0].error_code == ErrorCode.none
