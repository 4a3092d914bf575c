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


class SlowBroker:
    """Applies requests one at a time, slowly, and remembers their order."""

    def __init__(self) -> None:
        self.applied: list[object] = []

    async def apply_controller_request(self, request: object) -> object:
        await asyncio.sleep(0.01)
        if request == "bad":
            raise StorageError("disk gone")
        self.applied.append(request)
        return None


def test_queued_local_requests_do_not_hold_the_controller_up() -> None:
    """With `queue_local` (the broker's channel) a controller event only queues its
    requests to the local broker, as to a remote one: it no longer waits for this broker
    to apply a LeaderAndIsr of 10,000 partitions (docs/scaling.md). Order is kept, a failure
    is answered as an error code, and the ones after it are still applied."""
    broker = SlowBroker()
    channel = ControllerChannel(1, broker, remote=None, queue_local=True)
    answers: list[ErrorCode] = []

    async def scenario() -> None:
        for request in ("a", "bad", "b", "c"):
            await channel._send(1, request, answers.append)  # type: ignore[arg-type]
        assert broker.applied == []  # queued, not applied yet
        await channel.idle()
        assert broker.applied == ["a", "b", "c"]
        assert answers == [
            ErrorCode.none,
            ErrorCode.kafka_storage_error,
            ErrorCode.none,
            ErrorCode.none,
        ]
        await channel._send(1, "d")  # type: ignore[arg-type]
        await channel.close_local()  # stopping: what is still queued is dropped
        await asyncio.sleep(0.05)
        assert broker.applied == ["a", "b", "c"]

    asyncio.run(scenario())
