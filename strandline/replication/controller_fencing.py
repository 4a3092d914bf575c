"""How a broker decides whether to obey a controller request, pure (controller epoch, KIP-380).

Two fences, both applied by the real broker (`server/broker.py`,
`server/replica_manager.py`) and by the whole-cluster simulator:

- the controller epoch: a request from a controller older than the newest one this
  broker has heard from is a zombie's and is refused (STALE_CONTROLLER_EPOCH);
- the broker epoch: a request addressed to an earlier incarnation of this broker
  (before a restart or session expiry) is refused (STALE_BROKER_EPOCH);

and per partition, a LeaderAndIsr state whose leader epoch is not newer than the one
the broker holds is an old decision and is ignored.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode


def controller_request_error(
    request_controller_epoch: int,
    newest_controller_epoch: int,
    request_broker_epoch: int,
    broker_epoch: int,
) -> ErrorCode | None:
    """The error a controller request gets, or None if the broker applies it."""
    # Stale only when older than ours: a request may arrive between our znode's
    # creation and our learning its epoch (Kafka's isBrokerEpochStale).
    if request_broker_epoch != -1 and request_broker_epoch < broker_epoch:
        return ErrorCode.stale_broker_epoch
    if request_controller_epoch < newest_controller_epoch:
        return ErrorCode.stale_controller_epoch
    return None


def leader_and_isr_state_error(
    broker_id: int,
    replicas: tuple[int, ...],
    leader_epoch: int,
    current_leader_epoch: int | None,
) -> ErrorCode | None:
    """The error of one LeaderAndIsr partition state, or None if the broker takes the
    role it names. `current_leader_epoch` is None when the broker hosts no replica yet."""
    if current_leader_epoch is not None and leader_epoch <= current_leader_epoch:
        return ErrorCode.stale_controller_epoch
    if broker_id not in replicas:
        return ErrorCode.unknown_topic_or_partition
    return None
