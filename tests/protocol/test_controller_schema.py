# kio types fields with phantom ints (i32, BrokerId, TopicName); the expectations
# below are plain literals on purpose, so the checker's arg-type complaint is noise here.
# mypy: disable-error-code="arg-type"
"""The controller wire classes against bytes laid out by hand from Kafka's JSON schemas.

Each layout below is written field by field from the 3.x JSON schema (see
`strandline.protocol.controller_schema`), with its own tiny encoders, so a wrong field
order, type or flexible encoding in our classes cannot hide behind a symmetric
round trip through kio.
"""

from __future__ import annotations

import dataclasses
import io
import struct
import typing
import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

from strandline.protocol import controller_schema as schema
from strandline.protocol.codec import encode_request, parse_header, skip_header_tags
from strandline.protocol.controller_schema import (
    controlled_shutdown_v3,
    leader_and_isr_v4,
    leader_and_isr_v5,
    leader_and_isr_v6,
    stop_replica_v3,
    update_metadata_v7,
)

# -- hand encoders (Kafka protocol primitives, independent of kio) --------------------------


def uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def int8(n: int) -> bytes:
    return struct.pack(">b", n)


def int16(n: int) -> bytes:
    return struct.pack(">h", n)


def int32(n: int) -> bytes:
    return struct.pack(">i", n)


def int64(n: int) -> bytes:
    return struct.pack(">q", n)


def boolean(b: bool) -> bytes:
    return b"\x01" if b else b"\x00"


def compact_string(s: str | None) -> bytes:
    if s is None:
        return uvarint(0)
    raw = s.encode()
    return uvarint(len(raw) + 1) + raw


def compact_array(items: list[bytes]) -> bytes:
    return uvarint(len(items) + 1) + b"".join(items)


def int32_array(values: list[int]) -> bytes:
    return compact_array([int32(v) for v in values])


NO_TAGS = uvarint(0)  # every flexible struct ends with its (empty) tagged-field section

TOPIC_ID = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")


def read(cls: type[Any], data: bytes) -> Any:
    value, size = entity_reader(cls)(data, 0)
    assert size == len(data), f"{cls.__name__} consumed {size} of {len(data)} bytes"
    return value


def write(value: Any) -> bytes:
    out = io.BytesIO()
    entity_writer(type(value))(out, value)
    return out.getvalue()


# -- the classes look like kio's --------------------------------------------------------


ALL_CLASSES = [
    cls
    for module in (
        leader_and_isr_v4,
        leader_and_isr_v5,
        leader_and_isr_v6,
        stop_replica_v3,
        update_metadata_v7,
        controlled_shutdown_v3,
    )
    for cls in vars(module).values()
    if isinstance(cls, type) and dataclasses.is_dataclass(cls) and cls.__module__ == module.__name__
]


@pytest.mark.parametrize(
    "cls", ALL_CLASSES, ids=lambda c: f"{c.__module__.split('.')[-1]}.{c.__name__}"
)
def test_classes_have_kio_shape(cls: type[Any]) -> None:
    params = cls.__dataclass_params__  # type: ignore[attr-defined]
    assert params.frozen
    assert "__slots__" in cls.__dict__
    assert all(f.kw_only for f in dataclasses.fields(cls))
    assert cls.__flexible__ is True
    module = cls.__module__.rsplit(".", 1)[-1]
    assert cls.__version__ == int(module.rsplit("_v", 1)[1])
    api_key = {
        "leader": schema.LEADER_AND_ISR,
        "stop": schema.STOP_REPLICA,
        "update": schema.UPDATE_METADATA,
        "controlled": schema.CONTROLLED_SHUTDOWN,
    }[module.split("_")[0]]
    assert cls.__api_key__ == api_key
    is_response_side = cls.__header_schema__.__name__ == "ResponseHeader"
    if cls.__type__ is EntityType.request:
        assert not is_response_side
    elif cls.__type__ is EntityType.response:
        assert is_response_side
    else:
        assert cls.__type__ is EntityType.nested
    for f in dataclasses.fields(cls):
        # kio reads a primitive by its `kafka_type`; a struct (or array of structs) by its class.
        inner = typing.get_args(f.type)[0] if typing.get_origin(f.type) is tuple else f.type
        if not dataclasses.is_dataclass(inner):
            assert "kafka_type" in f.metadata, f"{cls.__name__}.{f.name}"


