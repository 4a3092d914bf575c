"""Plain controller requests/responses -> wire classes -> bytes -> wire classes -> plain."""

from __future__ import annotations

import io
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId, TopicName
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32, i64

from strandline.errors import InvalidRequestError
from strandline.protocol import controller_messages as cm
from strandline.protocol.controller_requests import (
    BrokerInfo,
    Endpoint,
    LeaderAndIsrRequest,
    PartitionState,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from strandline.protocol.controller_schema import (
    leader_and_isr_v5,
    leader_and_isr_v6,
    stop_replica_v3,
)
from strandline.types import TopicPartition


def through_bytes(wire: Any) -> Any:
    out = io.BytesIO()
    entity_writer(type(wire))(out, wire)
    data = out.getvalue()
    decoded, size = entity_reader(type(wire))(data, 0)
    assert size == len(data)
    return decoded


# -- strategies -------------------------------------------------------------------------

int32s = st.integers(-(2**31), 2**31 - 1)
broker_ids = st.integers(-1, 2**31 - 1)
epochs = st.integers(-1, 2**31 - 1)
broker_epochs = st.integers(-1, 2**63 - 1)
topic_names = st.text("abcdefghijklmnopqrstuvwxyz._-0123456789", min_size=1, max_size=20)
hosts = st.text(min_size=1, max_size=30)
ports = st.integers(0, 65535)
error_codes = st.sampled_from(list(ErrorCode))
replica_lists = st.lists(st.integers(0, 1000), max_size=5).map(tuple)


def brokers(with_rack: bool) -> st.SearchStrategy[BrokerInfo]:
    racks = st.none() | st.text(max_size=10) if with_rack else st.none()
    return st.builds(BrokerInfo, broker_id=broker_ids, host=hosts, port=ports, rack=racks)


@st.composite
def partition_states(draw: st.DrawFn, *, for_update_metadata: bool) -> tuple[PartitionState, ...]:
    """States grouped by topic, as the wire groups them, so the round trip is exact."""
    topics = draw(st.lists(topic_names, unique=True, max_size=4))
    states = []
    for topic in topics:
        for partition in draw(
            st.lists(st.integers(0, 10_000), unique=True, min_size=1, max_size=4)
        ):
            states.append(
                PartitionState(
                    tp=TopicPartition(topic, partition),
                    controller_epoch=draw(epochs),
                    leader=draw(broker_ids),
                    leader_epoch=draw(epochs),
                    isr=draw(replica_lists),
                    zk_version=draw(int32s),
                    replicas=draw(replica_lists),
                    # Each API carries only one of these two fields.
                    is_new=False if for_update_metadata else draw(st.booleans()),
                    offline_replicas=draw(replica_lists) if for_update_metadata else (),
                )
            )
    return tuple(states)


leader_and_isr_requests = st.builds(
    LeaderAndIsrRequest,
    controller_id=broker_ids,
    controller_epoch=epochs,
    broker_epoch=broker_epochs,
    partitions=partition_states(for_update_metadata=False),
    live_leaders=st.lists(brokers(with_rack=False), max_size=3).map(tuple),
)


@st.composite
def partition_errors(draw: st.DrawFn) -> dict[TopicPartition, ErrorCode]:
    topics = draw(st.lists(topic_names, unique=True, max_size=4))
    return {
        TopicPartition(topic, p): draw(error_codes)
        for topic in topics
        for p in draw(st.lists(st.integers(0, 10_000), unique=True, min_size=1, max_size=3))
    }


# -- LeaderAndIsr -------------------------------------------------------------------------


@pytest.mark.parametrize("version", [4, 5, 6])
@given(request=leader_and_isr_requests)
@settings(max_examples=60, deadline=None)
def test_leader_and_isr_request_round_trip(version: int, request: LeaderAndIsrRequest) -> None:
    wire = cm.leader_and_isr_request_to_wire(request, version)
    assert wire.__version__ == version
    assert cm.leader_and_isr_request_from_wire(through_bytes(wire)) == request


@pytest.mark.parametrize("version", [4, 5, 6])
@given(errors=partition_errors(), top=error_codes)
@settings(max_examples=60, deadline=None)
def test_leader_and_isr_response_round_trip(
    version: int, errors: dict[TopicPartition, ErrorCode], top: ErrorCode
) -> None:
    topic_ids = {tp.topic: uuid.uuid4() for tp in errors}
    response = cm.LeaderAndIsrResponse(top, errors)
    wire = cm.leader_and_isr_response_to_wire(response, version, topic_ids=topic_ids)
    names = {topic_id: topic for topic, topic_id in topic_ids.items()}
    assert cm.leader_and_isr_response_from_wire(through_bytes(wire), topic_names=names) == response


def test_leader_and_isr_v5_sends_zero_topic_id_without_ids() -> None:
    state = PartitionState(TopicPartition("t", 0), 1, 1, 1, (1,), 0, (1,))
    wire = cm.leader_and_isr_request_to_wire(LeaderAndIsrRequest(0, 1, 5, (state,), ()), 5)
    assert isinstance(wire, leader_and_isr_v5.LeaderAndIsrRequest)
    assert wire.topic_states[0].topic_id == uuid.UUID(int=0)
    decoded = through_bytes(wire)
    # kio reads the zero UUID back as None; the name map still resolves it.
    assert cm.leader_and_isr_topic_ids(decoded) == {uuid.UUID(int=0): "t"}


def test_leader_and_isr_v6_response_with_unknown_topic_id_is_refused() -> None:
    response = cm.LeaderAndIsrResponse(ErrorCode.none, {TopicPartition("t", 0): ErrorCode.none})
    wire = through_bytes(cm.leader_and_isr_response_to_wire(response, 6))
    with pytest.raises(InvalidRequestError):
        cm.leader_and_isr_response_from_wire(wire, topic_names={})


def test_leader_and_isr_response_decodes_with_ids_taken_from_the_request() -> None:
    state = PartitionState(TopicPartition("orders", 3), 1, 1, 1, (1,), 0, (1,))
    ids = {"orders": uuid.uuid4()}
    request_wire = cm.leader_and_isr_request_to_wire(
        LeaderAndIsrRequest(0, 1, 5, (state,), ()), 6, topic_ids=ids
    )
    response = cm.leader_and_isr_error_response(
        cm.leader_and_isr_request_from_wire(request_wire), ErrorCode.stale_controller_epoch
    )
    assert response.partition_errors == {state.tp: ErrorCode.stale_controller_epoch}
    wire = through_bytes(cm.leader_and_isr_response_to_wire(response, 6, topic_ids=ids))
    decoded = cm.leader_and_isr_response_from_wire(
        wire, topic_names=cm.leader_and_isr_topic_ids(request_wire)
    )
    assert decoded == response


def test_leader_and_isr_undefined_version_is_refused() -> None:
    request = LeaderAndIsrRequest(0, 1, 5, (), ())
    with pytest.raises(LookupError):
        cm.leader_and_isr_request_to_wire(request, 7)


def test_leader_and_isr_v6_fills_schema_defaults() -> None:
    state = PartitionState(TopicPartition("t", 0), 1, 2, 3, (2,), 4, (2, 1), is_new=True)
    wire = cm.leader_and_isr_request_to_wire(LeaderAndIsrRequest(0, 1, 5, (state,), ()), 6)
    assert isinstance(wire, leader_and_isr_v6.LeaderAndIsrRequest)
    assert wire.type == cm.LEADER_AND_ISR_TYPE_UNKNOWN
    ps = wire.topic_states[0].partition_states[0]
    assert (ps.adding_replicas, ps.removing_replicas, ps.leader_recovery_state) == ((), (), 0)
    assert ps.partition_epoch == 4 and ps.is_new


# -- StopReplica --------------------------------------------------------------------------


@st.composite
def stop_replica_requests(draw: st.DrawFn) -> StopReplicaRequest:
    topics = draw(st.lists(topic_names, unique=True, min_size=1, max_size=4))
    tps = tuple(
        TopicPartition(topic, p)
        for topic in topics
        for p in draw(st.lists(st.integers(0, 10_000), unique=True, min_size=1, max_size=4))
    )
    return StopReplicaRequest(
        controller_id=draw(broker_ids),
        controller_epoch=draw(epochs),
        broker_epoch=draw(broker_epochs),
        partitions=tps,
        delete_partitions=draw(st.booleans()),
    )


@given(request=stop_replica_requests())
@settings(max_examples=80, deadline=None)
def test_stop_replica_request_round_trip(request: StopReplicaRequest) -> None:
    wire = through_bytes(cm.stop_replica_request_to_wire(request))
    assert cm.stop_replica_request_from_wire(wire) == (request,)
    expected_epoch = cm.EPOCH_DURING_DELETE if request.delete_partitions else cm.NO_EPOCH
    assert cm.stop_replica_leader_epochs(wire) == dict.fromkeys(request.partitions, expected_epoch)


def test_stop_replica_carries_given_leader_epochs() -> None:
    tp = TopicPartition("t", 1)
    request = StopReplicaRequest(0, 4, 9, (tp, TopicPartition("t", 2)), delete_partitions=False)
    wire = through_bytes(cm.stop_replica_request_to_wire(request, leader_epochs={tp: 12}))
    assert cm.stop_replica_leader_epochs(wire) == {tp: 12, TopicPartition("t", 2): cm.NO_EPOCH}


def test_stop_replica_mixed_delete_flags_split_into_two_requests() -> None:
    m = stop_replica_v3
    wire = m.StopReplicaRequest(
        controller_id=BrokerId(1),
        controller_epoch=i32(2),
        broker_epoch=i64(3),
        topic_states=(
            m.StopReplicaTopicState(
                topic_name=TopicName("t"),
                partition_states=tuple(
                    m.StopReplicaPartitionState(
                        partition_index=i32(p), leader_epoch=i32(5), delete_partition=delete
                    )
                    for p, delete in ((0, True), (1, False))
                ),
            ),
        ),
    )
    assert cm.stop_replica_request_from_wire(wire) == (
        StopReplicaRequest(1, 2, 3, (TopicPartition("t", 1),), delete_partitions=False),
        StopReplicaRequest(1, 2, 3, (TopicPartition("t", 0),), delete_partitions=True),
    )


@given(errors=partition_errors(), top=error_codes)
@settings(max_examples=60, deadline=None)
def test_stop_replica_response_round_trip(
    errors: dict[TopicPartition, ErrorCode], top: ErrorCode
) -> None:
    response = cm.StopReplicaResponse(top, errors)
    wire = through_bytes(cm.stop_replica_response_to_wire(response))
    assert cm.stop_replica_response_from_wire(wire) == response


def test_stop_replica_error_response_covers_every_partition() -> None:
    request = StopReplicaRequest(0, 1, 2, (TopicPartition("a", 0), TopicPartition("b", 1)), True)
    response = cm.stop_replica_error_response(request, ErrorCode.stale_broker_epoch)
    assert response.error_code is ErrorCode.stale_broker_epoch
    assert response.partition_errors == {
        TopicPartition("a", 0): ErrorCode.stale_broker_epoch,
        TopicPartition("b", 1): ErrorCode.stale_broker_epoch,
    }


# -- UpdateMetadata -----------------------------------------------------------------------


@st.composite
def brokers_with_endpoints(draw: st.DrawFn) -> BrokerInfo:
    """A broker as UpdateMetadata carries it: every listener; host and port are the
    first one's (what a decoder without a listener name picks)."""
    base = draw(brokers(with_rack=True))
    endpoints = [Endpoint("PLAINTEXT", base.host, base.port, "PLAINTEXT")]
    if draw(st.booleans()):
        endpoints.append(Endpoint("SASL_SSL", draw(hosts), draw(ports), "SASL_SSL"))
    return BrokerInfo(base.broker_id, base.host, base.port, base.rack, tuple(endpoints))


@st.composite
def update_metadata_requests(draw: st.DrawFn) -> UpdateMetadataRequest:
    partitions = draw(partition_states(for_update_metadata=True))
    live = {p.tp.topic for p in partitions}
    deleted = draw(st.lists(topic_names.filter(lambda t: t not in live), unique=True, max_size=3))
    return UpdateMetadataRequest(
        controller_id=draw(broker_ids),
        controller_epoch=draw(epochs),
        broker_epoch=draw(broker_epochs),
        partitions=partitions,
        live_brokers=tuple(draw(st.lists(brokers_with_endpoints(), max_size=4))),
        deleted_topics=tuple(deleted),
    )


@given(request=update_metadata_requests(), with_deleted_partitions=st.booleans())
@settings(max_examples=80, deadline=None)
def test_update_metadata_request_round_trip(
    request: UpdateMetadataRequest, with_deleted_partitions: bool
) -> None:
    deleted_partitions = (
        {topic: [0, 1, 2] for topic in request.deleted_topics} if with_deleted_partitions else None
    )
    wire = cm.update_metadata_request_to_wire(request, deleted_topic_partitions=deleted_partitions)
    assert cm.update_metadata_request_from_wire(through_bytes(wire)) == request


def test_update_metadata_marks_deleted_partitions_like_kafka() -> None:
    request = UpdateMetadataRequest(0, 3, 1, (), (), deleted_topics=("gone",))
    wire = cm.update_metadata_request_to_wire(request, deleted_topic_partitions={"gone": [0, 1]})
    (topic,) = wire.topic_states
    assert topic.topic_name == "gone"
    assert [p.leader for p in topic.partition_states] == [cm.LEADER_DURING_DELETE] * 2
    assert [p.partition_index for p in topic.partition_states] == [0, 1]


def test_update_metadata_picks_the_endpoint_of_the_listener() -> None:
    broker = BrokerInfo(3, "h3", 9093, "rack-a")
    request = UpdateMetadataRequest(0, 1, 2, (), (broker,))
    wire = through_bytes(cm.update_metadata_request_to_wire(request, listener="INTERNAL"))
    assert wire.live_brokers[0].endpoints[0].listener == "INTERNAL"
    decoded = cm.update_metadata_request_from_wire(wire, listener="INTERNAL")
    internal = Endpoint("INTERNAL", "h3", 9093, "PLAINTEXT")
    assert decoded.live_brokers == (BrokerInfo(3, "h3", 9093, "rack-a", (internal,)),)
    with pytest.raises(InvalidRequestError):
        cm.update_metadata_request_from_wire(wire, listener="EXTERNAL")


@given(code=error_codes)
@settings(max_examples=20, deadline=None)
def test_update_metadata_response_round_trip(code: ErrorCode) -> None:
    response = cm.UpdateMetadataResponse(code)
    wire = through_bytes(cm.update_metadata_response_to_wire(response))
    assert cm.update_metadata_response_from_wire(wire) == response


# -- ControlledShutdown -------------------------------------------------------------------


@given(broker_id=broker_ids, broker_epoch=broker_epochs)
@settings(max_examples=40, deadline=None)
def test_controlled_shutdown_request_round_trip(broker_id: int, broker_epoch: int) -> None:
    request = cm.ControlledShutdownRequest(broker_id, broker_epoch)
    wire = through_bytes(cm.controlled_shutdown_request_to_wire(request))
    assert cm.controlled_shutdown_request_from_wire(wire) == request


@given(
    code=error_codes,
    remaining=st.lists(st.builds(TopicPartition, topic_names, st.integers(0, 10_000)), max_size=6),
)
@settings(max_examples=40, deadline=None)
def test_controlled_shutdown_response_round_trip(
    code: ErrorCode, remaining: list[TopicPartition]
) -> None:
    response = cm.ControlledShutdownResponse(code, tuple(remaining))
    wire = through_bytes(cm.controlled_shutdown_response_to_wire(response))
    assert cm.controlled_shutdown_response_from_wire(wire) == response


def test_out_of_range_values_are_refused_before_the_wire() -> None:
    state = PartitionState(TopicPartition("t", 2**31), 1, 1, 1, (1,), 0, (1,))
    with pytest.raises(Exception):  # noqa: B017 - kio's phantom types raise their own TypeError
        cm.leader_and_isr_request_to_wire(LeaderAndIsrRequest(0, 1, 5, (state,), ()), 6)


def test_update_metadata_keeps_every_listener_and_picks_the_named_one() -> None:
    endpoints = (
        Endpoint("INTERNAL", "10.0.0.3", 9093, "SASL_SSL"),
        Endpoint("EXTERNAL", "broker3.example", 19093, "SSL"),
    )
    broker = BrokerInfo(3, "10.0.0.3", 9093, None, endpoints)
    request = UpdateMetadataRequest(0, 1, 2, (), (broker,))
    wire = through_bytes(cm.update_metadata_request_to_wire(request))
    assert [e.security_protocol for e in wire.live_brokers[0].endpoints] == [3, 1]
    decoded = cm.update_metadata_request_from_wire(wire, listener="EXTERNAL")
    (got,) = decoded.live_brokers
    assert (got.host, got.port) == ("broker3.example", 19093)
    assert got.endpoints == endpoints
    assert got.address_for("INTERNAL") == ("10.0.0.3", 9093)
    assert got.address_for("OTHER") is None


def test_topic_ids_travel_in_leader_and_isr_and_update_metadata() -> None:
    """KIP-516: the plain requests' ids go out in LeaderAndIsr v5/v6 and UpdateMetadata
    v7 and come back; v4 has none, and a deleted topic's UpdateMetadata entry none."""
    ids = {"a": uuid.uuid4(), "b": uuid.uuid4()}
    states = tuple(
        PartitionState(TopicPartition(t, 0), 1, 1, 0, (1,), 0, (1,)) for t in ("a", "b", "c")
    )
    request = LeaderAndIsrRequest(0, 1, 5, states, (), topic_ids=ids)
    assert cm.DEFAULT_VERSIONS[cm.LEADER_AND_ISR] == 5
    for version in (5, 6):
        wire = through_bytes(cm.leader_and_isr_request_to_wire(request, version))
        assert {t.topic_name: t.topic_id or uuid.UUID(int=0) for t in wire.topic_states} == {
            **ids,
            "c": uuid.UUID(int=0),
        }
        assert cm.leader_and_isr_request_from_wire(wire) == request
    v4 = through_bytes(cm.leader_and_isr_request_to_wire(request, 4))
    assert cm.leader_and_isr_request_from_wire(v4).topic_ids == {}

    update = UpdateMetadataRequest(0, 1, 5, states, (), deleted_topics=("gone",), topic_ids=ids)
    wire_um = through_bytes(cm.update_metadata_request_to_wire(update))
    assert {t.topic_name: t.topic_id for t in wire_um.topic_states}["a"] == ids["a"]
    assert cm.update_metadata_request_from_wire(wire_um) == update
