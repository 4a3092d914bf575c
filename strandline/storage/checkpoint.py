"""Kafka's checkpoint files, written atomically (`atomic_file.write_atomically`).

Offset checkpoints (`recovery-point-offset-checkpoint`, `replication-offset-checkpoint`,
`log-start-offset-checkpoint`) hold a version line `0`, a count line, then one
`topic partition offset` line per partition.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

from strandline.storage.atomic_file import write_atomically
from strandline.topic_ids import ZERO_TOPIC_ID, topic_id_from_str, topic_id_to_str
from strandline.types import TopicPartition

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
# KIP-516: the topic id of the partition whose dir this is (PartitionMetadataFile).
PARTITION_METADATA = "partition.metadata"
CHECKPOINT_VERSION = 0
PARTITION_METADATA_VERSION = 0


class CheckpointFormatError(ValueError):
    pass


def render_offsets(offsets: dict[TopicPartition, int]) -> str:
    lines = [str(CHECKPOINT_VERSION), str(len(offsets))]
    for tp in sorted(offsets):
        lines.append(f"{tp.topic} {tp.partition} {offsets[tp]}")
    return "\n".join(lines) + "\n"


def parse_offsets(text: str) -> dict[TopicPartition, int]:
    lines = text.splitlines()
    if len(lines) < 2:
        raise CheckpointFormatError("checkpoint lacks the version and count lines")
    if lines[0].strip() != str(CHECKPOINT_VERSION):
        raise CheckpointFormatError(f"unknown checkpoint version {lines[0]!r}")
    try:
        expected = int(lines[1])
    except ValueError as exc:
        raise CheckpointFormatError(f"bad count line {lines[1]!r}") from exc
    entries = [line for line in lines[2:] if line.strip()]
    if len(entries) != expected:
        raise CheckpointFormatError(f"expected {expected} entries, found {len(entries)}")
    offsets: dict[TopicPartition, int] = {}
    for line in entries:
        parts = line.split()
        if len(parts) != 3:
            raise CheckpointFormatError(f"malformed checkpoint line {line!r}")
        topic, partition, offset = parts
        offsets[TopicPartition(topic, int(partition))] = int(offset)
    return offsets


def write_offsets(path: Path, offsets: dict[TopicPartition, int]) -> None:
    write_atomically(path, render_offsets(offsets))


def read_offsets(path: Path) -> dict[TopicPartition, int]:
    """The checkpoint's offsets; an absent file is an empty checkpoint."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    return parse_offsets(text)


def render_partition_metadata(topic_id: uuid.UUID) -> str:
    """As Kafka's PartitionMetadata.encode: two lines, no trailing newline."""
    return f"version: {PARTITION_METADATA_VERSION}\ntopic_id: {topic_id_to_str(topic_id)}"


_WHITESPACE = re.compile(r"\s+")


def parse_partition_metadata(text: str) -> uuid.UUID:
    """The topic id a `partition.metadata` holds (Kafka's PartitionMetadataReadBuffer:
    a version >= 0 then a non-zero id); CheckpointFormatError naming the bad line."""
    lines = text.splitlines()
    if len(lines) < 2:
        raise CheckpointFormatError(f"partition.metadata has {len(lines)} line(s), not 2")
    version_line = _WHITESPACE.split(lines[0].strip())
    if len(version_line) != 2 or version_line[0] != "version:":
        raise CheckpointFormatError(f"malformed line in partition.metadata: {lines[0]!r}")
    try:
        version = int(version_line[1])
    except ValueError:
        raise CheckpointFormatError(f"malformed line in partition.metadata: {lines[0]!r}") from None
    if version < PARTITION_METADATA_VERSION:
        raise CheckpointFormatError(f"unrecognized partition.metadata version {version}")
    id_line = _WHITESPACE.split(lines[1].strip())
    if len(id_line) != 2 or id_line[0] != "topic_id:":
        raise CheckpointFormatError(f"malformed line in partition.metadata: {lines[1]!r}")
    try:
        topic_id = topic_id_from_str(id_line[1])
    except ValueError as e:
        raise CheckpointFormatError(f"partition.metadata: {e}") from None
    if topic_id == ZERO_TOPIC_ID:
        raise CheckpointFormatError("partition.metadata holds the zero topic id")
    return topic_id
