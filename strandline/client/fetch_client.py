"""Executor-side Kafka client for one partition: raw Fetch bytes and offset bounds.

It finds the partition's leader with a Metadata request, keeps one blocking connection
to it, and sends Fetch (v4-12, the highest both sides speak) and ListOffsets requests
built from kio's classes. The Fetch response's records stay bytes: decoding them is
`record_decoder`'s job. Errors come back as exceptions the caller can act on:
`RetriableFetchError` (leadership moving, a broker gone: refresh and retry) and
`FetchOffsetOutOfRangeError`. No retry loop lives here; the range reader owns the deadline.

On a secured cluster the same `kafka.*` settings as the driver's librdkafka clients
(`ClientSecurity.from_config`) wrap each connection in TLS and log it in with SASL
(`security.sasl_login`, the exchange the asyncio client uses too) before any request.
A refused login raises `SaslLoginError` and an unverifiable certificate
`FetchError`: neither is retried.
"""

from __future__ import annotations

import datetime
import socket
import ssl
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from strandline.client.connection import KafkaConnectionError, response_type_for
from strandline.client.security import ClientSecurity, run_sasl_login
from strandline.protocol.codec import encode_request
from strandline.protocol.messages import build, request_module

API_VERSIONS, METADATA, FETCH, LIST_OFFSETS = 18, 3, 1, 2
# What we can build and parse: (lowest, highest) per API. docs/decisions.md: Fetch 4-12.
OUR_VERSIONS = {FETCH: (4, 12), METADATA: (1, 12), LIST_OFFSETS: (1, 7)}
EARLIEST_TIMESTAMP, LATEST_TIMESTAMP = -2, -1
# Kafka's IsolationLevel on the wire.
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
CONSUMER_REPLICA_ID = -1

DEFAULT_PARTITION_MAX_BYTES = 16 * 1024 * 1024
DEFAULT_FETCH_MAX_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_WAIT_MS = 100
REQUEST_TIMEOUT_S = 30.0

_SIZE = struct.Struct(">i")
# Errors the Java consumer also meets as "retriable": leadership is moving or the
# broker is not ready; a new leader (or the same one, later) will answer.
_ALSO_RETRIABLE = frozenset({ErrorCode.broker_not_available})


class FetchError(RuntimeError):
    """The broker refused the request for good (e.g. authorization)."""


class RetriableFetchError(FetchError):
    """Leadership is moving or a broker is unreachable: refresh metadata and retry."""


class FetchOffsetOutOfRangeError(FetchError):
    """The fetch offset is not in the leader's log (below its start or past its end)."""


@dataclass(frozen=True)
class FetchedRecords:
    records: bytes
    high_watermark: int
    # -1 when the broker's Fetch version does not carry it (below v5).
    log_start_offset: int
    # read_committed: the last stable offset, and the (producer id, first offset) of
    # every aborted transaction overlapping the returned records.
    last_stable_offset: int = -1
    aborted_transactions: tuple[tuple[int, int], ...] = ()


def _check(error: ErrorCode, what: str) -> None:
    if error == ErrorCode.none:
        return
    if error == ErrorCode.offset_out_of_range:
        raise FetchOffsetOutOfRangeError(what)
    if error.retriable or error in _ALSO_RETRIABLE:
        raise RetriableFetchError(f"{what}: {error.name}")
    raise FetchError(f"{what}: {error.name}")


def _host_port(address: str) -> tuple[str, int]:
    host, _, port = address.strip().rpartition(":")
    return host.strip("[]"), int(port)


