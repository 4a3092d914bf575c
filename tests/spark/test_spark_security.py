"""The Spark source and sink on a SASL_SSL cluster: `kafka.`-prefixed security options
reach every connection they open (the driver's librdkafka Consumer, the sink's
Producers and the executors' own fetch connections), in librdkafka's or Java's names.

Also, without a cluster: the one SASL login exchange (`security.sasl_login`) against a
fake broker, and the translation of the Java client's keys.
"""

from __future__ import annotations

import asyncio
import datetime
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate.v1.request import SaslAuthenticateRequest
from kio.schema.sasl_authenticate.v1.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse
from kio.static.primitive import i64Timedelta
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from strandline.client.connection import KafkaConnection, SaslError
from strandline.client.fetch_client import FetchError, PartitionClient, RetriableFetchError
from strandline.client.security import (
    ClientSecurity,
    SaslLoginError,
    SaslRequest,
    run_sasl_login,
    sasl_login,
)
from strandline.coordination.zk_client import ZkClient
from strandline.security.certs import create_ca, issue
from strandline.security.scram import (
    SCRAM_MECHANISMS,
    ScramCredential,
    ScramServer,
    make_credential,
)
from strandline.security.scram import SaslAuthenticationError as ServerRefusal
from strandline.server.session import SecurityProtocol
from strandline.spark.options import OptionError, SinkOptions, SourceOptions

from .kafka_helpers import unique_topic

ALICE, ALICE_PASSWORD = "alice", "alice-pw"
MECHANISM = "SCRAM-SHA-512"
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required"
ROWS = 240
PARTITIONS = 3
# A refused login must fail the query, not wait out librdkafka's retries or the
# source's poll timeout (120 s): the driver notices it within one metadata timeout.
REFUSAL_BOUND_S = 45.0


# --- the shared SASL exchange against a fake broker ---------------------------------------


def _sasl(mechanism: str, password: str = ALICE_PASSWORD) -> ClientSecurity:
    return ClientSecurity(
        SecurityProtocol.SASL_PLAINTEXT, sasl_mechanism=mechanism, username=ALICE, password=password
    )


class FakeBroker:
    """Answers SaslHandshake and SaslAuthenticate as a broker with one SCRAM user
    (alice) would; records what it was sent."""

    def __init__(self, mechanism: str, offered: tuple[str, ...] = ("PLAIN", MECHANISM)) -> None:
        credential = make_credential(SCRAM_MECHANISMS[mechanism], ALICE_PASSWORD, iterations=4096)
        self._credentials: dict[str, ScramCredential] = {ALICE: credential}
        self._scram = ScramServer(mechanism, self._credentials.get)
        self._offered = offered
        self.sent: list[SaslRequest] = []
        self.tamper_final = False

    def send(self, request: SaslRequest) -> Any:
        self.sent.append(request)
        if isinstance(request, SaslHandshakeRequest):
            ok = request.mechanism in self._offered
            error = ErrorCode.none if ok else ErrorCode.unsupported_sasl_mechanism
            return SaslHandshakeResponse(error_code=error, mechanisms=self._offered)
        assert isinstance(request, SaslAuthenticateRequest)
        try:
            token = self._scram.evaluate(bytes(request.auth_bytes))
        except ServerRefusal as refusal:
            return self._answer(ErrorCode.sasl_authentication_failed, str(refusal), b"")
        if self.tamper_final and self._scram.complete:
            token = b"v=" + b"A" * 88
        return self._answer(ErrorCode.none, None, token)

    @staticmethod
    def _answer(error: ErrorCode, message: str | None, token: bytes) -> SaslAuthenticateResponse:
        return SaslAuthenticateResponse(
            error_code=error,
            error_message=message,
            auth_bytes=token,
            session_lifetime=i64Timedelta.parse(datetime.timedelta(0)),
        )


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_login_completes_a_scram_exchange(mechanism: str) -> None:
    broker = FakeBroker(mechanism, offered=("SCRAM-SHA-256", "SCRAM-SHA-512"))
    run_sasl_login(_sasl(mechanism), broker.send)
    kinds = [type(r).__name__ for r in broker.sent]
    assert kinds == ["SaslHandshakeRequest", "SaslAuthenticateRequest", "SaslAuthenticateRequest"]
    assert broker.sent[0] == SaslHandshakeRequest(mechanism=mechanism)


