"""The controller's event loop against the session's real ZooKeeper: what happens to
requests still queued when the controller stops."""

from __future__ import annotations

import asyncio

import pytest

from strandline.controller.channel import ControllerChannel, ControllerRequest
from strandline.controller.controller import Controller
from strandline.coordination.zk_client import ZkClient
from strandline.errors import NotControllerError
from strandline.state_change_log import StateChangeLog


class RecordingBroker:
    """The local broker's side of the channel: keeps what the controller sent it."""

    def __init__(self) -> None:
        self.received: list[ControllerRequest] = []

    async def apply_controller_request(self, request: ControllerRequest) -> object:
        self.received.append(request)
        return None


async def _until(predicate: object, timeout_s: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not predicate():  # type: ignore[operator]
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


def test_requests_queued_when_the_controller_stops_are_refused(zk_connect: str) -> None:
    """A ControlledShutdown still in the queue when the controller stops (every broker of
    the cluster stopping at once) is answered NOT_CONTROLLER instead of never: the asking
    broker would otherwise wait out its request timeout and be killed."""

    async def scenario(zk: ZkClient) -> None:
        controller = Controller(
            1,
            zk,
            ControllerChannel(1, RecordingBroker(), None),
            StateChangeLog(None, 1),
            unclean_leader_election=lambda _topic: False,
        )
        controller.start()
        await _until(lambda: controller.is_active)
        asking = asyncio.ensure_future(controller.controlled_shutdown(2, 0))
        await asyncio.sleep(0)  # the request is queued; the event loop has not taken it
        await controller.stop()
        with pytest.raises(NotControllerError):
            await asyncio.wait_for(asking, timeout=2.0)
        assert not controller.is_active

    zk = ZkClient(zk_connect, session_timeout_ms=4000).connect()
    try:
        asyncio.run(scenario(zk))
    finally:
        zk.close()


def test_watch_events_already_waiting_are_not_queued_twice(zk_connect: str) -> None:
    """Thousands of ISR change notifications (a broker rejoining every ISR after a
    restart) fire the watch thousands of times: one event waiting in the queue covers
    them all, since its procedure reads every notification when it runs. Requests
    (ControlledShutdown) are never merged."""
    from strandline.controller import effects as fx

    async def scenario() -> None:
        controller = Controller(
            1,
            ZkClient(zk_connect),  # never connected: nothing here runs a procedure
            ControllerChannel(1, RecordingBroker(), None),
            StateChangeLog(None, 1),
            unclean_leader_election=lambda _topic: False,
        )
        for _ in range(100):
            controller._enqueue(fx.IsrChangeNotification())
            controller._enqueue(fx.PartitionModifications("a"))
        controller._enqueue(fx.PartitionModifications("b"))
        assert controller._events.qsize() == 3
        first = controller._events.get_nowait()
        controller._waiting.discard(first.event)  # as `_run` does when it takes one
        controller._enqueue(fx.IsrChangeNotification())  # a change after it started
        assert controller._events.qsize() == 3
        for _ in range(2):
            controller._enqueue(fx.ControlledShutdown(2, 0))
        assert controller._events.qsize() == 5

    asyncio.run(scenario())
