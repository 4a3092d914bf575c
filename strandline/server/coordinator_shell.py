"""What the shells around the two pure coordinators share (GroupService around the
GroupCoordinator, TxnService around the TransactionCoordinator).

Both park a request under a fresh token until the core answers it (`Respond`), run the
core's appends as tasks in the order the core asked for them, fire the core's single
timer (`tick` by `next_deadline_ms`), follow leadership of their internal topic's
partitions and replay a partition's log when they become its leader.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import AsyncIterator, Callable, Coroutine, Hashable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from strandline.server.replica_manager import ReplicaManager
    from strandline.storage.log import Log
    from strandline.types import TopicPartition

log = logging.getLogger(__name__)

# The timer also wakes at least this often, so a clock jump is never missed for long.
MAX_TIMER_SLEEP_S = 1.0


class TimedCore(Protocol):
    def next_deadline_ms(self) -> int | None: ...
    def tick(self, now_ms: int) -> Any: ...


class CoordinatorShell:
    """Subclasses set `self.core` and implement `execute` and `on_leadership`."""

    core: TimedCore
    name: str  # for task names and logs

    def __init__(self, replica_manager: ReplicaManager, now_ms: Callable[[], int]) -> None:
        self.replica_manager = replica_manager
        self.now_ms = now_ms
        self._tokens = itertools.count(1)
        self._waiting: dict[Hashable, asyncio.Future[object]] = {}
        # Partitions loaded or loading, with the leader epoch we serve them in.
        self._serving: dict[int, int] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._timer_task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._stopping = False

    # -- life cycle --------------------------------------------------------------------

    def start(self) -> None:
        self.replica_manager.leadership_listeners.append(self.on_leadership)
        self._timer_task = asyncio.get_running_loop().create_task(
            self._timer_loop(), name=f"{self.name}-timer"
        )

    async def stop(self, *more_tasks: asyncio.Task[None] | None) -> None:
        self._stopping = True
        if self.on_leadership in self.replica_manager.leadership_listeners:
            self.replica_manager.leadership_listeners.remove(self.on_leadership)
        tasks = [t for t in (self._timer_task, *more_tasks, *self._tasks) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for future in self._waiting.values():
            if not future.done():
                future.set_result(None)
        self._waiting.clear()

    # -- requests ----------------------------------------------------------------------

    async def ask(self, request: Callable[[Any, int], Any]) -> object:
        """Run one core call with a fresh token and await the answer to it (None when
        the broker stops first). The answer may come from this call, from another
        request, a timer or an append."""
        if self._stopping:
            return None
        token = next(self._tokens)
        future: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        self._waiting[token] = future
        try:
            self.execute(request(token, self.now_ms()))
            return await future
        finally:
            self._waiting.pop(token, None)

    def respond(self, token: Hashable, response: object) -> None:
        future = self._waiting.pop(token, None)
        if future is not None and not future.done():
            future.set_result(response)

    def execute(self, effects: Any) -> None:
        raise NotImplementedError

    def on_leadership(self, tp: TopicPartition, is_leader: bool, leader_epoch: int) -> None:
        raise NotImplementedError

    def spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        # Tasks start in creation order, so appends keep the core's order.
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def is_serving(self, partition: int) -> bool:
        return partition in self._serving

    # -- timer ---------------------------------------------------------------------------

    def tick_due(self, deadline: int | None, now: int, slept_full: bool) -> bool:
        """Whether to tick now; by default only when the core's deadline has come."""
        return deadline is not None and deadline <= now

    async def _timer_loop(self) -> None:
        while True:
            deadline = self.core.next_deadline_ms()
            sleep_s = MAX_TIMER_SLEEP_S
            if deadline is not None:
                sleep_s = min(sleep_s, max(0.0, (deadline - self.now_ms()) / 1000))
            if sleep_s > 0:
                try:
                    await asyncio.wait_for(self._wake.wait(), sleep_s)
                except TimeoutError:
                    pass
            self._wake.clear()
            now = self.now_ms()
            if self.tick_due(self.core.next_deadline_ms(), now, sleep_s >= MAX_TIMER_SLEEP_S):
                try:
                    self.execute(self.core.tick(now))
                except Exception:
                    log.exception("%s tick failed", self.name)
                    await asyncio.sleep(0.1)  # never spin on a deadline that stays due
            self._wake.clear()


async def read_log_chunks(plog: Log, read_bytes: int) -> AsyncIterator[bytes]:
    """The partition's batches from its start to its log end, a chunk of whole batches
    at a time.

    The log end is looked at again after every chunk (Kafka's logEndOffset is a def), and
    nothing awaits between the last chunk and the caller's next step: a record appended
    meanwhile is either read or appended after the caller acted on what it read.
    """
    offset = plog.log_start_offset
    while offset < (end := plog.log_end_offset):
        chunk = plog.read(offset, read_bytes, max_offset=end)
        if chunk.size == 0 or chunk.next_offset <= offset:
            break
        offset = chunk.next_offset
        yield chunk.records
        if offset < plog.log_end_offset:
            await asyncio.sleep(0)  # let other requests through on a long log
