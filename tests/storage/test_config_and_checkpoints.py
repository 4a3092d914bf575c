from __future__ import annotations

import pytest

from strandline.errors import InvalidConfigError
from strandline.storage.checkpoint import (
    CheckpointFormatError,
    parse_offsets,
    read_offsets,
    render_offsets,
    write_offsets,
)
from strandline.storage.config import TOPIC_CONFIG_KEYS, LogConfig, config_source
from strandline.types import TopicPartition


def test_defaults_are_kafkas() -> None:
    props = LogConfig().to_props()
    assert props["segment.bytes"] == "1073741824"
    assert props["retention.ms"] == "604800000"
    assert props["max.message.bytes"] == "1048588"
    assert props["message.timestamp.type"] == "CreateTime"
    assert props["unclean.leader.election.enable"] == "false"
    assert set(props) == {k.name for k in TOPIC_CONFIG_KEYS}


def test_topic_overrides_apply_on_top_of_the_broker_default() -> None:
    broker = LogConfig.from_broker_props({"log.segment.bytes": "4096", "log.retention.hours": "1"})
    assert broker.segment_bytes == 4096
    assert broker.retention_ms == 3_600_000
    topic = LogConfig.from_props({"retention.ms": "-1", "cleanup.policy": "compact"}, broker)
    assert topic.retention_ms == -1
    assert topic.segment_bytes == 4096
    assert not topic.delete_enabled


def test_broker_retention_keys_follow_kafkas_priority() -> None:
    props = {"log.retention.hours": "5", "log.retention.minutes": "3", "log.retention.ms": "7"}
    assert LogConfig.from_broker_props(props).retention_ms == 7
    del props["log.retention.ms"]
    assert LogConfig.from_broker_props(props).retention_ms == 180_000
    assert LogConfig.from_broker_props({"log.retention.hours": "-1"}).retention_ms == -1
    assert LogConfig.from_broker_props({"log.roll.hours": "2"}).segment_ms == 7_200_000
    assert LogConfig.from_broker_props({"message.max.bytes": "99"}).max_message_bytes == 99
    msgs = LogConfig.from_broker_props({"log.flush.interval.messages": "1"})
    assert msgs.flush_messages == 1


@pytest.mark.parametrize(
    "props",
    [
        {"retention.ms": "soon"},
        {"segment.bytes": "1"},
        {"message.timestamp.type": "WallClock"},
        {"unclean.leader.election.enable": "maybe"},
        {"no.such.config": "1"},
    ],
)
def test_invalid_topic_configs_are_rejected(props: dict[str, str]) -> None:
    with pytest.raises(InvalidConfigError):
        LogConfig.from_props(props)


def test_unknown_keys_are_tolerated_when_not_strict() -> None:
    assert LogConfig.from_props({"no.such.config": "1"}, strict=False) == LogConfig()


def test_config_source() -> None:
    assert config_source("retention.ms", {"retention.ms": "1"}, {}) == (
        "TOPIC_CONFIG",
        "retention.ms",
    )
    assert config_source("retention.ms", {}, {"log.retention.hours": "1"}) == (
        "STATIC_BROKER_CONFIG",
        "log.retention.hours",
    )
    assert config_source("retention.ms", {}, {}) == ("DEFAULT_CONFIG", None)


def test_offset_checkpoint_is_kafkas_text_format(tmp_path) -> None:  # type: ignore[no-untyped-def]
    offsets = {TopicPartition("b-topic", 1): 42, TopicPartition("a", 0): 7}
    assert render_offsets(offsets) == "0\n2\na 0 7\nb-topic 1 42\n"
    path = tmp_path / "recovery-point-offset-checkpoint"
    write_offsets(path, offsets)
    assert read_offsets(path) == offsets
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no tmp left behind
    assert read_offsets(tmp_path / "absent") == {}


@pytest.mark.parametrize("text", ["", "1\n0\n", "0\n2\na 0 1\n", "0\n1\na 0\n"])
def test_malformed_checkpoint_is_rejected(text: str) -> None:
    with pytest.raises(CheckpointFormatError):
        parse_offsets(text)
