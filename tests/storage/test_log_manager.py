from __future__ import annotations

import os
from pathlib import Path

import pytest

from strandline.errors import StorageError
from strandline.storage.config import LogConfig
from strandline.storage.log import Log
from strandline.storage.log_manager import (
    CLEAN_SHUTDOWN_FILE,
    InconsistentBrokerIdError,
    LogManager,
    parse_partition_dir,
)
from strandline.types import TopicPartition

from .batches import build_batch, decode

A0 = TopicPartition("alpha", 0)
A1 = TopicPartition("alpha", 1)
DASHED = TopicPartition("my-topic-7", 12)


def manager(dirs: list[Path], retention_check_interval_ms: int = 300_000) -> LogManager:
    return LogManager(
        dirs, LogConfig(), broker_id=3, retention_check_interval_ms=retention_check_interval_ms
    )


def produce(mgr: LogManager, tp: TopicPartition, n: int, now_ms: int = 0) -> None:
    log = mgr.get_or_create_log(tp, mgr.default_config, now_ms)
    for i in range(n):
        log.append_as_leader(build_batch([b"%s-%d" % (tp.topic.encode(), i)]), 0, now_ms)


def test_partition_dir_names() -> None:
    assert parse_partition_dir("my-topic-7-12") == DASHED
    assert parse_partition_dir("alpha-0.abc123-delete") is None
    assert parse_partition_dir("meta.properties") is None


def test_logs_spread_over_dirs_and_survive_restart(tmp_path: Path) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    mgr = manager(dirs)
    for tp in (A0, A1, DASHED):
        produce(mgr, tp, 5)
    assert {p.name for p in dirs[0].iterdir() if p.is_dir()} | {
        p.name for p in dirs[1].iterdir() if p.is_dir()
    } == {"alpha-0", "alpha-1", "my-topic-7-12"}
    assert all(any(p.is_dir() for p in d.iterdir()) for d in dirs)
    mgr.checkpoint_high_watermarks({A0: 5, A1: 3, DASHED: 4})
    mgr.get_log(A1).delete_records_before(2)  # type: ignore[union-attr]
    mgr.shutdown()
    for d in dirs:
        assert (d / CLEAN_SHUTDOWN_FILE).exists()
        assert (d / "meta.properties").read_text() == "version=0\nbroker.id=3\n"
    text = "".join((d / "log-start-offset-checkpoint").read_text() for d in dirs)
    assert "alpha 1 2" in text

    again = manager(dirs)
    again.load_all(now_ms=0, topic_configs=lambda topic: LogConfig())
    assert set(again.all_logs()) == {A0, A1, DASHED}
    assert not any((d / CLEAN_SHUTDOWN_FILE).exists() for d in dirs)
    assert again.read_high_watermarks() == {A0: 5, A1: 3, DASHED: 4}
    log = again.get_log(A1)
    assert log is not None and log.log_start_offset == 2 and log.log_end_offset == 5
    assert decode(log.read(2, 1000).records)[0][3] == b"alpha-2"
    again.delete_log(A0)
    assert again.get_log(A0) is None
    assert not any((d / "alpha-0").exists() for d in dirs)


def test_crash_restart_recovers_from_recovery_point(tmp_path: Path) -> None:
    mgr = manager([tmp_path])
    produce(mgr, A0, 4)
    mgr.get_log(A0).flush()  # type: ignore[union-attr]
    mgr.checkpoint_recovery_points()
    produce(mgr, A0, 2)
    assert "alpha 0 4" in (tmp_path / "recovery-point-offset-checkpoint").read_text()
    log_file = tmp_path / "alpha-0" / "00000000000000000000.log"
    data = log_file.read_bytes()
    log_file.write_bytes(data[:-10])  # the crash tore the last batch
    # no shutdown(): no clean marker
    again = manager([tmp_path])
    again.load_all(now_ms=0, topic_configs=lambda topic: LogConfig())
    log = again.get_log(A0)
    assert log is not None and log.log_end_offset == 5
    assert "alpha 0 5" in (tmp_path / "recovery-point-offset-checkpoint").read_text()