def test_index_finds_every_defined_version() -> None:
    for api_key, (low, high) in schema.SUPPORTED_VERSIONS.items():
        for version in range(low, high + 1):
            req = schema.request_type(api_key, version)
            resp = schema.response_type(api_key, version)
            assert (req.__api_key__, req.__version__) == (api_key, version)
            assert (resp.__api_key__, resp.__version__) == (api_key, version)
            assert req.__type__ is EntityType.request
            assert resp.__type__ is EntityType.response
    with pytest.raises(LookupError):
        schema.request_type(schema.LEADER_AND_ISR, 7)
    with pytest.raises(LookupError):
        schema.response_type(schema.UPDATE_METADATA, 8)


# -- LeaderAndIsr -----------------------------------------------------------------------


def _lai_partition(*, v6: bool) -> bytes:
    return (
        int32(2)  # PartitionIndex
        + int32(7)  # ControllerEpoch
        + int32(1)  # Leader
        + int32(4)  # LeaderEpoch
        + int32_array([1, 3])  # Isr
        + int32(12)  # PartitionEpoch (zkVersion)
        + int32_array([1, 2, 3])  # Replicas
        + int32_array([3])  # AddingReplicas
        + int32_array([2])  # RemovingReplicas
        + boolean(True)  # IsNew
        + (int8(1) if v6 else b"")  # LeaderRecoveryState (v6+)
        + NO_TAGS
    )


def _lai_live_leader() -> bytes:
    return int32(1) + compact_string("127.0.0.1") + int32(19092) + NO_TAGS


LAI_V6_BYTES = (
    int32(0)  # ControllerId
    + int32(7)  # ControllerEpoch
    + int64(4294967296)  # BrokerEpoch
    + int8(2)  # Type (v5+)
    + compact_array(
        [
            compact_string("orders")
            + TOPIC_ID.bytes
            + compact_array([_lai_partition(v6=True)])
            + NO_TAGS
        ]
    )
    + compact_array([_lai_live_leader()])
    + NO_TAGS
)


def test_leader_and_isr_v6_request_from_hand_laid_bytes() -> None:
    m = leader_and_isr_v6
    expected = m.LeaderAndIsrRequest(
        controller_id=0,
        controller_epoch=7,
        broker_epoch=4294967296,
        type=2,
        topic_states=(
            m.LeaderAndIsrTopicState(
                topic_name="orders",
                topic_id=TOPIC_ID,
                partition_states=(
                    m.LeaderAndIsrPartitionState(
                        partition_index=2,
                        controller_epoch=7,
                        leader=1,
                        leader_epoch=4,
                        isr=(1, 3),
                        partition_epoch=12,
                        replicas=(1, 2, 3),
                        adding_replicas=(3,),
                        removing_replicas=(2,),
                        is_new=True,
                        leader_recovery_state=1,
                    ),
                ),
            ),
        ),
        live_leaders=(m.LeaderAndIsrLiveLeader(broker_id=1, host_name="127.0.0.1", port=19092),),
    )
    assert read(m.LeaderAndIsrRequest, LAI_V6_BYTES) == expected
    assert write(expected) == LAI_V6_BYTES


def test_leader_and_isr_v4_request_has_no_type_nor_topic_id() -> None:
    data = (
        int32(0)
        + int32(7)
        + int64(-1)
        + compact_array(
            [compact_string("orders") + compact_array([_lai_partition(v6=False)]) + NO_TAGS]
        )
        + compact_array([_lai_live_leader()])
        + NO_TAGS
    )
    decoded = read(leader_and_isr_v4.LeaderAndIsrRequest, data)
    assert decoded.broker_epoch == -1
    assert decoded.topic_states[0].topic_name == "orders"
    assert decoded.topic_states[0].partition_states[0].replicas == (1, 2, 3)
    assert decoded.live_leaders[0].port == 19092
    assert write(decoded) == data


