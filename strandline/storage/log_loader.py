"""Opening a partition dir (Kafka's LogLoader): what is on disk becomes the segments.

`clean_directory` removes what an interrupted write, rename or delete left behind and
the indexes of segments that are gone; `recover_segments` CRC-checks the segments after
the recovery point and cuts the log at the first torn or corrupt batch; `read_topic_id`
reads `partition.metadata` (KIP-516). `Log._load` puts them together with the
leader-epoch checkpoint (`leader_epoch_checkpoint`) and the producer state
(`log_producer_state`).
"""

from __future__ import annotations

import logging
import os
import re
import uuid
from pathlib import Path

from strandline.storage.checkpoint import (
    LEADER_EPOCH_CHECKPOINT,
    PARTITION_METADATA,
    CheckpointFormatError,
    parse_partition_metadata,
)
from strandline.storage.segment import LogSegment
from strandline.types import TopicPartition

# The Log's logger: these messages are about one partition's log, as before the split.
logger = logging.getLogger("strandline.storage.log")

SEGMENT_FILE = re.compile(r"^(\d{20})\.(log|index|timeindex|txnindex)$")
# Leftovers of an interrupted write, rename or delete: never part of the log.
STALE_SUFFIXES = (".tmp", ".deleted", ".cleaned", ".swap")


def clean_directory(directory: Path, tp: TopicPartition) -> list[int]:
    """Remove leftovers and orphan indexes; return the base offsets of `.log` files."""
    names = os.listdir(directory)
    bases = set()
    for name in names:
        match = SEGMENT_FILE.match(name)
        if match and match.group(2) == "log":
            bases.add(int(match.group(1)))
    for name in names:
        path = directory / name
        match = SEGMENT_FILE.match(name)
        stale = name.endswith(STALE_SUFFIXES) and not name.startswith(LEADER_EPOCH_CHECKPOINT)
        orphan = match is not None and int(match.group(1)) not in bases
        if stale or orphan or name == LEADER_EPOCH_CHECKPOINT + ".tmp":
            logger.info("removing stale file", extra={"tp": str(tp), "file": name})
            path.unlink(missing_ok=True)
    return sorted(bases)


def read_topic_id(directory: Path, tp: TopicPartition) -> uuid.UUID | None:
    """The topic id `partition.metadata` names; None if there is none or it is unreadable."""
    path = directory / PARTITION_METADATA
    try:
        return parse_partition_metadata(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (CheckpointFormatError, UnicodeDecodeError) as exc:
        # Kept, not deleted: the next LeaderAndIsr names the id and rewrites it.
        logger.warning("ignoring unreadable %s of %s: %s", PARTITION_METADATA, tp, exc)
        return None


def recover_segments(
    segments: list[LogSegment], start: int, tp: TopicPartition, *, dense: bool
) -> bool:
    """CRC-check segments[start:]; cut at the first bad batch and drop what follows
    (from `segments`, in place). False when there was nothing to recover."""
    if start >= len(segments):
        return False
    for i in range(start, len(segments)):
        segment = segments[i]
        result = segment.recover(verify_crc=True, dense=dense)
        if result.truncated_bytes:
            dropped = segments[i + 1 :]
            logger.warning(
                "log recovery cut a torn or corrupt tail: tp=%s segment=%d position=%d "
                "truncated_bytes=%d dropped_segments=%s reason=%s",
                tp,
                segment.base_offset,
                segment.size,
                result.truncated_bytes,
                [s.base_offset for s in dropped],
                result.reason,
                extra={
                    "tp": str(tp),
                    "segment": segment.base_offset,
                    "position": segment.size,
                    "truncated_bytes": result.truncated_bytes,
                    "dropped_segments": [s.base_offset for s in dropped],
                    "reason": result.reason,
                },
            )
            for later in dropped:
                later.delete()
            del segments[i + 1 :]
            break
    # A recovered segment that ended up empty is useless unless it is the last one.
    while (
        len(segments) > 1
        and segments[-1].is_empty
        and (segments[-2].next_offset > segments[-1].base_offset)
    ):
        segments.pop().delete()
    return True
