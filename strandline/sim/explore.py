"""Random fault schedules over the simulator, and shrinking of a violating one."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

from strandline.replication.truncation import TruncationMode
from strandline.sim import events as ev
from strandline.sim import shrinking
from strandline.sim.events import Event
from strandline.sim.runner import run_schedule
from strandline.sim.simulator import SimConfig

# Relative weights: mostly traffic and replication, with a steady trickle of faults.
EVENT_WEIGHTS: tuple[tuple[str, int], ...] = (
    (ev.PRODUCE, 24),
    (ev.FETCH, 34),
    (ev.FETCH_LOST, 3),
    (ev.FETCH_DELAYED, 3),
    (ev.DELIVER, 3),
    (ev.CRASH, 6),
    (ev.RESTART, 8),
    (ev.BOUNCE, 5),
    (ev.POWER_FAILURE, 1),
    (ev.FLUSH, 5),
    (ev.ELECT, 3),
    (ev.TICK, 5),
)
_KINDS = [kind for kind, _ in EVENT_WEIGHTS]
_CUMULATIVE: list[int] = []
_total = 0
for _kind, _weight in EVENT_WEIGHTS:
    _total += _weight
    _CUMULATIVE.append(_total)


def random_schedule(rng: random.Random, replicas: int, steps: int) -> list[Event]:
    kinds = rng.choices(_KINDS, cum_weights=_CUMULATIVE, k=steps)
    schedule = []
    for index, kind in enumerate(kinds):
        if kind == ev.PRODUCE:
            schedule.append(Event(kind, -1, rng.random() < 0.5, f"v{index}"))
        elif kind == ev.POWER_FAILURE:
            schedule.append(Event(kind, -1, rng.random() < 0.5))
        elif kind == ev.TICK:
            schedule.append(Event(kind))
        elif kind in (ev.CRASH, ev.BOUNCE):
            schedule.append(Event(kind, rng.randrange(replicas), rng.random() < 0.3))
        else:
            schedule.append(Event(kind, rng.randrange(replicas)))
    return schedule


def schedule_config(rng: random.Random, replicas: int, mode: TruncationMode) -> SimConfig:
    """Each schedule draws its min.insync.replicas and unclean-election setting too."""
    return SimConfig(
        replicas=replicas,
        truncation=mode,
        min_insync_replicas=rng.choice((1, 2)) if replicas > 1 else 1,
        unclean_leader_election_enable=rng.random() < 0.3,
    )


def violates(config: SimConfig, schedule: list[Event]) -> list[str]:
    return run_schedule(config, schedule, settle=True, stop_at_first=True).violations


def shrink(config: SimConfig, schedule: list[Event]) -> list[Event]:
    """The shortest sub-schedule that still violates an invariant (delta debugging)."""
    return shrinking.shrink(schedule, lambda candidate: violates(config, candidate))


@dataclass
class Violation:
    schedule_seed: int
    config: SimConfig
    violations: list[str]
    schedule: list[Event]
    shrunk: list[Event] = field(default_factory=list)
    shrunk_violations: list[str] = field(default_factory=list)


@dataclass
class ExploreReport:
    seed: int
    schedules: int
    steps: int
    replicas: int
    truncation: TruncationMode
    violating_schedules: int
    first: Violation | None
    elapsed_s: float

    @property
    def schedules_per_minute(self) -> float:
        return self.schedules * 60.0 / self.elapsed_s if self.elapsed_s > 0 else 0.0


def explore(
    seed: int,
    schedules: int,
    mode: TruncationMode,
    replicas: int = 3,
    steps: int = 50,
    shrink_first: bool = True,
) -> ExploreReport:
    """Run `schedules` random schedules; schedule i uses seed `seed + i`."""
    started = time.perf_counter()
    violating = 0
    first: Violation | None = None
    for index in range(schedules):
        schedule_seed = seed + index
        rng = random.Random(schedule_seed)
        config = schedule_config(rng, replicas, mode)
        schedule = random_schedule(rng, replicas, steps)
        problems = violates(config, schedule)
        if problems:
            violating += 1
            if first is None:
                first = Violation(schedule_seed, config, problems, schedule)
    elapsed = time.perf_counter() - started
    if first is not None and shrink_first:
        first.shrunk = shrink(first.config, first.schedule)
        first.shrunk_violations = violates(first.config, first.shrunk)
    return ExploreReport(seed, schedules, steps, replicas, mode, violating, first, elapsed)
