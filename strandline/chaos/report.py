"""Many schedules' checks folded into one summary, and its rich rendering.

`summarize` is pure (results in, JSON-ready dict out); `render_table` only prints to the
console it is given.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import Any

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table

from strandline.chaos.checker import CheckResult
from strandline.chaos.checker import check as run_checker
from strandline.chaos.history import Op, read_history
from strandline.storage import replica_verify

# Totals summed over schedules: (summary key, CheckResult attribute).
TOTALS: tuple[tuple[str, str], ...] = (
    ("acked", "acked"),
    ("lost", "lost"),
    ("wrong_offset", "wrong_offset"),
    ("duplicates", "duplicates"),
    ("reordered", "reordered"),
    ("diverged", "diverged"),
    ("offsets_backwards", "offsets_backwards"),
    ("skipped", "skipped"),
    ("indeterminate", "indeterminate"),
    ("lost_acks1", "lost_acks1"),
    ("duplicates_non_idempotent", "duplicates_non_idempotent"),
    ("duplicates_epoch_bump", "duplicates_epoch_bump"),
)


@dataclass(frozen=True)
class ScheduleResult:
    seed: int
    seconds: float  # the schedule's own run time
    faults: list[str]  # the fault kinds drawn, in schedule order
    check: CheckResult
    folder: Path  # where its history, timeline and logs were kept
    extra: dict[str, Any] = field(default_factory=dict)


def _spread(values: Sequence[float]) -> dict[str, Any]:
    if not values:
        return {"median": None, "max": None, "windows": 0}
    return {
        "median": round(median(values), 3),
        "max": round(max(values), 3),
        "windows": len(values),
    }


def _per_kind(per_run: Sequence[Mapping[str, list[float]]]) -> dict[str, dict[str, Any]]:
    pooled: dict[str, list[float]] = defaultdict(list)
    for by_kind in per_run:
        for kind, values in by_kind.items():
            pooled[kind].extend(values)
    return {kind: _spread(values) for kind, values in sorted(pooled.items())}


def summarize(
    results: Sequence[ScheduleResult], wall_seconds: float | None = None
) -> dict[str, Any]:
    """`wall_seconds` is the campaign's total wall time; without it, the schedules' own
    seconds are summed (which ignores setup and teardown between them)."""
    checks = [r.check for r in results]
    summary: dict[str, Any] = {"schedules": len(results)}
    for key, attribute in TOTALS:
        summary[key] = sum(int(getattr(c, attribute)) for c in checks)
    summary["failed_schedules"] = [r.seed for r in results if not r.check.ok]
    anomalies: list[dict[str, Any]] = []
    for result in results:
        for anomaly in result.check.anomalies:
            entry = anomaly.to_json()
            if entry["seed"] is None:
                entry["seed"] = result.seed
            entry["folder"] = str(result.folder)
            anomalies.append(entry)
    summary["anomalies"] = anomalies
    summary["unavailability_s"] = _per_kind([c.unavailability for c in checks])
    summary["partition_unavailability_s"] = _per_kind([c.partition_unavailability for c in checks])
    summary["recovery_s"] = _per_kind([c.recovery for c in checks])
    unrecovered: dict[str, int] = defaultdict(int)
    for check in checks:
        for kind, count in check.unrecovered.items():
            unrecovered[kind] += count
    summary["unrecovered"] = dict(unrecovered)
    spent = wall_seconds if wall_seconds is not None else sum(r.seconds for r in results)
    summary["wall_seconds"] = round(spent, 3)
    summary["schedules_per_hour"] = round(len(results) * 3600.0 / spent, 2) if spent > 0 else None
    return summary


def _fmt(value: Any) -> str:
    return "-" if value is None else f"{value:.2f}"


def availability_table(summary: Mapping[str, Any]) -> Table:
    table = Table(
        title="availability per fault kind (seconds; gap = longest time with no acknowledged"
        " write, any partition or the worst partition)",
        title_justify="left",
    )
    table.add_column("fault")
    table.add_column("windows", justify="right")
    table.add_column("gap med", justify="right")
    table.add_column("gap max", justify="right")
    table.add_column("worst tp gap med", justify="right")
    table.add_column("worst tp gap max", justify="right")
    table.add_column("recovery med", justify="right")
    table.add_column("recovery max", justify="right")
    unavailable = summary.get("unavailability_s", {})
    recovery = summary.get("recovery_s", {})
    per_partition = summary.get("partition_unavailability_s", {})
    unrecovered = summary.get("unrecovered", {})
    for kind in sorted(set(unavailable) | set(recovery)):
        down = unavailable.get(kind, {})
        back = recovery.get(kind, {})
        worst = per_partition.get(kind, {})
        never = unrecovered.get(kind, 0)
        table.add_row(
            kind,
            str(down.get("windows", 0)),
            _fmt(down.get("median")),
            _fmt(down.get("max")),
            _fmt(worst.get("median")),
            _fmt(worst.get("max")),
            _fmt(back.get("median")),
            _fmt(back.get("max")) + (f" ({never} never)" if never else ""),
        )
    return table


def totals_panel(summary: Mapping[str, Any]) -> Panel:
    anomalies = summary.get("anomalies", [])
    lines = [
        f"schedules: {summary.get('schedules', 0)}"
        + (
            f"  ({summary['schedules_per_hour']}/hour)"
            if summary.get("schedules_per_hour") is not None
            else ""
        ),
        f"acked: {summary.get('acked', 0)}",
        f"lost: {summary.get('lost', 0)}",
        f"wrong offset: {summary.get('wrong_offset', 0)}",
        f"duplicates: {summary.get('duplicates', 0)}"
        f"  (non-idempotent, legal: {summary.get('duplicates_non_idempotent', 0)};"
        f" resent by the client under a bumped epoch: {summary.get('duplicates_epoch_bump', 0)})",
        f"reordered: {summary.get('reordered', 0)}",
        f"diverged: {summary.get('diverged', 0)}",
        f"offsets backwards: {summary.get('offsets_backwards', 0)}",
        f"skipped: {summary.get('skipped', 0)}",
        f"anomalies: {len(anomalies)}",
    ]
    by_seed: dict[Any, list[str]] = defaultdict(list)
    for anomaly in anomalies:
        if anomaly["kind"] not in by_seed[anomaly["seed"]]:
            by_seed[anomaly["seed"]].append(anomaly["kind"])
    for seed, kinds in by_seed.items():
        lines.append(f"  seed {seed}: {', '.join(kinds)}")
    clean = not anomalies and not summary.get("failed_schedules")
    return Panel(
        "\n".join(lines),
        title="totals",
        title_align="left",
        border_style="green" if clean else "red",
    )


def render_table(summary: Mapping[str, Any], console: Console) -> None:
    console.print(Group(availability_table(summary), totals_panel(summary)))


SCHEDULE_FILE = "schedule.json"


def check_schedule(ops: Sequence[Op], seed: int | None) -> CheckResult:
    """The checker as a chaos run applies it. Unavailability windows end at the first
    acknowledged write after the fault, so each is charged to its own fault; an
    acknowledged write lost is reported whatever acks asked for (with acks=1 it is Kafka's
    documented behaviour, and the unsafe-settings tests expect to see it)."""
    return run_checker(ops, seed=seed, grace=None, acks1_loss_is_anomaly=True)


def kept_producer_batches(folder: Path, ops: Sequence[Op]) -> list[Op]:
    """`producer-batches` ops rebuilt from the segments a failed schedule keeps under
    `cluster/broker-N/data`, for a history written before the runner recorded them: the
    final read's partitions, up to the HW each replica comparison used."""
    if any(op["f"] == "producer-batches" for op in ops):
        return []
    topics = {op["topic"] for op in ops if op["f"] == "final-read"}
    rebuilt: list[Op] = []
    for op in ops:
        if op["f"] != "replica-compare" or op["topic"] not in topics:
            continue
        tp = f"{op['topic']}-{op['partition']}"
        for broker in op.get("brokers") or []:
            directory = folder / "cluster" / f"broker-{broker}" / "data" / tp
            if directory.is_dir():
                batches = replica_verify.producer_batches(directory, int(op["high_watermark"]))
                rebuilt.append(
                    {
                        "t": op["t"],
                        "process": "checker",
                        "f": "producer-batches",
                        "type": "ok",
                        "topic": op["topic"],
                        "partition": op["partition"],
                        "batches": [list(b) for b in batches],
                    }
                )
                break
    return rebuilt


