"""`cluster up --security ssl | sasl_plaintext`: the admin in client_config can produce
and consume, and a client without the right credentials can not (sasl_ssl is covered
by the deny matrix)."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaError, Producer


def _round_trip(config: dict[str, str], topic: str) -> list[bytes]:
    producer = Producer({**config, "acks": "all", "message.timeout.ms": 15000})
    errors: list[KafkaError] = []
    for i in range(5):
        producer.produce(topic, b"m%d" % i, on_delivery=lambda e, _m: e and errors.append(e))
    assert producer.flush(20) == 0 and not errors, errors
    consumer = Consumer(
        {**config, "group.id": "g", "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    for _ in range(60):
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
        if len(values) == 5:
            break
    consumer.close()
    return values


@pytest.mark.parametrize("mode", ["ssl", "sasl_plaintext"])
def test_admin_round_trip_and_strangers_refused(cluster_factory, mode: str) -> None:
    cluster = cluster_factory(brokers=1, security=mode, auto_create_topics_enable="true")
    assert cluster.client_config["security.protocol"] == mode.upper()
    admin = {"bootstrap.servers": cluster.bootstrap, **cluster.client_config}
    assert _round_trip(admin, "modes") == [b"m%d" % i for i in range(5)]

    # Without the admin's certificate (ssl) or with a wrong password (sasl): refused.
    stranger = dict(admin)
    if mode == "ssl":
        stranger.pop("ssl.certificate.location")
        stranger.pop("ssl.key.location")
    else:
        stranger["sasl.password"] = "wrong"
    failures: list[KafkaError] = []
    producer = Producer({**stranger, "message.timeout.ms": 4000, "error_cb": failures.append})
    delivered: list[object] = []
    producer.produce("modes", b"x", on_delivery=lambda e, m: delivered.append(e or m.offset()))
    producer.flush(8)
    assert delivered and isinstance(delivered[0], KafkaError), delivered
    if mode == "sasl_plaintext":
        assert any(f.code() == KafkaError._AUTHENTICATION for f in failures), failures
