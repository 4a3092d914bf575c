"""Bad input gets a clear Kafka error or a closed connection, and the broker keeps
serving everyone else. Raw sockets + kio-built requests (see wire.py)."""

from __future__ import annotations

import os
import struct
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kio.schema.errors import ErrorCode

from . import wire
from .cluster_support import new_cluster
from .roundtrip_support import create_topic_confluent
from .wire import WireClient, assert_serves_normal_client

ClusterFactory = Callable[..., Any]


def _topic() -> str:
    return f"bad-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def broker(cluster_factory: ClusterFactory) -> str:
    return str(new_cluster(cluster_factory).bootstrap)


@pytest.fixture
def topic(broker: str) -> str:
    name = _topic()
    create_topic_confluent(broker, name, partitions=1)
    return name


def test_truncated_frame_closes_only_that_connection(broker: str, topic: str) -> None:
    with WireClient(broker) as bystander, WireClient(broker) as bad:
        bad.send_raw(struct.pack(">i", 100) + b"\0" * 10)
        bad.sock.shutdown(1)  # SHUT_WR: the rest of the frame never comes
        assert bad.closed_by_peer()
        assert bystander.request(wire.api_versions()).error_code == ErrorCode.none
    assert_serves_normal_client(broker, topic)


@pytest.mark.parametrize("size", [-1, -(2**31)])
def test_negative_length_closes_connection(broker: str, size: int) -> None:
    with WireClient(broker) as bad:
        bad.send_raw(struct.pack(">i", size))
        assert bad.closed_by_peer()
    assert_serves_normal_client(broker)


def test_length_over_socket_request_max_bytes_closes_connection(
    cluster_factory: ClusterFactory,
) -> None:
    bootstrap = new_cluster(cluster_factory, config={"socket.request.max.bytes": "65536"}).bootstrap
    with WireClient(bootstrap) as bad:
        # Only the prefix is sent: the broker must refuse without waiting for the body.
        bad.send_raw(struct.pack(">i", 65537))
        assert bad.closed_by_peer()
    with WireClient(bootstrap) as ok:
        # A request under the limit on the same listener is answered as usual.
        assert ok.request(wire.api_versions()).error_code == ErrorCode.none
    assert_serves_normal_client(bootstrap)


def test_unknown_api_key_is_refused(broker: str) -> None:
    with WireClient(broker) as bad:
        header = struct.pack(">hhih", 9999, 0, 7, 2) + b"it"
        bad.send_raw(struct.pack(">i", len(header)) + header)
        # Kafka cannot even parse the header of an unknown API: it closes the connection.
        assert bad.closed_by_peer()
    assert_serves_normal_client(broker)


def test_api_versions_unsupported_version_answers_v0(broker: str) -> None:
    with WireClient(broker) as client:
        response = client.request(wire.api_versions(), version=99, response_version=0)
        assert response.error_code == ErrorCode.unsupported_version
        by_key = {k.api_key: k for k in response.api_keys}
        assert 18 in by_key and by_key[18].min_version == 0 and by_key[18].max_version >= 3
        # The same connection then goes on with a version the broker offered.
        assert client.request(wire.api_versions()).error_code == ErrorCode.none
    assert_serves_normal_client(broker)


@pytest.mark.parametrize(
    ("name", "version"), [("bad name", "1"), ("it-wire", "1.0-"), ("", "1"), ("-x", "2")]
)
def test_api_versions_v3_malformed_client_software_is_invalid_request(
    broker: str, name: str, version: str
) -> None:
    # KIP-511: v3's client name and version must match Kafka's pattern.
    with WireClient(broker) as client:
        request = wire.ApiVersionsRequest(
            client_software_name=name, client_software_version=version
        )
        response = client.request(request)
        assert response.error_code == ErrorCode.invalid_request
        assert response.api_keys == ()
        # The connection stays usable: a well-formed request then gets the ranges.
        good = client.request(wire.api_versions())
        assert good.error_code == ErrorCode.none and len(good.api_keys) > 10
    assert_serves_normal_client(broker)


def test_unsupported_version_of_another_api_is_refused(broker: str, topic: str) -> None:
    with WireClient(broker) as bad:
        bad.send_raw(wire.encode_request(wire.metadata(topic), 1, version=999))
        # Only ApiVersions has a fallback answer; for any other API Kafka closes.
        assert bad.closed_by_peer()
    assert_serves_normal_client(broker, topic)


