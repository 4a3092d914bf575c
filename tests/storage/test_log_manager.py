from __future__ import annotations

from pathlib import Path

import pytest

from strandline.storage.config import LogConfig
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
