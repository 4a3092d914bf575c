"""Deterministic simulation of the replication protocol over `strandline.replication`."""

from strandline.sim.events import Event
from strandline.sim.explore import ExploreReport, explore, shrink
from strandline.sim.runner import RunResult, run_schedule
from strandline.sim.scenarios import SCENARIOS, Scenario
from strandline.sim.simulator import SimConfig, Simulator

__all__ = [
    "SCENARIOS",
    "Event",
    "ExploreReport",
    "RunResult",
    "Scenario",
    "SimConfig",
    "Simulator",
    "explore",
    "run_schedule",
    "shrink",
]
