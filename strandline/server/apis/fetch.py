"""Fetch (1): read whole batches below the high watermark (consumers) or the log end
(followers). A fetch that finds fewer than `min_bytes` parks in the fetch purgatory
and is answered as soon as an append or HW move makes enough data available.

`isolation_level=1` (read_committed, KIP-98) reads below the last stable offset instead
of the HW and answers the aborted transactions overlapping the records returned, which
the client drops; every response carries the real LSO."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from kio.schema.errors import ErrorCode

from strandline.errors import KafkaError
from strandline.protocol.codec import RequestHeader
from strandline.protocol.fetch_codec import (
    FetchPartitionResult,
    decode_fetch_request,
    encode_fetch_response,
)
from strandline.protocol.file_region import Records
from strandline.security.acl import AclOperation, ResourceType
from strandline.server.apis.api_versions import NO_THROTTLE_MS
from strandline.server.apis.registry import FramedResponse, api
from strandline.server.authz import authorized_names, cluster_authorized
from strandline.server.context import BrokerContext
from strandline.server.fetch_session import (
    INVALID_SESSION_ID,
    PartitionAnswer,
    PartitionPosition,
    SessionFetch,
    session_key,
)
from strandline.server.replica_manager import ReplicaManager
from strandline.server.session import current_session
from strandline.server.zero_copy import SEND_REGIONS
from strandline.storage.txn_index import AbortedTxn
from strandline.types import TopicPartition

API_KEY = 1


@api(API_KEY, 4, 12, decode=decode_fetch_request)
async def handle(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    rm = ctx.replica_manager
    replica_id = request.replica_id
    requested = {
        TopicPartition(t.topic, p.partition): PartitionPosition(
            p.fetch_offset,
            p.partition_max_bytes,
            p.current_leader_epoch,
            p.log_start_offset,
            p.last_fetched_epoch,
        )
        for t in request.topics
        for p in t.partitions
    }
    # Authorized before a session is opened or a follower position recorded.
    # A replica id without CLUSTER_ACTION is only a claim: no session, nothing recorded.
    if replica_id >= 0 and not cluster_authorized(ctx, AclOperation.CLUSTER_ACTION):
        refused = dict.fromkeys(requested, _DENIED)
        return _response(
            header.api_version,
            header.correlation_id,
            list(requested),
            refused,
            INVALID_SESSION_ID,
            ErrorCode.none,
        )
    denied = _unauthorized(ctx, requested, replica_id)
    session = current_session()
    fetch = rm.fetch_sessions.open_fetch(
        request.session_id,
        request.session_epoch,
        replica_id,
        {tp: w for tp, w in requested.items() if tp not in denied} if denied else requested,
        (
            TopicPartition(f.topic, partition)
            for f in request.forgotten_topics_data
            for partition in f.partitions
        ),
        ctx.now_ms(),
        owner=f"{session.principal}@{session.peer_host}",
    )
    if isinstance(fetch, ErrorCode):
        # FETCH_SESSION_ID_NOT_FOUND / INVALID_FETCH_SESSION_EPOCH: the fetcher starts a
        # new session with a full fetch.
        return _response(
            header.api_version, header.correlation_id, [], {}, INVALID_SESSION_ID, fetch
        )
    if fetch.session is not None:
        rm.note_session_fetch(replica_id, fetch.session.id)
    # What to read: partition -> position (a copy: a waiting session fetch grows its own).
    wanted = dict(fetch.to_read())
    denied |= _unauthorized(ctx, wanted, replica_id)
    if denied:
        wanted = {tp: w for tp, w in wanted.items() if tp not in denied}
    throttle = rm.throttle
    # Replicas of a reassignment catching up, held to leader.replication.throttled.rate.
    # (Looked at only while the leader quota is set: per partition it asks the ISR.)
    throttled = (
        {
            tp
            for tp in wanted
            if (h := rm.partitions.get(tp)) is not None
            and throttle.leader_throttles(tp, h.isr, replica_id)
        }
        if replica_id >= 0 and throttle.leader.limited
        else set()
    )

    def held() -> set[TopicPartition]:
        return throttled if throttled and throttle.leader.exceeded(throttle.clock()) else set()

    isolation = request.isolation_level
    results = _collect(ctx, wanted, request.max_bytes, replica_id, held(), isolation)
    if replica_id >= 0:
        # A follower's fetch offset is its LEO; record it only after reading, so this
        # response carries the HW from before the update (docs/replication.md).
        now = ctx.now_ms()
        for tp, w in wanted.items():
            result = results[tp]
            # A diverging follower's fetch offset is not its position (as Kafka).
            if result[0] == ErrorCode.none and result[6] is None:
                rm.on_follower_fetch(tp, replica_id, w.fetch_offset, now, w.log_start_offset)
    total = 0
    has_error = False
    for result in results.values():
        total += len(result[1])
        # A diverging epoch is answered at once, as an error is.
        has_error = has_error or result[0] != ErrorCode.none or result[6] is not None
    wait_s = request.max_wait.total_seconds()
    incremental = fetch.session is not None and not fetch.full
    if (wanted or incremental) and not has_error and total < request.min_bytes and wait_s > 0:
        # Bytes readable now, per partition looked at so far: a wake-up re-reads only
        # the partition it names (or, for a session, the ones that changed), so a fetch
        # over thousands of partitions pays for one per append, not all of them.
        readable: dict[TopicPartition, int] = {}
        readable_sum = [0]

        def enough(key: Hashable | None) -> bool:
            waiting = held()
            looked: dict[TopicPartition, int]  # partition -> fetch offset
            if incremental:
                changed = fetch.to_read() if key is None else fetch.take_new()
                looked = {tp: p.fetch_offset for tp, p in changed.items()}
            elif key is None:
                looked = offsets
            elif isinstance(key, TopicPartition) and key in offsets:
                looked = {key: offsets[key]}
            else:
                looked = {}
            for tp, offset in looked.items():
                now_readable = (
                    0
                    if tp in waiting or tp in denied
                    else rm.available_bytes(tp, offset, replica_id, request.min_bytes, isolation)
                )
                readable_sum[0] += now_readable - readable.get(tp, 0)
                readable[tp] = now_readable
            return readable_sum[0] >= request.min_bytes

        offsets = {tp: w.fetch_offset for tp, w in wanted.items()}
        if held():
            # Answer (empty) when the quota frees, so the follower asks again then.
            wait_s = min(wait_s, throttle.leader.delay_s(throttle.clock()))
        # A session's fetch waits on the session, which every change to one of its
        # partitions wakes: no per-partition registration for an idle session.
        keys: list[object] = [session_key(fetch.session_id)] if incremental else list(wanted)
        if await rm.fetch_purgatory.wait(keys, enough, wait_s) or incremental:
            if incremental:
                # Partitions that changed meanwhile are authorized like the named ones.
                wanted = dict(fetch.to_read())
                denied |= _unauthorized(ctx, wanted, replica_id)
                wanted = {tp: w for tp, w in wanted.items() if tp not in denied}
            results = _collect(ctx, wanted, request.max_bytes, replica_id, held(), isolation)
    for tp in throttled:
        if tp in results:
            throttle.leader.record(len(results[tp][1]), throttle.clock())
    if ctx.metrics.enabled:
        # One counter step per topic (per response for followers), not per partition.
        out: dict[str, int] = {}
        for tp, result in results.items():
            if result[1]:
                topic = "" if replica_id >= 0 else tp.topic
                out[topic] = out.get(topic, 0) + len(result[1])
        for topic, size in out.items():
            ctx.metrics.bytes_out(topic, size, replication=replica_id >= 0)
    for tp in denied:
        results[tp] = _DENIED
    named = fetch.respond(_answers(rm, fetch, wanted, results, replica_id, isolation))
    # Refused partitions are never in a session; the response names them all the same.
    named += [tp for tp in denied if tp not in named]
    return _response(
        header.api_version,
        header.correlation_id,
        named,
        results,
        fetch.session_id,
        ErrorCode.none,
    )


def _answers(
    rm: ReplicaManager,
    fetch: SessionFetch,
    wanted: dict[TopicPartition, PartitionPosition],
    results: dict[TopicPartition, _Result],
    replica_id: int,
    isolation: int,
) -> dict[TopicPartition, PartitionAnswer]:
    """What each read found, for the session to decide which partitions to name."""
    answers = {}
    for tp, (error, records, hw, start, lso, _aborted, diverging) in results.items():
        # Left out for the budget or the throttle: the session reads it again next time.
        more = (
            fetch.session is not None
            and not records
            and error == ErrorCode.none
            and tp in wanted
            and rm.available_bytes(tp, wanted[tp].fetch_offset, replica_id, 1, isolation) > 0
        )
        answers[tp] = PartitionAnswer(
            error, bool(records), hw, lso, start, more, diverging is not None
        )
    return answers


def _unauthorized(
    ctx: BrokerContext, wanted: dict[TopicPartition, PartitionPosition], replica_id: int
) -> set[TopicPartition]:
    """A follower needs CLUSTER_ACTION on the cluster; a consumer READ on each topic."""
    if replica_id >= 0:
        if cluster_authorized(ctx, AclOperation.CLUSTER_ACTION):
            return set()
        return set(wanted)
    allowed = authorized_names(
        ctx, AclOperation.READ, ResourceType.TOPIC, (tp.topic for tp in wanted)
    )
    return {tp for tp in wanted if tp.topic not in allowed}


# error, records, high watermark, log start, last stable offset, aborted txns (read_committed),
# diverging epoch (epoch, end offset) or None.
# The records are a FileRegion (len() = size) on connections that send with sendfile.
_Result = tuple[ErrorCode, Records, int, int, int, list[AbortedTxn] | None, tuple[int, int] | None]
_DENIED: _Result = (ErrorCode.topic_authorization_failed, b"", -1, -1, -1, None, None)


def _collect(
    ctx: BrokerContext,
    wanted: dict[TopicPartition, PartitionPosition],
    response_max_bytes: int,
    replica_id: int,
    held: set[TopicPartition],
    isolation_level: int = 0,
) -> dict[TopicPartition, _Result]:
    """Read each wanted partition; a `held` one (throttled) answers its offsets only."""
    rm = ctx.replica_manager
    results: dict[TopicPartition, _Result] = {}
    budget = response_max_bytes
    # Zero-copy (Kafka's FileRecords): where the connection sends with sendfile, the
    # records stay in the segment file until the network layer writes the response.
    as_region = SEND_REGIONS.get()
    for tp, w in wanted.items():
        try:
            # KIP-74: the first partition with data returns at least one batch even
            # if it is larger than the budget, so a consumer can always progress.
            r = rm.read(
                tp,
                w.fetch_offset,
                0 if tp in held else min(w.max_bytes, max(budget, 0)),
                replica_id=replica_id,
                min_one_batch=budget == response_max_bytes and tp not in held,
                current_leader_epoch=w.leader_epoch,
                isolation_level=isolation_level,
                as_region=as_region,
                last_fetched_epoch=w.last_fetched_epoch,
            )
        except KafkaError as e:
            hw, start, lso = _offsets_or_unknown(ctx, tp)
            results[tp] = (e.code, b"", hw, start, lso, None, None)
            continue
        budget -= len(r.records)
        results[tp] = (
            ErrorCode.none,
            r.records,
            r.high_watermark,
            r.log_start_offset,
            r.last_stable_offset,
            r.aborted_transactions,
            r.diverging_epoch,
        )
    return results


def _offsets_or_unknown(ctx: BrokerContext, tp: TopicPartition) -> tuple[int, int, int]:
    hosted = ctx.replica_manager.partitions.get(tp)
    if hosted is None:
        return -1, -1, -1
    return hosted.high_watermark, hosted.log.log_start_offset, hosted.last_stable_offset


def _response(
    version: int,
    correlation_id: int,
    named: list[TopicPartition],
    results: dict[TopicPartition, _Result],
    session_id: int,
    error: ErrorCode,
) -> FramedResponse:
    by_topic: dict[str, list[FetchPartitionResult]] = {}
    diverging: dict[tuple[str, int], tuple[int, int]] | None = None
    for tp in named:
        p_error, records, hw, start, lso, aborted, diverged = results[tp]
        if diverged is not None:
            if diverging is None:
                diverging = {}
            diverging[tp] = diverged
        partitions = by_topic.get(tp.topic)
        if partitions is None:
            partitions = by_topic[tp.topic] = []
        partitions.append(
            (
                tp.partition,
                p_error,
                hw,
                lso,
                start,
                None if aborted is None else [(a.producer_id, a.first_offset) for a in aborted],
                records,
            )
        )
    return FramedResponse(
        encode_fetch_response(
            version,
            correlation_id,
            list(by_topic.items()),
            error_code=error,
            session_id=session_id,
            throttle_ms=NO_THROTTLE_MS,
            diverging=diverging,
        )
    )
