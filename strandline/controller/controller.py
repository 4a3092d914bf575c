"""The controller shell: carries out the core's effects with ZooKeeper and sockets.

Every broker runs one. Events (ZooKeeper watches, broker requests, the rebalance
timer) go into one queue and are processed one at a time, in order (Kafka's
ControllerEventManager). Each event's procedure comes from the pure
`ControllerCore` (`procedures.py`); this module performs the effects it yields —
ZooKeeper reads and writes on a worker thread through `zk_effects.perform`, requests
through the `ControllerChannel`, lines in state-change.log — and feeds the results back.
The simulator (`strandline.sim.cluster_controller`) is the other shell around the same core.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from strandline.controller import effects as fx
from strandline.controller import zk_effects
from strandline.controller.channel import ControllerChannel
from strandline.controller.context import ControllerContext, Reassignment
from strandline.controller.procedures import (
    ControllerCore,
    PartitionResults,
    Procedure,
    RebalanceSettings,
    broker_info,
)
from strandline.coordination import znodes
from strandline.coordination.errors import ControllerMovedError
from strandline.coordination.zk_client import ZkClient
from strandline.errors import NotControllerError
from strandline.state_change_log import StateChangeLog
from strandline.types import TopicPartition

__all__ = ["Controller", "PartitionResults", "RebalanceSettings"]

log = logging.getLogger(__name__)


# Events whose procedure reads the current state from ZooKeeper and acts on the
# difference: two of them queued back to back do what one does.
COALESCED_EVENTS = (
    fx.ControllerChange,
    fx.BrokerChange,
    fx.TopicChange,
    fx.PartitionModifications,
    fx.TopicDeletion,
    fx.IsrChangeNotification,
    fx.PreferredReplicaElection,
    fx.PartitionReassignment,
    fx.AutoLeaderRebalance,
)


@dataclass
class _Queued:
    event: fx.ControllerEvent
    reply: asyncio.Future[Any] | None = field(default=None, compare=False)

    def refuse(self) -> None:
        """Answer an event that will never run: this broker is no longer the controller."""
        if self.reply is not None and not self.reply.done():
            self.reply.set_exception(NotControllerError("this broker is not the controller"))


class Controller:
    def __init__(
        self,
        broker_id: int,
        zk: ZkClient,
        channel: ControllerChannel,
        state_change_log: StateChangeLog,
        unclean_leader_election: Callable[[str], bool],
        rebalance: RebalanceSettings | None = None,
        inter_broker_listener: str = "PLAINTEXT",
    ) -> None:
        self.broker_id = broker_id
        self.zk = zk
        self.channel = channel
        self.state_change_log = state_change_log
        self.core = ControllerCore(
            broker_id, unclean_leader_election, rebalance, inter_broker_listener
        )
        self._events: asyncio.Queue[_Queued] = asyncio.Queue()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._watched_data: set[str] = set()
        # Watch events queued and not started yet (see `_enqueue`).
        self._waiting: set[fx.ControllerEvent] = set()
        self.on_elected: Callable[[int], Awaitable[None]] | None = None
        self._rebalance_task: asyncio.Task[None] | None = None

    @property
    def ctx(self) -> ControllerContext | None:
        return self.core.ctx

    @property
    def is_active(self) -> bool:
        return self.core.is_active

    @property
    def rebalance(self) -> RebalanceSettings:
        return self.core.rebalance

    # -- lifecycle -------------------------------------------------------------

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.create_task(self._run(), name="controller-events")
        self.zk.watch_data(
            znodes.CONTROLLER_PATH, lambda _data, _stat: self.put(fx.ControllerChange())
        )
        self.put(fx.Startup())

    async def stop(self) -> None:
        self._stop_rebalance_timer()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        await self.channel.close_local()
        if self.is_active:
            await asyncio.to_thread(self.zk.resign_controller, self.broker_id)
        self.core.ctx = None
        # Brokers waiting on an answer (ControlledShutdown while the whole cluster stops)
        # must hear NOT_CONTROLLER now rather than wait out their request timeout.
        while not self._events.empty():
            self._events.get_nowait().refuse()
        self._waiting.clear()

    def put(self, event: fx.ControllerEvent) -> None:
        """Thread-safe: ZooKeeper watches fire on kazoo's thread."""
        if self._loop is None:
            return
        self._loop.call_soon_threadsafe(self._enqueue, event)

    def _enqueue(self, event: fx.ControllerEvent) -> None:
        """On the loop: queue `event` unless the same watch event already waits in the
        queue. Those procedures read ZooKeeper when they run, so the one waiting covers
        this trigger too: thousands of ISR change notifications (a broker back after a
        restart) otherwise queue thousands of events, each reading every notification
        and sending UpdateMetadata to every broker."""
        if isinstance(event, COALESCED_EVENTS):
            if event in self._waiting:
                return
            self._waiting.add(event)
        self._events.put_nowait(_Queued(event))

    async def _run(self) -> None:
        while True:
            queued = await self._events.get()
            # From here on a new trigger must queue again: this run may read too early.
            self._waiting.discard(queued.event)
            try:
                result = await self._perform(self.core.handle(queued.event))
            except asyncio.CancelledError:
                queued.refuse()
                raise
            except Exception as e:
                if isinstance(e, ControllerMovedError):
                    # Another controller was elected: our writes are fenced from now
                    # on. Check /controller, which resigns us (Kafka's maybeResign).
                    log.warning("controller event %s fenced: %s", queued.event, e)
                    self.put(fx.ControllerChange())
                if queued.reply is not None and not queued.reply.done():
                    queued.reply.set_exception(e)
                elif not isinstance(e, NotControllerError | ControllerMovedError):
                    log.exception("controller event %s failed", queued.event)
            else:
                if queued.reply is not None and not queued.reply.done():
                    queued.reply.set_result(result)

    async def _perform(self, procedure: Procedure) -> Any:
        """Drive one procedure: carry out each effect, send its result back in."""
        result: Any = None
        while True:
            try:
                effect = procedure.send(result)
            except StopIteration as done:
                return done.value
            result = await self._carry_out(effect)

    async def _carry_out(self, effect: fx.Effect) -> Any:
        match effect:
            case fx.SendLeaderAndIsr(broker_id, request):
                await self.channel.send_leader_and_isr(broker_id, request)
            case fx.SendUpdateMetadata(broker_id, request):
                await self.channel.send_update_metadata(broker_id, request)
            case fx.SendStopReplica(broker_id, request, deleting):
                on_answer = None if deleting is None else self._deletion_answer(deleting, broker_id)
                await self.channel.send_stop_replica(broker_id, request, on_answer=on_answer)
            case fx.ForgetBrokers(broker_ids):
                await self.channel.remove_brokers(set(broker_ids))
            case fx.StateChange(kind, fields):
                self.state_change_log.record(kind, **fields)
                if kind == "controller-elected":
                    log.info("broker %d is now the controller (%s)", self.broker_id, fields)
                elif kind == "unclean-leader-election":
                    log.warning(
                        "unclean leader election for %s: broker %d leads; records not on it "
                        "are lost",
                        fields["tp"],
                        fields["leader"],
                    )
            case fx.WatchChildren(path, event):
                # A watch fires once at registration too; every procedure diffs against
                # the context, so the extra event is harmless. Events reaching a
                # broker that is not the controller are refused by the core.
                self.zk.watch_children(path, self._on_children(event))
            case fx.WatchData(path, event):
                if path not in self._watched_data:
                    self._watched_data.add(path)
                    self.zk.watch_data(path, self._when_present(event))
                else:
                    # kazoo's watch outlives a failover, so it does not fire again at
                    # this registration: queue its first event ourselves (the
                    # procedures read the znode, an absent one changes nothing).
                    self.put(event)
            case fx.BecameController(epoch):
                if self.on_elected is not None:
                    await self.on_elected(epoch)
                if self.rebalance.enable:
                    self._start_rebalance_timer()
            case fx.Resigned():
                self._stop_rebalance_timer()
            case _:
                return await asyncio.to_thread(zk_effects.perform, effect, self.zk)
        return None

    def _deletion_answer(self, topic: str, broker_id: int) -> Callable[[ErrorCode], None]:
        def answered(code: ErrorCode) -> None:
            self.put(fx.StopReplicaAnswered(topic, broker_id, code))

        return answered

    def _on_children(self, event: fx.ControllerEvent) -> Callable[[list[str]], None]:
        return lambda _children: self.put(event)

    def _when_present(self, event: fx.ControllerEvent) -> Callable[[bytes | None, object], None]:
        """A data-watch callback that queues `event` while the znode exists."""

        def fire(data: bytes | None, _stat: object) -> None:
            if data is not None:
                self.put(event)

        return fire

    def endpoint_of(self, broker_id: int) -> tuple[str, int] | None:
        """Where a live broker listens, as this controller knows it."""
        ctx = self.core.ctx
        if ctx is None:
            return None
        live = ctx.live_brokers.get(broker_id)
        if live is None:
            return None
        info = broker_info(live, self.core.inter_broker_listener)
        return info.host, info.port

    # -- requests brokers and clients make of the controller ------------------------------

    async def _ask(self, event: fx.ControllerEvent) -> Any:
        """Queue an event that answers through a future (NotControllerError if we are
        not, or stop being, the controller before it runs)."""
        if not self.is_active or self._loop is None:
            raise NotControllerError("this broker is not the controller")
        reply: asyncio.Future[Any] = self._loop.create_future()
        self._events.put_nowait(_Queued(event, reply))
        return await reply

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> list[TopicPartition]:
        """A broker asks to stop: returns the partitions it still leads (none when all
        leadership could move)."""
        if self._loop is None:
            raise NotControllerError("this broker is not the controller")
        reply: asyncio.Future[list[TopicPartition]] = self._loop.create_future()
        self._events.put_nowait(_Queued(fx.ControlledShutdown(broker_id, broker_epoch), reply))
        return await reply

    async def alter_partition_reassignments(
        self, wanted: dict[TopicPartition, tuple[int, ...] | None]
    ) -> PartitionResults:
        """AlterPartitionReassignments (45): start, change or (None) cancel reassignments;
        answers once they are started, not finished."""
        result: PartitionResults = await self._ask(fx.AlterReassignments(wanted))
        return result

    def list_partition_reassignments(
        self, tps: list[TopicPartition] | None
    ) -> dict[TopicPartition, Reassignment]:
        """ListPartitionReassignments (46): the reassignments in progress."""
        return self.core.list_reassignments(tps)

    async def elect_leaders(
        self, tps: list[TopicPartition] | None, election_type: int
    ) -> PartitionResults:
        """ElectLeaders: `tps` None means every partition (answers leave out the ones
        that needed no election)."""
        result: PartitionResults = await self._ask(
            fx.ElectLeaders(None if tps is None else tuple(tps), election_type)
        )
        return result

    # -- auto leader rebalance timer ---------------------------------------------------

    def _start_rebalance_timer(self) -> None:
        self._stop_rebalance_timer()

        async def tick() -> None:
            while True:
                await asyncio.sleep(self.rebalance.check_interval_s)
                self.put(fx.AutoLeaderRebalance())

        self._rebalance_task = asyncio.create_task(tick(), name="auto-leader-rebalance")

    def _stop_rebalance_timer(self) -> None:
        if self._rebalance_task is not None:
            self._rebalance_task.cancel()
            self._rebalance_task = None
