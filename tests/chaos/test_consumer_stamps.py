"""A consumer process's ops carry the moment they happened, not the moment the parent's
pump got round to them: a revoke-time commit forwarded late must not seem to follow
another member's later commit (seed 31011 of docs/faults.md's run 8 before the fix)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from strandline.chaos.checker import check
from strandline.chaos.history import HistoryWriter, read_history
from strandline.chaos.workload import MONOTONIC, ConsumerProcess


def commit(consumer: str, offset: int) -> dict[str, Any]:
    return {
        "process": consumer,
        "f": "commit",
        "type": "ok",
        "consumer": consumer,
        "group": "g",
        "offsets": [["t", 0, offset]],
    }


def test_an_op_forwarded_late_keeps_the_time_it_happened(tmp_path: Path) -> None:
    history = HistoryWriter(tmp_path / "history.jsonl")
    early = time.monotonic()
    # consumer-1 commits 1494 as its partition is revoked; its op waits in the queue
    # while consumer-0, the new owner, commits 1570 (stamped by the parent as it goes).
    process = ConsumerProcess(1, "t", "g")
    process.record, process._t_at = history.write, history.t_at
    while time.monotonic() <= early:
        pass
    history.write(commit("consumer-0", 1570))
    process._ops.put({**commit("consumer-1", 1494), MONOTONIC: early})
    process._ops.put(None)
    process._forward()  # the pump: runs until the end-of-ops marker
    history.close()

    ops = read_history(history.path)
    late = [op for op in ops if op["process"] == "consumer-1"]
    assert [op["offsets"] for op in late] == [[["t", 0, 1494]]]
    assert MONOTONIC not in late[0]
    assert late[0]["t"] < next(op["t"] for op in ops if op["process"] == "consumer-0")
    result = check(ops)
    assert result.offsets_backwards == 0, result.anomalies


def test_the_same_commits_stamped_on_arrival_are_an_anomaly(tmp_path: Path) -> None:
    # What the checker saw before the fix: the order of arrival, 1570 then 1494.
    history = HistoryWriter(tmp_path / "history.jsonl")
    history.write(commit("consumer-0", 1570))
    history.write(commit("consumer-1", 1494))
    history.close()
    assert check(read_history(history.path)).offsets_backwards == 1
