"""ReplicaManager with many partitions at once (docs/scaling.md): logs a LeaderAndIsr creates
are opened together, and states whose log could not be created are retried together."""

from __future__ import annotations

from pathlib import Path

from kio.schema.errors import ErrorCode

from strandline.protocol.controller_requests import PartitionState
from strandline.server.replica_manager import ReplicaManager
from strandline.state_change_log import StateChangeLog
from strandline.storage.config import LogConfig
from strandline.storage.log_manager import LogManager
from strandline.types import TopicPartition

NOW = 1_700_000_000_000


def test_unopened_logs_are_retried_in_one_batch(tmp_path: Path) -> None:
    logs = LogManager([tmp_path / "logs"], LogConfig(), 1)
    rm = ReplicaManager(1, logs, lambda _t: LogConfig(), StateChangeLog(None, 1), 10_000)
    tps = [TopicPartition("t", p) for p in range(30)]
    blocked = tps[10:]
    for tp in blocked:  # a file where the partition's directory must go
        (tmp_path / "logs" / tp.dir_name).write_text("in the way")
    states = [PartitionState(tp, 1, 1, 0, (1, 2), 0, (1, 2)) for tp in tps]
    results = rm.become_leader_or_follower(1, states, (), NOW)
    assert {tp for tp, code in results.items() if code == ErrorCode.none} == set(tps[:10])
    assert {results[tp] for tp in blocked} == {ErrorCode.kafka_storage_error}
    assert set(rm.unopened) == set(blocked)

    for tp in blocked:
        (tmp_path / "logs" / tp.dir_name).unlink()
    reads = 0
    read_high_watermarks = logs.read_high_watermarks

    def counted() -> dict[TopicPartition, int]:
        nonlocal reads
        reads += 1
        return read_high_watermarks()

    logs.read_high_watermarks = counted  # type: ignore[method-assign]
    rm.retry_unopened(NOW)
    assert reads == 1  # one pass for all twenty, not one per partition
    assert rm.unopened == {}
    assert all(rm.partitions[tp].is_leader(1) for tp in tps)
