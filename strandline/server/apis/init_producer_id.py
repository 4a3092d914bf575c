"""InitProducerId (22): a producer id and epoch for an idempotent or transactional producer.

Without a transactional id Kafka "blindly" hands out a fresh producer id with epoch 0,
also when the request names the producer's current id and epoch (the KIP-360 epoch-bump
form, v3+): the new id starts its sequences at 0 everywhere.

With a transactional id the transaction coordinator answers (it must own the id's
`__transaction_state` partition, else NOT_COORDINATOR): it bumps the id's epoch, which
fences any older producer with the same id; an open transaction of that older producer
is aborted first, and the request is answered CONCURRENT_TRANSACTIONS until the abort is
complete (the client retries). An exhausted epoch gets a new producer id. v3+ may name
the current producer id and epoch (KIP-360) to bump its own epoch after an error.
"""

from __future__ import annotations

import datetime
import logging
from typing import Any

from kazoo.exceptions import KazooException
from kio.schema.errors import ErrorCode

from strandline.protocol.codec import RequestHeader
from strandline.protocol.messages import build, response_class
from strandline.security.acl import AclOperation, ResourceType
from strandline.server.apis.api_versions import NO_THROTTLE
from strandline.server.apis.registry import api
from strandline.server.authz import any_authorized, authorized, cluster_authorized
from strandline.server.context import BrokerContext

API_KEY = 22
NO_PRODUCER_ID = NO_PRODUCER_EPOCH = -1
log = logging.getLogger(__name__)


@api(API_KEY, 0, 5)
async def handle(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any | None:
    producer_id, producer_epoch, error = -1, -1, ErrorCode.none
    transactional_id = request.transactional_id
    if transactional_id is not None:
        if not authorized(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            error = ErrorCode.transactional_id_authorization_failed
        else:
            producer_id, producer_epoch, error = await _transactional(ctx, request)
            if error is ErrorCode.producer_fenced and header.api_version < 4:
                # Clients before v4 do not know PRODUCER_FENCED (KIP-588).
                error = ErrorCode.invalid_producer_epoch
    elif not (
        cluster_authorized(ctx, AclOperation.IDEMPOTENT_WRITE)
        or any_authorized(ctx, AclOperation.WRITE, ResourceType.TOPIC)
    ):
        # Kafka 3: IDEMPOTENT_WRITE on the cluster, or WRITE on any topic (KIP-679).
        error = ErrorCode.cluster_authorization_failed
    else:
        try:
            producer_id, producer_epoch = await ctx.producer_ids.generate(), 0
        except (KazooException, OSError) as exc:
            # Kafka's answer while no id block can be had: retriable, the client tries again.
            log.warning("cannot claim a producer id block: %s", exc)
            error = ErrorCode.coordinator_load_in_progress
    return build(
        response_class(API_KEY, header.api_version, "InitProducerIdResponse"),
        throttle_time=NO_THROTTLE,
        error_code=error,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
    )


async def _transactional(ctx: BrokerContext, request: Any) -> tuple[int, int, ErrorCode]:
    given_id = int(getattr(request, "producer_id", NO_PRODUCER_ID))
    given_epoch = int(getattr(request, "producer_epoch", NO_PRODUCER_EPOCH))
    if (given_id == NO_PRODUCER_ID) != (given_epoch == NO_PRODUCER_EPOCH):
        return -1, -1, ErrorCode.invalid_request  # both or neither, as Kafka
    expected = None if given_id == NO_PRODUCER_ID else (given_id, given_epoch)
    timeout_ms = round(request.transaction_timeout / datetime.timedelta(milliseconds=1))
    result = await ctx.txn_service.init_producer_id(request.transactional_id, timeout_ms, expected)
    return result.producer_id, result.producer_epoch, result.error
