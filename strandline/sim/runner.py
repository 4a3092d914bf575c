"""Run one schedule of events through a simulator, checking the invariants after each step."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from strandline.sim import invariants
from strandline.sim.events import Event
from strandline.sim.simulator import NAMES, SimConfig, Simulator


@dataclass
class RunResult:
    violations: list[str]
    committed_lost: list[int]
    dropped_outside_guarantee: list[int]
    diverged: bool
    acked: list[str]
    failed_produces: list[tuple[str, str]]
    steps: list[dict[str, Any]] = field(default_factory=list)


def run_schedule(
    config: SimConfig,
    schedule: list[Event],
    record: bool = False,
    settle: bool = False,
    stop_at_first: bool = False,
) -> RunResult:
    """Replay `schedule`; with `settle`, finish by restarting everyone and catching up,
    then require the logs to converge. `record` keeps a per-step snapshot."""
    sim = Simulator(config, record=record)
    violations: list[str] = []
    steps: list[dict[str, Any]] = []
    if record:
        steps.append({"step": 0, "event": "initial state", "notes": sim.notes, **sim.snapshot()})
    for index, event in enumerate(schedule, start=1):
        sim.step(event)
        problems = invariants.check_step(sim)
        if problems:
            violations.extend(f"step {index}: {p}" for p in problems)
        if record:
            steps.append(
                {
                    "step": index,
                    "event": event.describe(NAMES),
                    "notes": sim.notes,
                    "violations": problems,
                    **sim.snapshot(),
                }
            )
        if problems and stop_at_first:
            break
    if settle and not (violations and stop_at_first):
        sim.notes = []
        sim.settle()
        problems = invariants.check_step(sim) + invariants.check_converged(sim)
        violations.extend(f"settle: {p}" for p in problems)
        if record:
            steps.append(
                {
                    "step": len(schedule) + 1,
                    "event": "settle (restart all, catch up)",
                    "notes": sim.notes,
                    "violations": problems,
                    **sim.snapshot(),
                }
            )
    return RunResult(
        violations=violations,
        committed_lost=invariants.committed_lost_offsets(sim),
        dropped_outside_guarantee=invariants.dropped_outside_guarantee(sim),
        diverged=invariants.diverged(sim),
        acked=list(sim.acked),
        failed_produces=list(sim.failed_produces),
        steps=steps,
    )
