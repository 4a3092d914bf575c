"""Driver-side questions to the cluster: which partitions, and their offset bounds.

Kafka's ListOffsets "latest" is the high watermark for a read_uncommitted consumer and
the last stable offset (LSO) for a read_committed one (librdkafka sends the consumer's
`isolation.level`), so planned ranges never reach past the HW, nor past the first
transaction still open when read_committed.

On a secured cluster librdkafka reports a refused login only as an error event and
keeps retrying; `LoginWatch` catches that event so a query fails with the reason
(SaslLoginError) instead of a bare timeout. The sink's producer uses it too.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from functools import partial
from typing import TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from strandline.client.security import SaslLoginError
from strandline.spark.options import SourceOptions
from strandline.types import TopicPartition

METADATA_TIMEOUT_S = 10.0
# How long the driver keeps asking while leadership moves (a broker failover
# takes a few seconds: session timeout plus election).
RETRY_DEADLINE_S = 30.0
RETRY_BACKOFF_S = 0.2

T = TypeVar("T")

# librdkafka does not flag every one of these as retriable on the query paths.
_LEADERSHIP_MOVING = frozenset(
    {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_ENOUGH_REPLICAS,
        KafkaError.REPLICA_NOT_AVAILABLE,
        KafkaError.FENCED_LEADER_EPOCH,
        KafkaError.UNKNOWN_LEADER_EPOCH,
        KafkaError._TRANSPORT,
        KafkaError._TIMED_OUT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._DESTROY_BROKER,
    }
)


def _is_transient(error: object) -> bool:
    if not isinstance(error, KafkaError):
        return False
    return error.retriable() or error.code() in _LEADERSHIP_MOVING


class TlsHandshakeError(ConnectionError):
    """librdkafka could not set up TLS with the cluster (e.g. an untrusted certificate)."""


class LoginWatch:
    """A librdkafka `error_cb` remembering the first refused SASL login or untrusted
    broker certificate (other TLS errors, such as a broker closing a connection
    mid-handshake while it restarts, are left to retries). librdkafka delivers these
    events while the client is polled (`poll`, `flush`)."""

    def __init__(self) -> None:
        self.failure: KafkaError | None = None

    def __call__(self, error: KafkaError) -> None:
        if self.failure is not None:
            return
        if error.code() == KafkaError._AUTHENTICATION or (
            error.code() == KafkaError._SSL and "certificate" in error.str()
        ):
            self.failure = error

    def check(self) -> None:
        """Raise the failure seen, if any: retrying cannot fix credentials."""
        if self.failure is None:
            return
        if self.failure.code() == KafkaError._AUTHENTICATION:
            raise SaslLoginError(f"SASL authentication failed: {self.failure.str()}")
        raise TlsHandshakeError(f"TLS handshake failed: {self.failure.str()}")


def retry_transient(
    call: Callable[[], T],
    deadline_s: float = RETRY_DEADLINE_S,
    check: Callable[[], None] | None = None,
) -> T:
    """Repeat `call` while it fails with a retriable Kafka error (NOT_LEADER_OR_FOLLOWER,
    LEADER_NOT_AVAILABLE, ...): a leader that just died must not fail the query.
    `check` runs after each failure and may raise a better reason (a refused login)."""
    give_up = time.monotonic() + deadline_s
    while True:
        try:
            return call()
        except KafkaException as exc:
            if check is not None:
                check()
            error = exc.args[0] if exc.args else None
            if not _is_transient(error) or time.monotonic() >= give_up:
                raise
            time.sleep(RETRY_BACKOFF_S)


def consumer_config(kafka_config: dict[str, str]) -> dict[str, object]:
    """A consumer that never joins a group or commits: Spark's checkpoint owns offsets.
    Its `isolation.level` (from the source option, read_committed by default) decides
    whether "latest" is the HW or the LSO."""
    return {
        "group.id": "strandline-spark",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "isolation.level": "read_committed",
        **kafka_config,
    }


class OffsetReader:
    def __init__(self, options: SourceOptions) -> None:
        self._options = options
        self._consumer: Consumer | None = None
        self._login = LoginWatch()

    @property
    def consumer(self) -> Consumer:
        if self._consumer is None:
            config = consumer_config(self._options.kafka_config)
            config["error_cb"] = self._login
            self._consumer = Consumer(config)
        return self._consumer

    def _check_login(self) -> None:
        if self._consumer is not None:
            self._consumer.poll(0)  # serves error_cb; nothing is assigned, so no records
        self._login.check()

    def _retry(self, call: Callable[[], T]) -> T:
        return retry_transient(call, check=self._check_login)

    def partitions(self) -> list[TopicPartition]:
        """Current partitions of the subscribed topics (new partitions show up here)."""
        metadata = self._retry(lambda: self.consumer.list_topics(timeout=METADATA_TIMEOUT_S))
        found: list[TopicPartition] = []
        for name, topic in metadata.topics.items():
            if topic.error is not None or not self._options.subscribes_to(name):
                continue
            found.extend(TopicPartition(name, p) for p in topic.partitions)
        return sorted(found)

    def watermarks(
        self, partitions: Iterable[TopicPartition]
    ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        """(earliest, latest) offsets: the log start offset and the high watermark (the
        LSO when read_committed)."""
        earliest: dict[TopicPartition, int] = {}
        latest: dict[TopicPartition, int] = {}
        for tp in partitions:
            low, high = self._retry(
                partial(
                    self.consumer.get_watermark_offsets,
                    KafkaTopicPartition(tp.topic, tp.partition),
                    timeout=METADATA_TIMEOUT_S,
                    cached=False,
                )
            )
            earliest[tp], latest[tp] = low, high
        return earliest, latest

    def offsets_for_times(self, wanted: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """First offset whose timestamp is >= the given epoch-ms, per partition."""

        def ask() -> dict[TopicPartition, int]:
            result = self.consumer.offsets_for_times(
                [KafkaTopicPartition(tp.topic, tp.partition, ms) for tp, ms in wanted.items()],
                timeout=METADATA_TIMEOUT_S,
            )
            out: dict[TopicPartition, int] = {}
            for ktp in result:
                if ktp.error is not None:
                    raise KafkaException(ktp.error)
                out[TopicPartition(ktp.topic, ktp.partition)] = ktp.offset
            return out

        return self._retry(ask)

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def __getstate__(self) -> dict[str, object]:
        # A live client never travels with a pickled reader; the new owner reconnects.
        return {"_options": self._options, "_consumer": None, "_login": LoginWatch()}