def test_leader_and_isr_v5_response_groups_errors_by_topic_id() -> None:
    data = (
        int16(0)
        + compact_array(
            [
                TOPIC_ID.bytes
                + compact_array(
                    [
                        int32(0) + int16(0) + NO_TAGS,
                        int32(1) + int16(ErrorCode.kafka_storage_error.value) + NO_TAGS,
                    ]
                )
                + NO_TAGS
            ]
        )
        + NO_TAGS
    )
    m = leader_and_isr_v5
    decoded = read(m.LeaderAndIsrResponse, data)
    assert decoded == m.LeaderAndIsrResponse(
        error_code=ErrorCode.none,
        topics=(
            m.LeaderAndIsrTopicError(
                topic_id=TOPIC_ID,
                partition_errors=(
                    m.LeaderAndIsrPartitionError(partition_index=0, error_code=ErrorCode.none),
                    m.LeaderAndIsrPartitionError(
                        partition_index=1, error_code=ErrorCode.kafka_storage_error
                    ),
                ),
            ),
        ),
    )
    assert write(decoded) == data


def test_leader_and_isr_v4_response_names_topics() -> None:
    data = (
        int16(ErrorCode.stale_controller_epoch.value)
        + compact_array(
            [
                compact_string("orders")
                + int32(3)
                + int16(ErrorCode.stale_controller_epoch.value)
                + NO_TAGS
            ]
        )
        + NO_TAGS
    )
    decoded = read(leader_and_isr_v4.LeaderAndIsrResponse, data)
    assert decoded.error_code is ErrorCode.stale_controller_epoch
    assert decoded.partition_errors[0].topic_name == "orders"
    assert decoded.partition_errors[0].partition_index == 3
    assert write(decoded) == data


# -- StopReplica ------------------------------------------------------------------------


def test_stop_replica_v3_request_from_hand_laid_bytes() -> None:
    data = (
        int32(2)  # ControllerId
        + int32(9)  # ControllerEpoch
        + int64(77)  # BrokerEpoch
        + compact_array(
            [
                compact_string("logs")
                + compact_array(
                    [
                        int32(0) + int32(-2) + boolean(True) + NO_TAGS,
                        int32(5) + int32(3) + boolean(False) + NO_TAGS,
                    ]
                )
                + NO_TAGS
            ]
        )
        + NO_TAGS
    )
    m = stop_replica_v3
    expected = m.StopReplicaRequest(
        controller_id=2,
        controller_epoch=9,
        broker_epoch=77,
        topic_states=(
            m.StopReplicaTopicState(
                topic_name="logs",
                partition_states=(
                    m.StopReplicaPartitionState(
                        partition_index=0, leader_epoch=-2, delete_partition=True
                    ),
                    m.StopReplicaPartitionState(
                        partition_index=5, leader_epoch=3, delete_partition=False
                    ),
                ),
            ),
        ),
    )
    assert read(m.StopReplicaRequest, data) == expected
    assert write(expected) == data


def test_stop_replica_v3_response_from_hand_laid_bytes() -> None:
    data = (
        int16(0)
        + compact_array(
            [
                compact_string("logs")
                + int32(5)
                + int16(ErrorCode.fenced_leader_epoch.value)
                + NO_TAGS
            ]
        )
        + NO_TAGS
    )
    m = stop_replica_v3
    expected = m.StopReplicaResponse(
        error_code=ErrorCode.none,
        partition_errors=(
            m.StopReplicaPartitionError(
                topic_name="logs", partition_index=5, error_code=ErrorCode.fenced_leader_epoch
            ),
        ),
    )
    assert read(m.StopReplicaResponse, data) == expected
    assert write(expected) == data


# -- UpdateMetadata ---------------------------------------------------------------------