def test_wrong_crc_is_corrupt_message(broker: str, topic: str) -> None:
    corrupt = bytearray(wire.batch([b"hello", b"world"]))
    corrupt[-1] ^= 0xFF  # inside the CRC-covered records
    with WireClient(broker) as client:
        response = client.request(wire.produce(topic, 0, bytes(corrupt)))
        assert wire.produce_error(response) == ErrorCode.corrupt_message
        fetched = wire.fetch_partition(client.request(wire.fetch(topic, 0, 0)))
        assert fetched.high_watermark == 0, "a corrupt batch must not be appended"
    assert_serves_normal_client(broker, topic)


def test_batch_over_message_max_bytes(cluster_factory: ClusterFactory) -> None:
    bootstrap = new_cluster(cluster_factory, config={"message.max.bytes": "10000"}).bootstrap
    name = _topic()
    create_topic_confluent(bootstrap, name, partitions=1)
    with WireClient(bootstrap) as client:
        too_big = client.request(wire.produce(name, 0, wire.batch([b"x" * 20_000])))
        assert wire.produce_error(too_big) == ErrorCode.message_too_large
        fits = client.request(wire.produce(name, 0, wire.batch([b"x" * 1_000])))
        assert wire.produce_error(fits) == ErrorCode.none
    assert_serves_normal_client(bootstrap, name)


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_magic_is_rejected(broker: str, topic: str, magic: int) -> None:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 20)
    builder.append(0, timestamp=None if magic == 0 else 1_700_000_000_000, key=None, value=b"v")
    with WireClient(broker) as client:
        response = client.request(wire.produce(topic, 0, bytes(builder.build())))
        # Produce v3+ carries only v2 batches: Kafka answers with one of these.
        assert wire.produce_error(response) in {
            ErrorCode.unsupported_for_message_format,
            ErrorCode.invalid_record,
            ErrorCode.corrupt_message,
        }
        fetched = wire.fetch_partition(client.request(wire.fetch(topic, 0, 0)))
        assert fetched.high_watermark == 0
    assert_serves_normal_client(broker, topic)


def test_produce_unknown_topic_auto_create_on(cluster_factory: ClusterFactory) -> None:
    bootstrap = new_cluster(
        cluster_factory, config={"auto.create.topics.enable": "true", "num.partitions": "2"}
    ).bootstrap
    name = _topic()
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    delivered: list[Any] = []
    producer.produce(name, value=b"first", on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(20) == 0
    assert delivered == [None]
    with WireClient(bootstrap) as client:
        topic_meta = client.request(wire.metadata(name)).topics[0]
        assert topic_meta.error_code == ErrorCode.none
        assert len(topic_meta.partitions) == 2  # num.partitions
    assert_serves_normal_client(bootstrap, name)


def test_produce_unknown_topic_auto_create_off(cluster_factory: ClusterFactory) -> None:
    bootstrap = new_cluster(
        cluster_factory, config={"auto.create.topics.enable": "false"}
    ).bootstrap
    name = _topic()
    with WireClient(bootstrap) as client:
        response = client.request(wire.produce(name, 0, wire.batch([b"v"])))
        assert wire.produce_error(response) == ErrorCode.unknown_topic_or_partition
        meta = client.request(wire.metadata(name, auto_create=True))
        assert meta.topics[0].error_code == ErrorCode.unknown_topic_or_partition
    assert_serves_normal_client(bootstrap)


def test_fetch_beyond_log_end_is_offset_out_of_range(broker: str, topic: str) -> None:
    with WireClient(broker) as client:
        assert (
            wire.produce_error(client.request(wire.produce(topic, 0, wire.batch([b"a"]))))
            == ErrorCode.none
        )
        at_end = wire.fetch_partition(client.request(wire.fetch(topic, 0, 1)))
        assert at_end.error_code == ErrorCode.none  # the log end itself is a valid position
        beyond = wire.fetch_partition(client.request(wire.fetch(topic, 0, 1000)))
        assert beyond.error_code == ErrorCode.offset_out_of_range
        negative = wire.fetch_partition(client.request(wire.fetch(topic, 0, -5)))
        assert negative.error_code == ErrorCode.offset_out_of_range
    assert_serves_normal_client(broker, topic)


@pytest.fixture
def tiny_tmpfs(tmp_path: Path) -> Iterator[Path]:
    mount_point = tmp_path / "tmpfs"
    mount_point.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount_point)], check=True
    )
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def test_full_disk_is_storage_error_and_recovers(
    cluster_factory: ClusterFactory, tiny_tmpfs: Path
) -> None:
    log_dir = tiny_tmpfs / "data"
    bootstrap = new_cluster(cluster_factory, config={"log.dirs": str(log_dir)}).bootstrap
    name = _topic()
    create_topic_confluent(bootstrap, name, partitions=1)
    # Leave about 1 MiB free, in one file we can delete to "return" the space.
    filler = tiny_tmpfs / "filler"
    stat = os.statvfs(tiny_tmpfs)
    filler.write_bytes(b"\0" * max(0, stat.f_bavail * stat.f_frsize - (1 << 20)))

    acked: list[bytes] = []
    with WireClient(bootstrap) as client:
        error = ErrorCode.none
        for n in range(40):
            value = bytes([n % 251]) * 100_000
            error = wire.produce_error(client.request(wire.produce(name, 0, wire.batch([value]))))
            if error != ErrorCode.none:
                break
            acked.append(value)
        assert error == ErrorCode.kafka_storage_error
        assert acked, "some records fit before the disk filled"
        _assert_log_holds(client, name, acked)
    assert_serves_normal_client(bootstrap, name)

    filler.unlink()
    with WireClient(bootstrap) as client:
        deadline = time.monotonic() + 10
        while True:
            error = wire.produce_error(client.request(wire.produce(name, 0, wire.batch([b"z"]))))
            if error == ErrorCode.none or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert error == ErrorCode.none, "the broker recovers once space returns"
        _assert_log_holds(client, name, [*acked, b"z"])


