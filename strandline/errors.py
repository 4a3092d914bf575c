"""Exceptions that carry the Kafka error code the wire answer must use.

Inside the broker a failure is an exception with a clear message; at the wire
boundary the handler turns it into `error_code` (kio's `ErrorCode`).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode


class ConfigError(ValueError):
    """A broker config value is missing or malformed; the message names the key. (Not a
    KafkaError: it stops a broker or a tool from starting, it is never a wire answer;
    AlterConfigs refuses a bad value with InvalidConfigError.)"""


class KafkaError(Exception):
    """Base: an error that maps onto one Kafka error code."""

    code: ErrorCode = ErrorCode.unknown_server_error

    def __init__(self, message: str = "", code: ErrorCode | None = None) -> None:
        super().__init__(message or self.__class__.__name__)
        if code is not None:
            self.code = code


class CorruptRecordError(KafkaError):
    code = ErrorCode.corrupt_message


class InvalidRecordError(KafkaError):
    code = ErrorCode.invalid_record


class UnsupportedMagicError(KafkaError):
    # Kafka answers a v0/v1 batch on a v3+ produce with UNSUPPORTED_FOR_MESSAGE_FORMAT.
    code = ErrorCode.unsupported_for_message_format


class RecordTooLargeError(KafkaError):
    code = ErrorCode.message_too_large


class OffsetOutOfRangeError(KafkaError):
    code = ErrorCode.offset_out_of_range


class UnknownTopicOrPartitionError(KafkaError):
    code = ErrorCode.unknown_topic_or_partition


class StorageError(KafkaError):
    """The log directory failed (full disk, I/O error); earlier data stays intact."""

    code = ErrorCode.kafka_storage_error


class InconsistentTopicIdError(KafkaError):
    """A partition dir, or a request, names another id for the topic (KIP-516)."""

    code = ErrorCode.inconsistent_topic_id


class NotLeaderError(KafkaError):
    code = ErrorCode.not_leader_or_follower


class InvalidConfigError(KafkaError):
    code = ErrorCode.invalid_config


class PolicyViolationError(KafkaError):
    code = ErrorCode.policy_violation


class NotEnoughReplicasError(KafkaError):
    code = ErrorCode.not_enough_replicas


class NotEnoughReplicasAfterAppendError(KafkaError):
    code = ErrorCode.not_enough_replicas_after_append


class TopicExistsError(KafkaError):
    code = ErrorCode.topic_already_exists


class InvalidTopicError(KafkaError):
    code = ErrorCode.invalid_topic_exception


class InvalidPartitionsError(KafkaError):
    code = ErrorCode.invalid_partitions


class InvalidReplicationFactorError(KafkaError):
    code = ErrorCode.invalid_replication_factor


class StaleControllerEpochError(KafkaError):
    code = ErrorCode.stale_controller_epoch


class InvalidRequestError(KafkaError):
    code = ErrorCode.invalid_request


class StaleBrokerEpochError(KafkaError):
    code = ErrorCode.stale_broker_epoch


class NotControllerError(KafkaError):
    code = ErrorCode.not_controller


class InvalidReplicaAssignmentError(KafkaError):
    code = ErrorCode.invalid_replica_assignment


class TopicAuthorizationFailedError(KafkaError):
    code = ErrorCode.topic_authorization_failed


class GroupAuthorizationFailedError(KafkaError):
    code = ErrorCode.group_authorization_failed


class ClusterAuthorizationFailedError(KafkaError):
    code = ErrorCode.cluster_authorization_failed


class RequestTimedOutError(KafkaError):
    code = ErrorCode.request_timed_out
