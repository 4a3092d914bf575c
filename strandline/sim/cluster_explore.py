"""Random whole-cluster schedules, checked by `cluster_invariants`, and shrinking.

Schedule i of `explore(schedules, seed)` is drawn from `random.Random(seed + i)`: its
configuration (min.insync.replicas, unclean election, topics) and its events (traffic,
replication, controller steps, request delays and losses, crashes, session expiries,
topic creation and deletion, reassignments, preferred elections). A violating schedule
is shrunk by delta debugging (as `explore.py` does for the one-partition simulator).

Faults come in bursts whose follow-ups often wait for a gap of background work (and
writes), so a second fault hits after the controller reacted to the first; with the
simulator's HW checkpoints and its settle (the brokers still down stay down through a
failover, then come back one at a time) this finds KIP-101's loss in `hw` mode and
KIP-279's divergence in `kip101` mode (docs/replication.md). A broker's outage and
return, with a preferred-replica election requested while it catches up, reaches the
window where a controller that decides on the ISR it last heard of refuses the election
wrongly.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from strandline.replication.truncation import TruncationMode
from strandline.sim import shrinking
from strandline.sim.cluster import ClusterSim
from strandline.sim.cluster_events import (
    Bounce,
    ClusterEvent,
    ControllerStep,
    Crash,
    CreateTopic,
    DeleteTopic,
    Deliver,
    ExpireSession,
    Fetch,
    Hold,
    LoseRequest,
    LoseZkReply,
    Notify,
    PauseFetcher,
    PreferredElection,
    Produce,
    Reassign,
    Restart,
    Run,
    Tick,
    ZkBlip,
)
from strandline.sim.cluster_invariants import CheckedRun, run_checked
from strandline.sim.cluster_state import ClusterConfig

BROKERS = (0, 1, 2)
TOPIC_NAMES = ("t", "u")

# Mostly traffic, replication and background rounds, with a steady trickle of faults
# and admin requests.
EVENT_WEIGHTS: tuple[tuple[str, int], ...] = (
    ("run", 14),
    ("controller_step", 8),
    ("notify", 3),
    ("deliver", 4),
    ("hold", 2),
    ("lose", 1),
    ("fetch", 10),
    ("produce", 24),
    ("crash", 3),
    ("restart", 4),
    ("expire", 1),
    ("bounce", 4),
    ("pause", 3),
    ("zk_blip", 3),
    ("zk_reply", 2),
    ("tick", 8),
    ("create", 1),
    ("delete", 1),
    ("reassign", 2),
    ("preferred", 2),
)
_KINDS = [kind for kind, _ in EVENT_WEIGHTS]
_CUMULATIVE: list[int] = []
_total = 0
for _kind, _weight in EVENT_WEIGHTS:
    _total += _weight
    _CUMULATIVE.append(_total)


# Faults come in bursts: after a fault, the next one or two events are faults too
# (with FAULT_BURST's probability), drawn from the fault kinds with their weights.
# Real incidents are correlated (a broker bounces and the leader dies while the
# follower is still catching up), and the windows the KIP-101 losses need are that
# short: one isolated fault per few rounds of background work heals before the next.
FAULT_KINDS = (
    "crash",
    "restart",
    "expire",
    "bounce",
    "pause",
    "zk_reply",
    "zk_blip",
    "hold",
    "lose",
)
FAULT_BURST = 0.35
# A follow-up fault comes after a few rounds of background work with this probability:
# the controller has reacted to the first fault (a bounced follower got its
# LeaderAndIsr and truncated) when the second hits (its leader dies).
BURST_GAP = 0.5
_FAULT_WEIGHTS = [w for k, w in EVENT_WEIGHTS if k in FAULT_KINDS]
_FAULT_NAMES = [k for k, _ in EVENT_WEIGHTS if k in FAULT_KINDS]


def _with_fault_bursts(rng: random.Random, kinds: list[str]) -> list[str]:
    out: list[str] = []
    for kind in kinds:
        if len(out) >= len(kinds):
            break
        out.append(kind)
        if kind in FAULT_KINDS and rng.random() < FAULT_BURST:
            for follow_up in rng.choices(_FAULT_NAMES, weights=_FAULT_WEIGHTS, k=rng.randint(1, 2)):
                if rng.random() < BURST_GAP:
                    out.append("gap")
                out.append(follow_up)
    return out[: len(kinds)]


# After a broker comes back, the operator (or the auto-rebalancer) moves leadership back
# to it with a preferred-replica election, issued while it is still catching up: the
# request and the returning replica's ISR expansion race (a leader's ISR write reaches
# ZooKeeper before its notification reaches the controller).
PREFERRED_ON_RETURN = 0.5


def _preferred_on_return(
    rng: random.Random, broker: int, preferred_here: list[tuple[str, int]], index: int
) -> list[ClusterEvent]:
    """The broker is down past its session timeout (the controller moves its leaderships
    and drops it from the ISRs), comes back, and the election for one of the partitions
    it is the preferred replica of is issued while it catches up."""
    topic, partition = rng.choice(preferred_here)
    return [
        Crash(broker),
        *[Tick()] * 3,
        Run(rng.randint(10, 20)),
        _random_produce(rng, [(topic, partition)], index, "r"),
        Restart(broker),
        Run(rng.randint(3, 10)),
        PreferredElection(topic, partition),
        *[Fetch(broker)] * rng.randint(1, 3),
    ]


def random_config(
    rng: random.Random, truncation: TruncationMode = TruncationMode.KIP279
) -> ClusterConfig:
    """1-2 topics, 1-3 partitions in all, replication factor 2-3."""
    if rng.random() < 0.5:
        topics: tuple[tuple[str, int, int], ...] = (("t", rng.randint(1, 3), rng.choice((2, 3))),)
    else:
        topics = (("t", rng.randint(1, 2), 3), ("u", 1, rng.choice((2, 3))))
    return ClusterConfig(
        brokers=BROKERS,
        topics=topics,
        min_insync_replicas=rng.choice((1, 2)),
        unclean_leader_election=rng.random() < 0.35,
        truncation=truncation,
    )


def _pair(rng: random.Random) -> tuple[int, int]:
    controller, broker = rng.sample(BROKERS, 2)
    return controller, broker


def _random_produce(
    rng: random.Random, partitions: list[tuple[str, int]], index: int, suffix: str = ""
) -> Produce:
    if partitions and rng.random() < 0.9:
        topic, partition = rng.choice(partitions)
    else:
        topic, partition = rng.choice(TOPIC_NAMES), rng.randrange(2)
    return Produce(topic, partition, f"v{index}{suffix}", rng.random() < 0.6, rng.choice(BROKERS))


def random_schedule(
    rng: random.Random, steps: int, config: ClusterConfig | None = None
) -> list[ClusterEvent]:
    """`steps` random events; produces go mostly to the partitions `config` creates."""
    # The outage-and-return pattern draws from its own stream, seeded from the
    # schedule's: where it does not fire, the schedule is the one the mix drew before it
    # existed (and the finds the tests keep stay where they were).
    returns = random.Random(repr(rng.getstate()))
    kinds = _with_fault_bursts(rng, rng.choices(_KINDS, cum_weights=_CUMULATIVE, k=steps))
    partitions = [
        (name, p) for name, count, _rf in (config.topics if config else ()) for p in range(count)
    ]
    schedule: list[ClusterEvent] = []
    previous_fault_broker: int | None = None
    for index, kind in enumerate(kinds):
        broker = rng.choice(BROKERS)
        if kind == "gap":
            pass
        elif kind in FAULT_KINDS:
            # A fault right after another mostly hits another broker (correlated
            # failures: a follower bounces and its leader dies).
            if previous_fault_broker is not None and rng.random() < 0.7:
                broker = rng.choice([b for b in BROKERS if b != previous_fault_broker])
            previous_fault_broker = broker
        else:
            previous_fault_broker = None
        topic = rng.choice(TOPIC_NAMES)
        event: ClusterEvent
        if kind == "gap":
            # Background work between two faults of a burst, with the producers still
            # writing; half the time long enough for a crashed broker's session to
            # expire and the controller to fail its partitions over (the ticks pass
            # session.timeout.ms). The last write lands just before the next fault: a
            # record the leader appended and nobody fetched yet when it dies.
            if rng.random() < 0.5:
                schedule.append(_random_produce(rng, partitions, index, "a"))
            schedule.append(Run(rng.randint(2, 8)))
            if rng.random() < 0.5:
                schedule += [Tick()] * rng.randint(1, 3)
                schedule.append(Run(rng.randint(5, 30)))
            if rng.random() < 0.7:
                schedule.append(_random_produce(rng, partitions, index, "b"))
            continue
        if kind == "run":
            # Mostly single rounds: a follower's HW trails the leader's by one round
            # after every acknowledgement, and longer runs close that window.
            event = Run(1 if rng.random() < 0.7 else rng.randint(2, 3))
        elif kind == "controller_step":
            event = ControllerStep(broker)
        elif kind == "notify":
            event = Notify()
        elif kind == "deliver":
            event = Deliver(*_pair(rng))
        elif kind == "hold":
            event = Hold(*_pair(rng), rng.randint(1, 4))
        elif kind == "lose":
            event = LoseRequest(*_pair(rng))
        elif kind == "fetch":
            event = Fetch(broker, rng.random() < 0.1)
        elif kind == "produce":
            event = _random_produce(rng, partitions, index)
        elif kind == "crash":
            event = Crash(broker)
        elif kind == "restart":
            event = Restart(broker)
            preferred_here = [(t, p) for t, p in partitions if p % len(BROKERS) == broker]
            if preferred_here and returns.random() < PREFERRED_ON_RETURN:
                schedule += _preferred_on_return(returns, broker, preferred_here, index)
                continue
        elif kind == "expire":
            event = ExpireSession(broker)
        elif kind == "bounce":
            event = Bounce(broker, rng.choice((0, 300, 600)))
        elif kind == "zk_blip":
            event = ZkBlip(broker, rng.choice((300, 500)), rng.randrange(1 << 30))
        elif kind == "pause":
            event = PauseFetcher(broker, rng.choice((300, 600, 1200)))
        elif kind == "zk_reply":
            event = LoseZkReply(broker, rng.randint(0, 3), rng.random() < 0.5, rng.random() < 0.2)
        elif kind == "tick":
            event = Tick()
        elif kind == "create":
            event = CreateTopic(topic, rng.randint(1, 2), rng.choice((2, 3)))
        elif kind == "delete":
            event = DeleteTopic(topic)
        elif kind == "reassign":
            size = rng.choice((1, 2, 3))
            event = Reassign(topic, rng.randrange(2), tuple(rng.sample(BROKERS, size)))
        else:
            event = PreferredElection(topic, rng.randrange(2))
        schedule.append(event)
    return schedule[:steps]


def check(config: ClusterConfig, schedule: Sequence[ClusterEvent]) -> CheckedRun:
    """Run the schedule from a fresh cluster, stopping at the first violating step."""
    return run_checked(ClusterSim(config), schedule, stop_at_first=True, settle=True)


def violations_of(config: ClusterConfig, schedule: Sequence[ClusterEvent]) -> list[str]:
    return check(config, schedule).violations


def is_stuck(config: ClusterConfig, schedule: Sequence[ClusterEvent]) -> bool:
    return check(config, schedule).stuck


def shrink(
    config: ClusterConfig,
    schedule: Sequence[ClusterEvent],
    still_fails: Callable[[ClusterConfig, Sequence[ClusterEvent]], object] = violations_of,
) -> list[ClusterEvent]:
    """The shortest sub-schedule for which `still_fails` (a violation, by default)
    holds; event pairs are tried too once the schedule is short."""
    return shrinking.shrink(
        schedule, lambda candidate: still_fails(config, candidate), pairs_up_to=40
    )


@dataclass
class ClusterViolation:
    schedule_seed: int
    config: ClusterConfig
    violations: list[str]
    schedule: list[ClusterEvent]
    shrunk: list[ClusterEvent] = field(default_factory=list)
    shrunk_violations: list[str] = field(default_factory=list)


@dataclass
class ClusterExploreReport:
    seed: int
    schedules: int
    steps: int
    violations: list[ClusterViolation]
    elapsed_s: float
    # Schedules after which the cluster never became quiescent (liveness), and the
    # first of them shrunk (its `violations` are empty).
    stuck: int = 0
    first_stuck: ClusterViolation | None = None
    # Stuck only after a controller request was lost for good. Kafka's controller
    # channel resends until the broker answers or dies, so this is the model's loss,
    # not a liveness bug: the follower simply never hears of the new epoch.
    stuck_after_lost_request: int = 0

    @property
    def violating_schedules(self) -> int:
        return len(self.violations)

    @property
    def schedules_per_minute(self) -> float:
        return self.schedules * 60.0 / self.elapsed_s if self.elapsed_s > 0 else 0.0


def explore(
    schedules: int,
    seed: int = 0,
    steps: int = 60,
    shrink_violations: int = 1,
    shrink_stuck: bool = False,
    truncation: TruncationMode = TruncationMode.KIP279,
) -> ClusterExploreReport:
    """Run `schedules` random schedules (schedule i from seed `seed + i`); shrink the
    first `shrink_violations` violating ones (the timing excludes shrinking)."""
    started = time.perf_counter()
    found: list[ClusterViolation] = []
    stuck = 0
    stuck_after_loss = 0
    first_stuck: ClusterViolation | None = None
    for index in range(schedules):
        schedule_seed = seed + index
        rng = random.Random(schedule_seed)
        config = random_config(rng, truncation)
        schedule = random_schedule(rng, steps, config)
        result = check(config, schedule)
        if result.violations:
            found.append(ClusterViolation(schedule_seed, config, result.violations, schedule))
        elif result.stuck and any(isinstance(e, LoseRequest) for e in schedule):
            stuck_after_loss += 1
        elif result.stuck:
            stuck += 1
            if first_stuck is None:
                first_stuck = ClusterViolation(schedule_seed, config, [], schedule)
    elapsed = time.perf_counter() - started
    for violation in found[:shrink_violations]:
        violation.shrunk = shrink(violation.config, violation.schedule)
        violation.shrunk_violations = violations_of(violation.config, violation.shrunk)
    if first_stuck is not None and shrink_stuck:
        first_stuck.shrunk = shrink(first_stuck.config, first_stuck.schedule, is_stuck)
    return ClusterExploreReport(
        seed, schedules, steps, found, elapsed, stuck, first_stuck, stuck_after_loss
    )
