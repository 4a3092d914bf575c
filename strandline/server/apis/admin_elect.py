"""ElectLeaders (43): preferred (0) or unclean (1) leader election on request.

Answered by the controller only, as Kafka's ZooKeeper-mode brokers do since 2.4: the
handler hands the request to the local controller's event queue and answers when the
elections are written; any other broker answers NOT_CONTROLLER for every partition
and the admin client retries at the controller named by Metadata. (The older path,
writing /admin/preferred_replica_election from any broker, still works for tools.)
"""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode

from strandline.controller.decisions import PREFERRED_ELECTION
from strandline.errors import KafkaError
from strandline.protocol.codec import RequestHeader
from strandline.protocol.messages import build, response_class
from strandline.security.acl import AclOperation
from strandline.server.apis.api_versions import NO_THROTTLE
from strandline.server.apis.registry import api
from strandline.server.authz import require_cluster
from strandline.server.context import BrokerContext
from strandline.types import TopicPartition

ELECT_LEADERS = 43

Results = dict[TopicPartition, tuple[ErrorCode, str | None]]


def requested_partitions(request: Any) -> list[TopicPartition] | None:
    if request.topic_partitions is None:
        return None
    return [TopicPartition(t.topic, int(p)) for t in request.topic_partitions for p in t.partitions]


@api(ELECT_LEADERS, 0, 2)
async def elect_leaders(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    v = header.api_version
    tps = requested_partitions(request)
    election_type = int(getattr(request, "election_type", PREFERRED_ELECTION))
    timeout_s = max(request.timeout.total_seconds(), 0.001)
    results: Results
    try:
        require_cluster(ctx, AclOperation.ALTER)
    except KafkaError as e:
        # As Kafka's KafkaApis: the refusal is the response's own error (v1+, what an
        # admin client reads first) and every partition's.
        return _response(v, e.code, {tp: (e.code, None) for tp in tps or []})
    try:
        results = await asyncio.wait_for(
            ctx.controller.elect_leaders(tps, election_type), timeout_s
        )
    except KafkaError as e:
        results = {tp: (e.code, str(e)) for tp in tps or []}
        if tps is None:
            return _response(v, e.code, {})
    except TimeoutError:
        results = {tp: (ErrorCode.request_timed_out, None) for tp in tps or []}
    return _response(v, ErrorCode.none, results)


def _response(v: int, error: ErrorCode, results: Results) -> Any:
    partition_cls = response_class(ELECT_LEADERS, v, "PartitionResult")
    topic_cls = response_class(ELECT_LEADERS, v, "ReplicaElectionResult")
    by_topic: dict[str, list[Any]] = {}
    for tp, (code, message) in sorted(results.items()):
        by_topic.setdefault(tp.topic, []).append(
            build(partition_cls, partition_id=tp.partition, error_code=code, error_message=message)
        )
    return build(
        response_class(ELECT_LEADERS, v, "ElectLeadersResponse"),
        throttle_time=NO_THROTTLE,
        error_code=error,
        replica_election_results=tuple(
            build(topic_cls, topic=topic, partition_result=tuple(parts))
            for topic, parts in by_topic.items()
        ),
    )
