"""Text views of simulator runs: one rich table per step (HW/LEO diagrams as text)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table


def step_table(step: dict[str, Any]) -> Table:
    leader = step["leader"] or "none (offline)"
    table = Table(
        title=f"step {step['step']}: {step['event']}",
        caption=(
            f"leader {leader}, leader epoch {step['leader_epoch']}, ISR {{{','.join(step['isr'])}}}"
        ),
        title_justify="left",
        caption_justify="left",
    )
    table.add_column("replica")
    table.add_column("role")
    table.add_column("log (offset epoch value)")
    table.add_column("LEO", justify="right")
    table.add_column("HW", justify="right")
    table.add_column("epoch cache")
    for replica in step["replicas"]:
        log = "\n".join(f"{offset} e{epoch} {value}" for offset, epoch, value in replica["log"])
        cache = " ".join(f"({epoch},{offset})" for epoch, offset in replica["epoch_cache"])
        table.add_row(
            replica["id"],
            replica["role"],
            log or "-",
            str(replica["leo"]),
            str(replica["hw"]),
            cache or "-",
        )
    return table


def print_steps(console: Console, steps: list[dict[str, Any]]) -> None:
    for step in steps:
        console.print(step_table(step))
        for note in step.get("notes", []):
            console.print(f"  - {note}", markup=False, highlight=False)
        for problem in step.get("violations", []):
            console.print(
                f"  ! VIOLATION {problem}", style="bold red", markup=False, highlight=False
            )
        console.print()
