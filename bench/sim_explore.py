"""How many random fault schedules `strandline sim explore` checks per minute.

Usage: .venv/bin/python bench/sim_explore.py [--schedules N] [--replicas 3] [--steps 50]

Runs the explorer single-threaded (as the CLI does) in each truncation mode and prints
schedules/minute plus CPU time, so a busy shared machine can be told apart from a slow
simulator: CPU-based figures are what the code costs, wall-clock ones what you waited.
"""

from __future__ import annotations

import argparse
import time

from strandline.replication.truncation import TruncationMode
from strandline.sim.explore import explore


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedules", type=int, default=5000)
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"{args.replicas} replicas x {args.steps} steps, {args.schedules} schedules per mode")
    print(
        f"{'mode':8} {'violating':>9} {'wall s':>7} {'cpu s':>7} "
        f"{'sched/min (wall)':>17} {'sched/min (cpu)':>16}"
    )
    for mode in (TruncationMode.KIP279, TruncationMode.KIP101, TruncationMode.HW):
        cpu_started = time.process_time()
        report = explore(
            args.seed,
            args.schedules,
            mode,
            replicas=args.replicas,
            steps=args.steps,
            shrink_first=False,
        )
        cpu = time.process_time() - cpu_started
        per_min_cpu = args.schedules * 60.0 / cpu if cpu > 0 else 0.0
        print(
            f"{mode.value:8} {report.violating_schedules:>9} {report.elapsed_s:>7.2f} "
            f"{cpu:>7.2f} {report.schedules_per_minute:>17,.0f} {per_min_cpu:>16,.0f}"
        )


if __name__ == "__main__":
    main()
