"""`strandline sim ...`: replay Kafka's replication scenarios, or explore random fault schedules."""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import Annotated, Any

import typer
from rich.console import Console

from strandline.replication.truncation import TruncationMode
from strandline.sim.cluster_explore import ClusterViolation
from strandline.sim.cluster_explore import explore as run_cluster_explore
from strandline.sim.cluster_scenarios import CLUSTER_SCENARIOS, render_rows
from strandline.sim.explore import explore as run_explore
from strandline.sim.render import print_steps
from strandline.sim.runner import run_schedule
from strandline.sim.scenarios import SCENARIOS
from strandline.sim.simulator import NAMES, SimConfig

app = typer.Typer(
    help="Deterministic simulation of the replication protocol.", no_args_is_help=True
)

TruncationOption = Annotated[
    TruncationMode,
    typer.Option("--truncation", help="Follower truncation rule: hw (pre-0.11), kip101, kip279."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object to stdout.")]


def _config_json(config: SimConfig) -> dict[str, Any]:
    out = dataclasses.asdict(config)
    out["truncation"] = config.truncation.value
    return out


@app.command("list")
def list_scenarios() -> None:
    """List the named scenarios."""
    for scenario in SCENARIOS.values():
        typer.echo(f"{scenario.name}: {scenario.summary}")
    for cluster_scenario in CLUSTER_SCENARIOS.values():
        typer.echo(f"{cluster_scenario.name} (whole cluster): {cluster_scenario.summary}")


@app.command("scenario")
def scenario(
    name: Annotated[str, typer.Argument(help="Scenario name (see `strandline sim list`).")],
    truncation: TruncationOption = TruncationMode.KIP279,
    as_json: JsonOption = False,
) -> None:
    """Replay a named scenario, printing every replica's log, LEO, HW and epoch cache
    (or, for the whole-cluster scenarios, the controller's steps as Kafka runs them)."""
    if name in CLUSTER_SCENARIOS:
        _cluster_scenario(name, as_json)
        return
    chosen = SCENARIOS.get(name)
    if chosen is None:
        known = ", ".join([*SCENARIOS, *CLUSTER_SCENARIOS])
        typer.echo(f"unknown scenario {name!r}; known: {known}", err=True)
        raise typer.Exit(2)
    config = chosen.config_for(truncation)
    result = run_schedule(config, list(chosen.events), record=True)
    if as_json:
        json.dump(
            {
                "scenario": chosen.name,
                "truncation": truncation.value,
                "config": _config_json(config),
                "committed_lost": result.committed_lost,
                "committed_dropped_outside_guarantee": result.dropped_outside_guarantee,
                "diverged": result.diverged,
                "violations": result.violations,
                "acked": result.acked,
                "failed_produces": [list(item) for item in result.failed_produces],
                "steps": result.steps,
            },
            sys.stdout,
        )
        sys.stdout.write("\n")
        return
    console = Console()
    console.print(f"[bold]{chosen.name}[/bold] (truncation={truncation.value}): {chosen.summary}")
    console.print()
    print_steps(console, result.steps)
    console.print(
        f"committed_lost: {result.committed_lost}   "
        f"dropped outside Kafka's guarantee: {result.dropped_outside_guarantee}   "
        f"diverged: {result.diverged}   violations: {len(result.violations)}"
    )


def _cluster_scenario(name: str, as_json: bool) -> None:
    result = CLUSTER_SCENARIOS[name].run()
    if as_json:
        json.dump(
            {
                "scenario": result.name,
                "summary": result.summary,
                "violations": result.violations,
                "rows": result.rows,
            },
            sys.stdout,
            default=str,
        )
        sys.stdout.write("\n")
        return
    console = Console(width=max(Console().width, 160))
    render_rows(console, result)


def _cluster_explore(
    seed: int,
    schedules: int,
    steps: int,
    truncation: TruncationMode,
    strict: bool,
    as_json: bool,
) -> None:
    report = run_cluster_explore(
        schedules, seed=seed, steps=steps, shrink_violations=3, truncation=truncation
    )

    def shown(v: ClusterViolation) -> dict[str, Any]:
        return {
            "seed": v.schedule_seed,
            "config": {k: str(x) for k, x in dataclasses.asdict(v.config).items()},
            "violations": v.violations,
            "original_length": len(v.schedule),
            "shrunk": [e.describe() for e in v.shrunk],
            "shrunk_violations": v.shrunk_violations,
        }

    if as_json:
        json.dump(
            {
                "schedules": report.schedules,
                "seed": seed,
                "steps_per_schedule": steps,
                "truncation": truncation.value,
                "violating_schedules": report.violating_schedules,
                "violations": [shown(v) for v in report.violations[:3]],
                "stuck_schedules": report.stuck,
                "stuck_after_lost_request": report.stuck_after_lost_request,
                "elapsed_s": round(report.elapsed_s, 3),
                "schedules_per_minute": round(report.schedules_per_minute),
            },
            sys.stdout,
        )
        sys.stdout.write("\n")
    else:
        console = Console()
        console.print(
            f"explored {report.schedules} whole-cluster schedules (3 brokers, {steps} events, "
            f"seeds {seed}..{seed + schedules - 1}, truncation={truncation.value}) in "
            f"{report.elapsed_s:.1f} s = "
            f"{report.schedules_per_minute:,.0f} schedules/min"
        )
        console.print(f"violating schedules: {report.violating_schedules}")
        console.print(f"schedules that never became quiescent at settle (liveness): {report.stuck}")
        console.print(
            "  and after a controller request lost for good (Kafka's channel resends "
            f"instead): {report.stuck_after_lost_request}"
        )
        for v in report.violations[:3]:
            console.print(
                f"\nseed {v.schedule_seed}: {v.violations[0]}\nshrunk from "
                f"{len(v.schedule)} to {len(v.shrunk)} events:",
                markup=False,
            )
            for index, event in enumerate(v.shrunk, start=1):
                console.print(f"  {index}. {event.describe()}", markup=False)
            for problem in v.shrunk_violations:
                console.print(f"VIOLATION {problem}", markup=False, style="bold red")
    if strict and report.violating_schedules:
        raise typer.Exit(1)


@app.command("explore")
def explore(
    seed: Annotated[int, typer.Option(help="Schedule i uses seed S + i.")] = 0,
    schedules: Annotated[int, typer.Option(help="How many random schedules.")] = 1000,
    truncation: TruncationOption = TruncationMode.KIP279,
    replicas: Annotated[int, typer.Option(min=1, max=len(NAMES))] = 3,
    steps: Annotated[int, typer.Option(help="Events per schedule.")] = 50,
    strict: Annotated[bool, typer.Option(help="Exit 1 when a violation is found.")] = False,
    as_json: JsonOption = False,
    cluster: Annotated[
        bool,
        typer.Option(
            "--cluster",
            help="Whole-cluster schedules (brokers, ZooKeeper, controller); --steps "
            "defaults to 60 there.",
        ),
    ] = False,
) -> None:
    """Run random fault schedules, check the invariants after every step, shrink a failure."""
    if cluster:
        # The truncation rule used to be ignored here: every cluster run was kip279.
        _cluster_explore(seed, schedules, 60 if steps == 50 else steps, truncation, strict, as_json)
        return
    report = run_explore(seed, schedules, truncation, replicas=replicas, steps=steps)
    first = report.first
    replay = None
    if first is not None:
        replay = run_schedule(first.config, first.shrunk, record=True, settle=True)
    if as_json:
        json.dump(
            {
                "schedules": report.schedules,
                "seed": report.seed,
                "truncation": truncation.value,
                "replicas": replicas,
                "steps_per_schedule": steps,
                "violating_schedules": report.violating_schedules,
                "violations": replay.violations if replay else [],
                "committed_lost": replay.committed_lost if replay else [],
                "diverged": replay.diverged if replay else False,
                "reproducer": None
                if first is None
                else {
                    "seed": first.schedule_seed,
                    "config": _config_json(first.config),
                    "original_length": len(first.schedule),
                    "original_violations": first.violations,
                    "schedule": [event.to_json() for event in first.shrunk],
                },
                "steps": replay.steps if replay else [],
                "elapsed_s": round(report.elapsed_s, 3),
                "schedules_per_minute": round(report.schedules_per_minute),
            },
            sys.stdout,
        )
        sys.stdout.write("\n")
    else:
        console = Console()
        console.print(
            f"explored {report.schedules} schedules ({replicas} replicas x {steps} steps, "
            f"seeds {seed}..{seed + schedules - 1}, truncation={truncation.value}) in "
            f"{report.elapsed_s:.1f} s = {report.schedules_per_minute:,.0f} schedules/min"
        )
        console.print(f"violating schedules: {report.violating_schedules}")
        if first is not None and replay is not None:
            console.print(
                f"\nfirst violation: seed {first.schedule_seed}, "
                f"min.insync.replicas={first.config.min_insync_replicas}, "
                f"unclean.leader.election.enable={first.config.unclean_leader_election_enable}; "
                f"shrunk from {len(first.schedule)} to {len(first.shrunk)} events:"
            )
            for index, event in enumerate(first.shrunk, start=1):
                console.print(f"  {index}. {event.describe(NAMES)}", markup=False)
            console.print()
            print_steps(console, replay.steps)
            for problem in replay.violations:
                console.print(f"VIOLATION {problem}", markup=False, style="bold red")
    if strict and report.violating_schedules:
        raise typer.Exit(1)
