"""TxnOffsetCommit (28): a transactional producer commits a consumer group's offsets as
part of its transaction (KIP-98; Kafka's KafkaApis.handleTxnOffsetCommitRequest).

The producer first added the group's `__consumer_offsets` partition to its transaction
(AddOffsetsToTxn), then sends this request to the group coordinator. The offsets are
written there as a transactional batch of the producer and stay pending, invisible to
OffsetFetch, until the transaction's marker commits or aborts them
(`GroupService.complete_txn_offsets`, called by WriteTxnMarkers).

Authorization as in Kafka: WRITE on the transactional id, READ on the group (each failure
answered for every partition), READ on each topic (TOPIC_AUTHORIZATION_FAILED for its
partitions). Partitions the cluster does not know answer UNKNOWN_TOPIC_OR_PARTITION.

Not done (Kafka 3.6+ KIP-890 part 1): verifying with the transaction coordinator that the
offsets partition was added to the transaction first. Clients always send
AddOffsetsToTxn before TxnOffsetCommit; a client that skipped it would leave the offsets
pending until its producer's next marker on the partition.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kio.schema.errors import ErrorCode

from strandline.group import model
from strandline.protocol.codec import RequestHeader
from strandline.security.acl import AclOperation, ResourceType
from strandline.server.apis.groups import commit_response
from strandline.server.apis.registry import api
from strandline.server.authz import authorized, authorized_names
from strandline.server.context import BrokerContext
from strandline.types import TopicPartition

TXN_OFFSET_COMMIT = 28
E = ErrorCode


@api(TXN_OFFSET_COMMIT, 0, 4)
async def txn_offset_commit(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    v = header.api_version
    offsets: list[tuple[TopicPartition, model.OffsetAndMetadata]] = [
        (
            TopicPartition(topic.name, int(p.partition_index)),
            model.OffsetAndMetadata(
                offset=int(p.committed_offset),
                leader_epoch=int(getattr(p, "committed_leader_epoch", -1)),  # v2+
                metadata=p.committed_metadata or "",
            ),
        )
        for topic in request.topics
        for p in topic.partitions
    ]
    errors = await _commit(ctx, request, offsets)
    if v < 2:
        # Clients before 2.3 (v0/v1) may crash on a loading error (KAFKA-7296): Kafka
        # answers them COORDINATOR_NOT_AVAILABLE instead, which they retry.
        errors = [
            (tp, E.coordinator_not_available if e is E.coordinator_load_in_progress else e)
            for tp, e in errors
        ]
    return commit_response(TXN_OFFSET_COMMIT, v, "TxnOffsetCommit", errors)


async def _commit(
    ctx: BrokerContext,
    request: Any,
    offsets: list[tuple[TopicPartition, model.OffsetAndMetadata]],
) -> list[tuple[TopicPartition, ErrorCode]]:
    """Each requested partition's error, in request order."""
    if not authorized(
        ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id
    ):
        return [(tp, E.transactional_id_authorization_failed) for tp, _ in offsets]
    if not authorized(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return [(tp, E.group_authorization_failed) for tp, _ in offsets]
    readable = authorized_names(
        ctx, AclOperation.READ, ResourceType.TOPIC, {tp.topic for tp, _ in offsets}
    )
    refused: dict[TopicPartition, ErrorCode] = {}
    for tp, _ in offsets:
        if tp.topic not in readable:
            refused[tp] = E.topic_authorization_failed
        elif ctx.metadata_cache.partition(tp) is None:
            refused[tp] = E.unknown_topic_or_partition
    allowed = tuple((tp, o) for tp, o in offsets if tp not in refused)
    answered: dict[TopicPartition, ErrorCode] = {}
    if allowed:
        core_request = model.TxnOffsetCommitRequest(
            token=None,
            group_id=request.group_id,
            producer_id=int(request.producer_id),
            producer_epoch=int(request.producer_epoch),
            offsets=allowed,
            generation_id=int(getattr(request, "generation_id", model.NO_GENERATION)),  # v3+
            member_id=getattr(request, "member_id", model.UNKNOWN_MEMBER_ID),
            group_instance_id=getattr(request, "group_instance_id", None),
        )
        coordinator = ctx.group_service.coordinator
        answer = await ctx.group_service.ask(
            lambda token, now: coordinator.txn_offset_commit(
                dataclasses.replace(core_request, token=token), now
            )
        )
        if isinstance(answer, model.TxnOffsetCommitResponse):
            answered = dict(answer.errors)
        else:  # the broker is stopping
            answered = {tp: E.coordinator_not_available for tp, _ in allowed}
    return [(tp, refused.get(tp) or answered.get(tp, E.unknown_server_error)) for tp, _ in offsets]