def test_update_metadata_v7_request_from_hand_laid_bytes() -> None:
    partition = (
        int32(1)  # PartitionIndex
        + int32(3)  # ControllerEpoch
        + int32(2)  # Leader
        + int32(8)  # LeaderEpoch
        + int32_array([2, 0])  # Isr
        + int32(5)  # ZkVersion
        + int32_array([2, 0, 1])  # Replicas
        + int32_array([1])  # OfflineReplicas
        + NO_TAGS
    )
    broker = (
        int32(2)  # Id
        + compact_array(
            [
                int32(9092)
                + compact_string("b2.local")
                + compact_string("PLAINTEXT")
                + int16(0)
                + NO_TAGS
            ]
        )
        + compact_string(None)  # Rack: null
        + NO_TAGS
    )
    rack_broker = int32(0) + compact_array([]) + compact_string("r1") + NO_TAGS
    data = (
        int32(1)  # ControllerId
        + int32(3)  # ControllerEpoch
        + int64(-1)  # BrokerEpoch
        + compact_array(
            [compact_string("events") + TOPIC_ID.bytes + compact_array([partition]) + NO_TAGS]
        )
        + compact_array([broker, rack_broker])
        + NO_TAGS
    )
    m = update_metadata_v7
    expected = m.UpdateMetadataRequest(
        controller_id=1,
        controller_epoch=3,
        broker_epoch=-1,
        topic_states=(
            m.UpdateMetadataTopicState(
                topic_name="events",
                topic_id=TOPIC_ID,
                partition_states=(
                    m.UpdateMetadataPartitionState(
                        partition_index=1,
                        controller_epoch=3,
                        leader=2,
                        leader_epoch=8,
                        isr=(2, 0),
                        zk_version=5,
                        replicas=(2, 0, 1),
                        offline_replicas=(1,),
                    ),
                ),
            ),
        ),
        live_brokers=(
            m.UpdateMetadataBroker(
                id=2,
                endpoints=(
                    m.UpdateMetadataEndpoint(
                        port=9092, host="b2.local", listener="PLAINTEXT", security_protocol=0
                    ),
                ),
                rack=None,
            ),
            m.UpdateMetadataBroker(id=0, endpoints=(), rack="r1"),
        ),
    )
    assert read(m.UpdateMetadataRequest, data) == expected
    assert write(expected) == data


def test_update_metadata_v7_response_from_hand_laid_bytes() -> None:
    data = int16(ErrorCode.stale_broker_epoch.value) + NO_TAGS
    decoded = read(update_metadata_v7.UpdateMetadataResponse, data)
    assert decoded.error_code is ErrorCode.stale_broker_epoch
    assert write(decoded) == data


# -- ControlledShutdown -----------------------------------------------------------------


def test_controlled_shutdown_v3_request_from_hand_laid_bytes() -> None:
    data = int32(3) + int64(1234567890123) + NO_TAGS
    m = controlled_shutdown_v3
    expected = m.ControlledShutdownRequest(broker_id=3, broker_epoch=1234567890123)
    assert read(m.ControlledShutdownRequest, data) == expected
    assert write(expected) == data


def test_controlled_shutdown_v3_response_from_hand_laid_bytes() -> None:
    data = (
        int16(0)
        + compact_array(
            [
                compact_string("orders") + int32(0) + NO_TAGS,
                compact_string("orders") + int32(4) + NO_TAGS,
            ]
        )
        + NO_TAGS
    )
    m = controlled_shutdown_v3
    expected = m.ControlledShutdownResponse(
        error_code=ErrorCode.none,
        remaining_partitions=(
            m.RemainingPartition(topic_name="orders", partition_index=0),
            m.RemainingPartition(topic_name="orders", partition_index=4),
        ),
    )
    assert read(m.ControlledShutdownResponse, data) == expected
    assert write(expected) == data


# -- framing: a full request through Strandline's codec --------------------------------------


def test_framed_request_parses_with_header_v2() -> None:
    request = read(leader_and_isr_v6.LeaderAndIsrRequest, LAI_V6_BYTES)
    frame = encode_request(correlation_id=41, client_id="controller-0", request=request)
    (size,) = struct.unpack_from(">i", frame, 0)
    body = frame[4:]
    assert size == len(body)
    header, pos = parse_header(body)
    assert (header.api_key, header.api_version, header.correlation_id) == (4, 6, 41)
    assert header.client_id == "controller-0"
    cls = schema.request_type(header.api_key, header.api_version)
    pos = skip_header_tags(body, pos)
    assert body[pos:] == LAI_V6_BYTES
    decoded, _ = entity_reader(cls)(body, pos)
    assert decoded == request


def test_truncated_bytes_are_rejected() -> None:
    with pytest.raises(Exception):  # noqa: B017 - kio raises several types; any is a refusal
        read(leader_and_isr_v6.LeaderAndIsrRequest, LAI_V6_BYTES[:-5])
