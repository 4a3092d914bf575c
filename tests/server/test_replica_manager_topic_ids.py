"""KIP-516 on the broker: each partition dir records its topic id in
`partition.metadata`, and a dir of another id (a stale replica of a deleted topic of
the same name) is answered INCONSISTENT_TOPIC_ID, deleted, and replaced by a fresh log."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from strandline.errors import InconsistentTopicIdError
from strandline.protocol.controller_requests import PartitionState
from strandline.server.replica_manager import ReplicaManager
from strandline.state_change_log import StateChangeLog
from strandline.storage.checkpoint import (
    PARTITION_METADATA,
    CheckpointFormatError,
    parse_partition_metadata,
    render_partition_metadata,
)
from strandline.storage.config import LogConfig
from strandline.storage.log_manager import LogManager
from strandline.topic_ids import random_topic_id, topic_id_to_str
from strandline.types import TopicPartition
from tests.storage.batches import build_batch

NOW = 1_700_000_000_000
TP = TopicPartition("t", 0)


def replica_manager(log_dir: Path) -> ReplicaManager:
    logs = LogManager([log_dir], LogConfig(), 1)
    logs.load_all(NOW, lambda _t: LogConfig())
    return ReplicaManager(1, logs, lambda _t: LogConfig(), StateChangeLog(None, 1), 10_000)


def leader_state(leader_epoch: int = 0) -> PartitionState:
    return PartitionState(TP, 1, 1, leader_epoch, (1,), 0, (1,))


def metadata_file(log_dir: Path) -> Path:
    return log_dir / TP.dir_name / PARTITION_METADATA


def test_partition_metadata_has_kafkas_format() -> None:
    topic_id = uuid.UUID("6cdbc079-f907-4423-bc59-b85832a6e0aa")
    text = render_partition_metadata(topic_id)
    # PartitionMetadata.encode: "version: 0\ntopic_id: <Uuid.toString()>", no newline.
    assert text == "version: 0\ntopic_id: bNvAefkHRCO8WbhYMqbgqg"
    assert parse_partition_metadata(text) == topic_id
    assert parse_partition_metadata(text + "\n") == topic_id
    for bad in (
        "",
        "version: 0",
        "version: x\ntopic_id: bNvAefkHRCO8WbhYMqbgqg",
        "version: -1\ntopic_id: bNvAefkHRCO8WbhYMqbgqg",
        "version: 0\ntopic_id: nope",
        "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA",  # the zero UUID
    ):
        with pytest.raises(CheckpointFormatError):
            parse_partition_metadata(bad)


def test_leader_and_isr_writes_partition_metadata_which_survives_a_restart(
    tmp_path: Path,
) -> None:
    log_dir = tmp_path / "logs"
    topic_id = random_topic_id()
    rm = replica_manager(log_dir)
    results = rm.become_leader_or_follower(1, [leader_state()], (), NOW, {"t": topic_id})
    assert results == {TP: ErrorCode.none}
    assert metadata_file(log_dir).read_text() == (
        f"version: 0\ntopic_id: {topic_id_to_str(topic_id)}"
    )
    rm.append_as_leader(TP, build_batch([b"kept"]), acks=1, now_ms=NOW)
    rm.log_manager.shutdown()

    again = replica_manager(log_dir)
    log = again.log_manager.get_log(TP)
    assert log is not None and log.topic_id == topic_id
    results = again.become_leader_or_follower(1, [leader_state(1)], (), NOW, {"t": topic_id})
    assert results == {TP: ErrorCode.none}
    assert again.partitions[TP].log.log_end_offset == 1  # same id: the dir is reused


def test_a_dir_of_another_topic_id_is_refused_deleted_and_recreated_empty(
    tmp_path: Path,
) -> None:
    log_dir = tmp_path / "logs"
    old_id, new_id = random_topic_id(), random_topic_id()
    rm = replica_manager(log_dir)
    rm.become_leader_or_follower(1, [leader_state()], (), NOW, {"t": old_id})
    rm.append_as_leader(TP, build_batch([b"old-record"]), acks=1, now_ms=NOW)
    rm.log_manager.shutdown()

    # The broker comes back holding the old topic's dir; the controller now names the
    # topic by its new id (deleted and created again meanwhile).
    rm = replica_manager(log_dir)
    results = rm.become_leader_or_follower(1, [leader_state()], (), NOW, {"t": new_id})

    assert results == {TP: ErrorCode.inconsistent_topic_id}
    assert TP not in rm.partitions
    assert not (log_dir / TP.dir_name).exists()  # renamed to -delete, then removed
    assert TP in rm.unopened

    rm.retry_unopened(NOW)
    hosted = rm.partitions[TP]
    assert hosted.is_leader(1)
    assert hosted.log.log_end_offset == 0 and hosted.log.topic_id == new_id
    assert parse_partition_metadata(metadata_file(log_dir).read_text()) == new_id
    segments = b"".join(f.read_bytes() for f in (log_dir / TP.dir_name).glob("*.log"))
    assert b"old-record" not in segments


def test_a_hosted_partition_of_another_topic_id_is_stopped_and_replaced(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    old_id, new_id = random_topic_id(), random_topic_id()
    rm = replica_manager(log_dir)
    rm.become_leader_or_follower(1, [leader_state(4)], (), NOW, {"t": old_id})
    rm.append_as_leader(TP, build_batch([b"old-record"]), acks=1, now_ms=NOW)

    # A lower leader epoch than the old topic's: the new topic starts at 0.
    results = rm.become_leader_or_follower(1, [leader_state(0)], (), NOW, {"t": new_id})
    assert results == {TP: ErrorCode.inconsistent_topic_id}
    assert TP not in rm.partitions
    rm.retry_unopened(NOW)
    assert rm.partitions[TP].log.topic_id == new_id
    assert rm.partitions[TP].log.log_end_offset == 0


def test_a_dir_without_partition_metadata_adopts_the_id(tmp_path: Path) -> None:
    """A dir from before topic ids (no file) is the topic's: Kafka records the id."""
    log_dir = tmp_path / "logs"
    rm = replica_manager(log_dir)
    rm.become_leader_or_follower(1, [leader_state()], (), NOW)  # no ids (v4 request)
    rm.append_as_leader(TP, build_batch([b"kept"]), acks=1, now_ms=NOW)
    assert not metadata_file(log_dir).exists()
    topic_id = random_topic_id()
    results = rm.become_leader_or_follower(1, [leader_state(1)], (), NOW, {"t": topic_id})
    assert results == {TP: ErrorCode.none}
    assert rm.partitions[TP].log.log_end_offset == 1
    assert parse_partition_metadata(metadata_file(log_dir).read_text()) == topic_id
    with pytest.raises(InconsistentTopicIdError):
        rm.partitions[TP].log.assign_topic_id(random_topic_id())


def test_an_unreadable_partition_metadata_is_kept_and_rewritten(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    rm = replica_manager(log_dir)
    topic_id = random_topic_id()
    rm.become_leader_or_follower(1, [leader_state()], (), NOW, {"t": topic_id})
    rm.log_manager.shutdown()
    metadata_file(log_dir).write_text("garbage")
    rm = replica_manager(log_dir)
    log = rm.log_manager.get_log(TP)
    assert log is not None and log.topic_id is None
    results = rm.become_leader_or_follower(1, [leader_state(1)], (), NOW, {"t": topic_id})
    assert results == {TP: ErrorCode.none}
    assert parse_partition_metadata(metadata_file(log_dir).read_text()) == topic_id
