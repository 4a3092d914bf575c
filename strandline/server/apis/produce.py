"""Produce (0): append batches as leader; acks=-1 waits in the produce purgatory
until the high watermark passes the batch (every ISR member has it).

Transactional batches (KIP-98) need WRITE on the request's transactional id, as in
Kafka; the partition's producer state opens the transaction (storage.producer_state)."""

from __future__ import annotations

import logging
import struct
from collections.abc import Hashable
from typing import Any

from kio.schema.errors import ErrorCode

from strandline.errors import KafkaError
from strandline.internal_topics import is_internal
from strandline.protocol.codec import RequestHeader
from strandline.protocol.produce_codec import (
    RecordError,
    decode_produce_request,
    encode_produce_response,
)
from strandline.protocol.record_batch import (
    ATTRIBUTES_OFFSET,
    LOG_OVERHEAD,
    TRANSACTIONAL_MASK,
)
from strandline.security.acl import AclOperation, ResourceType
from strandline.server.apis.api_versions import NO_THROTTLE_MS
from strandline.server.apis.registry import FramedResponse, api
from strandline.server.authz import authorized, authorized_names
from strandline.server.context import BrokerContext
from strandline.storage.record_validation import RecordValidationError
from strandline.types import TopicPartition

API_KEY = 0
_NO_RECORD_ERRORS: list[RecordError] = []  # shared, never mutated
_BATCH_LENGTH = struct.Struct(">i")  # at offset 8 of a batch, after its baseOffset
log = logging.getLogger(__name__)


class _PartitionOutcome:
    __slots__ = (
        "error",
        "base_offset",
        "last_offset",
        "log_append_time",
        "log_start_offset",
        "message",
        "record_errors",
    )

    def __init__(self) -> None:
        self.error = ErrorCode.none
        self.base_offset = -1
        self.last_offset = -1
        self.log_append_time = -1
        self.log_start_offset = -1
        self.message: str | None = None
        self.record_errors: list[RecordError] = _NO_RECORD_ERRORS

    def fail(self, error: ErrorCode, message: str) -> None:
        self.error = error
        self.message = message


