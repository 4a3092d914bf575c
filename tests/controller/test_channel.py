"""The controller's channel to its own broker answers a broker-side failure as an error
code, as a remote broker's response would, instead of raising into the controller's
event (which would leave the event half-applied: znodes written, requests unsent)."""

from __future__ import annotations

import asyncio

from kio.schema.errors import ErrorCode

from strandline.controller.channel import ControllerChannel
from strandline.errors import StorageError


class FailingBroker:
    def __init__(self) -> None:
        self.calls = 0

    async def apply_controller_request(self, request: object) -> object:
        self.calls += 1
        raise StorageError("cannot open log t-0: [Errno 28] No space left on device")


def test_a_local_failure_becomes_an_answer_not_an_exception() -> None:
    broker = FailingBroker()
    channel = ControllerChannel(1, broker, remote=None)
    answers: list[ErrorCode] = []

    async def send_both() -> None:
        await channel._send(1, object())  # type: ignore[arg-type]
        await channel._send(1, object(), answers.append)  # type: ignore[arg-type]

    asyncio.run(send_both())
    assert broker.calls == 2
    assert answers == [ErrorCode.kafka_storage_error]
