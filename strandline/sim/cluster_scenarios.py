"""Kafka's controller procedures as scripted whole-cluster schedules, step by step.

Each scenario runs a `ClusterSim` with `record=True` and returns one row per event:
the controller and its epoch, the watched partition's assigned replicas (AR) and
leader/ISR as ZooKeeper holds them, which brokers hold a log of it, and what happened
(controller effects, state-change log lines, broker notes). `render_rows` prints them
as a rich table, like Kafka's reassignment OAR/RAR table.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table

from strandline.sim.cluster import ClusterSim
from strandline.sim.cluster_events import (
    ClusterEvent,
    ControllerStep,
    Crash,
    CreateTopic,
    DeleteTopic,
    ExpireSession,
    Hold,
    Notify,
    PreferredElection,
    Produce,
    Reassign,
    Restart,
    Run,
    Tick,
)
from strandline.sim.cluster_invariants import ClusterChecker
from strandline.sim.cluster_state import ClusterConfig
from strandline.types import TopicPartition

Row = dict[str, Any]


@dataclass
class ClusterScenarioResult:
    name: str
    summary: str
    rows: list[Row]
    sim: ClusterSim
    violations: list[str]


@dataclass(frozen=True)
class ClusterScenario:
    name: str
    summary: str
    config: ClusterConfig
    tp: TopicPartition
    events: tuple[ClusterEvent, ...]

    def run(self) -> ClusterScenarioResult:
        sim = ClusterSim(self.config, record=True)
        checker = ClusterChecker(sim)
        rows = [_row(sim, self.tp, 0, "initial state (settled)", [])]
        violations: list[str] = []
        for index, event in enumerate(self.events, start=1):
            sim.step(event)
            problems = checker.check_step()
            violations += problems
            rows.append(_row(sim, self.tp, index, event.describe(), sim.notes + problems))
        return ClusterScenarioResult(self.name, self.summary, rows, sim, violations)


def _row(sim: ClusterSim, tp: TopicPartition, step: int, event: str, notes: list[str]) -> Row:
    assignment = sim.assignment(tp.topic)
    state = sim.partition_state(tp)
    holders = []
    for broker_id, broker in sim.brokers.items():
        replica = broker.replicas.get(tp)
        if replica is not None:
            down = "" if broker.alive else " down"
            holders.append(
                f"{broker_id}: LEO {replica.log_end_offset} HW {replica.high_watermark}{down}"
            )
    return {
        "step": step,
        "event": event,
        "controller": sim.controller_id(),
        "controller_epoch": sim.controller_epoch(),
        "active_controllers": sim.active_controllers(),
        "AR": None if assignment is None else assignment.get(tp.partition),
        "leader": None if state is None else state.leader,
        "leader_epoch": None if state is None else state.leader_epoch,
        "isr": None if state is None else list(state.isr),
        "reassigning": {str(k): v for k, v in sim.admin.get_partition_reassignment().items()},
        "marked_for_deletion": sim.admin.get_topics_marked_for_deletion(),
        "logs": holders,
        "notes": list(notes),
    }


def _runs(n: int) -> list[ClusterEvent]:
    return [Run(1)] * n


def _ticks(n: int) -> list[ClusterEvent]:
    return [Tick()] * n


T0 = TopicPartition("t", 0)

# A zombie: controller 0 is mid-way through a topic creation when its session expires;
# broker 1 wins the election (epoch 2) and runs onControllerFailover step by step while
# the zombie's held requests (epoch 1) are still on their way and get fenced.
CONTROLLER_FAILOVER = ClusterScenario(
    name="controller-failover",
    summary=(
        "Kafka's controller failover: controller 0's session expires mid-procedure; "
        "broker 1 is elected (epoch 2) and runs onControllerFailover step by step; the "
        "zombie's requests (epoch 1) are refused by controller epoch."
    ),
    config=ClusterConfig(brokers=(0, 1, 2), topics=(("t", 1, 3),), min_insync_replicas=2),
    tp=T0,
    events=(
        Hold(0, 1, 3),
        Hold(0, 2, 3),
        CreateTopic("u", 1, 3),
        Notify(),
        *[ControllerStep(0)] * 8,
        ExpireSession(0),
        *[ControllerStep(0)] * 3,
        Notify(),
        *[ControllerStep(1)] * 30,
        Produce("t", 0, "m1", True, 1),
        *_runs(40),
    ),
)

REASSIGNMENT = ClusterScenario(
    name="reassignment",
    summary=(
        "Kafka's partition reassignment OAR {1,2,3} -> RAR {4,5,6}: AR = OAR + RAR, "
        "leader epoch bump, the new replicas catch up and join the ISR, the leader moves "
        "into RAR, OAR - RAR are stopped and deleted, AR = RAR. Broker 1 (the leader) "
        "dies mid-way; the reassignment still ends with replicas = RAR."
    ),
    config=ClusterConfig(brokers=(1, 2, 3, 4, 5, 6), topics=(("t", 1, 3),), min_insync_replicas=2),
    tp=T0,
    events=(
        Produce("t", 0, "m1", True, 1),
        Produce("t", 0, "m2", True, 1),
        *_runs(2),
        Reassign("t", 0, (4, 5, 6)),
        Notify(),
        *[ControllerStep(1)] * 12,
        Crash(1),
        *_ticks(3),
        *_runs(100),
        Restart(1),  # its copy is a stray log now: deleted as it starts
        *_runs(20),
    ),
)

PREFERRED_ELECTION = ClusterScenario(
    name="preferred-election",
    summary=(
        "Kafka's preferred replica election: the preferred replica 0 dies, 1 leads; "
        "0 comes back as a follower and rejoins the ISR; the tool's "
        "/admin/preferred_replica_election makes 0 the leader again."
    ),
    config=ClusterConfig(brokers=(0, 1, 2), topics=(("t", 1, 3),), min_insync_replicas=2),
    tp=T0,
    events=(
        Produce("t", 0, "m1", True, 1),
        *_runs(2),
        Crash(0),
        *_ticks(3),
        *_runs(40),
        Produce("t", 0, "m2", True, 1),
        *_runs(3),
        Restart(0),
        *_runs(40),
        PreferredElection("t", 0),
        *_runs(20),
    ),
)

TOPIC_DELETION_WITH_OFFLINE_BROKER = ClusterScenario(
    name="topic-deletion-with-offline-broker",
    summary=(
        "Kafka's topic deletion while broker 2 is down: the deletion stays pending "
        "until 2 is back, its replica is deleted then (no stray log), and a new topic of "
        "the same name starts empty."
    ),
    config=ClusterConfig(brokers=(0, 1, 2), topics=(("t", 1, 3),), min_insync_replicas=1),
    tp=T0,
    events=(
        Produce("t", 0, "m1", True, 0),
        Produce("t", 0, "m2", True, 0),
        *_runs(3),
        Crash(2),
        *_ticks(3),
        *_runs(6),
        DeleteTopic("t"),
        *_runs(20),
        Restart(2),
        *_runs(30),
        CreateTopic("t", 1, 3),
        *_runs(20),
        Produce("t", 0, "n1", True, 0),
        *_runs(3),
    ),
)

CLUSTER_SCENARIOS: dict[str, ClusterScenario] = {
    s.name: s
    for s in (
        CONTROLLER_FAILOVER,
        REASSIGNMENT,
        PREFERRED_ELECTION,
        TOPIC_DELETION_WITH_OFFLINE_BROKER,
    )
}

_COLUMNS: tuple[tuple[str, Callable[[Row], str]], ...] = (
    ("step", lambda r: str(r["step"])),
    ("event", lambda r: r["event"]),
    (
        "controller (epoch)",
        lambda r: (
            f"{r['controller']} ({r['controller_epoch']})"
            + (f"\nactive: {r['active_controllers']}" if len(r["active_controllers"]) > 1 else "")
        ),
    ),
    ("AR", lambda r: _braces(r["AR"])),
    (
        "leader/ISR",
        lambda r: (
            "-"
            if r["leader"] is None
            else f"{r['leader']}/{_braces(r['isr'])} e{r['leader_epoch']}"
        ),
    ),
    ("logs (broker: LEO HW)", lambda r: "\n".join(r["logs"]) or "-"),
    ("what happened", lambda r: "\n".join(r["notes"])),
)


def _braces(values: Sequence[int] | None) -> str:
    return "-" if values is None else "{" + ",".join(map(str, values)) + "}"


def changed_rows(rows: list[Row]) -> list[Row]:
    """The rows where something happened (a Run round with nothing to do is left out)."""
    return [r for i, r in enumerate(rows) if i == 0 or r["notes"]]


def render_rows(console: Console, result: ClusterScenarioResult, all_rows: bool = False) -> None:
    table = Table(title=f"{result.name}: {result.summary}", title_justify="left", show_lines=True)
    for name, _ in _COLUMNS:
        table.add_column(name, overflow="fold")
    for row in result.rows if all_rows else changed_rows(result.rows):
        table.add_row(*(render(row) for _name, render in _COLUMNS))
    console.print(table)
    console.print(
        "\nOAR/RAR-style table (AR, leader/ISR as ZooKeeper holds them, at each change):",
        markup=False,
    )
    seen: tuple[Any, ...] | None = None
    for row in result.rows:
        key = (tuple(row["AR"] or ()), row["leader"], tuple(row["isr"] or ()))
        if key != seen:
            seen = key
            console.print(
                f"  {_braces(row['AR']):<16} {row['leader']}/{_braces(row['isr']):<16} "
                f"(step {row['step']}: {row['event']})",
                markup=False,
                highlight=False,
            )
    for problem in result.violations:
        console.print(f"VIOLATION {problem}", style="bold red", markup=False)
