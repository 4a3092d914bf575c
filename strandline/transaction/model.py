"""What goes in and out of the pure transaction coordinator: its settings, the effects it
asks of the shell, and the answers to requests."""

from __future__ import annotations

from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from strandline.types import TopicPartition

Token = int


@dataclass(frozen=True)
class TxnConfig:
    """Kafka's broker keys (transaction.state.log.*, transaction.*), Kafka's defaults."""

    num_partitions: int = 50  # transaction.state.log.num.partitions
    replication_factor: int = 3  # transaction.state.log.replication.factor
    min_isr: int = 2  # transaction.state.log.min.isr
    segment_bytes: int = 104_857_600  # transaction.state.log.segment.bytes
    max_timeout_ms: int = 900_000  # transaction.max.timeout.ms
    # transaction.abort.timed.out.transaction.cleanup.interval.ms
    abort_timed_out_interval_ms: int = 10_000
    transactional_id_expiration_ms: int = 604_800_000  # transactional.id.expiration.ms
    # transaction.remove.expired.transaction.cleanup.interval.ms
    remove_expired_interval_ms: int = 3_600_000
    # How long a marker or a completion record waits before it is tried again after a
    # retriable error (Kafka's marker sender polls with a 100 ms back-off too).
    retry_backoff_ms: int = 100


# -- effects --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Respond:
    """Answer the request parked under `token`."""

    token: Token
    response: object


@dataclass(frozen=True)
class AppendToTxnLog:
    """Append (key, value) records to `__transaction_state-<partition>` with acks=all and
    report the outcome with `append_done(append_id, error, now_ms)`."""

    append_id: int
    partition: int
    records: tuple[tuple[bytes, bytes | None], ...]


@dataclass(frozen=True)
class SendMarkers:
    """Write the end marker of a transaction on its partitions (WriteTxnMarkers to each
    partition's leader, after `delay_ms`) and report with `markers_written`."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    partitions: frozenset[TopicPartition]
    delay_ms: int = 0


Effect = Respond | AppendToTxnLog | SendMarkers


# -- answers --------------------------------------------------------------------------------


@dataclass(frozen=True)
class InitProducerIdResult:
    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(frozen=True)
class TxnResult:
    """The answer of AddPartitionsToTxn, AddOffsetsToTxn and EndTxn: one error code."""

    error: ErrorCode


@dataclass(frozen=True)
class DescribedTxn:
    transactional_id: str
    error: ErrorCode
    state: str = ""
    producer_id: int = -1
    producer_epoch: int = -1
    timeout_ms: int = 0
    start_timestamp_ms: int = -1
    partitions: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True)
class ListedTxn:
    transactional_id: str
    producer_id: int
    state: str
    start_timestamp_ms: int = -1


@dataclass(frozen=True)
class ListedTxns:
    error: ErrorCode
    transactions: tuple[ListedTxn, ...] = ()
    unknown_state_filters: tuple[str, ...] = field(default_factory=tuple)