def _assert_log_holds(client: WireClient, topic: str, values: list[bytes]) -> None:
    """Fetch from 0 and compare every record value, batch by batch (kafka-python decodes)."""
    from kafka.record import MemoryRecords

    got: list[bytes] = []
    offset = 0
    for _ in range(len(values) + 1):
        if len(got) >= len(values):
            break
        part = wire.fetch_partition(client.request(wire.fetch(topic, 0, offset)))
        assert part.error_code == ErrorCode.none
        records = MemoryRecords(part.records or b"")
        while (batch := records.next_batch()) is not None:
            for record in batch:
                if record.offset >= offset:
                    got.append(record.value)
                    offset = record.offset + 1
    assert got == values


def test_random_bytes_never_kill_the_broker(broker: str, topic: str) -> None:
    with WireClient(broker) as bystander:

        @settings(
            max_examples=50,
            deadline=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        )
        @given(
            garbage=st.binary(max_size=512),
            framed=st.booleans(),
        )
        def throw(garbage: bytes, framed: bool) -> None:
            with WireClient(broker, timeout_s=1.0) as bad:
                # Framed garbage reaches the header/body parsers; unframed hits the length.
                bad.send_raw(struct.pack(">i", len(garbage)) + garbage if framed else garbage)
                bad.sock.shutdown(1)
                # Closed, or answered and then closed at our EOF: either way, no hang.
                bad.closed_by_peer(1.0)
            assert bystander.request(wire.api_versions()).error_code == ErrorCode.none

        throw()
    assert_serves_normal_client(broker, topic)


# APIs whose body opens with an array, at a flexible version: a count of ~2^32 elements
# made kio's native reader abort the whole broker process before lengths were checked.
@pytest.mark.parametrize(("api_key", "version"), [(3, 12), (19, 5), (32, 4), (42, 2)])
def test_an_array_count_past_the_end_never_kills_the_broker(
    broker: str, topic: str, api_key: int, version: int
) -> None:
    header = struct.pack(">hhih", api_key, version, 7, 3) + b"bad" + b"\0"
    body = b"\xff\xff\xff\xff\x0f"  # compact count 2^32 - 2
    with WireClient(broker) as bystander, WireClient(broker) as bad:
        bad.send_raw(struct.pack(">i", len(header) + len(body)) + header + body)
        assert bad.closed_by_peer()
        assert bystander.request(wire.api_versions()).error_code == ErrorCode.none
    assert_serves_normal_client(broker, topic)