def test_sasl_login_plain_sends_one_token() -> None:
    login = sasl_login(_sasl("PLAIN"))
    assert next(login) == SaslHandshakeRequest(mechanism="PLAIN")
    token = login.send(SaslHandshakeResponse(error_code=ErrorCode.none, mechanisms=("PLAIN",)))
    assert token == SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-pw")
    with pytest.raises(StopIteration):
        login.send(FakeBroker._answer(ErrorCode.none, None, b""))


def test_sasl_login_wrong_password_names_sasl_authentication() -> None:
    broker = FakeBroker(MECHANISM)
    with pytest.raises(SaslLoginError, match="SASL authentication as 'alice' with SCRAM-SHA-512"):
        run_sasl_login(_sasl(MECHANISM, password="wrong"), broker.send)
    assert len(broker.sent) == 3  # handshake, client-first, client-final (refused)


def test_sasl_login_refused_mechanism() -> None:
    broker = FakeBroker(MECHANISM, offered=("PLAIN",))
    with pytest.raises(SaslLoginError, match=r"unsupported_sasl_mechanism.*offers \['PLAIN'\]"):
        run_sasl_login(_sasl(MECHANISM), broker.send)


def test_sasl_login_rejects_a_broker_that_cannot_prove_the_credential() -> None:
    broker = FakeBroker(MECHANISM)
    broker.tamper_final = True
    with pytest.raises(SaslLoginError, match="signature does not match"):
        run_sasl_login(_sasl(MECHANISM), broker.send)


# --- Java client keys -> librdkafka's ------------------------------------------------------


def test_java_keys_are_translated_for_librdkafka(tmp_path: Path) -> None:
    ca = create_ca(tmp_path, "test-ca").cert
    java = {
        "kafka.bootstrap.servers": "127.0.0.1:9093",
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": MECHANISM,
        "kafka.sasl.jaas.config": f'{SCRAM_JAAS} username="alice" password="alice-pw";',
        "kafka.ssl.truststore.location": str(ca),
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.endpoint.identification.algorithm": "",
        "kafka.ssl.enabled.protocols": "TLSv1.2,TLSv1.3",
        "topic": "t",
    }
    assert SinkOptions.parse(java).kafka_config == {
        "bootstrap.servers": "127.0.0.1:9093",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": MECHANISM,
        "sasl.username": ALICE,
        "sasl.password": ALICE_PASSWORD,
        "ssl.ca.location": str(ca),
        "ssl.endpoint.identification.algorithm": "none",
    }
    security = ClientSecurity.from_config(SinkOptions.parse(java).kafka_config)
    assert security is not None and security.username == ALICE
    assert security.check_hostname is False


def test_java_pem_key_stores_become_librdkafka_certificate_files(tmp_path: Path) -> None:
    ca = create_ca(tmp_path, "test-ca")
    client = issue(ca, tmp_path, ALICE, [], client=True)
    inline = {
        "kafka.ssl.truststore.certificates": ca.cert.read_text(),
        "kafka.ssl.keystore.certificate.chain": client.cert.read_text(),
        "kafka.ssl.keystore.key": client.key.read_text(),
    }
    files = {
        "kafka.ssl.truststore.location": str(ca.cert),
        "kafka.ssl.keystore.location": str(client.keystore),
        "kafka.ssl.keystore.type": "PEM",
    }
    base = {"kafka.bootstrap.servers": "127.0.0.1:9093", "kafka.security.protocol": "SSL"}
    assert options_config({**base, **inline}) == {
        "bootstrap.servers": "127.0.0.1:9093",
        "security.protocol": "SSL",
        "ssl.ca.pem": ca.cert.read_text(),
        "ssl.certificate.pem": client.cert.read_text(),
        "ssl.key.pem": client.key.read_text(),
    }
    assert options_config({**base, **files}) == {
        "bootstrap.servers": "127.0.0.1:9093",
        "security.protocol": "SSL",
        "ssl.ca.location": str(ca.cert),
        "ssl.certificate.location": str(client.keystore),
        "ssl.key.location": str(client.keystore),
    }


