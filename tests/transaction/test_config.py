"""The coordinator's broker keys, as Kafka spells them."""

from __future__ import annotations

import pytest

from strandline.server.txn_service import txn_config_from_props
from strandline.transaction.model import TxnConfig


def test_defaults_are_kafkas() -> None:
    config = txn_config_from_props({})
    assert config == TxnConfig()
    assert (config.num_partitions, config.replication_factor, config.min_isr) == (50, 3, 2)
    assert config.max_timeout_ms == 900_000
    assert config.abort_timed_out_interval_ms == 10_000


def test_keys_override_and_bad_values_fail() -> None:
    config = txn_config_from_props(
        {
            "transaction.state.log.num.partitions": "4",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.max.timeout.ms": "30000",
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
            "transactional.id.expiration.ms": "1000",
        }
    )
    assert (config.num_partitions, config.replication_factor, config.min_isr) == (4, 1, 1)
    assert (config.max_timeout_ms, config.abort_timed_out_interval_ms) == (30_000, 200)
    assert config.transactional_id_expiration_ms == 1000
    with pytest.raises(ValueError):
        txn_config_from_props({"transaction.state.log.num.partitions": "0"})
    with pytest.raises(ValueError):
        txn_config_from_props({"transaction.max.timeout.ms": "soon"})