# History ops written only once a schedule's workload, healing and final read are over.
RUN_ENDED = ("replica-compare", "replica-compare-skipped")


def load_results(run_dirs: Sequence[Path], *, recheck: bool = False) -> list[ScheduleResult]:
    """The finished schedules under each folder (`seed-*/check.json`), so runs made
    separately (or in parallel) can be summarized together. A schedule's kinds and run
    time come from its `schedule.json`, or else from the history's plan line.
    `recheck` runs the checker again on each history (and rewrites check.json), including
    schedules that ran to their end but have no check.json (their check crashed)."""
    results: list[ScheduleResult] = []
    for run_dir in run_dirs:
        for folder in sorted(Path(run_dir).glob("seed-*")):
            check_path = folder / "check.json"
            seed = int(folder.name.removeprefix("seed-"))
            if recheck and (folder / "history.jsonl").exists():
                ops = read_history(folder / "history.jsonl")
                # A schedule whose run ended but whose check did not (a checker bug, since
                # fixed) is checked now; one cut short before its final read is not.
                if not check_path.exists() and not any(op["f"] in RUN_ENDED for op in ops):
                    continue
                check = check_schedule([*ops, *kept_producer_batches(folder, ops)], seed)
                check_path.write_text(json.dumps(check.to_json(), indent=2) + "\n")
            elif check_path.exists():
                check = CheckResult.from_json(json.loads(check_path.read_text()))
            else:
                continue
            schedule_path = folder / SCHEDULE_FILE
            if schedule_path.exists():
                schedule = json.loads(schedule_path.read_text())
                faults, seconds = list(schedule["faults"]), float(schedule["seconds"])
            else:
                # Written before schedule.json existed: the plan line names the kinds, and
                # the last op's time is the run's length (without the cluster's start).
                ops = read_history(folder / "history.jsonl")
                plan = next((op for op in ops if op["f"] == "plan"), {})
                faults = [step["kind"] for step in plan.get("steps", [])]
                seconds = max((float(op["t"]) for op in ops), default=0.0)
            results.append(ScheduleResult(seed, seconds, faults, check, folder))
    return sorted(results, key=lambda r: r.seed)
