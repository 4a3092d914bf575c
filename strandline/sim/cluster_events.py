"""The whole-cluster simulator's schedule events (`ClusterSim.step` applies one).

Each event is one thing that happens to the cluster: background work (rounds,
controller steps, watch notifications, request deliveries), traffic (produce, fetch),
faults (crashes, bounces, lost requests and ZooKeeper replies, stalled fetchers,
expired sessions) and the admin tools. `describe()` is how a schedule is printed.
"""

from __future__ import annotations

from typing import NamedTuple


class Run(NamedTuple):
    """`rounds` rounds of background work: watch notifications run, every controller
    carries out one effect, every channel not held delivers one request, every live
    follower fetches once."""

    rounds: int = 1

    def describe(self) -> str:
        return f"run {self.rounds} round(s)"


class ControllerStep(NamedTuple):
    """Broker `broker`'s controller carries out one effect (or starts its next event)."""

    broker: int

    def describe(self) -> str:
        return f"controller step on {self.broker}"


class Notify(NamedTuple):
    """The pending ZooKeeper watch notifications are delivered."""

    def describe(self) -> str:
        return "deliver ZooKeeper watch notifications"


class Deliver(NamedTuple):
    """The oldest request from controller `controller` to broker `broker` arrives."""

    controller: int
    broker: int

    def describe(self) -> str:
        return f"deliver one request {self.controller} -> {self.broker}"


class Hold(NamedTuple):
    """Requests from `controller` to `broker` are delayed for `rounds` Run rounds."""

    controller: int
    broker: int
    rounds: int = 3

    def describe(self) -> str:
        return f"delay requests {self.controller} -> {self.broker} for {self.rounds} rounds"


class LoseRequest(NamedTuple):
    """The oldest request from `controller` to `broker` is lost."""

    controller: int
    broker: int

    def describe(self) -> str:
        return f"lose one request {self.controller} -> {self.broker}"


class Fetch(NamedTuple):
    """Broker `broker` runs one fetch round for every partition it follows; with `lose`
    the leaders process the fetches but the responses are lost."""

    broker: int
    lose: bool = False

    def describe(self) -> str:
        return f"fetch round on {self.broker}" + (" (responses lost)" if self.lose else "")


class Produce(NamedTuple):
    """A producer sends `value` to the leader broker `via`'s metadata names."""

    topic: str
    partition: int
    value: str
    acks_all: bool
    via: int

    def describe(self) -> str:
        acks = "all" if self.acks_all else "1"
        return (
            f"produce {self.value} to {self.topic}-{self.partition} (acks={acks}, via {self.via})"
        )


class Crash(NamedTuple):
    """The broker process dies; its ZooKeeper session lives on until it expires."""

    broker: int

    def describe(self) -> str:
        return f"crash broker {self.broker}"


class Restart(NamedTuple):
    """A crashed broker starts again (after its old session expired)."""

    broker: int

    def describe(self) -> str:
        return f"restart broker {self.broker}"


class PauseFetcher(NamedTuple):
    """Broker `broker`'s replica fetchers stall for `ms` of simulated time (a GC pause,
    a slow disk or link): its followers fall behind, their leaders drop them from the
    ISR at the next checks and take them back once they catch up (ISR shrink and expand)."""

    broker: int
    ms: int = 600

    def describe(self) -> str:
        return f"broker {self.broker}'s fetchers stall for {self.ms} ms"


class Bounce(NamedTuple):
    """The broker process restarts faster than its ZooKeeper session times out (KIP-380's
    case): the controller sees one broker change, the same broker with a new broker
    epoch, and it stays in every ISR it was in. Its fetchers start `slow_ms` later (log
    recovery, many partitions to resume): a follower that truncated on the
    LeaderAndIsr stays behind that long, KIP-101's window."""

    broker: int
    slow_ms: int = 0

    def describe(self) -> str:
        slow = f", fetching {self.slow_ms} ms later" if self.slow_ms else ""
        return f"bounce broker {self.broker} (restart within the session timeout{slow})"


class LoseZkReply(NamedTuple):
    """The reply to one of broker `broker`'s next ZooKeeper requests (its broker side
    or its controller) is lost: the request fails before or after ZooKeeper applied it,
    and the client sees ConnectionLoss; with `expire` the session expires meanwhile."""

    broker: int
    skip: int = 0  # requests that go through first
    after_apply: bool = False
    expire: bool = False

    def describe(self) -> str:
        when = "after" if self.after_apply else "before"
        which = "next" if self.skip == 0 else f"{self.skip + 1}th next"
        expiry = ", and its session expires" if self.expire else ""
        return (
            f"broker {self.broker}'s {which} ZooKeeper request fails {when} it is "
            f"applied (ConnectionLoss){expiry}"
        )


class ZkBlip(NamedTuple):
    """Broker `broker` is cut from ZooKeeper on and off for `ms` (under the session
    timeout): each of its requests meanwhile loses its reply with probability 1/2,
    before or after being applied (drawn from `seed`)."""

    broker: int
    ms: int
    seed: int

    def describe(self) -> str:
        return f"broker {self.broker}'s ZooKeeper connection blips for {self.ms} ms"


class ExpireSession(NamedTuple):
    """ZooKeeper expires a live broker's session (a long GC pause): it registers again
    with a new broker epoch and runs the controller election again."""

    broker: int

    def describe(self) -> str:
        return f"expire the ZooKeeper session of broker {self.broker}"


class Tick(NamedTuple):
    """Time passes (tick_ms): leaders check for lagging followers; crashed brokers'
    sessions expire once session_timeout_ms passed."""

    def describe(self) -> str:
        return "tick"


class CreateTopic(NamedTuple):
    topic: str
    partitions: int = 1
    replication_factor: int = 3

    def describe(self) -> str:
        return (
            f"create topic {self.topic} ({self.partitions} partitions, "
            f"replication factor {self.replication_factor})"
        )


class DeleteTopic(NamedTuple):
    topic: str

    def describe(self) -> str:
        return f"delete topic {self.topic}"


class Reassign(NamedTuple):
    """kafka-reassign-partitions.sh --execute: write /admin/reassign_partitions (refused
    while a reassignment is in progress, as the tool does)."""

    topic: str
    partition: int
    target: tuple[int, ...]

    def describe(self) -> str:
        return f"reassign {self.topic}-{self.partition} to {list(self.target)}"


class PreferredElection(NamedTuple):
    """kafka-preferred-replica-election.sh for one partition."""

    topic: str
    partition: int

    def describe(self) -> str:
        return f"preferred replica election for {self.topic}-{self.partition}"


ClusterEvent = (
    Run
    | ControllerStep
    | Notify
    | Deliver
    | Hold
    | LoseRequest
    | Fetch
    | Produce
    | Crash
    | Restart
    | ExpireSession
    | Bounce
    | PauseFetcher
    | LoseZkReply
    | ZkBlip
    | Tick
    | CreateTopic
    | DeleteTopic
    | Reassign
    | PreferredElection
)
