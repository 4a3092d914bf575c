"""A log's `leader-epoch-checkpoint` file (Kafka's LeaderEpochCheckpointFile), and the
cache it is loaded into.

Appends replace the file without fsync (KAFKA-15046: the fsync on every follower's first
append of an epoch held up its fetches) and mark it `unsynced`; the Log's flush, roll and
close `sync` it before the recovery point moves past its entries. Every other change is
written durably (`write`). `load_leader_epoch_cache` makes up for what a crash may have
lost, from the batches themselves.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path

from strandline.protocol.record_batch import BatchHeader
from strandline.storage.atomic_file import create_unsynced, replace_unsynced, write_atomically
from strandline.storage.checkpoint import LEADER_EPOCH_CHECKPOINT
from strandline.storage.leader_epoch_cache import (
    EpochEntry,
    LeaderEpochCache,
    parse_checkpoint,
    render_checkpoint,
)
from strandline.types import TopicPartition

# The Log's logger: these messages are about one partition's log, as before the split.
logger = logging.getLogger("strandline.storage.log")


class LeaderEpochCheckpointFile:
    __slots__ = ("path", "unsynced")

    def __init__(self, directory: Path) -> None:
        self.path = directory / LEADER_EPOCH_CHECKPOINT
        # The file holds entries not yet fsynced (written by an append).
        self.unsynced = False

    def write(self, cache: LeaderEpochCache) -> None:
        write_atomically(self.path, render_checkpoint(cache.entries))
        self.unsynced = False

    def replace_unsynced(self, cache: LeaderEpochCache) -> None:
        replace_unsynced(self.path, render_checkpoint(cache.entries))
        self.unsynced = True

    def sync(self, cache: LeaderEpochCache) -> None:
        """Make the entries an append wrote durable (`cache` is what the file holds)."""
        if self.unsynced:
            self.write(cache)


def load_leader_epoch_cache(
    file: LeaderEpochCheckpointFile,
    headers_from: Callable[[int], Iterable[BatchHeader]],
    log_start_offset: int,
    log_end_offset: int,
    rebuild_from: int | None,
    tp: TopicPartition,
) -> LeaderEpochCache:
    """Read the leader-epoch checkpoint and complete it from the log itself.

    Appends write the checkpoint without fsync (KAFKA-15046: the fsync on every
    follower's first append of an epoch held up its fetches); `flush` makes it
    durable before the recovery point moves past its entries. So after an unclean
    shutdown the file may miss the epochs of batches at or past the recovery point
    (`rebuild_from`): every batch carries its partition leader epoch, and those
    epochs are assigned again from the batches (`headers_from(offset)`). An unreadable
    or missing file of a log that has data is rebuilt from every batch. The file is
    rewritten when the cache differs from it."""
    path = file.path
    entries: list[EpochEntry] = []
    missing = False
    trusted = True
    try:
        entries = parse_checkpoint(path.read_text())
    except FileNotFoundError:
        missing = True
        trusted = False
    except ValueError as exc:
        logger.warning("ignoring unreadable leader-epoch-checkpoint of %s: %s", tp, exc)
        trusted = False
    cache = LeaderEpochCache(entries)
    before = cache.entries
    if not trusted:
        rebuild_from = log_start_offset
    if rebuild_from is not None and rebuild_from < log_end_offset:
        for header in headers_from(max(rebuild_from, log_start_offset)):
            if header.partition_leader_epoch >= 0:
                cache.assign(header.partition_leader_epoch, header.base_offset)
    cache.truncate_from_end(log_end_offset)
    cache.truncate_from_start(log_start_offset)
    if missing and not cache.entries:
        # A new log: Kafka creates the file empty, unsynced: "no entries" needs no
        # fsync, since a torn or missing copy of it reads back as no entries too.
        # Two fsyncs per new partition were most of a large topic's creation time.
        create_unsynced(path, render_checkpoint(cache.entries))
    elif cache.entries != before or not trusted:
        file.write(cache)
    return cache
