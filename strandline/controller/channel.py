"""ControllerChannelManager: delivers controller requests to brokers.

Requests to the controller's own broker are applied in-process; requests to other
brokers go over the wire (LeaderAndIsr/UpdateMetadata/StopReplica, API keys 4-6)
through `RemoteSender`, one ordered queue per broker as in Kafka.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Protocol

from kio.schema.errors import ErrorCode

from strandline.errors import KafkaError
from strandline.protocol.controller_requests import (
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
)

log = logging.getLogger(__name__)

ControllerRequest = LeaderAndIsrRequest | UpdateMetadataRequest | StopReplicaRequest
# Called with the broker's answer (its top-level or first partition error, else NONE).
# Never called when the request is dropped because the broker died or we resigned.
OnAnswer = Callable[[ErrorCode], None]


class LocalBroker(Protocol):
    """What a broker exposes to the controller (locally: the broker itself)."""

    async def apply_controller_request(self, request: ControllerRequest) -> object: ...


class RemoteSender(Protocol):
    async def send(
        self, broker_id: int, request: ControllerRequest, on_answer: OnAnswer | None = None
    ) -> None: ...

    async def remove_brokers(self, broker_ids: set[int]) -> None: ...


class ControllerChannel:
    def __init__(
        self, local_broker_id: int, local: LocalBroker, remote: RemoteSender | None
    ) -> None:
        self.local_broker_id = local_broker_id
        self.local = local
        self.remote = remote

    async def _send(
        self, broker_id: int, request: ControllerRequest, on_answer: OnAnswer | None = None
    ) -> None:
        if broker_id == self.local_broker_id:
            # The remote sends queued just before wait for their sender tasks, and this
            # loop is about to be busy applying locally (hundreds of leaders, each an
            # fsynced checkpoint): yield once so those requests are on the wire first
            # and the other brokers do their part at the same time as we do ours.
            await asyncio.sleep(0)
            try:
                await self.local.apply_controller_request(request)
            except KafkaError as e:
                # What a remote broker would answer as an error code. Raising would abort
                # the controller's event half-way: UpdateMetadata unsent, other brokers'
                # LeaderAndIsr unsent, the znodes already written.
                log.error("local %s failed: %s", type(request).__name__, e)
                if on_answer is not None:
                    on_answer(e.code)
            else:
                if on_answer is not None:
                    on_answer(ErrorCode.none)
        elif self.remote is not None:
            await self.remote.send(broker_id, request, on_answer)
        else:
            log.error("no channel to broker %d for %s", broker_id, type(request).__name__)

    async def send_leader_and_isr(self, broker_id: int, request: LeaderAndIsrRequest) -> None:
        await self._send(broker_id, request)

    async def send_update_metadata(self, broker_id: int, request: UpdateMetadataRequest) -> None:
        await self._send(broker_id, request)

    async def send_stop_replica(
        self, broker_id: int, request: StopReplicaRequest, on_answer: OnAnswer | None = None
    ) -> None:
        await self._send(broker_id, request, on_answer)

    async def remove_brokers(self, broker_ids: set[int]) -> None:
        if self.remote is not None:
            await self.remote.remove_brokers(broker_ids)
