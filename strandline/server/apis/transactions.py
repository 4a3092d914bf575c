"""The transaction APIs a producer sends its transaction coordinator (KIP-98):
AddPartitionsToTxn (24), AddOffsetsToTxn (25), EndTxn (26), and the operators'
DescribeTransactions (65) and ListTransactions (66). InitProducerId (22) is in
init_producer_id.py, FindCoordinator (10) in groups.py.

Each handler checks ACLs as Kafka's KafkaApis does (WRITE on the TRANSACTIONAL_ID for a
producer's requests, DESCRIBE for the operator APIs), runs the request on the
TxnService's pure coordinator and maps the answer onto the kio response of the version.
Clients older than the version that introduced PRODUCER_FENCED hear
INVALID_PRODUCER_EPOCH instead, as from Kafka.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from strandline.group.partitioning import OFFSETS_TOPIC
from strandline.group.partitioning import partition_for as group_partition_for
from strandline.protocol.codec import RequestHeader
from strandline.protocol.messages import build, response_class
from strandline.security.acl import AclOperation, ResourceType
from strandline.server.apis.api_versions import NO_THROTTLE
from strandline.server.apis.registry import api
from strandline.server.authz import authorized
from strandline.server.context import BrokerContext
from strandline.transaction.model import TxnResult
from strandline.transaction.partitioning import TRANSACTION_STATE_TOPIC
from strandline.types import TopicPartition

ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN = 24, 25, 26
DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 65, 66


def _txn_allowed(ctx: BrokerContext, operation: AclOperation, transactional_id: str) -> bool:
    return authorized(ctx, operation, ResourceType.TRANSACTIONAL_ID, transactional_id)


def _for_version(error: ErrorCode, version: int, fenced_since: int) -> ErrorCode:
    """Clients before `fenced_since` do not know PRODUCER_FENCED (KIP-588)."""
    if error is ErrorCode.producer_fenced and version < fenced_since:
        return ErrorCode.invalid_producer_epoch
    return error


async def _ask_txn(ctx: BrokerContext, call: Any) -> ErrorCode:
    answer = await ctx.txn_service.ask(call)
    # None: the broker is stopping; the client finds the coordinator again.
    return answer.error if isinstance(answer, TxnResult) else ErrorCode.coordinator_not_available


def _is_internal(topic: str) -> bool:
    # Kafka's Topic.isInternal: producers never write these themselves.
    return topic in (OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC)


# == AddPartitionsToTxn ========================================================================


@api(ADD_PARTITIONS_TO_TXN, 0, 3)
async def add_partitions_to_txn(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    v = header.api_version
    transactional_id = request.v3_and_below_transactional_id
    wanted = [
        TopicPartition(t.name, int(p)) for t in request.v3_and_below_topics for p in t.partitions
    ]
    errors: dict[TopicPartition, ErrorCode]
    if not _txn_allowed(ctx, AclOperation.WRITE, transactional_id):
        errors = dict.fromkeys(wanted, ErrorCode.transactional_id_authorization_failed)
    else:
        denied = {
            tp
            for tp in wanted
            if _is_internal(tp.topic)
            or not authorized(ctx, AclOperation.WRITE, ResourceType.TOPIC, tp.topic)
        }
        unknown = {
            tp for tp in wanted if tp not in denied and ctx.metadata_cache.partition(tp) is None
        }
        if denied or unknown:
            # One bad partition fails the whole request; the others were not attempted.
            errors = {
                tp: ErrorCode.topic_authorization_failed
                if tp in denied
                else ErrorCode.unknown_topic_or_partition
                if tp in unknown
                else ErrorCode.operation_not_attempted
                for tp in wanted
            }
        else:
            coordinator = ctx.txn_service.coordinator
            error = await _ask_txn(
                ctx,
                lambda token, now: coordinator.add_partitions(
                    token,
                    transactional_id,
                    request.v3_and_below_producer_id,
                    request.v3_and_below_producer_epoch,
                    wanted,
                    now,
                ),
            )
            errors = dict.fromkeys(wanted, _for_version(error, v, 2))
    by_topic: dict[str, list[tuple[int, ErrorCode]]] = {}
    for tp, error in errors.items():
        by_topic.setdefault(tp.topic, []).append((tp.partition, error))
    partition_cls = response_class(ADD_PARTITIONS_TO_TXN, v, "AddPartitionsToTxnPartitionResult")
    topic_cls = response_class(ADD_PARTITIONS_TO_TXN, v, "AddPartitionsToTxnTopicResult")
    return build(
        response_class(ADD_PARTITIONS_TO_TXN, v, "AddPartitionsToTxnResponse"),
        throttle_time=NO_THROTTLE,
        results_by_topic_v3_and_below=tuple(
            build(
                topic_cls,
                name=topic,
                results_by_partition=tuple(
                    build(partition_cls, partition_index=p, partition_error_code=e)
                    for p, e in results
                ),
            )
            for topic, results in by_topic.items()
        ),
    )


# == AddOffsetsToTxn ===========================================================================


@api(ADD_OFFSETS_TO_TXN, 0, 3)
async def add_offsets_to_txn(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    v = header.api_version
    transactional_id = request.transactional_id
    if not _txn_allowed(ctx, AclOperation.WRITE, transactional_id):
        error = ErrorCode.transactional_id_authorization_failed
    elif not authorized(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        error = ErrorCode.group_authorization_failed
    else:
        # The group's __consumer_offsets partition joins the transaction, so the group
        # coordinator's transactional offsets get a marker too.
        offsets_partitions = ctx.config.offsets_topic_num_partitions
        tp = TopicPartition(
            OFFSETS_TOPIC, group_partition_for(request.group_id, offsets_partitions)
        )
        coordinator = ctx.txn_service.coordinator
        error = await _ask_txn(
            ctx,
            lambda token, now: coordinator.add_partitions(
                token, transactional_id, request.producer_id, request.producer_epoch, [tp], now
            ),
        )
        error = _for_version(error, v, 2)
    return build(
        response_class(ADD_OFFSETS_TO_TXN, v, "AddOffsetsToTxnResponse"),
        throttle_time=NO_THROTTLE,
        error_code=error,
    )


# == EndTxn ====================================================================================


@api(END_TXN, 0, 3)
async def end_txn(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    v = header.api_version
    transactional_id = request.transactional_id
    if not _txn_allowed(ctx, AclOperation.WRITE, transactional_id):
        error = ErrorCode.transactional_id_authorization_failed
    else:
        coordinator = ctx.txn_service.coordinator
        error = await _ask_txn(
            ctx,
            lambda token, now: coordinator.end_txn(
                token,
                transactional_id,
                request.producer_id,
                request.producer_epoch,
                bool(request.committed),
                now,
            ),
        )
        error = _for_version(error, v, 2)
    return build(
        response_class(END_TXN, v, "EndTxnResponse"),
        throttle_time=NO_THROTTLE,
        error_code=error,
    )


# == DescribeTransactions ======================================================================


def _timestamp(ms: int) -> datetime.datetime:
    # kio writes round(timestamp * 1000): -1 (no transaction yet) stays -1 on the wire.
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)


@api(DESCRIBE_TRANSACTIONS, 0, 0)
async def describe_transactions(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    v = header.api_version
    state_cls = response_class(DESCRIBE_TRANSACTIONS, v, "TransactionState")
    topic_cls = response_class(DESCRIBE_TRANSACTIONS, v, "TopicData")
    coordinator = ctx.txn_service.coordinator
    states = []
    for transactional_id in request.transactional_ids:
        if not _txn_allowed(ctx, AclOperation.DESCRIBE, transactional_id):
            states.append(
                build(
                    state_cls,
                    error_code=ErrorCode.transactional_id_authorization_failed,
                    transactional_id=transactional_id,
                    transaction_state="",
                    transaction_timeout=datetime.timedelta(0),
                    transaction_start_time=_timestamp(-1),
                    producer_id=-1,
                    producer_epoch=-1,
                    topics=(),
                )
            )
            continue
        described = coordinator.describe(transactional_id)
        by_topic: dict[str, list[int]] = {}
        for tp in described.partitions:
            # Only partitions of topics the principal may describe, as Kafka.
            if authorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, tp.topic):
                by_topic.setdefault(tp.topic, []).append(tp.partition)
        states.append(
            build(
                state_cls,
                error_code=described.error,
                transactional_id=transactional_id,
                transaction_state=described.state,
                transaction_timeout=datetime.timedelta(milliseconds=described.timeout_ms),
                transaction_start_time=_timestamp(described.start_timestamp_ms),
                producer_id=described.producer_id,
                producer_epoch=described.producer_epoch,
                topics=tuple(
                    build(topic_cls, topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()
                ),
            )
        )
    return build(
        response_class(DESCRIBE_TRANSACTIONS, v, "DescribeTransactionsResponse"),
        throttle_time=NO_THROTTLE,
        transaction_states=tuple(states),
    )


# == ListTransactions ==========================================================================


@api(LIST_TRANSACTIONS, 0, 1)
async def list_transactions(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    v = header.api_version
    listed = ctx.txn_service.coordinator.list_transactions(
        tuple(request.state_filters),
        tuple(int(p) for p in request.producer_id_filters),
        int(getattr(request, "duration_filter", -1)),
        ctx.now_ms(),
    )
    state_cls = response_class(LIST_TRANSACTIONS, v, "TransactionState")
    return build(
        response_class(LIST_TRANSACTIONS, v, "ListTransactionsResponse"),
        throttle_time=NO_THROTTLE,
        error_code=listed.error,
        unknown_state_filters=listed.unknown_state_filters,
        transaction_states=tuple(
            build(
                state_cls,
                transactional_id=t.transactional_id,
                producer_id=t.producer_id,
                transaction_state=t.state,
            )
            for t in listed.transactions
            if _txn_allowed(ctx, AclOperation.DESCRIBE, t.transactional_id)
        ),
    )