def test_meta_properties_must_match_broker_id(tmp_path: Path) -> None:
    manager([tmp_path])
    with pytest.raises(InconsistentBrokerIdError):
        LogManager([tmp_path], LogConfig(), broker_id=4)


def test_tick_applies_retention_flush_and_checkpoints(tmp_path: Path) -> None:
    mgr = manager([tmp_path], retention_check_interval_ms=5_000)
    config = LogConfig(segment_bytes=200, retention_ms=10_000, flush_ms=500)
    log = mgr.get_or_create_log(A0, config, now_ms=0)
    for i in range(6):
        log.append_as_leader(build_batch([b"x" * 100], timestamps=[i]), 0, 0)
    assert log.num_segments == 6
    mgr.tick(now_ms=9_000)  # first tick: retention runs but nothing is old enough
    assert log.num_segments == 6 and log.recovery_point == 6  # flush.ms passed
    mgr.tick(now_ms=12_000)  # old enough, but the retention check is not due yet
    assert log.num_segments == 6
    mgr.tick(now_ms=14_000)
    assert log.log_start_offset == 6 and log.log_end_offset == 6 and log.num_segments == 1
    mgr.tick(now_ms=100_000)
    assert "alpha 0 6" in (tmp_path / "log-start-offset-checkpoint").read_text()


def test_stray_logs_are_deleted_and_a_same_named_log_starts_empty(tmp_path: Path) -> None:
    mgr = manager([tmp_path])
    for tp in (A0, A1, DASHED):
        produce(mgr, tp, 5)
    mgr.shutdown()

    again = manager([tmp_path])
    again.load_all(now_ms=0, topic_configs=lambda topic: LogConfig())
    # alpha is gone from ZooKeeper; my-topic-7 still assigns partition 12 here.
    assert again.delete_stray_logs(lambda tp: tp.topic != "alpha") == [A0, A1]
    assert set(again.all_logs()) == {DASHED}
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["my-topic-7-12"]
    assert "alpha" not in (tmp_path / "recovery-point-offset-checkpoint").read_text()
    reborn = again.get_or_create_log(A0, again.default_config, 0)
    assert (reborn.log_start_offset, reborn.log_end_offset) == (0, 0)


def test_a_deleted_log_is_renamed_before_removal(tmp_path: Path) -> None:
    # A crash mid-removal must leave a `-delete` dir (removed at the next start), never a
    # partly deleted `alpha-0` that would load as the partition.
    mgr = manager([tmp_path])
    produce(mgr, A0, 3)
    log = mgr.get_log(A0)
    assert log is not None
    renamed: list[str] = []
    original = Path.rename

    def spy(self: Path, target: Path) -> Path:  # type: ignore[override]
        renamed.append(Path(target).name)
        return original(self, target)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Path, "rename", spy)
        mgr.delete_log(A0)
    assert len(renamed) == 1
    assert renamed[0].startswith("alpha-0.") and renamed[0].endswith("-delete")
    assert parse_partition_dir(renamed[0]) is None
    assert not any(p.is_dir() for p in tmp_path.iterdir())


def test_only_logs_with_timed_work_are_scheduled_and_rolled_when_due(tmp_path: Path) -> None:
    mgr = manager([tmp_path])
    config = LogConfig(segment_ms=1_000)
    idle = mgr.get_or_create_log(A1, config, 0)
    busy = mgr.get_or_create_log(A0, config, 0)
    assert mgr.scheduled() == {}, "empty logs have no timed work"
    busy.append_as_leader(build_batch([b"x"], timestamps=[500]), 0, 500)
    # Due once segment.ms has passed since the segment's first record.
    assert mgr.scheduled() == {A0: 1_501}
    mgr.tick(now_ms=1_000)
    assert busy.num_segments == 1
    mgr.tick(now_ms=1_501)
    assert busy.num_segments == 2 and idle.num_segments == 1
    assert mgr.scheduled() == {}, "a fresh empty active segment waits for an append"
    busy.append_as_leader(build_batch([b"y"], timestamps=[2_000]), 0, 2_000)
    assert mgr.scheduled() == {A0: 3_001}
    # A shorter segment.ms takes effect at once.
    busy.update_config(LogConfig(segment_ms=100))
    assert mgr.scheduled() == {A0: 2_101}
    mgr.delete_log(A0)
    assert mgr.scheduled() == {}