@pytest.mark.parametrize(
    ("extra", "complaint"),
    [
        ({"kafka.ssl.truststore.type": "JKS"}, "only PEM"),
        ({"kafka.sasl.jaas.config": f"{SCRAM_JAAS};"}, "username="),
        ({"kafka.sasl.mechanism": "GSSAPI"}, "GSSAPI is not supported"),
        ({"kafka.sasl.username": ALICE}, "needs sasl.username and sasl.password"),
    ],
)
def test_bad_security_options_fail_on_the_driver(extra: dict[str, str], complaint: str) -> None:
    options = {
        "kafka.bootstrap.servers": "127.0.0.1:9093",
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": MECHANISM,
        "subscribe": "t",
        **extra,
    }
    with pytest.raises(OptionError, match=complaint):
        SourceOptions.parse(options, streaming=False)


# --- a real SASL_SSL cluster ---------------------------------------------------------------


@dataclass
class SecuredTopic:
    bootstrap: str
    ca: str
    topic: str

    def librdkafka_options(self, password: str = ALICE_PASSWORD) -> dict[str, str]:
        """Alice's settings in librdkafka's names."""
        return {
            "kafka.bootstrap.servers": self.bootstrap,
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": MECHANISM,
            "kafka.sasl.username": ALICE,
            "kafka.sasl.password": password,
            "kafka.ssl.ca.location": self.ca,
        }

    def java_options(self, password: str = ALICE_PASSWORD) -> dict[str, str]:
        """Alice's settings as a Spark Kafka connector user writes them."""
        return {
            "kafka.bootstrap.servers": self.bootstrap,
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": MECHANISM,
            "kafka.sasl.jaas.config": f'{SCRAM_JAAS} username="{ALICE}" password="{password}";',
            "kafka.ssl.truststore.location": self.ca,
            "kafka.ssl.truststore.type": "PEM",
        }


def _eventually(what: str, attempt: Callable[[], object], timeout_s: float = 30.0) -> None:
    give_up = time.monotonic() + timeout_s
    while True:
        try:
            attempt()
            return
        except Exception as exc:  # noqa: BLE001 - retried until the deadline
            if time.monotonic() > give_up:
                raise AssertionError(f"{what} within {timeout_s:g}s: {exc}") from exc
            time.sleep(0.2)


@pytest.fixture
def secured(cluster_factory: Any) -> SecuredTopic:
    """A 1-broker SASL_SSL cluster (ACLs on, no access without one), a topic, and alice
    (SCRAM-SHA-512) allowed to Describe, Read and Write it: nothing else."""
    cluster = cluster_factory(brokers=1, security="sasl_ssl")
    with ZkClient(cluster.zk_connect).connect() as zk:
        zk.alter_user_scram_credentials(
            ALICE,
            {MECHANISM: make_credential(SCRAM_MECHANISMS[MECHANISM], ALICE_PASSWORD).format()},
        )
    topic = unique_topic("secured")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, **cluster.client_config})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        future.result(timeout=30)
    grants = [
        AclBinding(
            ResourceType.TOPIC,
            topic,
            ResourcePatternType.LITERAL,
            f"User:{ALICE}",
            "*",
            operation,
            AclPermissionType.ALLOW,
        )
        for operation in (AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE)
    ]
    for future in admin.create_acls(grants, request_timeout=30).values():
        future.result(timeout=30)
    secured = SecuredTopic(cluster.bootstrap, cluster.client_config["ssl.ca.location"], topic)

    def alice_sees_the_topic() -> None:
        # Her credential reaches the broker through a ZooKeeper change notification.
        options = SourceOptions.parse(
            {**secured.librdkafka_options(), "subscribe": topic}, streaming=False
        )
        client = PartitionClient(options.kafka_config, topic, 0, timeout_s=5.0)
        try:
            client.list_offsets()
        finally:
            client.close()

    _eventually("alice logs in and describes the topic", alice_sees_the_topic)
    return secured


def options_config(options: dict[str, str]) -> dict[str, str]:
    """The client settings the source and sink make of `kafka.*` options."""
    return SinkOptions.parse({**options, "topic": "unused"}).kafka_config


def _expected_rows() -> list[tuple[int, bytes, bytes]]:
    return sorted((i % PARTITIONS, f"key-{i}".encode(), f"value-{i}".encode()) for i in range(ROWS))


