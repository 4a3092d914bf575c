"""What one small batch costs in each step of a replication round, in-process (docs/scaling.md).

    .venv/bin/python bench/batch_budget.py [--partitions 1000] [--rounds 20]
    .venv/bin/python bench/batch_budget.py --root /path/to/other/checkout   # before/after

Two ReplicaManagers on real logs in a temporary directory, a leader and a follower of
`partitions` partitions (rf=2, Kafka's default log config). Each round appends one
1-record keyed batch of 100 B to every partition as the leader (`append`: validate,
offsets, producer state, write, index, HW), reads each partition at the follower's log
end as a follower fetch does (`read for a follower`), appends what was read on the
follower (`follower append`: CRC, epochs, write, index) and records the follower's new
position on the leader (`follower position and HW`). Each step's figure is CPU time per
partition-batch in the least disturbed round (`time.process_time`, best of `rounds`), so
other work on the machine inflates it less than wall time would. Wire encode/decode is
`bench/codecs.py`; the network and the event loop are in the cluster profile
(`docs/scaling.md`). Prints a table and one `BENCH_JSON {...}` line; never asserts.

`--root` imports `strandline` from another checkout (say, a worktree of an older commit),
so the same steps can be timed before and after a change on the same machine.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent
NOW = 1_700_000_000_000
STEPS = ("append", "read for a follower", "follower append", "follower position and HW")


def measure(partitions: int, rounds: int) -> dict[str, float]:
    from strandline.protocol.controller_requests import PartitionState
    from strandline.server.replica_manager import ReplicaManager
    from strandline.state_change_log import StateChangeLog
    from strandline.storage.config import LogConfig
    from strandline.storage.log_manager import LogManager
    from strandline.types import TopicPartition
    from tests.storage.batches import build_batch

    tps = [TopicPartition("budget", p) for p in range(partitions)]
    batch = build_batch([b"v" * 100], keys=[b"key-1"], timestamps=[NOW])
    best = dict.fromkeys(STEPS, float("inf"))
    with tempfile.TemporaryDirectory(prefix="batch-budget-") as tmp:

        def manager(broker_id: int) -> Any:
            logs = LogManager([Path(tmp) / f"broker-{broker_id}"], LogConfig(), broker_id)
            rm = ReplicaManager(
                broker_id, logs, lambda _t: LogConfig(), StateChangeLog(None, broker_id), 10_000
            )
            rm.become_leader_or_follower(
                1, [PartitionState(tp, 1, 1, 1, (1, 2), 0, (1, 2)) for tp in tps], (), NOW
            )
            return rm

        leader, follower = manager(1), manager(2)
        for r in range(rounds):
            t0 = time.process_time()
            for tp in tps:
                leader.append_as_leader(tp, batch, -1, NOW)
            t1 = time.process_time()
            got = [
                (tp, leader.read(tp, r, 1 << 20, replica_id=2, as_region=True).records)
                for tp in tps
            ]
            t2 = time.process_time()
            for tp, records in got:
                follower.append_as_follower(follower.partitions[tp], records, r, 0, NOW)
            t3 = time.process_time()
            for tp in tps:
                leader.on_follower_fetch(tp, 2, r + 1, NOW)
            t4 = time.process_time()
            for step, seconds in zip(STEPS, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
                best[step] = min(best[step], seconds / partitions * 1e6)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--root", help="import strandline from this checkout instead")
    args = parser.parse_args()
    root = Path(args.root).resolve() if args.root else HERE
    sys.path[:0] = [str(root), str(HERE)]  # the checkout's package, this one's tests/
    # Logs hold one descriptor each while idle, two while written: room for both managers.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 8 * args.partitions)), hard))
    figures = measure(args.partitions, args.rounds)

    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"One 1-record batch per partition, {args.partitions} partitions ({root})")
    table.add_column("step")
    table.add_column("CPU us per partition-batch", justify="right")
    for step in STEPS:
        table.add_row(step, f"{figures[step]:.1f}")
    table.add_row("sum", f"{sum(figures.values()):.1f}")
    Console(width=120).print(table)
    doc = {"root": str(root), "partitions": args.partitions, "rounds": args.rounds}
    print("BENCH_JSON " + json.dumps({**doc, "us_per_partition_batch": figures}, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