def test_many_logs_are_created_side_by_side_and_one_failure_stays_its_own(
    tmp_path: Path,
) -> None:
    """A LeaderAndIsr creating hundreds of logs opens them on a thread pool (docs/scaling.md):
    every log is usable, the dirs stay balanced, and a partition whose dir cannot be
    made gets its StorageError without failing the others."""
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    mgr = manager(dirs)
    tps = [TopicPartition("many", p) for p in range(40)]
    blocked = tps[7]
    for d in dirs:  # a file where either dir would put the partition's directory
        (d / blocked.dir_name).write_text("not a directory")
    results = mgr.get_or_create_logs({tp: mgr.default_config for tp in tps}, 0)
    assert isinstance(results[blocked], StorageError)
    assert mgr.get_log(blocked) is None
    created = [tp for tp in tps if tp != blocked]
    for tp in created:
        log = results[tp]
        assert isinstance(log, Log) and mgr.get_log(tp) is log
        log.append_as_leader(build_batch([b"x"]), 0, 0)
    per_dir = [sum(1 for tp in created if (d / tp.dir_name).is_dir()) for d in dirs]
    assert sorted(per_dir) == [19, 20]
    # Asking again returns the same logs and creates nothing.
    again = mgr.get_or_create_logs({tp: mgr.default_config for tp in created}, 0)
    assert all(again[tp] is results[tp] for tp in created)


def test_many_logs_load_side_by_side_after_restart(tmp_path: Path) -> None:
    mgr = manager([tmp_path / "d"])
    tps = [TopicPartition("load", p) for p in range(30)]
    for tp in tps:
        produce(mgr, tp, 1 + tp.partition % 3)
    mgr.shutdown()
    again = LogManager([tmp_path / "d"], LogConfig(), broker_id=3, open_threads=4)
    again.load_all(0, lambda _topic: LogConfig())
    assert sorted(again.all_logs()) == tps
    assert all(again.get_log(tp).log_end_offset == 1 + tp.partition % 3 for tp in tps)  # type: ignore[union-attr]


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_idle_logs_hold_one_descriptor_each(tmp_path: Path) -> None:
    """Index files are opened when first written (Kafka's lazy indexes): 10,000 idle
    partitions must fit a 20,000-descriptor limit, created or loaded (docs/scaling.md)."""
    tps = [TopicPartition("fd", p) for p in range(60)]
    before = _open_fds()
    mgr = manager([tmp_path / "d"])
    mgr.get_or_create_logs({tp: mgr.default_config for tp in tps}, 0)
    assert _open_fds() - before <= len(tps) + 5
    assert all((tmp_path / "d" / tp.dir_name / "00000000000000000000.index").exists() for tp in tps)
    produce(mgr, tps[0], 3)
    mgr.shutdown()
    assert _open_fds() <= before + 2
    again = manager([tmp_path / "d"])
    again.load_all(0, lambda _topic: LogConfig())
    assert _open_fds() - before <= len(tps) + 5
    reloaded = again.get_log(tps[0])
    assert reloaded is not None and reloaded.log_end_offset == 3
    again.shutdown()
    # After a crash every segment is recovered (its indexes rebuilt): still one each.
    (tmp_path / "d" / CLEAN_SHUTDOWN_FILE).unlink()
    recovered = manager([tmp_path / "d"])
    recovered.load_all(0, lambda _topic: LogConfig())
    assert _open_fds() - before <= len(tps) + 5
    log = recovered.get_log(tps[0])
    assert log is not None and log.log_end_offset == 3