def test_sink_and_source_read_and_write_a_sasl_ssl_cluster(
    spark: SparkSession, secured: SecuredTopic, tmp_path: Path
) -> None:
    # The sink, with librdkafka's key names.
    df = spark.range(ROWS).select(
        F.concat(F.lit("key-"), F.col("id").cast("string")).alias("key"),
        F.concat(F.lit("value-"), F.col("id").cast("string")).cast("binary").alias("value"),
        (F.col("id") % PARTITIONS).cast("int").alias("partition"),
    )
    df.write.format("strandline").options(**secured.librdkafka_options()).option(
        "topic", secured.topic
    ).mode("append").save()

    # The batch source, with the Java client's key names; executors fetch over TLS+SCRAM.
    rows = (
        spark.read.format("strandline")
        .options(**secured.java_options())
        .option("subscribe", secured.topic)
        .load()
        .select("partition", "offset", "key", "value")
        .collect()
    )
    assert sorted((r.partition, bytes(r.key), bytes(r.value)) for r in rows) == _expected_rows()
    for partition in range(PARTITIONS):
        offsets = sorted(r.offset for r in rows if r.partition == partition)
        assert offsets == list(range(ROWS // PARTITIONS))

    # One streaming micro-batch (Trigger.AvailableNow) reads the same records.
    query = (
        spark.readStream.format("strandline")
        .options(**secured.java_options())
        .option("subscribe", secured.topic)
        .option("startingOffsets", "earliest")
        .load()
        .select("partition", "key", "value")
        .writeStream.format("memory")
        .queryName("secured_stream")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(120)
        assert query.exception() is None
        streamed = spark.sql("SELECT * FROM secured_stream").collect()
    finally:
        query.stop()
    assert sorted((r.partition, bytes(r.key), bytes(r.value)) for r in streamed) == (
        _expected_rows()
    )


def test_a_wrong_password_fails_fast_naming_sasl_authentication(
    spark: SparkSession, secured: SecuredTopic
) -> None:
    # The driver (librdkafka): planning the read.
    started = time.monotonic()
    with pytest.raises(Exception, match="SASL authentication") as raised:
        spark.read.format("strandline").options(**secured.java_options("wrong")).option(
            "subscribe", secured.topic
        ).load().collect()
    took = time.monotonic() - started
    assert took < REFUSAL_BOUND_S, f"the refused read took {took:.1f}s"
    assert "invalid credentials" in str(raised.value)

    # The sink's producers, in the executors.
    started = time.monotonic()
    with pytest.raises(Exception, match="SASL authentication"):
        spark.range(3).select(F.col("id").cast("string").alias("value")).write.format(
            "strandline"
        ).options(**secured.librdkafka_options("wrong")).option("topic", secured.topic).mode(
            "append"
        ).save()
    took = time.monotonic() - started
    assert took < REFUSAL_BOUND_S, f"the refused write took {took:.1f}s"

    # The asyncio client (the tools', the brokers') drives the same exchange.
    host, _, port = secured.bootstrap.rpartition(":")
    wrong = ClientSecurity.from_config(options_config(secured.librdkafka_options("wrong")))
    with pytest.raises(SaslError, match="SASL authentication as 'alice'.*invalid credentials"):
        asyncio.run(KafkaConnection.open(host, int(port), timeout=5.0, security=wrong))

    # The executors' fetch client: refused at once, and not retried.
    options = SourceOptions.parse(
        {**secured.java_options("wrong"), "subscribe": secured.topic}, streaming=False
    )
    client = PartitionClient(options.kafka_config, secured.topic, 0, timeout_s=5.0)
    started = time.monotonic()
    try:
        with pytest.raises(SaslLoginError, match="SASL authentication as 'alice'.*failed"):
            client.fetch(0)
    finally:
        client.close()
    assert time.monotonic() - started < 5.0


def test_an_untrusted_broker_certificate_is_not_retried(
    secured: SecuredTopic, tmp_path: Path
) -> None:
    stranger = create_ca(tmp_path, "another-ca").cert
    options = {**secured.librdkafka_options(), "kafka.ssl.ca.location": str(stranger)}
    client = PartitionClient(options_config(options), secured.topic, 0, timeout_s=5.0)
    try:
        with pytest.raises(
            FetchError, match="TLS handshake .* certificate verify failed"
        ) as raised:
            client.fetch(0)
    finally:
        client.close()
    assert not isinstance(raised.value, RetriableFetchError)
