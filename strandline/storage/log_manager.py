"""All logs of one broker across its `log.dirs`, and the per-dir checkpoint files.

Each log dir holds `meta.properties`, `recovery-point-offset-checkpoint`,
`replication-offset-checkpoint`, `log-start-offset-checkpoint` and, after a clean
shutdown, `.kafka_cleanshutdown` (which lets the next start skip deep validation).
"""

from __future__ import annotations

import heapq
import logging
import re
import shutil
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from strandline.errors import StorageError
from strandline.storage.atomic_file import write_atomically
from strandline.storage.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CheckpointFormatError,
    read_offsets,
    write_offsets,
)
from strandline.storage.config import LogConfig
from strandline.storage.disk import DEFAULT_WRITER
from strandline.storage.index import Writer
from strandline.storage.log import Log
from strandline.types import TopicPartition

logger = logging.getLogger(__name__)
_T = TypeVar("_T")

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
META_PROPERTIES = "meta.properties"
_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
# Kafka renames a log dir to `<topic>-<p>.<uuid>-delete` before removing it.
_DELETED_DIR_SUFFIX = "-delete"
# Logs opened side by side at start-up and for a LeaderAndIsr that creates many
# (Kafka's num.recovery.threads.per.data.dir). Opening is mostly mkdir/open/fsync
# system calls, which release the GIL: with 10,000 partitions one thread spends
# seconds waiting on the disk (docs/scaling.md).
DEFAULT_OPEN_THREADS = 8
# Fewer logs than this are opened on the calling thread (a pool costs more).
_PARALLEL_OPEN_MIN = 8


class InconsistentBrokerIdError(StorageError):
    """meta.properties in a log dir names another broker."""


def parse_partition_dir(name: str) -> TopicPartition | None:
    if name.endswith(_DELETED_DIR_SUFFIX) or name.startswith("."):
        return None
    match = _PARTITION_DIR.match(name)
    if match is None:
        return None
    return TopicPartition(match.group("topic"), int(match.group("partition")))


