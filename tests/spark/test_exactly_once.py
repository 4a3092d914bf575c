"""A streaming query writing with the exactly-once sink is SIGKILLed
mid-batch and restarted from its checkpoint; read read_committed, the output holds
every input record exactly once. On local[2] and on the standalone cluster.

The driver runs as its own process (spark_job.py copy). One source partition is slow,
so a micro-batch is caught with one task's transaction committed (its marker says
batch 1 is written) while the other's is open with records in the log (HW > LSO) and
Spark has not recorded the batch: the replay must skip the first task's share, and
rewrite the second's after init_transactions() aborted its open transaction.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from .kafka_helpers import consume_all, create_topic, produce, unique_topic

JOB = Path(__file__).with_name("spark_job.py")
RECORDS = 80  # 2 micro-batches of 40 (maxOffsetsPerTrigger in spark_job.py)


def _descendants(pid: int) -> list[int]:
    """Every process below `pid` (from /proc), children first found first."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _crash(job: subprocess.Popen[str]) -> None:
    """SIGKILL the driver: the Python process, its JVM, and (local mode) the Python
    workers, which PySpark's daemon puts in a process group of their own."""
    for pid in [job.pid, *_descendants(job.pid)]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _query_id(checkpoint: Path) -> str | None:
    try:
        return str(json.loads((checkpoint / "metadata").read_text())["id"])
    except (OSError, ValueError, KeyError):
        return None


class _Probe:
    """The clients _wait_mid_batch polls with, made once: a new client per look costs
    a connection and a coordinator lookup each time, and on a loaded machine a round of
    looks then took longer than the window it has to land in."""

    def __init__(self, bootstrap: str, target: str) -> None:
        self._bootstrap, self._target = bootstrap, target
        self._ends = {
            isolation: Consumer(
                {"bootstrap.servers": bootstrap, "group.id": "ends", "isolation.level": isolation}
            )
            for isolation in ("read_uncommitted", "read_committed")
        }
        self._markers: list[Consumer] = []

    def markers(self, query_id: str) -> list[int]:
        """Each task's marker: the offset its marker group committed (0 when none)."""
        if not self._markers:
            self._markers = [
                Consumer(
                    {
                        "bootstrap.servers": self._bootstrap,
                        "group.id": f"strandline-spark-{query_id}-{task}",
                        "isolation.level": "read_committed",
                    }
                )
                for task in (0, 1)
            ]
        return [
            max(0, c.committed([TopicPartition(self._target, 0)], timeout=10)[0].offset)
            for c in self._markers
        ]

    def ends(self, isolation: str) -> list[int]:
        consumer = self._ends[isolation]
        return [
            consumer.get_watermark_offsets(
                TopicPartition(self._target, p), timeout=10, cached=False
            )[1]
            for p in (0, 1)
        ]

    def close(self) -> None:
        for consumer in [*self._ends.values(), *self._markers]:
            consumer.close()


def _wait_mid_batch(
    job: subprocess.Popen[str], bootstrap: str, target: str, checkpoint: Path
) -> int:
    """Until, in some micro-batch B, one task committed its transaction (its marker is
    B+1) while the other has one open with records in the log (HW > LSO), and Spark
    has not committed B. Returns B."""
    probe = _Probe(bootstrap, target)
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            assert job.poll() is None, f"the job ended early: {job.communicate()[1][-3000:]}"
            query_id = _query_id(checkpoint)
            if query_id is not None:
                markers = probe.markers(query_id)
                batch = max(markers) - 1
                if markers[0] != markers[1] and not (checkpoint / "commits" / str(batch)).exists():
                    # The HW first: an LSO read later and still below it is an open
                    # transaction.
                    hw = probe.ends("read_uncommitted")
                    lso = probe.ends("read_committed")
                    if any(s < h for s, h in zip(lso, hw, strict=True)):
                        return batch
            time.sleep(0.02)
    finally:
        probe.close()
    raise TimeoutError("never caught a micro-batch in flight")


@pytest.mark.parametrize("where", ["local", "standalone"])
def test_killed_driver_replays_without_duplicates(
    where: str, bootstrap: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    master = "local[2]" if where == "local" else request.getfixturevalue("standalone_master")
    source, target = unique_topic("eo-in"), unique_topic("eo-out")
    create_topic(bootstrap, source, partitions=2)
    create_topic(bootstrap, target, partitions=2)
    produce(bootstrap, source, partitions=2, count=RECORDS)
    checkpoint = tmp_path / "checkpoint"
    args = [sys.executable, str(JOB), "copy", bootstrap, source, target, str(checkpoint), master]
    env = dict(os.environ)

    # Each task's 20 rows of a batch: the sink waits 200 ms after each (4 s), and
    # source partition 1's rows take 250 ms each to compute first (5 s): the other task
    # commits before this one begins, whose transaction is then open for 4 s, a window
    # wide enough to see it and kill inside it even on a loaded machine.
    # (Standalone keeps the shorter timings it has always passed with: its executors are
    # not the driver's children, and the test does not need the open transaction there.)
    slow_ms, sink_ms = ("250", "200") if where == "local" else ("100", "80")
    job = subprocess.Popen(
        [*args, "1", slow_ms, sink_ms],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        batch = _wait_mid_batch(job, bootstrap, target, checkpoint)
        # The whole driver at once: a JVM left behind (local mode runs the executors in
        # it) would go on and commit the open transaction the test needs aborted.
        _crash(job)
    finally:
        if job.poll() is None:
            job.kill()
        job.communicate()
    assert not (checkpoint / "commits" / str(batch)).exists()

    rerun = subprocess.run(args, capture_output=True, text=True, timeout=300, env=env)
    assert rerun.returncode == 0, rerun.stderr[-3000:]

    committed = consume_all(bootstrap, target, 2, isolation="read_committed")
    counts = Counter(value for _, _, _, value, _ in committed)
    expected = {f"value-{i}".encode(): 1 for i in range(RECORDS)}
    assert counts == expected
    # Whether the open transaction seen before the kill was still open when the kill
    # landed is not checked: on a loaded machine it sometimes committed first (seen with
    # both kill methods), so a check of the aborted records left in the log would test
    # the machine's speed. _wait_mid_batch did see a batch in flight (HW > LSO).