@api(API_KEY, 3, 9, decode=decode_produce_request)
async def handle(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any | None:
    acks = request.acks
    rm = ctx.replica_manager
    now = ctx.now_ms()
    outcomes: dict[TopicPartition, _PartitionOutcome] = {}
    writable = authorized_names(
        ctx, AclOperation.WRITE, ResourceType.TOPIC, (t.name for t in request.topic_data)
    )
    if ctx.authorizer is not None and not _transactional_id_allowed(ctx, request):
        # Kafka refuses the whole request (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
        writable = set()
        denied_error = ErrorCode.transactional_id_authorization_failed
    else:
        denied_error = ErrorCode.topic_authorization_failed
    for topic in request.topic_data:
        for pdata in topic.partition_data:
            tp = TopicPartition(topic.name, pdata.index)
            outcome = outcomes[tp] = _PartitionOutcome()
            if topic.name not in writable:
                outcome.fail(denied_error, f"not authorized to write {tp}")
                continue
            if acks not in (0, 1, -1):
                outcome.fail(ErrorCode.invalid_required_acks, f"acks={acks} is not 0, 1 or -1")
                continue
            if not pdata.records:
                outcome.fail(ErrorCode.corrupt_message, "produce request without records")
                continue
            if _more_than_one_batch(pdata.records):
                # Kafka's ProduceRequest.validateRecords (v3+), before anything is
                # appended: the whole partition is refused, the others go on.
                outcome.fail(
                    ErrorCode.invalid_record,
                    f"Produce requests with version {header.api_version} are only allowed "
                    "to contain exactly one record batch per partition",
                )
                continue
            if is_internal(tp.topic):  # after the ACL check, as Kafka's appendToLocalLog
                outcome.fail(
                    ErrorCode.invalid_topic_exception,
                    f"cannot append to internal topic {tp.topic}: only the broker writes it",
                )
                continue
            try:
                info = rm.append_as_leader(tp, pdata.records, acks, now)
            except RecordValidationError as e:
                # KIP-467: the client fails exactly the records named, the others of the
                # batch with the partition's error.
                log.debug("produce to %s refused: %s", tp, e)
                outcome.fail(e.code, str(e))
                outcome.record_errors = e.record_errors
                continue
            except KafkaError as e:
                log.debug("produce to %s failed: %s", tp, e)
                outcome.fail(e.code, str(e))
                continue
            ctx.metrics.bytes_in(
                tp.topic, len(pdata.records), info.last_offset - info.first_offset + 1
            )
            outcome.base_offset = info.first_offset
            outcome.last_offset = info.last_offset
            outcome.log_append_time = info.log_append_time_ms
            outcome.log_start_offset = rm.get_partition(tp).log.log_start_offset

    if acks == 0:
        return None
    if acks == -1:
        await _await_replication(ctx, outcomes, request.timeout.total_seconds())
    return _response(header.api_version, header.correlation_id, request, outcomes)


def _more_than_one_batch(records: bytes | bytearray | memoryview) -> bool:
    """True when a whole second batch follows the first: where Kafka's batch iterator
    (ByteBufferLogInputStream.nextBatch) finds one. Anything else after the first batch
    (a partial batch, a bad length) is left to the append path, which judges it."""
    size = len(records)
    if size < LOG_OVERHEAD:
        return False
    (length,) = _BATCH_LENGTH.unpack_from(records, 8)
    second = LOG_OVERHEAD + length
    if length < 0 or size - second < LOG_OVERHEAD:
        return False
    (second_length,) = _BATCH_LENGTH.unpack_from(records, second + 8)
    return second_length >= 0 and size - second >= LOG_OVERHEAD + second_length


def _transactional_id_allowed(ctx: BrokerContext, request: Any) -> bool:
    """False when the request holds a transactional batch (Kafka looks at each
    partition's first batch) and WRITE on its transactional id is not granted."""
    transactional = any(
        len(p.records) > ATTRIBUTES_OFFSET + 1
        and p.records[ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL_MASK
        for t in request.topic_data
        for p in t.partition_data
        if p.records
    )
    if not transactional:
        return True
    tid = getattr(request, "transactional_id", None)
    return tid is not None and authorized(
        ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, tid
    )


async def _await_replication(
    ctx: BrokerContext, outcomes: dict[TopicPartition, _PartitionOutcome], timeout_s: float
) -> None:
    rm = ctx.replica_manager
    pending = {tp: o for tp, o in outcomes.items() if o.error == ErrorCode.none}
    if not pending:
        return

    # Partitions still waiting for their ISR; a wake-up for one looks at that one only.
    waiting = dict(pending)

    def all_completed(key: Hashable | None) -> bool:
        if key is None:
            to_check = list(waiting)
        elif isinstance(key, TopicPartition) and key in waiting:
            to_check = [key]
        else:
            return not waiting
        for tp in to_check:
            if rm.produce_completion(tp, waiting[tp].last_offset) is not None:
                del waiting[tp]
        return not waiting

    await rm.produce_purgatory.wait(pending, all_completed, timeout_s)
    for tp, o in pending.items():
        answer = rm.produce_completion(tp, o.last_offset)
        if answer is None:
            o.fail(ErrorCode.request_timed_out, f"{tp}: not replicated to the ISR in time")
        elif answer != ErrorCode.none:
            o.fail(answer, f"{tp}: {answer.name} while waiting for the ISR")


def _response(
    version: int,
    correlation_id: int,
    request: Any,
    outcomes: dict[TopicPartition, _PartitionOutcome],
) -> FramedResponse:
    topics = []
    for topic in request.topic_data:
        name = topic.name
        partitions = []
        for pdata in topic.partition_data:
            o = outcomes[TopicPartition(name, pdata.index)]
            partitions.append(
                (
                    pdata.index,
                    o.error,
                    o.base_offset,
                    o.log_append_time,
                    o.log_start_offset,
                    o.message,
                    o.record_errors,
                )
            )
        topics.append((name, partitions))
    return FramedResponse(
        [encode_produce_response(version, correlation_id, topics, NO_THROTTLE_MS)]
    )
