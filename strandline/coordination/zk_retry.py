"""ZooKeeper requests made on a client's behalf wait out a lost connection.

Kafka's KafkaZkClient sends every request through `retryRequestsUntilConnected`: a
CONNECTIONLOSS is not the client's problem, the request is sent again once the session
is back. We do that for the admin requests a broker makes while a client waits (topics,
configs, SCRAM credentials through `zk_request`; ACLs per resource pattern inside
`security/acl_cache.py`): a ZooKeeper connection that drops for a moment (a missed ping
on a loaded host) must not turn into a failed CreateTopics or IncrementalAlterConfigs.
kazoo's `KazooRetry` does the waiting. Past the deadline the client gets
REQUEST_TIMED_OUT for that resource, and its connection stays open.

The controller's fenced writes and the leader's ISR write do not come here: they read
back after a ConnectionLoss (the write may have been applied) and the controller
resigns on a lost session, as Kafka's do.

Retrying is safe because these requests are idempotent or re-read first: a config set
is a whole-znode set, the ACL and credential writes are conditional read-modify-writes,
a repeated config-change notification makes brokers reload once more. A topic creation
whose first attempt was applied but unanswered is refused as existing on the retry
(Kafka has the same window).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from kazoo.retry import KazooRetry, RetryFailedError

from strandline.errors import RequestTimedOutError

__all__ = ["RETRY_DEADLINE_S", "until_connected", "zk_request"]

P = ParamSpec("P")
T = TypeVar("T")

# A client's request times out after 30 s by default (request.timeout.ms); waiting
# longer for ZooKeeper would answer nobody.
RETRY_DEADLINE_S = 30.0

# A session that expires while we wait is replaced by kazoo with a new one; admin
# requests touch no ephemeral znode, so they go on in the new session
# (`ignore_expire`), as Kafka's do after its ZooKeeperClient reinitializes.
_UNTIL_CONNECTED = KazooRetry(
    max_tries=-1, delay=0.05, backoff=2, max_delay=1.0, deadline=RETRY_DEADLINE_S
)


def until_connected(request: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Call `request` until it completes without losing its connection (blocking).
    Past the deadline: RequestTimedOutError, which the API answers as REQUEST_TIMED_OUT
    (retriable for the client) on a connection that stays open."""
    retry = _UNTIL_CONNECTED.copy()  # a KazooRetry counts its attempts: one per call
    try:
        return retry(request, *args, **kwargs)
    except RetryFailedError as e:
        raise RequestTimedOutError(
            f"ZooKeeper unreachable for {retry.deadline:.0f}s; the request was not completed"
        ) from e


async def zk_request(request: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """`until_connected` on a worker thread, so the event loop keeps serving."""

    def call() -> T:
        return until_connected(request, *args, **kwargs)

    return await asyncio.to_thread(call)