class LogManager:
    def __init__(
        self,
        log_dirs: list[Path],
        default_config: LogConfig,
        broker_id: int,
        *,
        writer: Writer = DEFAULT_WRITER,
        retention_check_interval_ms: int = 300_000,  # log.retention.check.interval.ms
        recovery_point_checkpoint_interval_ms: int = 60_000,  # log.flush.offset.checkpoint...
        start_offset_checkpoint_interval_ms: int = 60_000,  # log.flush.start.offset.checkpoint...
        on_flushed: Callable[[float], None] | None = None,
        open_threads: int = DEFAULT_OPEN_THREADS,
    ) -> None:
        if not log_dirs:
            raise ValueError("at least one log dir is needed")
        self.log_dirs = [Path(d) for d in log_dirs]
        self.default_config = default_config
        self.broker_id = broker_id
        self.writer = writer
        self.retention_check_interval_ms = retention_check_interval_ms
        self.recovery_point_checkpoint_interval_ms = recovery_point_checkpoint_interval_ms
        self.start_offset_checkpoint_interval_ms = start_offset_checkpoint_interval_ms
        self.on_flushed = on_flushed
        self._logs: dict[TopicPartition, Log] = {}
        # Timed work (segment.ms rolls, flush.ms): each scheduled log's due time, and a
        # heap of (due, tp) whose entries not matching `_due` are stale and skipped.
        self._due: dict[TopicPartition, int] = {}
        # What each checkpoint file was last written with.
        self._written: dict[Path, dict[TopicPartition, int]] = {}
        self._timers: list[tuple[int, TopicPartition]] = []
        self._dir_of: dict[TopicPartition, Path] = {}
        # Logs per dir, kept up to date: choosing a dir for a new log must not count
        # every log (quadratic when a LeaderAndIsr creates thousands).
        self._dir_counts: dict[Path, int] = {d: 0 for d in self.log_dirs}
        self.open_threads = max(1, open_threads)
        self._last_retention_ms: int | None = None
        self._last_recovery_checkpoint_ms: int | None = None
        self._last_start_checkpoint_ms: int | None = None
        for log_dir in self.log_dirs:
            try:
                log_dir.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StorageError(f"cannot create log dir {log_dir}: {exc}") from exc
            self._check_meta_properties(log_dir)

    def _check_meta_properties(self, log_dir: Path) -> None:
        path = log_dir / META_PROPERTIES
        if path.exists():
            props = {}
            for line in path.read_text().splitlines():
                if "=" in line and not line.lstrip().startswith("#"):
                    key, _, value = line.partition("=")
                    props[key.strip()] = value.strip()
            existing = props.get("broker.id")
            if existing is not None and int(existing) != self.broker_id:
                raise InconsistentBrokerIdError(
                    f"{path} belongs to broker {existing}, not broker {self.broker_id}"
                )
            return
        write_atomically(path, f"version=0\nbroker.id={self.broker_id}\n")

    # ------------------------------------------------------------------ startup

    def load_all(self, now_ms: int, topic_configs: Callable[[str], LogConfig]) -> None:
        """Open every partition dir; recover what was not flushed before a crash. Logs
        are opened by `open_threads` threads side by side (Kafka's recovery threads)."""
        for log_dir in self.log_dirs:
            clean_marker = log_dir / CLEAN_SHUTDOWN_FILE
            clean = clean_marker.exists()
            recovery_points = self._read_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT)
            start_offsets = self._read_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT)
            found: list[tuple[Path, TopicPartition]] = []
            for child in sorted(log_dir.iterdir()):
                if not child.is_dir():
                    continue
                if child.name.endswith(_DELETED_DIR_SUFFIX):
                    shutil.rmtree(child, ignore_errors=True)
                    continue
                tp = parse_partition_dir(child.name)
                if tp is None:
                    continue
                if tp in self._logs:
                    raise StorageError(f"{tp} exists in both {self._dir_of[tp]} and {log_dir}")
                found.append((child, tp))

            def open_one(
                entry: tuple[Path, TopicPartition],
                clean: bool = clean,
                recovery_points: dict[TopicPartition, int] = recovery_points,
                start_offsets: dict[TopicPartition, int] = start_offsets,
            ) -> Log:
                child, tp = entry
                return Log.open(
                    child,
                    tp,
                    topic_configs(tp.topic),
                    recovery_point=recovery_points.get(tp, 0),
                    log_start_offset=start_offsets.get(tp, 0),
                    now_ms=now_ms,
                    clean_shutdown=clean,
                    writer=self.writer,
                )

            for (_child, tp), opened in zip(found, self._map(open_one, found), strict=True):
                if isinstance(opened, BaseException):
                    raise opened
                self._add(tp, opened, log_dir)
            # From here on a crash must not look clean.
            clean_marker.unlink(missing_ok=True)
        logger.info("loaded %d logs (clean shutdown markers honoured)", len(self._logs))
        self.checkpoint_recovery_points()
        self.checkpoint_log_start_offsets()

    def _map(self, fn: Callable[[_T], Log], items: list[_T]) -> list[Log | BaseException]:
        """`fn` over `items`, on `open_threads` threads when there are many; each item's
        Log or the exception it raised, in order."""

        def guarded(item: _T) -> Log | BaseException:
            try:
                return fn(item)
            except Exception as exc:  # noqa: BLE001 - handed back per item
                return exc

        if len(items) < _PARALLEL_OPEN_MIN or self.open_threads == 1:
            return [guarded(item) for item in items]
        with ThreadPoolExecutor(
            min(self.open_threads, len(items)), thread_name_prefix="log-open"
        ) as pool:
            return list(pool.map(guarded, items))

    def _add(self, tp: TopicPartition, log: Log, log_dir: Path) -> None:
        log.on_flushed = self.on_flushed
        log.on_timer_armed = self._schedule
        self._logs[tp] = log
        self._dir_of[tp] = log_dir
        self._dir_counts[log_dir] += 1
        self._schedule(log)

    def scheduled(self) -> dict[TopicPartition, int]:
        """The logs with timed work ahead (segment.ms, flush.ms), and when it is due."""
        return dict(self._due)

    def _schedule(self, log: Log) -> None:
        """Put `log` on the timer at its next due time, or take it off (no timed work)."""
        due = log.next_timer_due_ms()
        if due is None:
            log.timer_armed = False
            self._due.pop(log.tp, None)
            return
        log.timer_armed = True
        if self._due.get(log.tp, due + 1) > due:
            self._due[log.tp] = due
            heapq.heappush(self._timers, (due, log.tp))

    @staticmethod
    def _read_checkpoint(path: Path) -> dict[TopicPartition, int]:
        try:
            return read_offsets(path)
        except (CheckpointFormatError, ValueError) as exc:
            # Kafka fails the dir here; we recover everything instead (slower, not unsafe).
            logger.warning("ignoring malformed checkpoint %s: %s", path, exc)
            return {}

    # ------------------------------------------------------------------ logs

    def get_log(self, tp: TopicPartition) -> Log | None:
        return self._logs.get(tp)

    def all_logs(self) -> dict[TopicPartition, Log]:
        return dict(self._logs)

    def get_or_create_log(self, tp: TopicPartition, config: LogConfig, now_ms: int) -> Log:
        result = self.get_or_create_logs({tp: config}, now_ms)[tp]
        if isinstance(result, StorageError):
            raise result
        return result

    def get_or_create_logs(
        self, wanted: dict[TopicPartition, LogConfig], now_ms: int
    ) -> dict[TopicPartition, Log | StorageError]:
        """The log of every partition in `wanted`, created (in the least loaded dir) if
        missing; new logs are opened side by side on `open_threads` threads. A log that
        could not be created gets its StorageError, the others are unaffected."""
        results: dict[TopicPartition, Log | StorageError] = {}
        missing: list[tuple[TopicPartition, LogConfig, Path]] = []
        planned: dict[Path, int] = dict(self._dir_counts)
        for tp, config in wanted.items():
            log = self._logs.get(tp)
            if log is not None:
                results[tp] = log
                continue
            log_dir = min(self.log_dirs, key=lambda d: planned[d])
            planned[log_dir] += 1
            missing.append((tp, config, log_dir))

        def create(entry: tuple[TopicPartition, LogConfig, Path]) -> Log:
            tp, config, log_dir = entry
            return Log.open(
                log_dir / tp.dir_name,
                tp,
                config,
                recovery_point=0,
                log_start_offset=0,
                now_ms=now_ms,
                writer=self.writer,
            )

        for (tp, _config, log_dir), opened in zip(missing, self._map(create, missing), strict=True):
            if isinstance(opened, StorageError):
                results[tp] = opened
            elif isinstance(opened, BaseException):
                raise opened
            else:
                self._add(tp, opened, log_dir)
                results[tp] = opened
        return results

    def delete_log(self, tp: TopicPartition) -> None:
        log = self._logs.pop(tp, None)
        self._dir_of.pop(tp, None)
        self._due.pop(tp, None)
        if log is not None:
            log.delete()

    def delete_stray_logs(
        self, is_hosted: Callable[[TopicPartition], bool]
    ) -> list[TopicPartition]:
        """Delete the loaded logs of partitions this broker no longer hosts (their topic
        was deleted, or the partition moved away, while the broker was down), so that a
        new topic of the same name starts empty instead of reopening them."""
        stray = [tp for tp in sorted(self._logs) if not is_hosted(tp)]
        for tp in stray:
            self.delete_log(tp)
        if stray:
            self.checkpoint_recovery_points()
            self.checkpoint_log_start_offsets()
        return stray

    # ------------------------------------------------------------------ checkpoints

    def _by_dir(self) -> dict[Path, dict[TopicPartition, Log]]:
        grouped: dict[Path, dict[TopicPartition, Log]] = {d: {} for d in self.log_dirs}
        for tp, log in self._logs.items():
            grouped[self._dir_of[tp]][tp] = log
        return grouped

    def checkpoint_recovery_points(self) -> None:
        for log_dir, logs in self._by_dir().items():
            self._write(
                log_dir / RECOVERY_POINT_CHECKPOINT,
                {tp: log.recovery_point for tp, log in logs.items()},
            )

    def checkpoint_log_start_offsets(self) -> None:
        for log_dir, logs in self._by_dir().items():
            self._write(
                log_dir / LOG_START_OFFSET_CHECKPOINT,
                {tp: log.log_start_offset for tp, log in logs.items()},
            )

    def checkpoint_high_watermarks(self, hws: dict[TopicPartition, int]) -> None:
        for log_dir, logs in self._by_dir().items():
            self._write(
                log_dir / REPLICATION_OFFSET_CHECKPOINT,
                {tp: hw for tp, hw in hws.items() if tp in logs},
            )

    def read_high_watermarks(self) -> dict[TopicPartition, int]:
        hws: dict[TopicPartition, int] = {}
        for log_dir in self.log_dirs:
            hws.update(self._read_checkpoint(log_dir / REPLICATION_OFFSET_CHECKPOINT))
        return hws

    def _write(self, path: Path, offsets: dict[TopicPartition, int]) -> None:
        # Unchanged since the last write (idle partitions): the file already says it.
        if self._written.get(path) == offsets:
            return
        try:
            write_offsets(path, offsets)
        except OSError as exc:
            raise StorageError(f"cannot write {path}: {exc}") from exc
        self._written[path] = offsets

    # ------------------------------------------------------------------ periodic work

    def tick(self, now_ms: int) -> None:
        """flush.ms, segment.ms rolls, retention and checkpoints, each on its own interval.

        Rolls and flushes look only at the logs due by now (a heap of due times kept by
        `_schedule`): idle logs cost nothing here. Retention looks at every log, once per
        log.retention.check.interval.ms, as Kafka's does.
        A log whose directory fails is logged and skipped so the others keep working.
        """
        while self._timers and self._timers[0][0] <= now_ms:
            due, tp = heapq.heappop(self._timers)
            if self._due.get(tp) != due:
                continue  # rescheduled: another entry stands for it
            del self._due[tp]
            log = self._logs.get(tp)
            if log is None:
                continue
            try:
                log.maybe_flush(now_ms)
                log.maybe_roll(now_ms)
            except StorageError as exc:
                logger.error("periodic work on %s failed: %s", tp, exc)
                # Try again at the next tick rather than never.
                self._due[tp] = now_ms + 1
                heapq.heappush(self._timers, (now_ms + 1, tp))
                continue
            self._schedule(log)
        if _due(self._last_retention_ms, self.retention_check_interval_ms, now_ms):
            for tp, log in list(self._logs.items()):
                try:
                    log.apply_retention(now_ms)
                except StorageError as exc:
                    logger.error("retention of %s failed: %s", tp, exc)
            self._last_retention_ms = now_ms
        try:
            if _due(
                self._last_recovery_checkpoint_ms,
                self.recovery_point_checkpoint_interval_ms,
                now_ms,
            ):
                self.checkpoint_recovery_points()
                self._last_recovery_checkpoint_ms = now_ms
            if _due(
                self._last_start_checkpoint_ms, self.start_offset_checkpoint_interval_ms, now_ms
            ):
                self.checkpoint_log_start_offsets()
                self._last_start_checkpoint_ms = now_ms
        except StorageError as exc:
            logger.error("checkpoint failed: %s", exc)

    def shutdown(self) -> None:
        """Flush everything, write the checkpoints, then the clean-shutdown markers."""
        for log in self._logs.values():
            log.flush()
        self.checkpoint_recovery_points()
        self.checkpoint_log_start_offsets()
        for log in self._logs.values():
            log.close()
        for log_dir in self.log_dirs:
            write_atomically(log_dir / CLEAN_SHUTDOWN_FILE, "")


def _due(last_ms: int | None, interval_ms: int, now_ms: int) -> bool:
    return last_ms is None or now_ms - last_ms >= interval_ms
