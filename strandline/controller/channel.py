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
    """`queue_local`: requests to the local broker go through a queue of their own and
    are applied by a task, as a remote broker's are (Kafka's ControllerChannelManager
    has a queue per broker, its own included): a controller event then ends once its
    writes are done and its requests queued, not once this broker has applied them.
    With 10,000 partitions applying one LeaderAndIsr locally takes seconds; awaiting it
    held ControlledShutdown answers past the asking broker's 10 s timeout (docs/scaling.md).
    Without it (tests, tools), a send returns once the local broker has applied it."""

    def __init__(
        self,
        local_broker_id: int,
        local: LocalBroker,
        remote: RemoteSender | None,
        queue_local: bool = False,
    ) -> None:
        self.local_broker_id = local_broker_id
        self.local = local
        self.remote = remote
        self.queue_local = queue_local
        self._local_queue: asyncio.Queue[tuple[ControllerRequest, OnAnswer | None]] | None = None
        self._local_task: asyncio.Task[None] | None = None

    async def _send(
        self, broker_id: int, request: ControllerRequest, on_answer: OnAnswer | None = None
    ) -> None:
        if broker_id == self.local_broker_id:
            if self.queue_local:
                self._enqueue_local(request, on_answer)
                return
            # The remote sends queued just before wait for their sender tasks, and this
            # loop is about to be busy applying locally (hundreds of leaders, each an
            # fsynced checkpoint): yield once so those requests are on the wire first
            # and the other brokers do their part at the same time as we do ours.
            await asyncio.sleep(0)
            await self._apply_local(request, on_answer)
        elif self.remote is not None:
            await self.remote.send(broker_id, request, on_answer)
        else:
            log.error("no channel to broker %d for %s", broker_id, type(request).__name__)

    async def _apply_local(self, request: ControllerRequest, on_answer: OnAnswer | None) -> None:
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

    def _enqueue_local(self, request: ControllerRequest, on_answer: OnAnswer | None) -> None:
        if self._local_queue is None:
            self._local_queue = asyncio.Queue()
        if self._local_task is None or self._local_task.done():
            self._local_task = asyncio.create_task(
                self._run_local(self._local_queue), name="controller-send-local"
            )
        self._local_queue.put_nowait((request, on_answer))

    async def _run_local(
        self, queue: asyncio.Queue[tuple[ControllerRequest, OnAnswer | None]]
    ) -> None:
        while True:
            request, on_answer = await queue.get()
            try:
                await self._apply_local(request, on_answer)
            except Exception:  # one request failing must not stop the ones after it
                log.exception("local %s failed", type(request).__name__)
            finally:
                queue.task_done()

    async def idle(self) -> None:
        """Wait until the local broker has applied every request queued for it."""
        if self._local_queue is not None:
            await self._local_queue.join()

    async def close_local(self) -> None:
        """Stop applying local requests (the broker is stopping)."""
        task, self._local_task = self._local_task, None
        self._local_queue = None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass

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
