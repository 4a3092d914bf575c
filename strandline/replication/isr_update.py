"""A leader's ISR change and its ZooKeeper protocol, sans I/O (ZK-era Kafka).

The leader proposes a new ISR (`Partition.isr_shrink_proposal` / an expansion); this
module decides what the leader may act on. `isr_update(...)` is a generator in the
manner of `controller/procedures.py`: it yields effects (`WriteIsr`, `ReadIsr`,
`NotifyIsrChange`), the shell carries each out and sends back its result, a ZooKeeper
failure being sent back as a `ZkFailure` value rather than raised. It returns an
`IsrUpdateResult`: the ISR the leader acts on, and the zkVersion it writes against next.
The broker (`server/replica_manager.py`) and the simulated brokers (`sim/cluster.py`)
are two shells around it.

The rules (Kafka's conditional update, `ReplicationUtils.updateLeaderAndIsr` and
`checkLeaderAndIsrZkData`), and why:

- The state znode is written conditionally on the zkVersion the leader holds.
- BADVERSION or ConnectionLoss: the write's fate is unknown or it lost, so the znode is
  read again and the leader continues from what ZooKeeper holds. Same leader and leader
  epoch (the controller bumps the epoch on every change it makes, so any other ISR there
  was written by this leader in this epoch, e.g. by a write whose reply was lost): the
  leader takes that ISR and zkVersion. Another leader or epoch: the controller decided
  since; the leader waits for its LeaderAndIsr.
- The leader never acts on an ISR smaller than the one ZooKeeper may hold: a replica in
  ZooKeeper's ISR can be elected cleanly, so the leader must wait for it before it
  acknowledges. When the outcome is unknown (the read failed too) or fenced, it keeps the
  union of the old ISR, the proposal and what it read — it only delays the HW.
- The ISR change notification tells the controller; it is created after the write took
  effect. Its failure does not undo the ISR change (the state znode already holds it):
  the notification stays pending and the shell sends it again later.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from strandline.coordination.errors import ZkFailure
from strandline.coordination.znodes import LeaderAndIsr
from strandline.types import TopicPartition

# ConnectionLoss on the read-back is retried this many times before the outcome is
# left unknown (the next proposal's write then meets BADVERSION and reads again).
READ_ATTEMPTS = 3
# Notification attempts within one update; after that it stays pending for the shell.
NOTIFY_ATTEMPTS = 2


@dataclass(frozen=True)
class WriteIsr:
    """Conditional set of the partition state znode; answer: the new zkVersion."""

    tp: TopicPartition
    state: LeaderAndIsr
    expected_version: int


@dataclass(frozen=True)
class ReadIsr:
    """Read the partition state znode; answer: (LeaderAndIsr, zkVersion) or None."""

    tp: TopicPartition


@dataclass(frozen=True)
class NotifyIsrChange:
    """Create /isr_change_notification/isr_change_<seq> naming tp; answer: anything."""

    tp: TopicPartition


IsrEffect = WriteIsr | ReadIsr | NotifyIsrChange


class Outcome(enum.Enum):
    WRITTEN = "written"  # ZooKeeper holds the proposal
    ADOPTED = "adopted"  # ZooKeeper holds another ISR of this leader and epoch: taken
    FENCED = "fenced"  # another leader/epoch, or no znode: wait for the controller
    UNKNOWN = "unknown"  # the write's fate could not be learned


@dataclass(frozen=True)
class IsrUpdateResult:
    outcome: Outcome
    isr: frozenset[int]  # the ISR the leader acts on from now
    zk_version: int  # the zkVersion of the next conditional write
    notify_pending: bool = False  # the notification must still be created
    detail: str = ""

    @property
    def known(self) -> bool:
        """The ISR is exactly what ZooKeeper holds."""
        return self.outcome in (Outcome.WRITTEN, Outcome.ADOPTED)


IsrUpdate = Generator[IsrEffect, Any, IsrUpdateResult]


def isr_update(
    tp: TopicPartition,
    leader: int,
    leader_epoch: int,
    controller_epoch: int,
    zk_version: int,
    old_isr: frozenset[int],
    proposed_isr: frozenset[int],
) -> IsrUpdate:
    """Write `proposed_isr` for `tp` led by `leader` in `leader_epoch`; see the module doc."""
    state = LeaderAndIsr(
        leader=leader,
        leader_epoch=leader_epoch,
        isr=tuple(sorted(proposed_isr)),
        controller_epoch=controller_epoch,
    )
    written = yield WriteIsr(tp, state, zk_version)
    if isinstance(written, int) and not isinstance(written, bool):
        pending = yield from _notify(tp)
        return IsrUpdateResult(Outcome.WRITTEN, proposed_isr, written, pending)
    if written is ZkFailure.NO_NODE or written is ZkFailure.SESSION_EXPIRED:
        # NONODE: the topic is being deleted. Session expired: the request was never
        # applied (ZooKeeper refuses requests of an expired session).
        outcome = Outcome.FENCED if written is ZkFailure.NO_NODE else Outcome.UNKNOWN
        return IsrUpdateResult(
            outcome, old_isr | proposed_isr, zk_version, detail=f"write: {written.value}"
        )
    # BADVERSION or ConnectionLoss: continue from what ZooKeeper holds.
    found: Any = ZkFailure.CONNECTION_LOSS
    for _ in range(READ_ATTEMPTS):
        found = yield ReadIsr(tp)
        if found is not ZkFailure.CONNECTION_LOSS:
            break
    if isinstance(found, ZkFailure):
        return IsrUpdateResult(
            Outcome.UNKNOWN,
            old_isr | proposed_isr,
            zk_version,
            detail=f"write: {_name(written)}; read: {found.value}",
        )
    if found is None:
        return IsrUpdateResult(
            Outcome.FENCED, old_isr | proposed_isr, zk_version, detail="no state znode"
        )
    held, version = found
    held_isr = frozenset(held.isr)
    if held.leader != leader or held.leader_epoch != leader_epoch:
        return IsrUpdateResult(
            Outcome.FENCED,
            old_isr | proposed_isr | held_isr,
            zk_version,
            detail=f"ZooKeeper holds leader {held.leader} epoch {held.leader_epoch}",
        )
    pending = yield from _notify(tp)
    if held_isr == proposed_isr:
        return IsrUpdateResult(
            Outcome.WRITTEN, proposed_isr, version, pending, detail="write applied, reply lost"
        )
    return IsrUpdateResult(
        Outcome.ADOPTED, held_isr, version, pending, detail=f"ZooKeeper holds {sorted(held_isr)}"
    )


def notify_again(tp: TopicPartition) -> Generator[IsrEffect, Any, bool]:
    """Send a notification left pending by `isr_update`; returns whether it still is."""
    return (yield from _notify(tp))


def _notify(tp: TopicPartition) -> Generator[IsrEffect, Any, bool]:
    # A notification created twice only makes the controller read the state again.
    for _ in range(NOTIFY_ATTEMPTS):
        answer = yield NotifyIsrChange(tp)
        if not isinstance(answer, ZkFailure):
            return False
        if answer is ZkFailure.SESSION_EXPIRED:
            break
    return True


def _name(result: Any) -> str:
    return result.value if isinstance(result, ZkFailure) else str(result)


class IsrZk(Protocol):
    """The ZooKeeper operations an ISR update uses (ZkClient's and SimZkClient's names)."""

    def update_partition_state(
        self, tp: TopicPartition, state: LeaderAndIsr, expected_version: int
    ) -> int: ...
    def get_partition_state(self, tp: TopicPartition) -> tuple[LeaderAndIsr, int] | None: ...
    def create_isr_change_notification(self, tps: Iterable[TopicPartition]) -> str: ...


def perform(effect: IsrEffect, zk: IsrZk, classify: Callable[[Exception], ZkFailure]) -> Any:
    """Carry out one effect on a client; a failure comes back as `classify(exc)`."""
    try:
        match effect:
            case WriteIsr(tp, state, expected_version):
                return zk.update_partition_state(tp, state, expected_version)
            case ReadIsr(tp):
                return zk.get_partition_state(tp)
            case NotifyIsrChange(tp):
                return zk.create_isr_change_notification([tp])
    except Exception as exc:  # noqa: BLE001 - every failure is an answer to the core
        return classify(exc)
    raise TypeError(f"not an ISR effect: {effect!r}")


def run(update: Generator[IsrEffect, Any, Any], perform_one: Callable[[IsrEffect], Any]) -> Any:
    """Drive an update to its end, each effect carried out by `perform_one` (the
    simulator calls this directly, the broker on a worker thread)."""
    result: Any = None
    while True:
        try:
            effect = update.send(result)
        except StopIteration as stop:
            return stop.value
        result = perform_one(effect)
