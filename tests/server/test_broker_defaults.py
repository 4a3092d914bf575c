"""A broker config's default lives in one place: Kafka's (the config catalog) unless
`STRANDLINE_DEFAULTS` says otherwise; BrokerConfig applies it and DescribeConfigs reports it."""

from __future__ import annotations

import dataclasses

import pytest

from strandline.config_catalog import BROKER_CONFIGS
from strandline.server.broker_configs import BROKER_KEYS, BROKER_KEYS_BY_NAME
from strandline.server.config import STRANDLINE_DEFAULTS, BrokerConfig, broker_default

PARSED = BrokerConfig.from_props({"zookeeper.connect": "127.0.0.1:2181"})
FIELDS = {f.name for f in dataclasses.fields(BrokerConfig)}


def test_ours_differ_from_kafkas_only_where_listed() -> None:
    for key, value in STRANDLINE_DEFAULTS.items():
        kafka = BROKER_CONFIGS.get(key)
        assert kafka is None or kafka.default != value, f"{key}: the same as Kafka's, drop it"


# The scalar settings BrokerConfig parses under Kafka's name. Not
# log.flush.scheduler.interval.ms: Kafka's flush.ms falls back to it (LONG_MAX, never),
# while our flush scheduler looks every 1000 ms unless it is set.
SCALAR_KEYS = [
    k.name
    for k in BROKER_KEYS
    if k.name.replace(".", "_") in FIELDS
    and isinstance(getattr(PARSED, k.name.replace(".", "_")), int | str)
    and k.name not in ("zookeeper.connect", "log.flush.scheduler.interval.ms")
]


def test_the_scalar_keys_are_found() -> None:
    assert {"broker.id", "num.partitions", "min.insync.replicas"} <= set(SCALAR_KEYS)


@pytest.mark.parametrize("key", SCALAR_KEYS)
def test_broker_config_applies_the_default_describe_configs_reports(key: str) -> None:
    parsed = getattr(PARSED, key.replace(".", "_"))
    described = BROKER_KEYS_BY_NAME[key].default
    assert described == broker_default(key)
    if isinstance(parsed, bool):
        assert described == str(parsed).lower()
    else:
        assert described == str(parsed), f"{key}: parsed {parsed!r}, described {described!r}"


def test_a_required_key_without_default_is_named() -> None:
    with pytest.raises(Exception, match="zookeeper.connect"):
        BrokerConfig.from_props({})
