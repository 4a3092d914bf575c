"""Group APIs spoken raw (kio messages over a blocking socket) for exact-error tests."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32Timedelta, i64Timedelta

from strandline.client.connection import send_request
from strandline.protocol.messages import build, request_module

Address = tuple[str, int]


def request(api_key: int, version: int, message: str, /, **fields: Any) -> Any:
    return build(getattr(request_module(api_key, version), message), **fields)


def call(address: Address, req: Any, timeout: float = 15.0) -> Any:
    return send_request(address[0], address[1], req, timeout=timeout)


def find_coordinator(
    address: Address, keys: list[str], key_type: int = 0, timeout_s: float = 30.0
) -> list[Any]:
    """FindCoordinator v4 (batched) until every key has a coordinator."""
    deadline = time.monotonic() + timeout_s
    while True:
        response = call(
            address,
            request(
                10, 4, "FindCoordinatorRequest", key_type=key_type, coordinator_keys=tuple(keys)
            ),
        )
        if all(c.error_code == ErrorCode.none for c in response.coordinators):
            return list(response.coordinators)
        if time.monotonic() > deadline:
            raise AssertionError(f"no coordinator for {keys}: {response}")
        time.sleep(0.1)


def coordinator_address(bootstrap: Address, group: str) -> tuple[int, Address]:
    (c,) = find_coordinator(bootstrap, [group])
    return int(c.node_id), (c.host, int(c.port))


def join(
    address: Address,
    group: str,
    member_id: str = "",
    version: int = 5,
    session_ms: int = 6000,
    metadata: bytes = b"\x00\x01",
) -> Any:
    mod = request_module(11, version)
    return call(
        address,
        request(
            11,
            version,
            "JoinGroupRequest",
            group_id=group,
            session_timeout=i32Timedelta.parse(timedelta(milliseconds=session_ms)),
            rebalance_timeout=i32Timedelta.parse(timedelta(milliseconds=session_ms)),
            member_id=member_id,
            group_instance_id=None,
            protocol_type="consumer",
            protocols=(mod.JoinGroupRequestProtocol(name="range", metadata=metadata),),
            reason=None,
        ),
    )


def sync(address: Address, group: str, generation: int, member_id: str, assignment: bytes) -> Any:
    mod = request_module(14, 3)
    return call(
        address,
        request(
            14,
            3,
            "SyncGroupRequest",
            group_id=group,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=None,
            assignments=(
                mod.SyncGroupRequestAssignment(member_id=member_id, assignment=assignment),
            ),
        ),
    )


def heartbeat(address: Address, group: str, generation: int, member_id: str) -> ErrorCode:
    response = call(
        address,
        request(
            12,
            3,
            "HeartbeatRequest",
            group_id=group,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=None,
        ),
    )
    return ErrorCode(response.error_code)


def commit(
    address: Address,
    group: str,
    topic: str,
    offsets: dict[int, int],
    generation: int = -1,
    member_id: str = "",
    version: int = 8,
) -> dict[int, ErrorCode]:
    mod = request_module(8, version)
    response = call(
        address,
        request(
            8,
            version,
            "OffsetCommitRequest",
            group_id=group,
            generation_id_or_member_epoch=generation,
            member_id=member_id,
            group_instance_id=None,
            retention_time=i64Timedelta.parse(timedelta(milliseconds=-1)),
            topics=(
                mod.OffsetCommitRequestTopic(
                    name=topic,
                    partitions=tuple(
                        build(
                            mod.OffsetCommitRequestPartition,
                            partition_index=p,
                            committed_offset=o,
                            committed_leader_epoch=-1,
                            committed_metadata=f"m{o}",
                        )
                        for p, o in offsets.items()
                    ),
                ),
            ),
        ),
    )
    return {
        p.partition_index: ErrorCode(p.error_code) for t in response.topics for p in t.partitions
    }


def fetch_offsets(address: Address, group: str, version: int = 8) -> tuple[ErrorCode, dict]:
    """(error, {(topic, partition): (offset, metadata)}) for every committed offset."""
    if version >= 8:
        mod = request_module(9, version)
        response = call(
            address,
            request(
                9,
                version,
                "OffsetFetchRequest",
                groups=(mod.OffsetFetchRequestGroup(group_id=group, topics=None),),
                require_stable=False,
            ),
        )
        (g,) = response.groups
        error, topics = g.error_code, g.topics
    else:
        response = call(
            address,
            request(
                9, version, "OffsetFetchRequest", group_id=group, topics=None, require_stable=False
            ),
        )
        error, topics = response.error_code, response.topics
    return ErrorCode(error), {
        (t.name, p.partition_index): (p.committed_offset, p.metadata)
        for t in topics
        for p in t.partitions
    }
