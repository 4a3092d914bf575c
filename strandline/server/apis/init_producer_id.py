"""InitProducerId (22): a producer id and epoch for an idempotent producer.

Without a transactional id Kafka "blindly" hands out a fresh producer id with epoch 0,
also when the request names the producer's current id and epoch (the KIP-360 epoch-bump
form, v3+): the new id starts its sequences at 0 everywhere. Transactions are not
implemented, so a transactional id is answered UNSUPPORTED_VERSION: a non-retriable
error both librdkafka and the Java/kafka-python clients surface as fatal at once,
rather than the coordinator errors they would retry until their timeouts.
"""

from __future__ import annotations

import logging
from typing import Any

from kazoo.exceptions import KazooException
from kio.schema.errors import ErrorCode

from strandline.protocol.codec import RequestHeader
from strandline.protocol.messages import build, response_class
from strandline.security.acl import AclOperation, ResourceType
from strandline.server.apis.api_versions import NO_THROTTLE
from strandline.server.apis.registry import api
from strandline.server.authz import any_authorized, cluster_authorized
from strandline.server.context import BrokerContext

API_KEY = 22
log = logging.getLogger(__name__)


@api(API_KEY, 0, 5)
async def handle(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any | None:
    producer_id, producer_epoch, error = -1, -1, ErrorCode.none
    if request.transactional_id is not None:
        log.info(
            "InitProducerId for transactional id %r from %s refused: transactions are not "
            "supported",
            request.transactional_id,
            header.client_id,
        )
        error = ErrorCode.unsupported_version
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
