"""The one config table (strandline.config_catalog) against Kafka's source.

kafka_configs.json is an extract of the config definitions of apache/kafka at tag 3.8.0
(commit 771b9576b00ecf5b64ab6e8bedf04156fbdb5cd6): LogConfig.java (topics),
KafkaConfig.scala and RemoteLogManagerConfig.java (brokers), made by
extract_kafka_configs.py beside it. A default the extract could not evaluate (Kafka
computes it at run time) is between braces and not compared.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from strandline.config_catalog import (
    BROKER_CONFIGS,
    HONOURED_BROKER,
    TOPIC_CONFIGS,
    TOPIC_NO_EFFECT,
    validate,
)
from strandline.server.broker_configs import BROKER_KEYS_BY_NAME, no_effect_reason
from strandline.storage.config import KEYS_BY_NAME, LogConfig, render_value

EXTRACT = json.loads(Path(__file__).with_name("kafka_configs.json").read_text())
KAFKA = {(row["scope"], row["name"]): row for row in EXTRACT["configs"]}

# Broker defaults Strandline applies differently from Kafka, and why.
OUR_BROKER_DEFAULTS_DIFFER = {
    "listeners": "bind to loopback, not every interface, when unset",
    "log.dir": "/tmp/strandline-logs, not /tmp/kafka-logs",
    "broker.id": "0 when unset, not -1: ZooKeeper-generated broker ids are not offered",
}


# Kafka's dynamic-only broker configs (DynamicConfig.Broker, QuotaConfigs): not in
# KafkaConfig's ConfigDef, so not in the extract; ours take effect.
DYNAMIC_ONLY = {"leader.replication.throttled.rate", "follower.replication.throttled.rate"}


def _catalog(scope: str) -> dict[str, Any]:
    return TOPIC_CONFIGS if scope == "topic" else BROKER_CONFIGS


def test_the_extract_is_of_kafka_3_8() -> None:
    assert EXTRACT["tag"] == "3.8.0"
    assert len([k for k in KAFKA if k[0] == "topic"]) == 34
    assert len([k for k in KAFKA if k[0] == "broker"]) >= 250


@pytest.mark.parametrize("scope", ["topic", "broker"])
def test_every_kafka_config_is_in_the_table_with_its_type_and_default(scope: str) -> None:
    table = _catalog(scope)
    kafka = {name: row for (s, name), row in KAFKA.items() if s == scope}
    assert set(table) == set(kafka), set(table) ^ set(kafka)
    for name, row in kafka.items():
        ours = table[name]
        assert ours.type == row["type"], name
        default = row["default"]
        if default is None or not default.startswith("{"):
            assert ours.default == default, (name, ours.default, default)
        if row["valid"] is not None:
            expected = tuple(tuple(v) if isinstance(v, list) else v for v in row["valid"])
            assert ours.valid == expected, name
        if not row["doc"].startswith("{") and row["doc"]:
            assert ours.doc == row["doc"], name


def test_topic_configs_either_take_effect_or_say_why_not() -> None:
    assert set(KEYS_BY_NAME) <= set(TOPIC_CONFIGS)
    assert set(TOPIC_NO_EFFECT) <= set(TOPIC_CONFIGS)
    assert not set(KEYS_BY_NAME) & set(TOPIC_NO_EFFECT)
    assert set(KEYS_BY_NAME) | set(TOPIC_NO_EFFECT) == set(TOPIC_CONFIGS)
    # LogConfig's defaults are Kafka's.
    ours = LogConfig().to_props()
    for name in KEYS_BY_NAME:
        assert ours[name] == TOPIC_CONFIGS[name].default, name


def test_broker_configs_we_read_have_kafkas_defaults() -> None:
    for name, key in BROKER_KEYS_BY_NAME.items():
        if name in DYNAMIC_ONLY:
            continue
        definition = BROKER_CONFIGS.get(name)
        assert definition is not None, f"{name} is not a Kafka broker config"
        if name in OUR_BROKER_DEFAULTS_DIFFER or key.default is None:
            continue
        kafka_default = definition.default
        if definition.type == "DOUBLE" and kafka_default is not None:
            assert float(key.default) == float(kafka_default), name
        else:
            assert key.default == kafka_default, (name, key.default, kafka_default)
    assert set(HONOURED_BROKER) <= set(BROKER_CONFIGS)
    assert no_effect_reason("log.retention.hours") is None
    assert no_effect_reason(
        "sasl.kerberos.min.time.before.relogin",
    ).startswith("Kerberos")
    assert no_effect_reason("num.io.threads") is not None


def test_validation_follows_kafkas_validators() -> None:
    validate(TOPIC_CONFIGS["compression.zstd.level"], "5")
    with pytest.raises(ValueError, match="not between"):
        validate(TOPIC_CONFIGS["compression.zstd.level"], "23")
    with pytest.raises(ValueError, match="below the minimum"):
        validate(TOPIC_CONFIGS["max.compaction.lag.ms"], "0")
    with pytest.raises(ValueError, match="true or false"):
        validate(TOPIC_CONFIGS["preallocate"], "yes")
    with pytest.raises(ValueError, match="not one of"):
        validate(TOPIC_CONFIGS["compression.type"], "brotli")
    validate(BROKER_CONFIGS["sasl.kerberos.min.time.before.relogin"], "60000")
    with pytest.raises(ValueError, match="integer"):
        validate(BROKER_CONFIGS["sasl.kerberos.min.time.before.relogin"], "soon")
    assert render_value(True) == "true"


def test_docs_list_the_configs_with_no_effect() -> None:
    from tests.server.make_configs_doc import DOC, render

    assert DOC.read_text() == render(), "run tests/server/make_configs_doc.py"
