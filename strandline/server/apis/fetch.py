"""Fetch (1): read whole batches below the high watermark (consumers) or the log end
(followers). A fetch that finds fewer than `min_bytes` parks in the fetch purgatory
and is answered as soon as an append or HW move makes enough data available.

`isolation_level=1` (read_committed, KIP-98) reads below the last stable offset instead
of the HW and answers the aborted transactions overlapping the records returned, which
the client drops; every response carries the real LSO."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from strandline.errors import KafkaError
from strandline.protocol.codec import RequestHeader
from strandline.protocol.messages import build, response_class
from strandline.security.acl import AclOperation, ResourceType
from strandline.server.apis.api_versions import NO_THROTTLE
from strandline.server.apis.registry import api
from strandline.server.authz import authorized_names, cluster_authorized
from strandline.server.context import BrokerContext
from strandline.storage.txn_index import AbortedTxn
from strandline.types import TopicPartition

API_KEY = 1


class _Wanted:
    __slots__ = ("tp", "fetch_offset", "max_bytes", "leader_epoch")

    def __init__(
        self, tp: TopicPartition, fetch_offset: int, max_bytes: int, leader_epoch: int
    ) -> None:
        self.tp = tp
        self.fetch_offset = fetch_offset
        self.max_bytes = max_bytes
        self.leader_epoch = leader_epoch


@api(API_KEY, 4, 12)
async def handle(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    rm = ctx.replica_manager
    replica_id = request.replica_id
    wanted = [
        _Wanted(
            TopicPartition(t.topic, p.partition),
            p.fetch_offset,
            p.partition_max_bytes,
            getattr(p, "current_leader_epoch", -1),
        )
        for t in request.topics
        for p in t.partitions
    ]
    denied = _unauthorized(ctx, wanted, replica_id)
    if denied:
        wanted = [w for w in wanted if w.tp not in denied]
    throttle = rm.throttle
    # Replicas of a reassignment catching up, held to leader.replication.throttled.rate.
    throttled = {
        w.tp
        for w in wanted
        if replica_id >= 0
        and (h := rm.partitions.get(w.tp)) is not None
        and throttle.leader_throttles(w.tp, h.isr, replica_id)
    }

    def held() -> set[TopicPartition]:
        return throttled if throttled and throttle.leader.exceeded(throttle.clock()) else set()

    isolation = getattr(request, "isolation_level", 0)
    results = _collect(ctx, wanted, request.max_bytes, replica_id, held(), isolation)
    if replica_id >= 0:
        # A follower's fetch offset is its LEO; record it only after reading, so this
        # response carries the HW from before the update (seed 004).
        now = ctx.now_ms()
        for w in wanted:
            if results[w.tp][0] == ErrorCode.none:
                rm.on_follower_fetch(w.tp, replica_id, w.fetch_offset, now)
    total = sum(len(r[1]) for r in results.values())
    has_error = any(r[0] != ErrorCode.none for r in results.values())
    wait_s = request.max_wait.total_seconds()
    if wanted and not has_error and total < request.min_bytes and wait_s > 0:

        def enough() -> bool:
            available = 0
            waiting = held()
            for w in wanted:
                if w.tp in waiting:
                    continue
                available += rm.available_bytes(
                    w.tp, w.fetch_offset, replica_id, request.min_bytes - available, isolation
                )
                if available >= request.min_bytes:
                    return True
            return False

        if held():
            # Answer (empty) when the quota frees, so the follower asks again then.
            wait_s = min(wait_s, throttle.leader.delay_s(throttle.clock()))
        if await rm.fetch_purgatory.wait([w.tp for w in wanted], enough, wait_s):
            results = _collect(ctx, wanted, request.max_bytes, replica_id, held(), isolation)
    for tp in throttled:
        throttle.leader.record(len(results[tp][1]), throttle.clock())
    if ctx.metrics.enabled:
        for tp, result in results.items():
            if result[1]:
                ctx.metrics.bytes_out(tp.topic, len(result[1]), replication=replica_id >= 0)
    for tp in denied:
        results[tp] = (ErrorCode.topic_authorization_failed, b"", -1, -1, -1, None)
    return _response(header.api_version, request, results)


def _unauthorized(
    ctx: BrokerContext, wanted: list[_Wanted], replica_id: int
) -> set[TopicPartition]:
    """A follower needs CLUSTER_ACTION on the cluster; a consumer READ on each topic."""
    if replica_id >= 0:
        if cluster_authorized(ctx, AclOperation.CLUSTER_ACTION):
            return set()
        return {w.tp for w in wanted}
    allowed = authorized_names(
        ctx, AclOperation.READ, ResourceType.TOPIC, (w.tp.topic for w in wanted)
    )
    return {w.tp for w in wanted if w.tp.topic not in allowed}


# error, records, high watermark, log start, last stable offset, aborted txns (read_committed)
_Result = tuple[ErrorCode, bytes, int, int, int, list[AbortedTxn] | None]


def _collect(
    ctx: BrokerContext,
    wanted: list[_Wanted],
    response_max_bytes: int,
    replica_id: int,
    held: set[TopicPartition],
    isolation_level: int = 0,
) -> dict[TopicPartition, _Result]:
    """Read each wanted partition; a `held` one (throttled) answers its offsets only."""
    rm = ctx.replica_manager
    results: dict[TopicPartition, _Result] = {}
    budget = response_max_bytes
    for w in wanted:
        try:
            # KIP-74: the first partition with data returns at least one batch even
            # if it is larger than the budget, so a consumer can always progress.
            r = rm.read(
                w.tp,
                w.fetch_offset,
                0 if w.tp in held else min(w.max_bytes, max(budget, 0)),
                replica_id=replica_id,
                min_one_batch=budget == response_max_bytes and w.tp not in held,
                current_leader_epoch=w.leader_epoch,
                isolation_level=isolation_level,
            )
        except KafkaError as e:
            hw, start, lso = _offsets_or_unknown(ctx, w.tp)
            results[w.tp] = (e.code, b"", hw, start, lso, None)
            continue
        budget -= len(r.records)
        results[w.tp] = (
            ErrorCode.none,
            r.records,
            r.high_watermark,
            r.log_start_offset,
            r.last_stable_offset,
            r.aborted_transactions,
        )
    return results


def _offsets_or_unknown(ctx: BrokerContext, tp: TopicPartition) -> tuple[int, int, int]:
    hosted = ctx.replica_manager.partitions.get(tp)
    if hosted is None:
        return -1, -1, -1
    return hosted.high_watermark, hosted.log.log_start_offset, hosted.last_stable_offset


def _response(version: int, request: Any, results: dict[TopicPartition, _Result]) -> Any:
    partition_cls = response_class(API_KEY, version, "PartitionData")
    topic_cls = response_class(API_KEY, version, "FetchableTopicResponse")
    topics = []
    for t in request.topics:
        partitions = []
        for p in t.partitions:
            error, records, hw, start, lso, aborted = results[TopicPartition(t.topic, p.partition)]
            partitions.append(
                build(
                    partition_cls,
                    partition_index=p.partition,
                    error_code=error,
                    high_watermark=hw,
                    last_stable_offset=lso,
                    log_start_offset=start,
                    aborted_transactions=None
                    if aborted is None
                    else _aborted_transactions(version, aborted),
                    preferred_read_replica=-1,
                    records=records,
                )
            )
        topics.append(build(topic_cls, topic=t.topic, partitions=tuple(partitions)))
    return build(
        response_class(API_KEY, version, "FetchResponse"),
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        session_id=0,
        responses=tuple(topics),
    )


def _aborted_transactions(version: int, aborted: list[AbortedTxn]) -> tuple[Any, ...]:
    cls = response_class(API_KEY, version, "AbortedTransaction")
    return tuple(cls(producer_id=a.producer_id, first_offset=a.first_offset) for a in aborted)
