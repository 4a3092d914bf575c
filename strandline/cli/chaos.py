"""`strandline chaos run|explore|check`: Jepsen-style fault schedules against a real
cluster, checked from their histories."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from strandline.cli import tool_console

app = typer.Typer(
    help="Fault schedules against a real local cluster, with a history checker.",
    no_args_is_help=True,
)
console = tool_console()
err_console = tool_console(stderr=True)

OutOption = Annotated[
    Path, typer.Option("--out", help="Folder for each schedule's history, logs and timeline")
]
FaultsOption = Annotated[
    str,
    typer.Option(
        "--faults",
        help="Comma-separated fault kinds: kill,pause,partition,isolate,one-way,zk-isolate,"
        "zk-kill,session-expiry,disk-full,zk-blip (default: all)",
    ),
]


def _faults(text: str) -> tuple[str, ...]:
    from strandline.chaos.nemesis import FAULT_KINDS

    if not text.strip():
        return FAULT_KINDS
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    unknown = sorted(set(kinds) - set(FAULT_KINDS))
    if unknown:
        raise typer.BadParameter(
            f"unknown fault kind(s) {', '.join(unknown)}; known: {', '.join(FAULT_KINDS)}",
            param_hint="--faults",
        )
    return kinds


def _print_summary(summary: dict[str, Any], as_json: bool) -> None:
    """One JSON object, or the rich table; exits 1 when any schedule had an anomaly."""
    from strandline.chaos.report import render_table

    if as_json:
        print(json.dumps(summary, indent=2))
    else:
        render_table(summary, console)
    if summary["anomalies"]:
        raise typer.Exit(code=1)


@app.command("run")
def run(
    seed: Annotated[int, typer.Option("--seed", help="Seed of the fault schedule")] = 1,
    seconds: Annotated[float, typer.Option("--seconds", min=10, help="Length of the run")] = 30,
    faults: FaultsOption = "",
    out: OutOption = Path("chaos-runs"),
    acks: Annotated[str, typer.Option("--acks", help="Producers' acks: all or 1")] = "all",
    min_insync: Annotated[int, typer.Option("--min-insync-replicas")] = 2,
    unclean: Annotated[bool, typer.Option("--unclean-leader-election")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the check as JSON")] = False,
) -> None:
    """Run one schedule: a fresh cluster, the workload, faults from the seed, the check."""
    from strandline.chaos.report import render_table, summarize
    from strandline.chaos.runner import ChaosConfig, run_schedule

    config = ChaosConfig(
        seed=seed,
        out_dir=out,
        seconds=seconds,
        faults=_faults(faults),
        acks=acks,
        min_insync_replicas=min_insync,
        unclean_leader_election=unclean,
    )
    steps = config.schedule()
    if not as_json:
        console.print(
            f"seed {seed}: {len(steps)} faults: "
            + ", ".join(f"{s.kind}@{s.start_s:.1f}s+{s.duration_s:.1f}s" for s in steps)
        )
    result = run_schedule(config)
    summary = summarize([result], wall_seconds=result.seconds)
    if as_json:
        print(json.dumps(summary, indent=2))
    else:
        render_table(summary, console)
        console.print(f"history, state-change logs and timeline in {result.folder}")
    if not result.check.ok:
        raise typer.Exit(code=1)


@app.command("explore")
def explore(
    schedules: Annotated[int, typer.Option("--schedules", min=1)] = 10,
    seed: Annotated[int, typer.Option("--seed", help="First seed; schedule i uses seed+i")] = 1,
    seconds: Annotated[float, typer.Option("--seconds", min=10)] = 30,
    faults: FaultsOption = "",
    out: OutOption = Path("chaos-runs"),
    jobs: Annotated[
        int,
        typer.Option(
            "--jobs",
            min=1,
            help="Schedules run at once, each in its own process on its own cluster",
        ),
    ] = 1,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
) -> None:
    """Run many schedules, each on a fresh cluster; end with a table of the anomalies
    and the unavailability per fault kind."""
    from rich.progress import Progress

    from strandline.chaos.report import ScheduleResult, summarize
    from strandline.chaos.runner import (
        ChaosConfig,
        ScheduleFailed,
        explore_configs,
        run_schedules,
    )

    base = ChaosConfig(seed=seed, out_dir=out, seconds=seconds, faults=_faults(faults))
    results: list[ScheduleResult] = []
    failed: list[ScheduleFailed] = []
    started = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    with Progress(console=err_console, transient=as_json) as progress:
        task = progress.add_task("schedules", total=schedules)
        for result in run_schedules(explore_configs(base, schedules), jobs=jobs):
            progress.advance(task)
            if isinstance(result, ScheduleFailed):
                failed.append(result)
                progress.console.print(f"[red]{result}[/]")
                continue
            results.append(result)
            summary = summarize(results, wall_seconds=time.monotonic() - started)
            # Written after each schedule, so a long run can be read while it goes on.
            (out / "explore-summary.json").write_text(json.dumps(summary, indent=2) + "\n")
            if not result.check.ok:
                progress.console.print(
                    f"[red]seed {result.seed}: anomalies[/] (see {result.folder})"
                )
    for failure in failed:
        err_console.print(f"[red]{failure}[/]")
    _print_summary(summarize(results, wall_seconds=time.monotonic() - started), as_json)
    if failed:
        raise typer.Exit(code=1)


@app.command("report")
def report(
    run_dirs: Annotated[list[Path], typer.Argument(help="Folders written by run or explore")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
    recheck: Annotated[
        bool, typer.Option("--recheck", help="Run the checker again on every history")
    ] = False,
) -> None:
    """Summarize finished schedules again, across one or more run folders (explores run
    side by side are read as one)."""
    from strandline.chaos.report import load_results, summarize

    results = load_results(run_dirs, recheck=recheck)
    if not results:
        err_console.print(f"no finished schedules (seed-*/check.json) under {run_dirs}")
        raise typer.Exit(code=1)
    _print_summary(summarize(results, wall_seconds=sum(r.seconds for r in results)), as_json)


@app.command("check")
def check_history(
    history: Annotated[Path, typer.Argument(help="A history.jsonl written by chaos run")],
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Check a history again (the checker is pure: histories can be re-checked offline)."""
    from strandline.chaos.checker import check
    from strandline.chaos.history import read_history

    result = check(read_history(history))
    if as_json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        console.print_json(json.dumps(result.to_json()))
    if not result.ok:
        raise typer.Exit(code=1)