def fetch_partition(
    conn: BlockingConnection,
    topic: str,
    partition: int,
    offset: int,
    *,
    partition_max_bytes: int = DEFAULT_PARTITION_MAX_BYTES,
    fetch_max_bytes: int = DEFAULT_FETCH_MAX_BYTES,
    max_wait: datetime.timedelta = datetime.timedelta(milliseconds=DEFAULT_MAX_WAIT_MS),
    replica_id: int = CONSUMER_REPLICA_ID,
    isolation_level: int = READ_UNCOMMITTED,
) -> FetchedRecords:
    """One Fetch of one partition from the broker at the other end of `conn` (its leader,
    or any replica with replica_id -2, Kafka's debugging consumer)."""
    module = request_module(FETCH, conn.version(FETCH))
    wanted = build(
        module.FetchPartition,
        partition=partition,
        current_leader_epoch=-1,
        fetch_offset=offset,
        last_fetched_epoch=-1,
        log_start_offset=-1,
        partition_max_bytes=partition_max_bytes,
    )
    request = build(
        module.FetchRequest,
        replica_id=replica_id,
        max_wait=max_wait,
        min_bytes=1,
        max_bytes=fetch_max_bytes,
        isolation_level=isolation_level,
        session_id=0,
        session_epoch=-1,  # no fetch session (KIP-227): a full fetch every time
        topics=(build(module.FetchTopic, topic=topic, partitions=(wanted,)),),
        forgotten_topics_data=(),
        rack_id="",
    )
    response = conn.send(request)
    _check(response.error_code, f"fetch from {conn.address}")
    for answered in response.responses:
        for p in answered.partitions:
            if answered.topic == topic and p.partition_index == partition:
                _check(p.error_code, f"fetch {topic}-{partition} at {offset}")
                return FetchedRecords(
                    records=bytes(p.records or b""),
                    high_watermark=int(p.high_watermark),
                    log_start_offset=int(getattr(p, "log_start_offset", -1)),
                    last_stable_offset=int(p.last_stable_offset),
                    aborted_transactions=tuple(
                        (int(a.producer_id), int(a.first_offset))
                        for a in (p.aborted_transactions or ())
                    ),
                )
    raise RetriableFetchError(f"{conn.address} did not answer for {topic}-{partition}")


class BlockingConnection:
    """One socket to one broker; requests are sent and answered one at a time. With
    `security`, the socket is TLS and/or logged in with SASL before anything else."""

    def __init__(
        self,
        host: str,
        port: int,
        client_id: str,
        timeout_s: float,
        security: ClientSecurity | None = None,
    ) -> None:
        self.address = f"{host}:{port}"
        self._client_id = client_id
        self._correlation_id = 0
        try:
            self._sock = socket.create_connection((host, port), timeout=timeout_s)
        except OSError as exc:
            raise RetriableFetchError(f"cannot connect to {self.address}: {exc}") from exc
        try:
            self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if security is not None:
                self._secure(host, security)
            self.versions = self._negotiate()
        except BaseException:
            self.close()
            raise

    def _secure(self, host: str, security: ClientSecurity) -> None:
        context = security.ssl_context
        if context is not None:
            try:
                # The handshake runs here, under the connection's timeout.
                self._sock = context.wrap_socket(
                    self._sock, server_hostname=host if security.check_hostname else None
                )
            except ssl.SSLCertVerificationError as exc:
                raise FetchError(f"TLS handshake with {self.address} failed: {exc}") from exc
            except OSError as exc:
                raise RetriableFetchError(
                    f"TLS handshake with {self.address} failed: {exc}"
                ) from exc
        if security.sasl_mechanism is not None:
            run_sasl_login(security, self.send)

    def _negotiate(self) -> dict[int, int]:
        """The version to use per API: the highest that both we and the broker speak."""
        response = self.send(request_module(API_VERSIONS, 0).ApiVersionsRequest())
        _check(response.error_code, f"ApiVersions from {self.address}")
        theirs = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        chosen: dict[int, int] = {}
        for api_key, (our_min, our_max) in OUR_VERSIONS.items():
            their_min, their_max = theirs.get(api_key, (our_max + 1, -1))
            if max(our_min, their_min) <= min(our_max, their_max):
                chosen[api_key] = min(our_max, their_max)
        return chosen

    def version(self, api_key: int) -> int:
        try:
            return self.versions[api_key]
        except KeyError:
            low, high = OUR_VERSIONS[api_key]
            raise FetchError(
                f"broker {self.address} speaks no version {low}-{high} of API {api_key}"
            ) from None

    def send(self, request: Any) -> Any:
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        try:
            self._sock.sendall(encode_request(self._correlation_id, self._client_id, request))
            (size,) = _SIZE.unpack(self._recv(4))
            payload = self._recv(size)
        except (OSError, KafkaConnectionError) as exc:
            self.close()
            raise RetriableFetchError(f"connection to {self.address} failed: {exc}") from exc
        response_type = response_type_for(request)
        header, pos = entity_reader(response_type.__header_schema__)(payload, 0)
        if header.correlation_id != self._correlation_id:
            self.close()
            raise RetriableFetchError(f"{self.address} answered out of order")
        response, _ = entity_reader(response_type)(payload, pos)
        return response

    def _recv(self, n: int) -> memoryview:
        # One buffer, filled in place: a fetch response is tens of MiB. kio's readers
        # take a read-only memoryview (not a bytearray).
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            chunk = self._sock.recv_into(view[got:])
            if chunk == 0:
                raise KafkaConnectionError("connection closed by the broker")
            got += chunk
        return view.toreadonly()

    def close(self) -> None:
        self._sock.close()


