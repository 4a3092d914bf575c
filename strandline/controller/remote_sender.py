"""Sends controller requests to other brokers over the wire, one ordered queue and one
connection per broker (Kafka's ControllerChannelManager / RequestSendThread).

A request is retried until the broker answers or is removed (it died, or the
controller resigned); requests to one broker keep their order.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from kio.schema.errors import ErrorCode

from strandline.client.connection import KafkaConnection
from strandline.client.security import ClientSecurity
from strandline.controller.channel import ControllerRequest, OnAnswer
from strandline.protocol import controller_messages as cm
from strandline.protocol.controller_requests import (
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
)

log = logging.getLogger(__name__)

RETRY_BACKOFF_S = 0.1
# Kafka's controller.socket.timeout.ms (30 s). A LeaderAndIsr creating 10,000 logs can
# take a loaded broker more than 10 s: timing it out then sent it again, twice the work.
REQUEST_TIMEOUT_S = 30.0

Endpoint = tuple[str, int]


def to_wire(request: ControllerRequest) -> object:
    if isinstance(request, LeaderAndIsrRequest):
        return cm.leader_and_isr_request_to_wire(request)
    if isinstance(request, UpdateMetadataRequest):
        return cm.update_metadata_request_to_wire(request)
    if isinstance(request, StopReplicaRequest):
        return cm.stop_replica_request_to_wire(request)
    raise TypeError(f"not a controller request: {request!r}")


def answer_error(request: ControllerRequest, response: object) -> ErrorCode:
    """The error a broker's answer carries: top-level first, then any partition's."""
    if isinstance(request, StopReplicaRequest):
        parsed = cm.stop_replica_response_from_wire(response)  # type: ignore[arg-type]
        if parsed.error_code != ErrorCode.none:
            return parsed.error_code
        for code in parsed.partition_errors.values():
            if code != ErrorCode.none:
                return code
        return ErrorCode.none
    error_code = getattr(response, "error_code", ErrorCode.none)
    return error_code if isinstance(error_code, ErrorCode) else ErrorCode.none


class BrokerRequestSender:
    def __init__(
        self,
        controller_id: int,
        endpoint_of: Callable[[int], Endpoint | None],
        security: ClientSecurity | None = None,
    ) -> None:
        self.controller_id = controller_id
        self.endpoint_of = endpoint_of
        self.security = security
        self._queues: dict[int, asyncio.Queue[tuple[ControllerRequest, OnAnswer | None]]] = {}
        self._tasks: dict[int, asyncio.Task[None]] = {}

    async def send(
        self, broker_id: int, request: ControllerRequest, on_answer: OnAnswer | None = None
    ) -> None:
        queue = self._queues.get(broker_id)
        if queue is None:
            queue = self._queues[broker_id] = asyncio.Queue()
            self._tasks[broker_id] = asyncio.create_task(
                self._run(broker_id, queue), name=f"controller-send-{broker_id}"
            )
        queue.put_nowait((request, on_answer))

    async def remove_brokers(self, broker_ids: set[int]) -> None:
        for broker_id in broker_ids:
            self._queues.pop(broker_id, None)
            task = self._tasks.pop(broker_id, None)
            if task is not None:
                task.cancel()

    async def close(self) -> None:
        await self.remove_brokers(set(self._tasks))

    async def _run(
        self, broker_id: int, queue: asyncio.Queue[tuple[ControllerRequest, OnAnswer | None]]
    ) -> None:
        conn: KafkaConnection | None = None
        try:
            while True:
                request, on_answer = await queue.get()
                wire = to_wire(request)
                while True:
                    endpoint = self.endpoint_of(broker_id)
                    if endpoint is None:
                        break  # no longer live: drop it; startup will resend state
                    try:
                        if conn is None or conn.closed:
                            conn = await KafkaConnection.open(
                                *endpoint,
                                client_id=f"controller-{self.controller_id}",
                                security=self.security,
                            )
                        response = await conn.send(wire, timeout=REQUEST_TIMEOUT_S)
                        if on_answer is not None:
                            on_answer(answer_error(request, response))
                        break
                    except (TimeoutError, OSError) as e:
                        log.debug(
                            "sending %s to broker %d: %s", type(request).__name__, broker_id, e
                        )
                        if conn is not None:
                            await conn.close()
                            conn = None
                        await asyncio.sleep(RETRY_BACKOFF_S)
        finally:
            if conn is not None:
                await conn.close()