class PartitionClient:
    """Fetches one topic-partition from its current leader."""

    def __init__(
        self,
        kafka_config: Mapping[str, str],
        topic: str,
        partition: int,
        timeout_s: float = REQUEST_TIMEOUT_S,
    ) -> None:
        try:
            self._security = ClientSecurity.from_config(kafka_config)
        except ValueError as exc:  # checked on the driver; an executor may lack a file
            raise FetchError(f"kafka security options: {exc}") from exc
        self.topic = topic
        self.partition = partition
        self._bootstrap = [
            _host_port(a) for a in kafka_config["bootstrap.servers"].split(",") if a.strip()
        ]
        self._client_id = kafka_config.get("client.id", "strandline-spark")
        self.partition_max_bytes = int(
            kafka_config.get("max.partition.fetch.bytes", DEFAULT_PARTITION_MAX_BYTES)
        )
        self._fetch_max_bytes = int(kafka_config.get("fetch.max.bytes", DEFAULT_FETCH_MAX_BYTES))
        self._max_wait = datetime.timedelta(
            milliseconds=int(kafka_config.get("fetch.wait.max.ms", DEFAULT_MAX_WAIT_MS))
        )
        self._timeout_s = timeout_s
        # `isolation.level` as the source option `kafka.isolation.level` sets it.
        self.isolation_level = (
            READ_COMMITTED
            if kafka_config.get("isolation.level", "read_uncommitted") == "read_committed"
            else READ_UNCOMMITTED
        )
        self._brokers: dict[int, tuple[str, int]] = {}
        self._leader: BlockingConnection | None = None

    # ------------------------------------------------------------------ leader

    def _connect(self, host: str, port: int) -> BlockingConnection:
        # A parked fetch can take max_wait longer than any other request.
        timeout = self._timeout_s + self._max_wait.total_seconds()
        return BlockingConnection(host, port, self._client_id, timeout, self._security)

    def _leader_connection(self) -> BlockingConnection:
        if self._leader is None:
            host, port = self._find_leader()
            self._leader = self._connect(host, port)
        return self._leader

    def _find_leader(self) -> tuple[str, int]:
        """Ask the bootstrap servers, then every broker seen so far, who leads."""
        candidates = list(dict.fromkeys([*self._bootstrap, *self._brokers.values()]))
        last: Exception | None = None
        for host, port in candidates:
            try:
                conn = self._connect(host, port)
            except RetriableFetchError as exc:
                last = exc
                continue
            try:
                return self._leader_from(conn)
            except RetriableFetchError as exc:
                last = exc
            finally:
                conn.close()
        raise RetriableFetchError(f"no leader for {self.topic}-{self.partition}: {last}")

    def _leader_from(self, conn: BlockingConnection) -> tuple[str, int]:
        version = conn.version(METADATA)
        module = request_module(METADATA, version)
        request = build(
            module.MetadataRequest,
            topics=(build(module.MetadataRequestTopic, name=self.topic, topic_id=None),),
            allow_auto_topic_creation=False,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        )
        response = conn.send(request)
        self._brokers = {b.node_id: (b.host, b.port) for b in response.brokers}
        what = f"metadata for {self.topic}-{self.partition} from {conn.address}"
        for topic in response.topics:
            if topic.name != self.topic:
                continue
            _check(topic.error_code, what)
            for p in topic.partitions:
                if p.partition_index == self.partition:
                    _check(p.error_code, what)
                    if p.leader_id in self._brokers:
                        return self._brokers[p.leader_id]
                    raise RetriableFetchError(f"{what}: leader {p.leader_id} unknown")
        raise RetriableFetchError(f"{what}: {ErrorCode.unknown_topic_or_partition.name}")

    def _forget_leader(self) -> None:
        if self._leader is not None:
            self._leader.close()
            self._leader = None

    def _send_to_leader(self, make_request: Any) -> Any:
        """Send `make_request(connection)`; a retriable error drops the leader so the next
        call asks the metadata again."""
        try:
            conn = self._leader_connection()
            return make_request(conn)
        except RetriableFetchError:
            self._forget_leader()
            raise

    # ------------------------------------------------------------------ requests

    def fetch(self, offset: int) -> FetchedRecords:
        """Record batches from `offset` on (the first may start before it)."""
        return self._send_to_leader(lambda conn: self._fetch(conn, offset))  # type: ignore[no-any-return]

    def _fetch(self, conn: BlockingConnection, offset: int) -> FetchedRecords:
        return fetch_partition(
            conn,
            self.topic,
            self.partition,
            offset,
            partition_max_bytes=self.partition_max_bytes,
            fetch_max_bytes=max(self._fetch_max_bytes, self.partition_max_bytes),
            max_wait=self._max_wait,
            isolation_level=self.isolation_level,
        )

    def list_offsets(self) -> tuple[int, int]:
        """(log start offset, end) from the leader: the end is the high watermark, or the
        last stable offset when reading read_committed."""
        low = self._send_to_leader(lambda conn: self._list_offset(conn, EARLIEST_TIMESTAMP))
        high = self._send_to_leader(lambda conn: self._list_offset(conn, LATEST_TIMESTAMP))
        return int(low), int(high)

    def _list_offset(self, conn: BlockingConnection, timestamp: int) -> int:
        # One timestamp per request: Kafka refuses a partition listed twice.
        module = request_module(LIST_OFFSETS, conn.version(LIST_OFFSETS))
        request = build(
            module.ListOffsetsRequest,
            replica_id=CONSUMER_REPLICA_ID,
            isolation_level=self.isolation_level,
            topics=(
                build(
                    module.ListOffsetsTopic,
                    name=self.topic,
                    partitions=(
                        build(
                            module.ListOffsetsPartition,
                            partition_index=self.partition,
                            current_leader_epoch=-1,
                            timestamp=timestamp,
                        ),
                    ),
                ),
            ),
        )
        response = conn.send(request)
        for topic in response.topics:
            for p in topic.partitions:
                if topic.name == self.topic and p.partition_index == self.partition:
                    _check(p.error_code, f"list offsets of {self.topic}-{self.partition}")
                    return int(p.offset)
        raise RetriableFetchError(
            f"{conn.address} did not answer for {self.topic}-{self.partition}"
        )

    def close(self) -> None:
        self._forget_leader()
